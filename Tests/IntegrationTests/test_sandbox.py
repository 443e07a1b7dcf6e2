"""The daemon's own confinement (docs/security.md, "Confinement"): confined by Landlock
(AUTHBROKER_SANDBOX=on, the default under systemd), it identifies its callers through the
helper it forked before confining itself, so [[allow]] rules by exe serve their program and
refuse others; it cannot read the user's ~/.ssh; and a daemon that cannot identify a caller
says so rather than asking for a rule that is already there. Under a live user manager:
test_systemd_live.py."""
import os
import signal
import subprocess
import time

import pytest

from conftest import API, GIT, Daemon, RPC
from test_sign_in_on_demand import notifications  # noqa: F401  (the STUB notification server)
from policy_callers import ASK, PYTHON, ask_once, copy_of_python


def machine_config(gl, name, rules):
    return f"""[daemon]
store = "memory"

[providers.{name}]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('machine')}"
client_secret = "{gl.client_secret('machine')}"
grant = "client_credentials"
scopes = ["api"]
resources = ["{API}", "{GIT}"]
""" + rules


def rule(exe, resources):
    return f'\n[[allow]]\nexe = "{exe}"\nresources = {resources!r}\n'.replace("'", '"')


class Home:
    """A user's home with the config in ~/.config/authbroker, a key in ~/.ssh and the
    socket in a runtime folder of its own, as a desktop has them."""

    def __init__(self, d):
        self.home = os.path.join(d.dir, "home")
        self.folder = os.path.join(self.home, ".config", "authbroker")
        self.ssh = os.path.join(self.home, ".ssh")
        for p in (self.folder, self.ssh):
            os.makedirs(p, mode=0o700)
        d.config = os.path.join(self.folder, "config.toml")
        d.socket = os.path.join(d.dir, "run", "authbroker", "socket")
        os.makedirs(os.path.join(d.dir, "run"), mode=0o700)
        d.env.update(HOME=self.home, AUTHBROKER_SOCKET=d.socket)


def confined(gl, rules, sandbox="on"):
    d = Daemon(None, extra_env={"AUTHBROKER_SANDBOX": sandbox})
    d.gl = gl
    h = Home(d)
    d.write_config(text=machine_config(gl, d.name, rules))
    return d.start(), h


def test_a_confined_daemon_serves_an_exe_rule_its_program_and_refuses_another(glewlwyd_static):
    d, _ = confined(glewlwyd_static, rule(PYTHON, [API]))
    try:
        log = d.log_text()
        assert "confined by Landlock" in log, log
        # The helper is the daemon's one child, outside the sandbox.
        children = subprocess.run(["pgrep", "-P", str(d.proc.pid), "-x", "authbroker-id"], capture_output=True, text=True)
        assert children.stdout.split(), log
        assert ask_once(PYTHON, d, API) == ["served"], d.log_text()
        refused = ask_once(PYTHON, d, GIT)[0]
        assert refused.startswith("-32002 ") and PYTHON in refused and "add an [[allow]] rule" in refused, refused
        other = ask_once(copy_of_python(d), d, API)[0]
        assert other.startswith("-32002 ") and "python-copy" in other, other
    finally:
        d.cleanup()
    # The helper ends with the daemon.
    assert subprocess.run(["pgrep", "-x", "authbroker-id", "-P", str(d.proc.pid)], capture_output=True).returncode == 1


def test_a_killed_identification_helper_is_named_in_the_refusal(glewlwyd_static):
    """The helper is a process of the user: one that kills it loses the policy's callers
    until a restart, and is told so; nothing is served unidentified."""
    d, _ = confined(glewlwyd_static, rule(PYTHON, [API]))
    go = os.path.join(d.dir, "go")
    # A connection served before the helper dies, asking again after.
    held = subprocess.Popen([PYTHON, "-c", ASK + (
        "import os, time\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(ask(s, sys.argv[2]), flush=True)\n"
        "while not os.path.exists(sys.argv[3]): time.sleep(0.01)\n"
        "print(ask(s, sys.argv[2]), flush=True)\n"), d.socket, API, go], stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline().strip() == "served", d.log_text()
        assert ask_once(PYTHON, d, API) == ["served"], d.log_text()
        helper = subprocess.run(["pgrep", "-P", str(d.proc.pid), "-x", "authbroker-id"],
                                capture_output=True, text=True).stdout.split()
        os.kill(int(helper[0]), signal.SIGKILL)
        open(go, "w").close()
        again = held.stdout.readline().strip()
        assert again.startswith("-32002 ") and "identification helper" in again, again
        refused = ask_once(PYTHON, d, API)[0]
        assert refused.startswith("-32002 ") and "identification helper" in refused and "restart" in refused, refused
        assert d.proc.poll() is None, "the daemon goes on serving what needs no rule"
        assert ask_once(PYTHON, d, API)[0].startswith("-32002 ")
        assert d.log_text().count("the identification helper (authbroker-id) does not answer") == 1, d.log_text()
        assert "result" in d.rpc("daemon.status")
    finally:
        held.kill()
        held.wait()
        d.cleanup()


def reload_into_ssh(d, h):
    """Replaces the config by a link to a file in ~/.ssh (valid TOML, with a second rule)
    and reloads: what the daemon can read of ~/.ssh decides which configuration is in force."""
    key = os.path.join(h.ssh, "id_test.toml")
    with open(key, "w") as f:
        f.write(machine_config(d.gl, d.name, rule(PYTHON, [API, GIT])))
    os.remove(d.config)
    os.symlink(key, d.config)
    before = d.log_text()
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 20
    while not any(s in d.log_text()[len(before):] for s in ("still running on the previous one", "configuration reloaded")):
        assert time.time() < deadline, d.log_text()
        time.sleep(0.05)
    return d.log_text()[len(before):]


def test_the_confined_daemon_cannot_read_ssh(glewlwyd_static):
    d, h = confined(glewlwyd_static, rule(PYTHON, [API]))
    try:
        after = reload_into_ssh(d, h)
        assert "still running on the previous one" in after and "ermission denied" in after, after
        # Still on the previous configuration: the rule from ~/.ssh is not in force.
        assert ask_once(PYTHON, d, GIT)[0].startswith("-32002 ")
        assert ask_once(PYTHON, d, API) == ["served"]
    finally:
        d.cleanup()
    # Unconfined, the same daemon reads it: it is the sandbox that refused.
    d, h = confined(glewlwyd_static, rule(PYTHON, [API]), sandbox="off")
    try:
        assert "confined by Landlock" not in d.log_text()
        after = reload_into_ssh(d, h)
        assert "configuration reloaded" in after, after
        assert ask_once(PYTHON, d, GIT) == ["served"], d.log_text()
    finally:
        d.cleanup()


def test_abstract_sockets_stay_reachable_where_the_daemon_needs_one_and_it_says_why(glewlwyd_static):
    """Landlock's abstract-socket scoping (ABI 6) would cut the daemon off from a session
    bus or a systemd notification socket at an abstract address: there the daemon keeps
    them reachable, says why at start, and still serves."""
    if landlock_abi() < 6:
        pytest.skip("Landlock ABI 6 (Linux 6.12) scopes abstract sockets")
    d = Daemon(None, extra_env={"AUTHBROKER_SANDBOX": "on", "NOTIFY_SOCKET": "@authbroker-test-notify"})
    d.gl = glewlwyd_static
    Home(d)
    d.write_config(text=machine_config(glewlwyd_static, d.name, ""))
    try:
        d.start()
        log = d.log_text()
        assert "abstract Unix sockets stay reachable from the daemon's sandbox: systemd's NOTIFY_SOCKET is an abstract socket" in log, log
        assert ask_once(PYTHON, d, API) == ["served"], d.log_text()
    finally:
        d.cleanup()


def test_a_config_linked_from_a_dotfiles_folder_is_refused_on_reload_with_a_sentence_that_says_why():
    """config.toml as a link into a dotfiles repository: read at start, before the
    confinement; on reload the confinement refuses it, and the refusal says so (where the
    link leads, and to restart) rather than a bare "Permission denied: check its permissions"
    about a file the user can read."""
    d = Daemon(None, extra_env={"AUTHBROKER_SANDBOX": "on"})
    h = Home(d)
    dotfiles = os.path.join(h.home, "dotfiles", "authbroker")
    os.makedirs(dotfiles)
    real = os.path.join(dotfiles, "config.toml")
    with open(real, "w") as f:
        f.write(f'[daemon]\nstore = "memory"\n[providers.{d.name}]\nissuer = "http://127.0.0.1:9/oidc"\nclient_id = "c"\n')
    os.symlink(real, d.config)
    try:
        d.start()
        assert "confined by Landlock" in d.log_text(), d.log_text()
        before = d.log_text()
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while not any(s in d.log_text()[len(before):] for s in ("still running on the previous one", "configuration reloaded")):
            assert d.proc.poll() is None, f"authbrokerd ended with {d.proc.returncode}:\n{d.log_text()}"
            assert time.monotonic() < deadline, d.log_text()
            time.sleep(0.05)
        status = d.ctl("status")
        assert status.returncode == 0, status.stderr
        line = next(l for l in status.stdout.splitlines() if "last reload" in l)
        assert f"a link to {real}" in line and "confinement" in line and "systemctl --user restart authbroker.service" in line, line
        assert "check the file and its permissions" not in line, line
    finally:
        d.cleanup()


def test_a_daemon_that_cannot_identify_its_caller_says_so(glewlwyd_static):
    """In a user namespace of its own (what PrivateUsers= does), the kernel refuses the
    daemon (and its helper) the caller's /proc/PID/exe: the refusal says that, not "add an
    [[allow]] rule" for a program that has one."""
    d = Daemon(None, extra_env={"AUTHBROKER_SANDBOX": "on"})
    d.gl = glewlwyd_static
    d.write_config(text=machine_config(glewlwyd_static, d.name, rule(PYTHON, [API])))
    logf = open(d.log, "ab")
    from conftest import AUTHBROKERD
    d.proc = subprocess.Popen(["unshare", "--user", "--map-root-user", AUTHBROKERD, "--config", d.config],
                              env=d.env, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
    logf.close()
    try:
        deadline = time.time() + 20
        while True:
            try:
                RPC(d.socket, timeout=5).call("daemon.status")
                break
            except OSError:
                assert time.time() < deadline and d.proc.poll() is None, d.log_text()
                time.sleep(0.05)
        refused = ask_once(PYTHON, d, API)[0]
        assert refused.startswith("-32002 "), refused
        assert "cannot identify the program" in refused and "user namespace" in refused, refused
        assert "add an [[allow]] rule" not in refused, refused
    finally:
        d.cleanup()


# What a program the confined daemon starts itself may do: it inherits the daemon's Landlock
# domain, so it shows what the running daemon's own process may read and write. It writes
# its findings where it may (the daemon's runtime folder).
PROBE = """out="$(dirname "$AUTHBROKER_SOCKET")/probe"
try() { if sh -c "$2" >/dev/null 2>&1; then echo "$1=yes"; else echo "$1=no"; fi; }
{
  try read-ssh 'cat "$HOME/.ssh/id_test"'
  try write-ssh 'echo planted > "$HOME/.ssh/authorized_keys"'
  try write-home 'echo planted >> "$HOME/.bashrc"'
  try write-config 'echo planted > "$HOME/.config/authbroker/planted"'
  try write-tmp 'echo planted > "$PROBE_TMP"'
  try write-own 'echo mine > "$(dirname "$AUTHBROKER_SOCKET")/mine"'
  try read-ca 'cat "$SSL_CERT_FILE"'
  try connect-abstract '/usr/bin/python3 -c "import sys, socket; socket.socket(socket.AF_UNIX).connect(chr(0) + sys.argv[1])" "$PROBE_ABSTRACT"'
  try connect-path '/usr/bin/python3 -c "import sys, socket; socket.socket(socket.AF_UNIX).connect(sys.argv[1])" "$PROBE_AGENT"'
} > "$out.part" && mv "$out.part" "$out"
"""


def landlock_abi():
    """The kernel's Landlock ABI version (landlock_create_ruleset with
    LANDLOCK_CREATE_RULESET_VERSION), 0 without Landlock."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return max(0, libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))  # x86_64, arm64: 444


def test_the_confined_daemon_cannot_write_outside_its_own_folder(daemon_factory, notifications, tmp_path):
    """The daemon starts a program itself when the user clicks a sign-in notification
    ($BROWSER, run directly when not under systemd). That program runs in the daemon's
    domain: it reads nothing of ~/.ssh and writes only into the daemon's runtime folder.
    With Landlock ABI 6 it cannot connect to an abstract Unix socket made outside the
    sandbox (issue 38 item 6); a path socket outside the runtime folder (where ssh-agent
    listens) it can: Landlock has no right for connecting to one, as docs/security.md says."""
    import socket
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0authbroker-probe-%d" % os.getpid())
    abstract.listen(4)
    agent = socket.socket(socket.AF_UNIX)
    agent.bind(str(tmp_path / "agent.sock"))
    agent.listen(4)
    from test_sign_in_on_demand import waiting_token_get, wait_until
    d = daemon_factory(extra_env={"AUTHBROKER_SANDBOX": "on"})
    h = Home(d)
    with open(os.path.join(h.ssh, "id_test"), "w") as f:
        f.write("not a real key\n")
    # The probe is read by sh from the config folder: the daemon may read it, not run it.
    probe = os.path.join(h.folder, "probe.sh")
    with open(probe, "w") as f:
        f.write(PROBE)
    d.write_config()
    d.env.pop("INVOCATION_ID", None)
    # CA certificates the user keeps in the home folder stay readable (SSL_CERT_FILE).
    ca = os.path.join(h.home, "certs", "corp-ca.pem")
    os.makedirs(os.path.dirname(ca))
    with open(ca, "w") as f:
        f.write("a CA certificate\n")
    d.env.update(BROWSER=f"/bin/sh {probe} %s", PROBE_TMP=str(tmp_path / "planted"), SSL_CERT_FILE=ca,
                 PROBE_ABSTRACT="authbroker-probe-%d" % os.getpid(), PROBE_AGENT=str(tmp_path / "agent.sock"))
    d.start()
    waiter = waiting_token_get(d)
    try:
        assert wait_until(lambda: len(notifications.calls("Notify")) == 1), d.log_text()
        notifications.click(notifications.calls("Notify")[0]["id"], "sign-in")
        out = os.path.join(os.path.dirname(d.socket), "probe")
        assert wait_until(lambda: os.path.exists(out)), d.log_text()
        with open(out) as f:
            found = dict(line.strip().split("=") for line in f if "=" in line)
    finally:
        waiter.close()
        abstract.close()
        agent.close()
    assert found == {"read-ssh": "no", "write-ssh": "no", "write-home": "no", "write-config": "no",
                     "write-tmp": "no", "write-own": "yes", "read-ca": "yes",
                     "connect-abstract": "no" if landlock_abi() >= 6 else "yes", "connect-path": "yes"}, found
    assert not os.path.exists(os.path.join(h.ssh, "authorized_keys"))
    assert not os.path.exists(tmp_path / "planted")
