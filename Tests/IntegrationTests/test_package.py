"""The Debian package (scripts/package) as a user gets it: built once from one release
build, lintian clean, installed with `apt-get install ./authbroker_*.deb`, used under a
live systemd user manager (scripts/user-systemd, user abpkg) straight from the installed
files — the socket enabled for every user, socket activation of /usr/bin/authbrokerd by
the first authctl, a device sign-in at the real Glewlwyd, a token, status — and purged
with nothing left behind.

Root only (it installs a package and starts `systemd --user` for abpkg); skipped
otherwise. The release build takes minutes: AUTHBROKER_INSTALL_BIN (prebuilt release
binaries, as test_install.py takes them) or AUTHBROKER_DEB (a built package) skip it;
otherwise this test uses the one release build (conftest.release_bin_dir), which scripts/test
starts in the background early on.
"""
import os
import pwd
import re
import shutil
import subprocess
import time

import pytest

from conftest import API, BIN, ROOT, decode_jwt, release_bin_dir
from device_login import approve_device_login
from installed_package import ENABLED_LINK, already_installed, leftovers
from test_install import scratch_of
from test_systemd_live import Live

USER = "abpkg"
TOOL = os.path.join(ROOT, "scripts", "user-systemd")
PACKAGE = os.path.join(ROOT, "scripts", "package")


def run(*cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw)


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("installing a Debian package needs root (CI runs the suite as root)")
    given = os.environ.get("AUTHBROKER_DEB")
    if given:
        return given
    out = tmp_path_factory.mktemp("deb")
    # The one release build (scripts/test starts it early); scripts/install, which the package
    # script runs for the man pages, builds its man-page tool beside the debug build.
    r = run(PACKAGE, "--bin-dir", release_bin_dir(), "--output", str(out), "--scratch-path", scratch_of(BIN),
            timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    path = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"authbroker_\d+\.\d+\.\d+_[a-z0-9]+\.deb", os.path.basename(path)), path
    return path


class User(Live):
    """test_systemd_live's session helpers (show, write, log_text), for USER."""

    def __init__(self):  # noqa: super().__init__ is for test_systemd_live's own user
        out = run(TOOL, "env", USER, timeout=30).stdout
        self.env = dict(kv.split("=", 1) for kv in out.split())
        self.home = self.env["HOME"]
        pw = pwd.getpwnam(USER)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.log = os.path.join(self.home, "authbrokerd.log")

    def _as_user(self, cmd):
        return ["runuser", "-u", USER, "--", "env", "-i", *[f"{k}={v}" for k, v in self.env.items()], *cmd]

    def run(self, *cmd, timeout=60, check=False):
        r = run(*self._as_user(cmd), timeout=timeout)
        assert not check or r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
        return r

    def popen(self, *cmd):
        return subprocess.Popen(self._as_user(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def installed(deb, system_wide_turn, glewlwyd_static):
    # The package is built (deb) before this file's turn, so the release build it may wait
    # for holds up no other system-wide test.
    # scripts/test asks the same before it starts (support/installed_package.py).
    found = already_installed()
    assert found is None, found
    r = run("apt-get", "install", "-y", "-q", "--no-install-recommends", "./" + os.path.basename(deb),
            cwd=os.path.dirname(os.path.abspath(deb)), env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = [f for f in run("dpkg-query", "-L", "authbroker").stdout.splitlines() if os.path.isfile(f)]
    try:
        yield {"files": files, "gl": glewlwyd_static}
    finally:
        run(TOOL, "stop", USER, timeout=60)
        r = run("apt-get", "purge", "-y", "-q", "authbroker", env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # After the purge: not one of its files, links or records.
    assert [f for f in files if os.path.lexists(f)] == []
    assert leftovers() == []


def test_the_package_installs_everything_where_debian_keeps_it(installed):
    files = set(installed["files"])
    for f in ("/usr/bin/authbrokerd", "/usr/bin/authctl", "/usr/lib/systemd/user/authbroker.service",
              "/usr/lib/systemd/user/authbroker.socket", "/usr/share/bash-completion/completions/authctl",
              "/usr/share/zsh/vendor-completions/_authctl", "/usr/share/fish/vendor_completions.d/authctl.fish",
              "/usr/share/doc/authbroker/examples/config.toml", "/usr/share/doc/authbroker/protocol.md.gz",
              "/usr/share/man/man1/authctl.1.gz", "/usr/share/man/man1/authctl.token.1.gz",
              "/usr/share/man/man5/authbroker.toml.5.gz", "/usr/share/man/man8/authbrokerd.8.gz"):
        assert f in files, f
    with open("/usr/lib/systemd/user/authbroker.service") as f:
        assert re.search(r"^ExecStart=/usr/bin/authbrokerd$", f.read(), re.M)
    # Every command of authctl has its page, found by man.
    listed = run("/usr/bin/authctl", "--help").stdout.split("SUBCOMMANDS:")[1]
    commands = re.findall(r"^  ([a-z-]+)\s", listed, re.M)
    assert "token" in commands and "login" in commands
    for c in commands:
        r = run("man", "-w", f"authctl.{c}")
        assert r.stdout.strip() == f"/usr/share/man/man1/authctl.{c}.1.gz", (c, r.stdout, r.stderr)
    r = run("man", "-P", "cat", "authctl")
    assert "EXIT STATUS" in r.stdout
    # The completions load in their shells, as bash-completion and fish find them.
    r = run("bash", "-c", "source /usr/share/bash-completion/completions/authctl && complete -p authctl")
    assert r.returncode == 0 and "authctl" in r.stdout, r.stdout + r.stderr
    with open("/usr/share/zsh/vendor-completions/_authctl") as f:
        assert f.readline().startswith("#compdef authctl")
    # Enabled for every user, the way Debian enables user units.
    assert os.readlink(ENABLED_LINK) == "/usr/lib/systemd/user/authbroker.socket"
    r = run("systemctl", "--global", "is-enabled", "authbroker.socket")
    assert r.stdout.strip() == "enabled", r.stdout + r.stderr


@pytest.fixture(scope="module")
def session(installed):
    if not shutil.which("systemctl") or not os.path.exists("/lib/systemd/systemd"):
        pytest.skip("systemd is not installed here")
    start = run(TOOL, "start", USER, timeout=60)
    assert start.returncode == 0, start.stdout + start.stderr
    s = User()
    for d in (".config/authbroker", ".config/systemd", ".local/share/keyrings", "authbrokerd.log"):
        path = os.path.join(s.home, d)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (os.path.exists(path) and os.remove(path))
    # The real Secret Service for the user: gnome-keyring on its manager's session bus.
    s.run("mkdir", "-p", os.path.join(s.home, ".local", "share", "keyrings"), check=True)
    s.run("systemd-run", "--user", "--unit=ab-pkg-keyring", "--collect", "sh", "-c",
          "printf %s authbroker-test | exec gnome-keyring-daemon --foreground --unlock --components=secrets", check=True)
    deadline = time.time() + 20
    while s.run("timeout", "2", "dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets",
                "/org/freedesktop/secrets", "org.freedesktop.DBus.Peer.Ping").returncode != 0:
        assert time.time() < deadline, "gnome-keyring did not come up on the user's bus"
        time.sleep(0.2)
    gl = installed["gl"]
    # The packaged example, with the provider filled in as its comments say.
    with open("/usr/share/doc/authbroker/examples/config.toml") as f:
        assert "[providers." in f.read()
    s.write(os.path.join(s.home, ".config/authbroker/config.toml"), f"""[daemon]
store = "secret-service"

[providers.corp]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('authbroker')}"
scopes = ["openid", "profile", "email", "offline_access"]
resources = ["{API}"]
""")
    # The one test drop-in: the daemon's stderr to a file, since a container has no journald.
    s.write(os.path.join(s.home, ".config/systemd/user/authbroker.service.d/test-log.conf"), f"[Service]\nStandardError=append:{s.log}\n", 0o644)
    s.run("systemctl", "--user", "daemon-reload", check=True)
    s.gl = gl
    return s


def test_the_installed_socket_starts_the_installed_daemon_which_signs_in_and_serves_tokens(session):
    s = session
    # Enabled globally: listening from the user manager's start, nothing done per user.
    assert s.show("authbroker.socket", "ActiveState", "FragmentPath") == {
        "ActiveState": "active", "FragmentPath": "/usr/lib/systemd/user/authbroker.socket"}
    assert s.show("authbroker.service", "ActiveState")["ActiveState"] == "inactive"

    r = s.run("authctl", "status")
    assert r.returncode == 0, r.stdout + r.stderr + s.log_text()
    assert "secret-service" in r.stdout and "provider corp" in r.stdout
    shown = s.show("authbroker.service", "ActiveState", "FragmentPath", "MainPID")
    assert shown["ActiveState"] == "active" and shown["FragmentPath"] == "/usr/lib/systemd/user/authbroker.service"
    assert os.readlink(f"/proc/{shown['MainPID']}/exe") == "/usr/bin/authbrokerd"

    p = s.popen("authctl", "login", "--device", "--provider", "corp")
    approve_device_login(p, s.gl, "authbroker", "alice", s.log_text)
    r = s.run("authctl", "token", "--resource", API)
    assert r.returncode == 0, r.stderr + s.log_text()
    token = r.stdout.strip()
    assert decode_jwt(token)[1]["aud"] in (API, [API])
    status = s.run("authctl", "status")
    assert status.returncode == 0 and "alice" in status.stdout and API in status.stdout, status.stdout
    assert token not in status.stdout + status.stderr + s.log_text()


def newer_package(deb, folder):
    """The same package with a higher version: what `apt upgrade` brings. The binaries may
    be the same; dpkg still renames a new file over each, as for any upgrade."""
    tree = os.path.join(folder, "tree")
    r = run("dpkg-deb", "-R", deb, tree)
    assert r.returncode == 0, r.stderr
    control = os.path.join(tree, "DEBIAN", "control")
    with open(control) as f:
        text = f.read()
    version = re.search(r"^Version: (.+)$", text, re.M).group(1) + "+upgrade1"
    with open(control, "w") as f:
        f.write(re.sub(r"^Version: .+$", f"Version: {version}", text, flags=re.M))
    path = os.path.join(folder, f"authbroker_{version}_{run('dpkg', '--print-architecture').stdout.strip()}.deb")
    r = run("dpkg-deb", "-Zxz", "-z1", "--root-owner-group", "-b", tree, path)
    assert r.returncode == 0, r.stderr
    return path, version


def test_an_upgrade_while_the_daemon_runs_hands_over_to_the_new_daemon_signed_in(session, deb, tmp_path):
    """`apt-get install ./authbroker_<newer>.deb` while the user's daemon runs, with a program
    holding an event subscription open: the old daemon, left running the replaced (deleted)
    /usr/bin/authbrokerd, stops by itself once quiet, and the next authctl starts the new
    one, still signed in (the refresh token in the Secret Service, not rotated away)."""
    s = session
    if s.run("authctl", "token", "--resource", API).returncode != 0:
        p = s.popen("authctl", "login", "--device", "--provider", "corp")
        approve_device_login(p, s.gl, "authbroker", "alice", s.log_text)
    old = s.show("authbroker.service", "MainPID")["MainPID"]
    assert old != "0", s.log_text()
    events = s.popen("authctl", "events", "--json")
    try:
        # A refresh the subscriber hears: it is subscribed, its connection open.
        fresh = s.run("authctl", "token", "--fresh", "--resource", API)
        assert fresh.returncode == 0, fresh.stderr + s.log_text()
        assert '"token_refreshed"' in events.stdout.readline()

        newer, version = newer_package(deb, str(tmp_path))
        r = run("apt-get", "install", "-y", "-q", "--no-install-recommends", "./" + os.path.basename(newer),
                cwd=os.path.dirname(newer), env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert run("dpkg-query", "-W", "-f", "${Version}", "authbroker").stdout == version
        # The old daemon stops by itself: it does not run on with the replaced executable
        # for as long as something stays connected.
        deadline = time.time() + 60
        while os.path.exists(f"/proc/{old}"):
            exe = os.readlink(f"/proc/{old}/exe") if os.path.exists(f"/proc/{old}/exe") else ""
            assert time.time() < deadline, f"the old daemon runs on with {exe!r}\n{s.log_text()}"
            time.sleep(0.2)
        assert s.show("authbroker.service", "Result")["Result"] == "success"
        assert s.show("authbroker.socket", "ActiveState")["ActiveState"] == "active"
        # The subscriber hears the connection end, as at any stop of the daemon.
        _, err = events.communicate(timeout=20)
        assert events.returncode != 0 and "closed the events connection" in err, err
    finally:
        if events.poll() is None:
            events.kill()
            events.wait()

    # The next authctl starts the new executable, and the account is still signed in: the
    # new daemon reads the refresh token back from the Secret Service and refreshes with it.
    r = s.run("authctl", "token", "--resource", API)
    assert r.returncode == 0, r.stderr + s.log_text()
    new = s.show("authbroker.service", "MainPID")["MainPID"]
    assert new not in ("0", old)
    assert os.readlink(f"/proc/{new}/exe") == "/usr/bin/authbrokerd"
    assert "was replaced (an upgrade)" in s.log_text()
    assert r.stdout.strip() not in s.log_text()
    status = s.run("authctl", "status")
    assert status.returncode == 0 and "alice" in status.stdout, status.stdout + status.stderr


def test_apt_get_remove_stops_the_users_daemon_and_its_socket(session):
    """`apt-get remove authbroker` (no purge) while the user's daemon runs: the package's
    prerm stops the socket and the daemon in the running user manager, so that nobody is
    served tokens by a program that is no longer installed and the socket does not try to
    start it again. Last in this file: the fixture's purge follows."""
    s = session
    r = s.run("authctl", "status")
    assert r.returncode == 0, r.stdout + r.stderr + s.log_text()
    pid = s.show("authbroker.service", "MainPID")["MainPID"]
    assert pid != "0", s.log_text()
    r = run("apt-get", "remove", "-y", "-q", "authbroker", env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not os.path.exists("/usr/bin/authbrokerd")
    deadline = time.monotonic() + 60
    while (state := s.run("systemctl", "--user", "is-active", "authbroker.service", "authbroker.socket").stdout.split()) \
            != ["inactive", "inactive"]:
        assert time.monotonic() < deadline, f"service and socket: {state}\n{s.log_text()}"
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{pid}")
    # Nothing listens: the next authctl says so instead of waiting on a socket whose
    # daemon cannot start.
    r = s.run("/bin/sh", "-c", f"test -S {s.env['XDG_RUNTIME_DIR']}/authbroker/socket")
    assert r.returncode != 0, "the socket is still there after the removal"
