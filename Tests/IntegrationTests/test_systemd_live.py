"""The installed units under a live systemd user manager (scripts/user-systemd): socket
activation on the first authctl, READY/STATUS, reload, idle exit and restart from the
Secret Service (a real gnome-keyring on the test user's session bus), [[allow]] rules by
executable under the shipped unit and its Landlock confinement (no ~/.ssh), the unit's
exposure, and a service that cannot start answered with a sentence
while systemd gives up restarting it.

Runs as root (it starts `systemd --user` for the test user abtest); skipped otherwise or
when the user manager cannot start. The shipped unit is installed unchanged: it sets none
of the options that need a mount namespace (which fail with 226/NAMESPACE in containers).
The one test drop-in sends the daemon's stderr to a file, since a container has no journald.
"""
import fcntl
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import time

import pytest

from as_another_user import readable_copy
from conftest import API, BIN, GIT, ROOT
from device_login import approve_device_login
from thread_slices import door_slice, kernel_honours_custom_slices

USER = "abtest"
TOOL = os.path.join(ROOT, "scripts", "user-systemd")
PYTHON = os.path.realpath("/usr/bin/python3")
SERVICE_STATUS = "systemctl --user status authbroker.service"
# What scripts/install reads from the tree besides the binaries.
INSTALLED_FROM_THE_TREE = ("scripts/install", "systemd", "docs/man", "examples/config.toml")


class Live:
    """The test user's session under its own systemd --user, and commands run as that user."""

    def __init__(self):
        out = subprocess.run([TOOL, "env", USER], capture_output=True, text=True, check=True).stdout
        self.env = dict(kv.split("=", 1) for kv in out.split())
        self.home = self.env["HOME"]
        pw = pwd.getpwnam(USER)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.config = os.path.join(self.home, ".config", "authbroker", "config.toml")
        self.units = os.path.join(self.home, ".config", "systemd", "user")
        self.log = os.path.join(self.home, "authbrokerd.log")

    def run(self, *cmd, env=None, timeout=60, check=False, **kw):
        extra = [f"{k}={v}" for k, v in (env or {}).items()]
        r = subprocess.run(["runuser", "-u", USER, "--", "env", "-i",
                            *[f"{k}={v}" for k, v in self.env.items()], *extra, *cmd],
                           capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)
        if check:
            assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
        return r

    def popen(self, *cmd):
        return subprocess.Popen(["runuser", "-u", USER, "--", "env", "-i",
                                 *[f"{k}={v}" for k, v in self.env.items()], *cmd],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def systemctl(self, *args, check=True):
        return self.run("systemctl", "--user", *args, check=check)

    def show(self, unit, *props):
        out = self.systemctl("show", "-p", ",".join(props), unit).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def ctl(self, *args, env=None, timeout=60):
        return self.run(os.path.join(self.home, ".local", "bin", "authctl"), *args, env=env, timeout=timeout)

    def write(self, path, text, mode=0o600):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        d = path
        while d != self.home:
            os.chown(d, self.uid, self.gid)
            d = os.path.dirname(d)

    def drop_in(self, name, text):
        """A drop-in for authbroker.service (None removes it), then daemon-reload."""
        path = os.path.join(self.units, "authbroker.service.d", name)
        if text is None:
            if os.path.exists(path):
                os.remove(path)
        else:
            self.write(path, text, 0o644)
        self.systemctl("daemon-reload")

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-4000:]
        except FileNotFoundError:
            return ""

    def wait_for(self, unit, prop, value, timeout=30):
        deadline = time.time() + timeout
        while True:
            got = self.show(unit, prop)[prop]
            if got == value:
                return
            assert time.time() < deadline, f"{unit} {prop}={got}, expected {value}\n{self.log_text()}"
            time.sleep(0.1)


def config(gl, allow_exes, idle_exit=0, extra=""):
    rules = "".join(f'\n[[allow]]\nexe = "{exe}"\nresources = {json.dumps(res)}\n' for exe, res in allow_exes)
    return f"""[daemon]
store = "secret-service"
idle_exit = {idle_exit}

[providers.machine]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('machine')}"
client_secret = "{gl.client_secret('machine')}"
grant = "client_credentials"
scopes = ["api"]
resources = ["{API}", "{GIT}"]

[providers.corp]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('authbroker')}"
scopes = ["openid", "profile", "email", "offline_access"]
resources = ["{API}", "{GIT}"]
{extra}{rules}"""


# What a program of the user's would do: ask for a token and say only whether it got one.
PROBE = """
import hashlib, json, os, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(30)
s.connect(os.environ["XDG_RUNTIME_DIR"] + "/authbroker/socket")
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get",
                      "params": {"provider": sys.argv[1], "resource": sys.argv[2]}}).encode() + b"\\n")
buf = b""
while b"\\n" not in buf:
    buf += s.recv(65536)
a = json.loads(buf)
if "result" in a:
    print(json.dumps({"ok": hashlib.sha256(a["result"]["access_token"].encode()).hexdigest()[:12]}))
else:
    print(json.dumps({"error": a["error"]}))
"""


def hold_the_test_user():
    """One run at a time may own the test user's manager: suites from several checkouts on
    one machine would otherwise stop each other's."""
    lock = open(f"/run/lock/authbroker-live-systemd-{USER}.lock", "w")
    deadline = time.time() + 600
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.time() > deadline:
                lock.close()
                pytest.skip(f"another test run has held the live user manager of {USER} for 10 minutes")
            time.sleep(0.5)


@pytest.fixture(scope="module")
def live(system_wide_turn, glewlwyd_static):
    if os.geteuid() != 0:
        pytest.skip("the live systemd tests start `systemd --user` for a test user and need root (CI runs them as root)")
    if not shutil.which("systemctl") or not os.path.exists("/lib/systemd/systemd"):
        pytest.skip("systemd is not installed here")
    lock = hold_the_test_user()
    try:
        yield from _live(glewlwyd_static)
    finally:
        lock.close()


def _live(glewlwyd_static):
    start = subprocess.run([TOOL, "start", USER], capture_output=True, text=True, timeout=60)
    if start.returncode != 0:
        subprocess.run([TOOL, "stop", USER], capture_output=True, timeout=60)
        pytest.skip(f"systemd --user cannot start here: {start.stdout}{start.stderr}")
    try:
        s = Live()
        # A clean slate: nothing from an earlier run (units, binaries, keyring, config).
        for d in (".config/systemd/user", ".config/authbroker", ".local", "authbrokerd.log"):
            path = os.path.join(s.home, d)
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (os.path.exists(path) and os.remove(path))
        # The real Secret Service for the user: gnome-keyring on the session bus of its manager.
        s.run("mkdir", "-p", os.path.join(s.home, ".local", "share", "keyrings"), check=True)
        s.systemctl("start", "dbus.socket", check=False)  # listening before gnome-keyring connects
        s.run("systemd-run", "--user", "--unit=ab-test-keyring", "--collect", "sh", "-c",
              "printf %s authbroker-test | exec gnome-keyring-daemon --foreground --unlock --components=secrets",
              check=True)
        deadline = time.time() + 20
        # Asked of the bus, not of the name: a message to org.freedesktop.secrets before the
        # daemon above owns it makes D-Bus start a second gnome-keyring from its service file,
        # without the password, which then owns the name with no default keyring (a full run
        # under load: "made no default keyring" below).
        while "boolean true" not in s.run(
                "timeout", "2", "dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.secrets").stdout:
            assert time.time() < deadline, "gnome-keyring did not come up on the test user's bus"
            time.sleep(0.2)
        # Its name comes before its login keyring: a daemon started in between meets a Secret
        # Service without a default keyring (seen under load), which is another test's case.
        while '"/org/freedesktop/secrets/collection/' not in s.run(
                "timeout", "2", "dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.ReadAlias", "string:default").stdout:
            assert time.time() < deadline, "gnome-keyring made no default keyring for the test user"
            time.sleep(0.2)

        s.gl = glewlwyd_static
        s.write(s.config, config(s.gl, [(PYTHON, [API])]))
        # The binaries under test (or AUTHBROKER_INSTALL_BIN's release build, as in
        # test_install.py), installed by scripts/install run as the user: copied, with the
        # files the script installs, to a folder the user can read (the clone may be in one
        # the user cannot enter).
        bin_dir = os.environ.get("AUTHBROKER_INSTALL_BIN", BIN)
        with readable_copy(USER, {**{f"bin/{b}": os.path.join(bin_dir, b) for b in ("authbrokerd", "authctl")},
                                  **{p: os.path.join(ROOT, p) for p in INSTALLED_FROM_THE_TREE}}) as tree:
            r = s.run(os.path.join(tree, "scripts", "install"), "--bin-dir", os.path.join(tree, "bin"), "--no-strip",
                      timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        s.install_output = r.stdout
        s.drop_in("test-log.conf", f"[Service]\nStandardError=append:{s.log}\n")
        yield s
    finally:
        subprocess.run([TOOL, "stop", USER], capture_output=True, timeout=60)


def probe(s, provider, resource, program=PYTHON):
    r = s.run(program, "-c", PROBE, provider, resource, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr + s.log_text()
    return json.loads(r.stdout)


def test_install_enables_the_socket_and_the_first_authctl_starts_the_daemon(live):
    s = live
    assert "authbroker.socket is enabled" in s.install_output, s.install_output
    assert s.show("authbroker.socket", "ActiveState")["ActiveState"] == "active"
    assert s.show("authbroker.service", "ActiveState")["ActiveState"] == "inactive"

    r = s.ctl("status")
    assert r.returncode == 0, r.stderr + s.log_text()
    assert "secret-service" in r.stdout and "provider machine" in r.stdout

    # Type=notify: READY=1 made it active, and its STATUS= line is what systemctl shows.
    # The daemon says READY=1 as it starts serving; systemd reads that message on its own
    # time, which under load can be just after the answer above reached us.
    deadline = time.monotonic() + 10
    while True:
        shown = s.show("authbroker.service", "ActiveState", "SubState", "StatusText", "MainPID")
        if shown["ActiveState"] != "activating" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert (shown["ActiveState"], shown["SubState"]) == ("active", "running")
    assert "serving tokens for" in shown["StatusText"] and "machine" in shown["StatusText"]
    status = s.systemctl("status", "--no-pager", "authbroker.service", check=False).stdout
    assert re.search(r"Status: \"serving tokens for .*machine", status), status
    pid = int(shown["MainPID"])
    assert f"pid {pid}," in r.stdout

    # The shipped unit puts the daemon in no namespace of its own: it sees its callers as
    # they are, which the [[allow]] policy needs.
    manager = subprocess.check_output(["pgrep", "-u", USER, "-x", "systemd"], text=True).split()[0]
    for ns in ("user", "mnt"):
        assert os.readlink(f"/proc/{pid}/ns/{ns}") == os.readlink(f"/proc/{manager}/ns/{ns}"), ns
    # ...and confines itself instead (docs/security.md, "Confinement"): Landlock, with the
    # identification helper as its one child, outside the sandbox.
    assert "confined by Landlock" in s.log_text(), s.log_text()
    helper = subprocess.run(["pgrep", "-P", str(pid), "-x", "authbroker-id"], capture_output=True, text=True)
    assert helper.stdout.split(), s.log_text()
    # The unit's system-call filter lets the front door ask for its short time slice.
    if kernel_honours_custom_slices():
        assert door_slice(pid) == 300_000, s.log_text()


def test_allow_rule_by_executable_works_under_the_shipped_unit(live):
    s = live
    got = probe(s, "machine", API)
    assert "ok" in got, f"{PYTHON} is allowed {API}: {got}\n{s.log_text()}"
    # The same program is refused a resource its rule does not name.
    refused = probe(s, "machine", GIT)
    assert refused["error"]["code"] == -32002 and PYTHON in refused["error"]["message"], refused

    # Another program, a copy of the same interpreter, is refused.
    copy = os.path.join(s.home, "python-copy")
    s.run("cp", PYTHON, copy, check=True)
    other = probe(s, "machine", API, program=copy)
    assert other["error"]["code"] == -32002, other
    r = s.ctl("token", "--provider", "machine", "--resource", API)
    assert r.returncode == 5 and "forbidden by policy" in r.stderr, r.stderr
    assert os.path.join(s.home, ".local/bin/authctl") in r.stderr, r.stderr
    assert "cannot see their callers" not in s.log_text()


def test_the_running_daemon_cannot_read_ssh_and_the_units_exposure(live):
    s = live
    # The exposure systemd rates the shipped unit at, under the live manager. It counts
    # only systemd's own options; the Landlock confinement the daemon applies to itself is
    # what docs/security.md weighs against the rest.
    r = s.run("systemd-analyze", "--user", "security", "--no-pager", "authbroker.service")
    m = re.search(r"Overall exposure level for authbroker\.service: ([0-9.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    print(f"systemd-analyze --user security authbroker.service: {m.group(1)}")
    assert float(m.group(1)) <= 6.5, r.stdout

    # The config becomes a link to a file in ~/.ssh (valid TOML, one more rule) and the
    # daemon reloads: it cannot read the file, and keeps the rules it had.
    key = os.path.join(s.home, ".ssh", "id_test.toml")
    s.write(key, config(s.gl, [(PYTHON, [API, GIT])]))
    os.remove(s.config)
    os.symlink(key, s.config)
    try:
        before = len(s.log_text())
        pid = s.show("authbroker.service", "MainPID")["MainPID"]
        s.systemctl("reload", "authbroker.service")
        assert s.show("authbroker.service", "MainPID")["MainPID"] == pid
        deadline = time.time() + 20
        while "still running on the previous one" not in s.log_text()[-2000:]:
            assert time.time() < deadline, s.log_text()
            time.sleep(0.1)
        assert "ermission denied" in s.log_text()[-2000:], s.log_text()
        assert probe(s, "machine", GIT)["error"]["code"] == -32002
        assert "ok" in probe(s, "machine", API)
    finally:
        os.remove(s.config)
        s.write(s.config, config(s.gl, [(PYTHON, [API])]))


def test_reload_puts_the_new_configuration_in_force(live):
    s = live
    pid = s.show("authbroker.service", "MainPID")["MainPID"]
    authctl = os.path.join(s.home, ".local", "bin", "authctl")
    s.write(s.config, config(s.gl, [(PYTHON, [API]), (authctl, ["*"])]))
    s.systemctl("reload", "authbroker.service")
    assert s.show("authbroker.service", "MainPID", "ActiveState") == {"MainPID": pid, "ActiveState": "active"}
    r = s.ctl("token", "--provider", "machine", "--resource", GIT)
    assert r.returncode == 0, r.stderr + s.log_text()
    assert "ok" in probe(s, "machine", API)


def sign_in(s, provider="corp", user="alice"):
    p = s.popen(os.path.join(s.home, ".local", "bin", "authctl"), "login", "--device", "--provider", provider)
    approve_device_login(p, s.gl, "authbroker", user, s.log_text)


def test_idle_exit_and_a_restart_that_reads_the_account_back_from_the_secret_service(live):
    s = live
    sign_in(s)
    first = s.ctl("token", "--provider", "corp", "--resource", API)
    assert first.returncode == 0, first.stderr + s.log_text()
    pid = s.show("authbroker.service", "MainPID")["MainPID"]

    authctl = os.path.join(s.home, ".local", "bin", "authctl")
    s.write(s.config, config(s.gl, [(PYTHON, [API]), (authctl, ["*"])], idle_exit=2))
    s.systemctl("reload", "authbroker.service")
    # Idle: a clean exit that systemd does not count as a failure; the socket stays.
    s.wait_for("authbroker.service", "ActiveState", "inactive")
    assert s.show("authbroker.service", "Result")["Result"] == "success"
    assert s.show("authbroker.socket", "ActiveState")["ActiveState"] == "active"

    # The next caller starts a new daemon, which finds the account in the Secret Service
    # and refreshes: a new access token without signing in again.
    again = s.ctl("token", "--provider", "corp", "--resource", API)
    assert again.returncode == 0, again.stderr + s.log_text()
    assert s.show("authbroker.service", "MainPID")["MainPID"] not in ("0", pid)
    fp = lambda t: hashlib.sha256(t.strip().encode()).hexdigest()[:12]  # noqa: E731
    assert fp(again.stdout) != fp(first.stdout), "the cached token died with the old daemon; this one is refreshed"
    items = s.run("timeout", "20", "secret-tool", "search", "--all", "provider", "corp")
    assert "attribute.provider = corp" in items.stdout + items.stderr


def start_afresh(s):
    """Forget earlier failures and start-limit counts, so that each case starts clean."""
    s.systemctl("stop", "authbroker.service", check=False)
    s.systemctl("reset-failed", "authbroker.service", "authbroker.socket", check=False)
    s.systemctl("start", "authbroker.socket")


def test_a_user_namespace_hides_the_callers_and_the_daemon_says_so(live):
    # What the unit shipped before did (PrivateUsers=yes): the kernel hides every caller's
    # /proc/PID/exe from a daemon in another user namespace, so the rule refuses its program.
    s = live
    s.write(s.config, config(s.gl, [(PYTHON, [API])]))
    s.drop_in("sandbox.conf", "[Service]\nPrivateUsers=yes\n")
    try:
        start_afresh(s)
        refused = probe(s, "machine", API)
        assert refused["error"]["code"] == -32002, refused
        # The refusal says why, rather than asking for the rule that is there.
        message = refused["error"]["message"]
        assert "cannot identify the program" in message and "user namespace" in message, message
        assert "add an [[allow]] rule" not in message, message
        assert "the [[allow]] rules cannot see their callers" in s.log_text()
    finally:
        s.drop_in("sandbox.conf", None)
        start_afresh(s)
    assert "ok" in probe(s, "machine", API), s.log_text()


def test_a_configuration_error_is_answered_and_not_restarted(live):
    s = live
    s.write(s.config, "this is [not toml\n")
    start_afresh(s)
    r = s.ctl("status", timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr
    assert SERVICE_STATUS in r.stderr, r.stderr
    # systemctl status names the problem: the daemon's last STATUS= line.
    status = s.systemctl("status", "--no-pager", "authbroker.service", check=False).stdout
    assert "configuration error" in status and "config.toml" in status, status
    assert s.show("authbroker.service", "NRestarts")["NRestarts"] == "0"  # RestartPreventExitStatus=78
    assert s.show("authbroker.socket", "Result")["Result"] == "service-start-limit-hit"

    # Fixed config, failure state reset: served again.
    s.write(s.config, config(s.gl, [(PYTHON, [API])]))
    start_afresh(s)
    assert s.ctl("status").returncode == 0, s.log_text()


def test_a_crashing_daemon_hits_the_start_limit_and_the_client_hears_why(live):
    s = live
    s.drop_in("crash.conf", "[Service]\nExecStart=\nExecStart=/bin/sh -c 'echo crashing >&2; exit 1'\n")
    try:
        start_afresh(s)
        r = s.ctl("status", timeout=120)
        assert r.returncode == 3, r.stdout + r.stderr
        assert SERVICE_STATUS in r.stderr, r.stderr
        # systemd gave up: the service is failed, not waiting to restart, and the socket
        # says why.
        shown = s.show("authbroker.service", "ActiveState", "NRestarts")
        assert shown["ActiveState"] == "failed" and int(shown["NRestarts"]) >= 1, shown
        assert s.show("authbroker.socket", "Result")["Result"] == "service-start-limit-hit"
        # The next call finds nothing listening and says where to look.
        r = s.ctl("status")
        assert r.returncode == 3 and SERVICE_STATUS in r.stderr, r.stderr
    finally:
        s.drop_in("crash.conf", None)


def test_a_daemon_that_never_gets_ready_is_answered_at_the_deadline(live):
    s = live
    s.drop_in("hang.conf", "[Service]\nExecStart=\nExecStart=/bin/sleep 300\n")
    try:
        start_afresh(s)
        r = s.ctl("status", env={"AUTHBROKER_TIMEOUT": "2"}, timeout=60)
        assert r.returncode == 3, r.stdout + r.stderr
        assert "did not answer daemon.status within 2 s" in r.stderr, r.stderr
        assert SERVICE_STATUS in r.stderr and "AUTHBROKER_TIMEOUT" in r.stderr, r.stderr
        assert s.show("authbroker.service", "SubState")["SubState"] == "start"  # still waiting for READY=1
    finally:
        s.drop_in("hang.conf", None)
        start_afresh(s)


def test_a_kernel_keyring_daemon_under_the_shipped_unit_keeps_its_sign_in_across_a_restart(live):
    # store = "kernel-keyring" under the unit as shipped: KeyringMode=private (the service's
    # session keyring does not lead to the user keyring), the system-call filter
    # (@system-service holds add_key and keyctl) and Landlock (no file is involved).
    s = live
    ring = s.run("keyctl", "search", "@u", "keyring", "authbroker")
    if ring.returncode == 0:  # an earlier run's, with a provider of another Glewlwyd
        s.run("keyctl", "invalidate", ring.stdout.strip(), check=True)
    authctl = os.path.join(s.home, ".local", "bin", "authctl")
    s.write(s.config, config(s.gl, [(PYTHON, [API]), (authctl, ["*"])]).replace(
        'store = "secret-service"', 'store = "kernel-keyring"'))
    try:
        start_afresh(s)
        sign_in(s)
        first = s.ctl("token", "--provider", "corp", "--resource", API)
        assert first.returncode == 0, first.stderr + s.log_text()
        pid = s.show("authbroker.service", "MainPID")["MainPID"]
        assert s.show("authbroker.service", "KeyringMode")["KeyringMode"] == "private"

        s.systemctl("restart", "authbroker.service")
        again = s.ctl("token", "--provider", "corp", "--resource", API)
        assert again.returncode == 0, again.stderr + s.log_text()
        assert s.show("authbroker.service", "MainPID")["MainPID"] not in ("0", pid)
        fp = lambda t: hashlib.sha256(t.strip().encode()).hexdigest()[:12]  # noqa: E731
        assert fp(again.stdout) != fp(first.stdout), "the account came back from the keyring and was refreshed"
        status = s.ctl("status")
        assert "kernel-keyring" in status.stdout, status.stdout
        # The key is in the user's keyring, seen from the user's shell.
        ring = s.run("keyctl", "search", "@u", "keyring", "authbroker", check=True).stdout.strip()
        keys = s.run("keyctl", "rlist", ring, check=True).stdout.split()
        described = [s.run("keyctl", "rdescribe", k, check=True).stdout for k in keys]
        assert any(";authbroker:corp " in d for d in described), described
        assert s.ctl("logout", "--provider", "corp").returncode == 0
        # KEYCTL_INVALIDATE wakes the kernel's key garbage collector, which unlinks the key
        # from its keyrings on a work queue: wait for it (the daemon itself already skips an
        # invalidated key), as a full run once listed it just after the logout.
        deadline = time.time() + 10
        while s.run("keyctl", "rlist", ring, check=True).stdout.split() and time.time() < deadline:
            time.sleep(0.1)
        assert s.run("keyctl", "rlist", ring, check=True).stdout.split() == []

        # A system-call filter that blocks the keyring (as Docker's default profile does):
        # "secret store unavailable" with the reason, never a fallback to another store.
        s.drop_in("no-keyring.conf", "[Service]\nSystemCallFilter=~@keyring\n")
        start_afresh(s)
        refused = s.ctl("token", "--provider", "corp", "--resource", API)
        assert refused.returncode == 8, refused.stdout + refused.stderr + s.log_text()
        assert "system-call filter" in refused.stderr and "add_key and keyctl" in refused.stderr, refused.stderr
        status = s.ctl("status")
        assert "kernel-keyring" in status.stdout and "system-call filter" in status.stdout, status.stdout
    finally:
        s.drop_in("no-keyring.conf", None)
        s.write(s.config, config(s.gl, [(PYTHON, [API])]))
        start_afresh(s)


def wait_until_inactive(s, unit, timeout=90):
    """Polls `systemctl --user is-active` until the unit is inactive (not failed, not stopping)."""
    deadline = time.monotonic() + timeout
    while True:
        state = s.systemctl("is-active", unit, check=False).stdout.strip()
        if state == "inactive":
            return
        assert time.monotonic() < deadline, f"{unit} is {state}\n{s.log_text()}"
        time.sleep(0.2)


def test_a_removed_executable_stops_the_daemon_and_the_socket_serves_nothing_from_it(live):
    """`rm ~/.local/bin/authbrokerd` (what `apt-get remove` does to /usr/bin/authbrokerd)
    while the user's socket-activated daemon runs and a program holds an event subscription
    open: the daemon stops by itself, saying why, rather than serving tokens on from a
    program that is no longer installed; the next authctl is not served and is told where
    to look."""
    s = live
    start_afresh(s)
    assert s.ctl("status").returncode == 0, s.log_text()
    pid = s.show("authbroker.service", "MainPID")["MainPID"]
    assert pid != "0", s.log_text()
    exe = os.path.join(s.home, ".local", "bin", "authbrokerd")
    away = os.path.join(s.home, "authbrokerd.removed")
    events = s.popen(os.path.join(s.home, ".local", "bin", "authctl"), "events", "--json")
    try:
        os.rename(exe, away)
        wait_until_inactive(s, "authbroker.service")
        assert not os.path.exists(f"/proc/{pid}")
        assert s.show("authbroker.service", "Result")["Result"] == "success", s.log_text()
        assert "authbrokerd was removed (authbroker uninstalled): exiting" in s.log_text()
        _, err = events.communicate(timeout=20)
        assert events.returncode != 0 and "closed the events connection" in err, err
        # Nothing to start now: systemd fails to run the file (203/EXEC) until its start
        # limit, and authctl says where to look.
        r = s.ctl("status", timeout=120)
        assert r.returncode == 3 and SERVICE_STATUS in r.stderr, r.stdout + r.stderr
    finally:
        if events.poll() is None:
            events.kill()
            events.wait()
        if os.path.exists(away):
            os.rename(away, exe)
        start_afresh(s)
    assert s.ctl("status").returncode == 0, s.log_text()
