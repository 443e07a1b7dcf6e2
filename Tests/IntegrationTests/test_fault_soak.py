"""The fault test (issue 24, "In the suite"; issue 37 item 9): the real daemon on a session
bus of its own (a dbus-daemon and gnome-keyring the test kills and starts again), a real
Glewlwyd whose access tokens live a few seconds with refresh-token rotation on, both under
libfaketime so the test can step their wall clocks, and several clients that check every
token they get, while faults are injected on the real parts. After each fault:

- no token was served at or after its `exp` by the test's own clock, which is never
  faked (and no answer's `expires_at` is later than the token's own `exp`), every token is
  for the resource asked for and the signed-in `sub`;
- no sign-in was lost: the account is `ready`, also after a daemon restart;
- no caller heard -32001 ("not signed in") unless the provider refused the refresh token:
  the only refusals that can happen here are the windows of docs/security.md, Glewlwyd
  stopped after it rotated a refresh token and before its answer left ("A refresh that
  times out") and the daemon SIGKILLed between the provider's rotation and the write
  ("Crash safety and rotation"); after those two faults a lost sign-in whose stored
  refresh token Glewlwyd's database shows disabled is counted and printed, not failed;
- tokens are served again within BACK_WITHIN seconds of the fault's end.

The short run (the suite, CI) injects each fault once: about 70 s. The long
run (`scripts/soak --minutes 15`) sets AUTHBROKER_SOAK_MINUTES and injects faults at random
until the time is up (`test_soak`, skipped otherwise).

The clients: a persistent connection, a connection per request, a pipelined connection
(several requests written at once), `authctl token --json`, and one that hangs up in the
middle of its requests. No test prints a token: only counts and fingerprints.
"""
import collections
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import API, AUTHCTL, RPC, Daemon, _provider, _stop_provider, fingerprint, stop_process
from fake_clock import LIBFAKETIME, FakeClock
from glewlwyd_api import Glewlwyd, decode_jwt
from private_session import GNOME_KEYRING_PASSWORD, PrivateSession
from test_faults import UNLOCK, stored_refresh_token_on
from waiting import wait_until

TOKEN_LIFE = 4  # seconds: Glewlwyd's access tokens
BACK_WITHIN = 12  # seconds after a fault ends: http_timeout (2) + the longest back-off reached (8) + slack
GLEWLWYD_BIN = os.environ.get("GLEWLWYD_BIN", "/usr/bin/glewlwyd")
SOAK_MINUTES = float(os.environ.get("AUTHBROKER_SOAK_MINUTES", "0") or 0)

# The faults that can cost a sign-in through no fault of the daemon (docs/security.md).
WINDOW_FAULTS = ("provider stopped", "daemon SIGKILL")
STEP = 600  # seconds: the daemon's wall clock stepped back so far, then forward again (an NTP correction)
SKEW = 180  # seconds: Glewlwyd's clock ahead of the host's, then behind
# What shows a clock fault reached the process whose clock moved (Record.clock): without
# it, a test that sees no token past `exp` proves nothing.
CLOCK_EVIDENCE = {
    "wall clock stepped": ["expires_at moved with the daemon's clock"],
    "provider clock skew": ["iat ahead of the host's clock", "exp already past on arrival"],
}


# --- the real parts -------------------------------------------------------------------

class Provider:
    """The module's own Glewlwyd (short tokens, rotation), stopped, started and stalled as
    one process: its sqlite database keeps every grant across a restart."""

    def __init__(self, directory):
        self.dir = directory
        self.gl = Glewlwyd(directory)
        self.config = self.gl.env["config"]
        # Its wall clock is the test's to skew: started again under libfaketime.
        self.clock = FakeClock(directory)
        self.stop()
        self.start()

    @property
    def pid(self):
        with open(os.path.join(self.dir, "glewlwyd.pid")) as f:
            return int(f.read().strip())

    def stop(self):
        pid = self.pid
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 10
        while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.05)
        FakeClock.forget(pid)

    def start(self):
        out = open(os.path.join(self.dir, "glewlwyd.stdout"), "ab")
        proc = subprocess.Popen([GLEWLWYD_BIN, f"--config-file={self.config}"], stdin=subprocess.DEVNULL,
                                env=dict(os.environ, **self.clock.env()), stdout=out, stderr=subprocess.STDOUT,
                                cwd=self.dir, start_new_session=True)
        out.close()
        with open(os.path.join(self.dir, "glewlwyd.pid"), "w") as f:
            f.write(str(proc.pid))
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                self.gl.discovery()
                return
            except Exception:  # not listening yet
                time.sleep(0.1)
        raise AssertionError("Glewlwyd did not come back")

    def stall(self):
        stop_process(self.pid)

    def resume(self):
        os.kill(self.pid, signal.SIGCONT)


def restart_keyring(bus):
    """SIGKILLs gnome-keyring and starts it again on the same session bus and keyring file,
    as a desktop session does after a crash: under a new unique bus name and locked, then
    unlocked the way Seahorse does (test_faults.UNLOCK, with its GNOME_KEYRING_PASSWORD).
    Exactly one keyring runs afterwards, as before."""
    os.kill(bus.owner_pid(), signal.SIGKILL)
    wait_until(lambda: bus.owner_pid() is None, 10, "the killed keyring never left the bus")
    time.sleep(0.5)  # the daemon's calls meet a bus without a Secret Service
    subprocess.run(["timeout", "10", "gnome-keyring-daemon", "--start", "--daemonize", "--components=secrets"],
                   env=bus.env, capture_output=True, check=True)
    wait_until(lambda: bus.owner_pid() is not None, 10, "the keyring never came back on the bus")
    r = subprocess.run(["timeout", "10", "/usr/bin/python3", "-c", UNLOCK], capture_output=True, text=True,
                       env=dict(bus.env, AUTHBROKER_TEST_KEYRING_PASSWORD=GNOME_KEYRING_PASSWORD))
    assert r.returncode == 0, r.stderr


# --- what the clients see ---------------------------------------------------------------

class Record:
    """Every answer the clients got, checked as it arrives; violations by fault. `sent_at`
    is the test's own clock (time.time() here, never under libfaketime): the true time."""

    def __init__(self, subject):
        self.subject = subject
        self.lock = threading.Lock()
        self.phase = "start"
        self.tokens = collections.Counter()
        self.errors = collections.Counter()
        self.violations = collections.defaultdict(list)
        self.closed = collections.Counter()
        # -32001 answers by phase: violations unless the provider refused the refresh token.
        self.login_required = collections.defaultdict(list)
        self.lost_to_the_provider = collections.Counter()
        # What the answers showed of a clock fault, by phase (CLOCK_EVIDENCE).
        self.clock = collections.defaultdict(collections.Counter)

    def violation(self, text):
        with self.lock:
            if len(self.violations[self.phase]) < 20:
                self.violations[self.phase].append(text)

    def answer(self, answer, sent_at, client):
        if "result" in answer:
            self.token(answer["result"], sent_at, client)
            return
        code = answer.get("error", {}).get("code")
        with self.lock:
            self.errors[(self.phase, code)] += 1
        if code == -32004 and "is past by this computer's clock" in answer["error"].get("message", ""):
            with self.lock:
                self.clock[self.phase]["exp already past on arrival"] += 1
        if code == -32001:
            with self.lock:
                self.login_required[self.phase].append(f"{client}: -32001 without a refusal by the provider: "
                                                       f"{answer['error'].get('message')}")
        elif code not in (-32004, -32005, -32009):  # unreachable, store unavailable, overloaded
            self.violation(f"{client}: unexpected error {code}: {answer['error'].get('message')}")

    def token(self, result, sent_at, client):
        access = result["access_token"]
        try:
            _, claims = decode_jwt(access)
        except ValueError:
            return self.violation(f"{client}: not a JWT ({fingerprint(access)})")
        with self.lock:
            self.tokens[self.phase] += 1
        if claims["exp"] <= sent_at:
            self.violation(f"{client}: token {fingerprint(access)} served {sent_at - claims['exp']:.2f} s at or after its exp")
        if result["expires_at"] > claims["exp"]:
            self.violation(f"{client}: expires_at {result['expires_at']} is after the token's exp {claims['exp']} "
                           f"(iat {claims.get('iat')}, asked at {sent_at:.2f}, token {fingerprint(access)})")
        if claims.get("aud") not in (API, [API]):
            self.violation(f"{client}: token for aud {claims.get('aud')!r}, not {API}")
        if claims.get("sub") != self.subject:
            self.violation(f"{client}: token for another sub")
        with self.lock:
            if claims["exp"] - result["expires_at"] > STEP / 2:  # the daemon's wall clock is behind
                self.clock[self.phase]["expires_at moved with the daemon's clock"] += 1
            if claims.get("iat", sent_at) - sent_at > SKEW / 2:  # Glewlwyd's clock is ahead
                self.clock[self.phase]["iat ahead of the host's clock"] += 1

    def connection_lost(self, client):
        with self.lock:
            self.closed[(self.phase, client)] += 1


class Clients:
    """The client threads, run until `stop()`."""

    def __init__(self, daemon, record):
        self.d = daemon
        self.record = record
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.loop, args=(f,), daemon=True)
                        for f in (self.persistent, self.per_request, self.pipelined, self.authctl, self.hang_up)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=30)

    def params(self):
        return {"provider": self.d.name, "resource": API}

    def loop(self, client):
        while not self.stopping.is_set():
            try:
                client()
            except (OSError, ValueError, KeyError):
                self.record.connection_lost(client.__name__)
                time.sleep(0.1)  # the daemon is down or restarting

    def persistent(self):
        c = RPC(self.d.socket, timeout=20)
        try:
            while not self.stopping.is_set():
                sent = time.time()
                self.record.answer(c.call("token.get", self.params()), sent, "persistent")
                time.sleep(0.02)
        finally:
            c.close()

    def per_request(self):
        sent = time.time()
        c = RPC(self.d.socket, timeout=20)
        try:
            self.record.answer(c.call("token.get", self.params()), sent, "per-request")
        finally:
            c.close()
        time.sleep(0.02)

    def pipelined(self):
        c = RPC(self.d.socket, timeout=20)
        try:
            lines = "".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "token.get", "params": self.params()}) + "\n"
                            for i in range(4))
            sent = time.time()
            c.send_line(lines)
            ids = set()
            for _ in range(4):
                answer = c.read()
                ids.add(answer.get("id"))
                self.record.answer(answer, sent, "pipelined")
            if ids != set(range(4)):
                self.record.violation(f"pipelined: answers for ids {sorted(ids)}")
        finally:
            c.close()
        time.sleep(0.05)

    def authctl(self):
        sent = time.time()
        r = subprocess.run([AUTHCTL, "token", "--provider", self.d.name, "--resource", API, "--json"],
                           env=self.d.env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        if r.returncode == 0:
            self.record.token(json.loads(r.stdout), sent, "authctl")
        elif r.returncode == 4:
            self.record.answer({"error": {"code": -32001, "message": r.stderr.strip()}}, sent, "authctl")
        elif r.returncode == 3:
            raise OSError("daemon unavailable")
        elif r.returncode not in (7, 8, 11):  # unreachable, store unavailable, overloaded
            self.record.violation(f"authctl: exit status {r.returncode}: {r.stderr.strip()}")
        time.sleep(0.1)

    def hang_up(self):
        """Hangs up with a request in flight, or half a request written."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(self.d.socket)
        request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get", "params": self.params()}) + "\n"
        s.sendall(request.encode() if random.random() < 0.5 else request[: len(request) // 2].encode())
        s.close()
        time.sleep(0.05)


# --- the world: provider, daemon, signed-in account, clients --------------------------

class World:
    """The daemon on a session bus of its own at a fixed address (support/private_session.py:
    the bus can be killed and started again there), with its keyring; confined as under
    systemd (AUTHBROKER_SANDBOX=on), its wall clock under libfaketime (the offset file in its
    configuration's folder, which the confinement lets it read). authctl, started with the
    daemon's environment, reads the same stepped clock, as on a host whose clock stepped."""

    def __init__(self, provider):
        self.provider = provider
        self.bus = PrivateSession(fixed_address=True)
        self.bus.start_gnome_keyring()
        self.d = Daemon(provider.gl)
        self.clock = FakeClock(self.d.dir)
        self.d.env.update(self.clock.env(), DBUS_SESSION_BUS_ADDRESS=self.bus.address, AUTHBROKER_SANDBOX="on")
        self.write_config()
        self.d.start()
        self.d.login_device("alice")
        first = self.d.rpc("token.get", {"provider": self.d.name, "resource": API})
        assert "result" in first, first
        self.record = Record(decode_jwt(first["result"]["access_token"])[1]["sub"])
        self.clients = Clients(self.d, self.record).start()

    def write_config(self, extra_resource=False):
        resources = [API, "https://git.example.test"] if extra_resource else [API]
        self.d.write_config(text=(
            '[daemon]\nstore = "secret-service"\nrefresh_margin = 1\nhttp_timeout = 2\nstore_timeout = 2\n\n'
            f"[providers.{self.d.name}]\n"
            f'issuer = "{self.provider.gl.issuer}"\n'
            f'client_id = "{self.provider.gl.client_id("authbroker")}"\n'
            'scopes = ["openid", "profile", "email", "offline_access"]\n'
            f"resources = {json.dumps(resources)}\n"
            'access_tokens = "independent"\n'))

    def token(self):
        try:
            return self.d.rpc("token.get", {"provider": self.d.name, "resource": API})
        except (OSError, ValueError):
            return None

    def back(self, fault):
        """Seconds until a request sent after the fault's end gets a token; None if the
        account needs a sign-in (see `signed_in`) or nothing came within BACK_WITHIN."""
        ended = time.time()
        while time.time() - ended < BACK_WITHIN:
            answer = self.token()
            if answer and "result" in answer:
                return time.time() - ended
            if answer and answer.get("error", {}).get("code") == -32001:
                return None
            time.sleep(0.2)
        self.record.violation(f"no token within {BACK_WITHIN} s after {fault} ended")
        return None

    def signed_in(self, fault):
        """True if the account is ready. If not, the sign-in was lost: a violation unless
        the provider disabled the stored refresh token (it rotated, and the answer never
        reached the daemon); either way signed in again, so the next fault starts clean."""
        states = [a["state"] for a in self.d.rpc("account.list")["result"]["accounts"]]
        refused = self.record.login_required.pop(fault, [])
        if states == ["ready"]:
            for text in refused:
                self.record.violation(text)
            return True
        stored = stored_refresh_token_on(self.bus, self.d.name)
        honoured = self.provider.gl.refresh_token_enabled(stored) if stored else None
        if fault in WINDOW_FAULTS and honoured is False:
            with self.record.lock:
                self.record.lost_to_the_provider[fault] += 1
        elif honoured is False:
            self.record.violation(f"sign-in lost after {fault}: the stored refresh token was rotated at the provider, "
                                  f"and its successor never reached the store: accounts {states}")
        else:
            self.record.violation(f"sign-in lost after {fault} although the provider still honours the stored "
                                  f"refresh token (or none is stored): accounts {states}")
        self.d.login_device("alice")
        return False

    def rotation_written(self, fault, after=None):
        """The refresh token in the keyring once it is the one Glewlwyd honours (the newest
        of the rotation) and not `after`; None, and a violation, if that takes 15 s (a
        rotation happens every few seconds)."""
        deadline = time.time() + 15
        while time.time() < deadline:
            stored = stored_refresh_token_on(self.bus, self.d.name)
            if stored and stored != after and self.provider.gl.refresh_token_enabled(stored):
                return stored
            time.sleep(0.2)
        self.record.violation(f"after {fault}, no {'further ' if after else ''}rotated refresh token that Glewlwyd "
                              f"honours reached the keyring within 15 s")
        return None

    def restart_bus(self, fault):
        """The session bus and its keyring killed, the bus started again at the same address,
        then the keyring on it (the same file). Rotations while it is gone are held in
        memory; once it is back, they and the ones after reach the new keyring, and a daemon
        restart afterwards reads the account back (`run` checks it is `ready` and served)."""
        self.bus.restart_bus()
        time.sleep(TOKEN_LIFE + 1)  # a rotation or two with no bus
        self.bus.start_gnome_keyring()
        first = self.rotation_written(fault)
        if first:
            self.rotation_written(fault, after=first)
        self.restart_daemon(signal.SIGTERM)

    def restart_daemon(self, sig):
        self.d.proc.send_signal(sig)
        self.d.proc.wait(timeout=15)
        FakeClock.forget(self.d.proc.pid)
        self.d.start()

    def inject(self, fault):
        p = self.provider
        if fault == "provider stopped":
            p.stop()
            time.sleep(TOKEN_LIFE + 1)  # every cached token runs out while it is down
            p.start()
        elif fault == "provider stalled":
            p.stall()
            try:
                time.sleep(TOKEN_LIFE + 1)
            finally:
                p.resume()
        elif fault == "keyring restarted":
            restart_keyring(self.bus)
            # At least one rotation must be written to the new keyring, then a restart of the
            # daemon (an update, idle_exit) reads the account back.
            time.sleep(TOKEN_LIFE + 1)
            self.restart_daemon(signal.SIGTERM)
        elif fault == "reload":
            for i in range(3):
                self.write_config(extra_resource=(i % 2 == 0))
                self.d.proc.send_signal(signal.SIGHUP)
                time.sleep(1.5)
        elif fault == "daemon SIGKILL":
            time.sleep(random.uniform(0, 2))
            self.restart_daemon(signal.SIGKILL)
        elif fault == "daemon SIGTERM":
            time.sleep(random.uniform(0, 2))
            self.restart_daemon(signal.SIGTERM)
        elif fault == "session bus restarted":
            self.restart_bus(fault)
        elif fault == "wall clock stepped":
            # An NTP correction 10 minutes back, a few refreshes on it, then one forward.
            self.clock.step(-STEP)
            time.sleep(TOKEN_LIFE + 1)
            self.clock.step(0)
            time.sleep(TOKEN_LIFE - 1)
        elif fault == "provider clock skew":
            # Glewlwyd 3 minutes ahead (its tokens are served, and a sign-in is taken: its ID
            # token's iat is within clock_skew), then behind (every 4-second token arrives
            # past its exp: none may be served, and its rotated refresh token must be kept:
            # the daemon restart shows it was).
            p.clock.step(SKEW)
            started = time.monotonic()
            try:
                self.d.login_device("alice")
            except AssertionError:
                self.record.violation(f"a sign-in while Glewlwyd's clock was {SKEW} s ahead failed "
                                      f"(the daemon's log says why)")
            time.sleep(max(0.0, TOKEN_LIFE + 1 - (time.monotonic() - started)))
            p.clock.step(-SKEW)
            time.sleep(TOKEN_LIFE + 1)
            p.clock.step(0)
            self.restart_daemon(signal.SIGTERM)
        elif fault == "hang-ups":
            for _ in range(50):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(self.d.socket)
                s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get",
                                       "params": {"provider": self.d.name, "resource": API}}) + "\n").encode())
                s.close()
        else:
            raise ValueError(fault)

    def run(self, fault):
        """Injects one fault and checks what the clients saw; the violations it caused."""
        with self.record.lock:
            self.record.phase = fault
        self.inject(fault)
        for seen in CLOCK_EVIDENCE.get(fault, []):
            if not self.record.clock[fault][seen]:
                self.record.violation(f"{fault} never reached the clients' answers (no answer showed {seen}): "
                                      f"libfaketime did not move the clock (is the package faketime installed?)")
        took = self.back(fault)
        if not self.signed_in(fault):
            took = self.back(fault)
            # Answers to requests sent before the new sign-in: the same loss, already counted.
            self.record.login_required.pop(fault, None)
        assert self.d.proc.poll() is None, "the daemon died:\n" + self.d.log_text()[-3000:]
        if os.environ.get("AUTHBROKER_FAULTS_LOG"):
            with open(os.environ["AUTHBROKER_FAULTS_LOG"], "a") as f:
                f.write(f"===== {fault}\n" + self.d.log_text())
        time.sleep(1)  # clients meet the recovered daemon; what they see until the next fault counts here too
        return took, list(self.record.violations.get(fault, []))

    def close(self):
        self.clients.stop()
        self.d.cleanup()
        FakeClock.forget(self.d.proc.pid)
        self.bus.close()


@pytest.fixture(scope="module")
def provider():
    assert FakeClock.available(), f"{LIBFAKETIME} is missing: install the faketime package (scripts/setup does)"
    d = _provider("--access-token-duration", str(TOKEN_LIFE), "--refresh-token-one-use", "always")
    try:
        yield Provider(d)
    finally:
        _stop_provider(d)


@pytest.fixture(scope="module")
def world(provider, request):
    w = World(provider)
    yield w
    w.close()
    served = sum(w.record.tokens.values())
    errors = dict(w.record.errors)
    lost = dict(w.record.lost_to_the_provider)
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\nfault test: {served} tokens checked; errors by fault and code: {errors}; "
              f"sign-ins lost to a rotation whose answer never left the provider: {lost or 'none'}")


def check(world, fault):
    took, violations = world.run(fault)
    assert not violations, f"{fault}: " + "; ".join(violations)
    assert took is not None and took <= BACK_WITHIN


FAULTS = ["provider stopped", "provider stalled", "hang-ups", "daemon SIGKILL", "daemon SIGTERM", "reload",
          "keyring restarted", "session bus restarted", "wall clock stepped", "provider clock skew"]


@pytest.mark.skipif(SOAK_MINUTES > 0, reason="the long run (scripts/soak) runs test_soak only")
@pytest.mark.parametrize("fault", FAULTS)
def test_fault(world, fault):
    check(world, fault)


@pytest.mark.skipif(SOAK_MINUTES <= 0, reason="the long run: scripts/soak --minutes N")
def test_soak(world):
    rng = random.Random(os.environ.get("AUTHBROKER_SOAK_SEED", time.time()))
    end = time.time() + SOAK_MINUTES * 60
    summary = collections.Counter()
    failed = []
    slowest = collections.defaultdict(float)
    while time.time() < end:
        fault = rng.choice(FAULTS)
        took, violations = world.run(fault)
        summary[fault] += 1
        slowest[fault] = max(slowest[fault], took or BACK_WITHIN)
        failed += [f"{fault}: {v}" for v in violations]
        world.record.violations.pop(fault, None)
        time.sleep(rng.uniform(0, 3))
    print(f"\nsoak: {sum(summary.values())} faults {dict(summary)}; {sum(world.record.tokens.values())} tokens checked; "
          f"slowest recovery by fault (s): { {k: round(v, 1) for k, v in slowest.items()} }; "
          f"sign-ins lost in the windows of docs/security.md: {dict(world.record.lost_to_the_provider) or 'none'}")
    assert not failed, "\n".join(failed[:50])
