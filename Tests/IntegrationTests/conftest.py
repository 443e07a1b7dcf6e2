"""Fixtures for the integration tests: the real authbrokerd and authctl binaries, a real
Glewlwyd OIDC provider on 127.0.0.1, and the real gnome-keyring Secret Service of the
private D-Bus session that scripts/with-keyring starts around the suite.

No test prints a token: tokens are compared through `fingerprint()`.
"""
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "support"))

from device_login import approve_device_login  # noqa: E402
from glewlwyd_api import Glewlwyd, decode_jwt  # noqa: E402
from stub_provider import StubProvider  # noqa: E402

# A shell runs a background command (`scripts/test &` in a script, a CI runner's job) with
# SIGINT ignored, and an ignored signal stays ignored across exec: authctl would then outlive
# the Ctrl-C the tests send it, as it should for a user who asked for that. The tests stand
# for a user at a terminal, so their children start with SIGINT's default action (Python's
# own handler, set here as it is when SIGINT was not ignored, is reset in every child at exec).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _bin_dir():
    explicit = os.environ.get("AUTHBROKER_BIN")
    if explicit:
        return explicit
    return subprocess.check_output(["swift", "build", "--show-bin-path"], cwd=ROOT, text=True).strip()


BIN = _bin_dir()
AUTHBROKERD = os.path.join(BIN, "authbrokerd")
AUTHCTL = os.path.join(BIN, "authctl")
API = "https://api.example.test"
GIT = "https://git.example.test"


# scripts/test runs the tests on several pytest-xdist workers (--dist loadgroup), each in its
# own scripts/with-keyring: its own session bus, gnome-keyring and HOME. Two kinds of test
# file must not be spread over workers; each such file is one xdist group, so its tests run
# on one worker:
# - SYSTEM_WIDE: they use what the whole machine shares (live `systemd --user` managers of
#   fixed test users, /run/systemd/system, a package installed system-wide), so one of them
#   runs at a time on the machine: their module fixture takes `system_wide_turn` first;
# - ONE_WORKER: their tests share a module fixture that is slow to make (an install, a
#   release build, a Go or Python client, an sshd) or that carries state from test to test
#   (the fault test's world), so the fixture is made once, on one worker.
# A new test file of either kind joins its list.
SYSTEM_WIDE = {"test_systemd_live.py", "test_podman.py", "test_package.py"}
ONE_WORKER = {"test_install.py", "test_release_build.py", "test_client_go.py", "test_client_python.py",
              "test_ssh_forwarding.py", "test_fault_soak.py"}
# The files whose fixture uses the release build (release_bin_dir below), which scripts/test
# builds in the background from the start: they run last, so that the build has the debug
# build, the Swift tests and the other integration tests to finish beside.
NEEDS_RELEASE_BUILD = {"test_package.py", "test_release_build.py"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items):
    """The order the workers are given the work in (scripts/test passes
    --no-loadscope-reorder, so xdist keeps it): the groups with the most tests first, as
    xdist's own reordering would, but the files that need the release build last."""
    def scope(item):
        name = item.path.name
        return name if name in SYSTEM_WIDE | ONE_WORKER else item.nodeid
    size = {}
    for item in items:
        size[scope(item)] = size.get(scope(item), 0) + 1
    items.sort(key=lambda item: (item.path.name in NEEDS_RELEASE_BUILD, -size[scope(item)]))  # stable
    for item in items:
        name = item.path.name
        if name in SYSTEM_WIDE | ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(name.removesuffix(".py")))


@pytest.fixture(scope="module")
def system_wide_turn():
    """A SYSTEM_WIDE file's turn: held from its module fixture's start to the module's end,
    by one file at a time on the machine (whichever worker or test run asks)."""
    folder = "/run/lock" if os.access("/run/lock", os.W_OK) else tempfile.gettempdir()
    with open(os.path.join(folder, "authbroker-system-wide-tests.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def release_bin_dir():
    """The folder of the release binaries users install: AUTHBROKER_INSTALL_BIN when given
    (prebuilt), else the one release build (scripts/lib/build-release, in this tree's
    .build-release, where scripts/install and scripts/package build too). While scripts/test's
    background build of it still runs, SwiftPM makes this one wait for it; then it finds
    everything built."""
    given = os.environ.get("AUTHBROKER_INSTALL_BIN")
    if given:
        return given
    r = subprocess.run([os.path.join(ROOT, "scripts", "lib", "build-release")], capture_output=True, text=True,
                       timeout=3600, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return r.stdout.strip().splitlines()[-1]


def fingerprint(token):
    """A short, non-reversible stand-in for a token in assertions and messages."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def require_keyring():
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        pytest.fail("the integration tests run inside scripts/with-keyring (no D-Bus session here)")


def _provider(*args):
    require_keyring()
    d = tempfile.mkdtemp(prefix="ab-gl-")
    subprocess.run([os.path.join(ROOT, "scripts", "glewlwyd"), "start", d, *args], check=True)
    return d


def _stop_provider(d):
    subprocess.run([os.path.join(ROOT, "scripts", "glewlwyd"), "stop", d])
    if os.environ.get("AUTHBROKER_KEEP_HOME") != "1":
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def glewlwyd():
    """Glewlwyd with refresh-token rotation: every refresh token works once.

    Glewlwyd also narrows a rotated refresh token to the one resource it was just used
    for, so tests that need several resources from one sign-in use `glewlwyd_static`."""
    d = _provider("--refresh-token-one-use", "always")
    try:
        yield Glewlwyd(d)
    finally:
        _stop_provider(d)


@pytest.fixture(scope="session")
def glewlwyd_static():
    """Glewlwyd without rotation: one refresh token serves every resource of the grant."""
    d = _provider("--refresh-token-one-use", "never")
    try:
        yield Glewlwyd(d)
    finally:
        _stop_provider(d)


@pytest.fixture
def short_tmp():
    """A folder of its own under /tmp, removed after the test: for sockets, whose paths must
    fit 108 bytes (pytest's tmp_path may not), and for what other users must reach."""
    d = tempfile.mkdtemp(prefix="ab-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def stub():
    """A STUB provider (support/stub_provider.py) whose access tokens live ten minutes. A
    test file that needs other tokens defines a `stub` of its own."""
    s = StubProvider(access_token_life=600).start()
    yield s
    s.stop()


class RPC:
    """One JSON-RPC connection to the daemon, as any local program would open it."""

    def __init__(self, path, timeout=30):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 0

    def send_line(self, raw):
        self.sock.sendall(raw if isinstance(raw, bytes) else raw.encode())

    def read_raw(self):
        """The next line the daemon sent, undecoded (to search it for tokens)."""
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def read(self):
        return json.loads(self.read_raw())

    def call(self, method, params=None):
        self.next_id += 1
        req = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            req["params"] = params
        self.send_line(json.dumps(req) + "\n")
        return self.read()

    def close(self):
        self.sock.close()


def stop_process(pid):
    """SIGSTOPs `pid` and returns once every thread of it is stopped: the signal is only
    queued when kill returns, and a thread on the other core runs on for a moment (long
    enough, once, to accept and answer a connection the test meant to queue)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                pass  # a thread that ended
        if states and all(state in "tT" for state in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not stop")


def read_until_closed(sock, reset_ends=False):
    """Everything the daemon sends on `sock` until it closes the connection; with
    `reset_ends`, a reset (the daemon closed with requests of ours unread) ends it too.
    Waits no longer than the socket's timeout for each read."""
    got = b""
    try:
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return got
            got += chunk
    except ConnectionResetError:
        if not reset_ends:
            raise
        return got


class Daemon:
    """A real authbrokerd process with its own config, socket and provider name.

    Each daemon gets a unique provider name, so its Secret Service items never meet
    another test's in the shared keyring."""

    def __init__(self, glewlwyd, client="authbroker", store="secret-service", extra_env=None,
                 refresh_margin=60, name=None):
        self.gl = glewlwyd
        self.dir = tempfile.mkdtemp(prefix="ab-", dir="/tmp")
        self.socket = os.path.join(self.dir, "sock")
        self.config = os.path.join(self.dir, "config.toml")
        self.log = os.path.join(self.dir, "daemon.log")
        self.name = name or "t" + uuid.uuid4().hex[:8]
        self.client = client
        self.proc = None
        self.env = dict(os.environ, AUTHBROKER_SOCKET=self.socket)
        self.env.update(extra_env or {})
        if glewlwyd is not None:
            self.write_config(store=store, refresh_margin=refresh_margin)

    def write_config(self, store="secret-service", refresh_margin=60, text=None):
        if text is None:
            secret = self.gl.client_secret(self.client)
            text = (
                f'[daemon]\nstore = "{store}"\nrefresh_margin = {refresh_margin}\n\n'
                f"[providers.{self.name}]\n"
                f'issuer = "{self.gl.issuer}"\n'
                f'client_id = "{self.gl.client_id(self.client)}"\n'
                + (f'client_secret = "{secret}"\n' if secret else "")
                + 'scopes = ["openid", "profile", "email", "offline_access"]\n'
                f'resources = ["{API}", "{GIT}"]\n'
                # Glewlwyd keeps earlier access tokens alive after a refresh (docs/providers.md).
                'access_tokens = "independent"\n'
            )
        with open(self.config, "w") as f:
            f.write(text)

    def start(self, wait=True, args=(), wrapper=()):
        """`wrapper`: a command that execs the daemon (`keyctl session -`), so its pid is the daemon's."""
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [*wrapper, AUTHBROKERD, "--config", self.config, "--log-level", "debug", *args],
            env=self.env, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        logf.close()
        if not wait:
            return self
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"authbrokerd exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                c = RPC(self.socket, timeout=5)
                c.call("daemon.status")
                c.close()
                return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("authbrokerd did not become ready:\n" + self.log_text())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def restart(self):
        self.stop()
        return self.start()

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def rpc(self, method, params=None):
        c = RPC(self.socket)
        try:
            return c.call(method, params)
        finally:
            c.close()

    def connect(self):
        return RPC(self.socket)

    def ctl(self, *args, timeout=60):
        return subprocess.run([AUTHCTL, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def status(self):
        return self.rpc("daemon.status")["result"]

    def login_device(self, user="alice", *args):
        """`authctl login --device [args…]` as `user`, approved through Glewlwyd as the user would in a browser."""
        p = subprocess.Popen([AUTHCTL, "login", "--device", "--provider", self.name, *args], env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
        return approve_device_login(p, self.gl, self.client, user, self.log_text)

    def cleanup(self):
        self.stop()
        if os.environ.get("AUTHBROKER_KEEP_HOME") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def daemon_factory(request):
    """Makes daemons against the rotating provider, or `provider="static"`."""
    made = []

    def make(provider="rotating", **kw):
        gl = request.getfixturevalue("glewlwyd" if provider == "rotating" else "glewlwyd_static")
        d = Daemon(gl, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.cleanup()


@pytest.fixture
def policy_daemon(glewlwyd_static):
    """Makes started daemons whose config ends in `rules` ([[allow]] tables): memory store,
    the static provider with resources API and GIT, and alice signed in (signing in is not
    restricted by the rules). `daemon` adds lines to its [daemon] table, `extra_env` to
    its environment."""
    made = []

    def make(rules, daemon="", extra_env=None):
        d = Daemon(glewlwyd_static, extra_env=extra_env)
        made.append(d)
        d.write_config(text=f"""
[daemon]
store = "memory"
{daemon}
[providers.{d.name}]
issuer = "{glewlwyd_static.issuer}"
client_id = "{glewlwyd_static.client_id('authbroker')}"
resources = ["{API}", "{GIT}"]
""" + rules)
        d.start()
        d.login_device("alice")
        return d

    yield make
    for d in made:
        d.cleanup()


@pytest.fixture(scope="module")
def broker(glewlwyd_static):
    """One daemon for the module, signed in (Glewlwyd without rotation: both resources)."""
    d = Daemon(glewlwyd_static)
    d.start()
    d.login_device("alice")
    yield d
    d.cleanup()


@pytest.fixture
def git_env(broker, tmp_path):
    """The broker's environment for git, with an empty HOME of its own: no global or system
    git config but what the test writes."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(broker.env, HOME=str(home), GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1")
    env.pop("XDG_CONFIG_HOME", None)
    return env


def token_for(d, resource):
    """The token `authctl token` prints for the resource: what another tool must have got."""
    r = d.ctl("token", "--resource", resource, "--provider", d.name)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def signed_in_at_stub(config_for):
    """A real daemon whose config is `config_for(provider_name)`, with its one account
    signed in at a STUB provider (device flow, which the stub approves at once)."""
    d = Daemon(None)
    d.write_config(text=config_for(d.name))
    d.start()
    r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
    assert r.returncode == 0, f"sign-in at the STUB failed ({r.returncode}): {r.stderr}\n{d.log_text()}"
    return d


def token(d, **params):
    """The whole `token.get` answer for the daemon's provider."""
    c = RPC(d.socket, timeout=30)
    try:
        return c.call("token.get", dict(params, provider=d.name))
    finally:
        c.close()


def files_outside_the_keyring(*roots):
    """(path, bytes) of every readable file under the roots, except gnome-keyring's own
    encrypted store: the one place secrets belong."""
    for root in roots:
        for dirpath, _, files in os.walk(root):
            if os.path.join(".local", "share", "keyrings") in dirpath:
                continue
            for f in files:
                path = os.path.join(dirpath, f)
                try:
                    with open(path, "rb") as fh:
                        yield path, fh.read()
                except OSError:
                    pass


def secret_tool(*args):
    return subprocess.run(["timeout", "20", "secret-tool", *args], capture_output=True, text=True)


def stored_item(provider):
    """The daemon's Secret Service item for a provider, read as another client would:
    (attributes, secret payload) or None."""
    r = secret_tool("search", "--all", "--unlock", "provider", provider)
    if "attribute.provider" not in r.stdout + r.stderr:
        return None
    text = r.stdout + r.stderr
    attrs = dict(re.findall(r"^attribute\.(\w+) = (.*)$", text, re.M))
    secret = re.search(r"^secret = (.*)$", text, re.M)
    return attrs, (json.loads(secret.group(1)) if secret else None)
