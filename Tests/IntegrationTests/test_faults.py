"""Faults: a provider that fails in every way it can (a STUB provider, because a real one
will not fail on demand), a Secret Service that is locked or hangs (the real gnome-keyring,
locked over D-Bus or stopped with SIGSTOP), and SIGKILL in the middle of refreshes with
rotation on (the real daemon against the real Glewlwyd).

No test prints a token: tokens are compared through `fingerprint()`."""
import json
import os
import re
import random
import signal
import subprocess
import threading
import time
import urllib.parse

import pytest

from conftest import (API, AUTHCTL, RPC, Daemon, _provider, _stop_provider, files_outside_the_keyring, fingerprint, signed_in_at_stub,
                      stop_process, stored_item, token)
from glewlwyd_api import Glewlwyd
from private_session import PrivateSession
from stub_provider import StubProvider
from waiting import wait_until

LOGIN_COLLECTION = "/org/freedesktop/secrets/collection/login"


def stub_config(name, stub, store="secret-service", refresh_margin=120, http_timeout=2, store_timeout=10):
    # Tokens from the stub live 60 s; a refresh_margin of 120 s makes every request try a
    # refresh first, so every request meets the fault. Refreshes get the same deadline as
    # the other calls (refresh_timeout), so "slow" and "hang" are late for both.
    return (f'[daemon]\nstore = "{store}"\nrefresh_margin = {refresh_margin}\n'
            f"http_timeout = {http_timeout}\nrefresh_timeout = {http_timeout}\nstore_timeout = {store_timeout}\n\n"
            f"[providers.{name}]\nissuer = \"{stub.issuer}\"\nclient_id = \"{stub.client_id}\"\n"
            f'scopes = ["openid", "offline_access"]\nresources = ["{API}"]\n')


@pytest.fixture
def stub():
    s = StubProvider(access_token_life=60).start()
    yield s
    s.stop()


def signed_in_daemon(stub, **config):
    """A daemon whose one account signed in at the stub (device flow, approved at once)."""
    return signed_in_at_stub(lambda name: stub_config(name, stub, **config))


@pytest.fixture
def daemon(stub):
    d = signed_in_daemon(stub)
    yield d
    d.cleanup()


def stored_refresh_token(name):
    item = stored_item(name)
    assert item is not None, "the account's item is gone from the Secret Service"
    attrs, payload = item
    assert isinstance(payload, dict) and payload.get("refresh_token"), "the stored item is not a credential"
    return payload["refresh_token"]


# Not "slow": an answer later than refresh_timeout is no longer a failure but read late
# and kept (test_a_rotating_provider_stopped_during_a_refresh_costs_a_retry_not_the_sign_in);
# the STUB's "slow" answer carries a refresh token it never honours.
FAULTS = ["refuse", "reset", "http500", "garbage", "hang"]


@pytest.mark.parametrize("fault", FAULTS)
def test_provider_fault_serves_the_cached_token_then_fails_fast_and_backs_off(stub, daemon, fault):
    d = daemon
    first = token(d)
    assert "result" in first, first
    good = stub.last_issued_refresh
    assert fingerprint(stored_refresh_token(d.name)) == fingerprint(good)

    if fault == "refuse":
        stub.refuse()
    else:
        stub.mode = fault
    before = stub.counts()[0]

    # A refresh is due (refresh_margin), it fails, and the token in the cache, which is still
    # valid, is served anyway.
    stale = token(d)
    assert "result" in stale, stale
    assert fingerprint(stale["result"]["access_token"]) == fingerprint(first["result"]["access_token"])
    assert stale["result"]["expires_at"] > time.time()
    tried = stub.counts()[0]
    assert tried == before + (0 if fault == "refuse" else 1), "one refresh was attempted"

    # A caller that needs more life than the cached token has gets "provider unreachable" with
    # a retry hint; within the back-off (or, "hang", while the answer is still awaited) the
    # provider is not asked again.
    fail = token(d, min_ttl=90)
    assert fail["error"]["code"] == -32004, fail
    assert fail["error"]["data"]["retry_after"] >= 1
    assert fail["error"]["data"]["provider"] == d.name
    assert stub.counts()[0] == tried, "the daemon asked the provider again during its back-off"

    # authctl says so with exit status 7 and one sentence.
    r = d.ctl("token", "--provider", d.name, "--min-ttl", "90")
    assert r.returncode == 7, (r.returncode, r.stderr)
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1

    # Nothing in the store was lost or overwritten.
    assert fingerprint(stored_refresh_token(d.name)) == fingerprint(good)
    assert d.proc.poll() is None

    # The provider comes back: after the back-off the next request refreshes, rotates, stores.
    # A hung answer is still awaited (the daemon reads it up to 120 s): the STUB drops it.
    if fault == "hang":
        stub.release_hung()
        wait_until(lambda: "refresh failed" in d.log_text(), 10, "the dropped answer was not noticed")
    stub.resume("ok")
    # The back-off the daemon named (whole seconds, rounded up, begun before it answered) is
    # waited out: the time is what is tested, and a slower machine only waits longer.
    time.sleep(fail["error"]["data"]["retry_after"] + 0.2)
    fresh = token(d)
    assert "result" in fresh, fresh
    assert fingerprint(fresh["result"]["access_token"]) != fingerprint(first["result"]["access_token"])
    assert fingerprint(stored_refresh_token(d.name)) == fingerprint(stub.last_issued_refresh)
    assert stub.last_issued_refresh != good


@pytest.mark.parametrize("when", ["revocation", "discovery"])
def test_logout_while_the_provider_is_down_says_the_refresh_token_stays_valid_there(stub, daemon, when):
    """STUB (a provider that refuses connections): the account is removed here all the same,
    and the user reads that the provider could not be reached and what that leaves alive, not
    that it "refused" the revocation nor to "try again" (the account is gone: there is no again)."""
    d = daemon
    assert "result" in token(d)
    stub.refuse()
    if when == "discovery":
        d.restart()  # the discovery document is not known yet: it is what cannot be fetched
    r = d.ctl("logout", "--provider", d.name, "--no-browser")
    assert r.returncode == 0, r.stderr
    said = r.stdout.strip()
    assert "could not be reached" in said and "stays valid" in said, said
    assert "refused the revocation" not in said and "try again" not in said, said
    assert stored_item(d.name) is None
    assert d.rpc("account.list")["result"]["accounts"] == []
    assert stub.revoked == set()


def test_a_provider_that_never_answers_is_bounded_by_http_timeout(stub, daemon):
    """Every HTTP call has a deadline: with no cached token at all, the caller gets an error
    instead of waiting for ever."""
    d = daemon
    stub.mode = "hang"
    c = RPC(d.socket, timeout=15)  # far beyond http_timeout = 2 s: fails only if unbounded
    answer = c.call("token.get", {"provider": d.name, "resource": API})
    c.close()
    assert answer["error"]["code"] == -32004, answer
    assert "no answer within 2 s" in answer["error"]["message"]
    assert "result" in d.rpc("daemon.status")


# A name server that takes every question and never answers, for a daemon in network and
# mount namespaces of its own (unshare): its /etc/resolv.conf names only that server.
SILENT_NAME_SERVER = """
import os, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
s.settimeout(1)
parent = os.getppid()
while os.getppid() == parent:
    try:
        s.recvfrom(4096)
    except OSError:
        pass
"""
SILENT_DNS = ('ip link set lo up && { "$0" -c "$SILENT_NAME_SERVER" & } && sleep 0.3 '
              '&& mount --bind "$RESOLV_CONF" /etc/resolv.conf && exec "$@"')


def test_a_name_server_that_never_answers_is_bounded_by_http_timeout(tmp_path):
    """A dead name server (a VPN gone, a captive network) must cost a request its
    http_timeout, not the resolver's own time-outs (here 5 tries of 30 s): the sign-in
    fails with the time-out's sentence while the caller still waits."""
    import sys
    if subprocess.run(["unshare", "-rmn", "true"], capture_output=True).returncode != 0:
        pytest.skip("no user namespaces here")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:30 attempts:5\n")
    d = Daemon(None, extra_env={"RESOLV_CONF": str(resolv), "SILENT_NAME_SERVER": SILENT_NAME_SERVER})
    d.write_config(text=('[daemon]\nstore = "secret-service"\nhttp_timeout = 2\n\n'
                         f'[providers.{d.name}]\nissuer = "https://idp.example.test"\nclient_id = "c"\n'
                         f'scopes = ["openid"]\nresources = ["{API}"]\n'))
    try:
        d.start(wrapper=["unshare", "-rmn", "sh", "-c", SILENT_DNS, sys.executable])
        r = d.ctl("login", "--device", "--provider", d.name, timeout=20)  # far below 150 s
        assert r.returncode != 0, r.stdout
        assert "cannot reach idp.example.test: no answer within 2 s" in r.stderr, r.stderr
        assert "result" in d.rpc("daemon.status")
    finally:
        d.cleanup()


# A provider, idp.test, whose first address (IPv6, as getaddrinfo orders them) goes into a
# hole, the way a broken IPv6 route swallows every packet, and whose second (127.0.0.1 in
# the daemon's own network namespace) is served by a STUB over TLS.
BROKEN_IPV6 = ("ip link set lo up && ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up "
               "&& ip addr add 2001:db8::1/64 dev v0 nodad && ip -6 neigh add 2001:db8::2 lladdr 02:00:00:00:00:02 dev v0 "
               '&& mount --bind "$HOSTS_FILE" /etc/hosts && { "$0" -c "$TLS_STUB" & } && sleep 0.5 && exec "$@"')
TLS_STUB = """
import http.server, os, ssl, threading, time
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"issuer":"https://idp.test:8443","token_endpoint":"https://idp.test:8443/token"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 8443), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(os.environ["STUB_CERT"], os.environ["STUB_KEY"])
server.socket = context.wrap_socket(server.socket, server_side=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.5)
"""


def test_a_provider_whose_ipv6_address_is_a_hole_is_reached_over_ipv4(tmp_path):
    """A network whose IPv6 route swallows packets (common behind some routers and VPNs):
    the first of the provider's addresses must not take the whole http_timeout, so that
    the next one, which works, is tried while time is left, as curl and Go do."""
    import sys
    if subprocess.run(["unshare", "-rmn", "ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1"],
                      capture_output=True).returncode != 0:
        pytest.skip("no user namespaces or veth links here")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=idp.test",
                    "-addext", "subjectAltName=DNS:idp.test"], check=True, capture_output=True)
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n2001:db8::2 idp.test\n127.0.0.1 idp.test\n")
    d = Daemon(None, extra_env={"HOSTS_FILE": str(hosts), "TLS_STUB": TLS_STUB, "STUB_CERT": str(cert),
                                "STUB_KEY": str(key), "SSL_CERT_FILE": str(cert)})
    d.write_config(text=('[daemon]\nstore = "secret-service"\nhttp_timeout = 4\n\n'
                         f'[providers.{d.name}]\nissuer = "https://idp.test:8443"\nclient_id = "c"\n'
                         f'scopes = ["openid"]\nresources = ["{API}"]\n'))
    try:
        d.start(wrapper=["unshare", "-rmn", "sh", "-c", BROKEN_IPV6, sys.executable])
        r = d.ctl("login", "--device", "--provider", d.name, timeout=20)
        assert r.returncode != 0, r.stdout
        # The discovery document was read: the provider was reached.
        assert "names no device authorization endpoint in its discovery document" in r.stderr, r.stderr
    finally:
        d.cleanup()


# --- the Secret Service ---------------------------------------------------------------

def dbus(*args):
    return subprocess.run(["timeout", "10", "dbus-send", "--session", "--print-reply", *args],
                          capture_output=True, text=True)


def lock_login_keyring():
    r = dbus("--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
             "org.freedesktop.Secret.Service.Lock", f"array:objpath:{LOGIN_COLLECTION}")
    assert r.returncode == 0, r.stderr
    assert keyring_locked()


def keyring_locked():
    r = dbus("--dest=org.freedesktop.secrets", LOGIN_COLLECTION, "org.freedesktop.DBus.Properties.Get",
             "string:org.freedesktop.Secret.Collection", "string:Locked")
    return "boolean true" in r.stdout


UNLOCK = """
import dbus, os
bus = dbus.SessionBus()
service = bus.get_object("org.freedesktop.secrets", "/org/freedesktop/secrets")
_, session = service.OpenSession("plain", dbus.String("", variant_level=1),
                                 dbus_interface="org.freedesktop.Secret.Service")
password = dbus.ByteArray(os.environ["AUTHBROKER_TEST_KEYRING_PASSWORD"].encode())
secret = dbus.Struct((session, dbus.ByteArray(b""), password, "text/plain"), signature="oayays")
service.UnlockWithMasterPassword(dbus.ObjectPath("%s"), secret,
                                 dbus_interface="org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface")
""" % LOGIN_COLLECTION


def unlock_login_keyring():
    """Unlocks without a prompt, as Seahorse does: gnome-keyring's own interface takes the
    password over a plain Secret Service session. (The Secret Service's Unlock wants a
    prompt, and `gnome-keyring-daemon --unlock` only unlocks when it starts the daemon.)
    python3-dbus belongs to the system Python, so /usr/bin/python3 runs it."""
    env = dict(os.environ)
    env.setdefault("AUTHBROKER_TEST_KEYRING_PASSWORD", "authbroker-test")
    r = subprocess.run(["timeout", "10", "/usr/bin/python3", "-c", UNLOCK], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not keyring_locked(), "the login keyring could not be unlocked again"


def keyring_pid():
    r = dbus("--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
             "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.freedesktop.secrets")
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


def files_holding(secret, *roots):
    """Files under the roots whose bytes contain the secret (gnome-keyring's own encrypted
    store excepted)."""
    return [path for path, data in files_outside_the_keyring(*roots) if secret.encode() in data]


def test_locked_keyring_after_start(stub, daemon):
    d = daemon
    assert "result" in token(d)
    saved = stub.last_issued_refresh
    try:
        lock_login_keyring()
        # A rotation must write: the write fails, the new refresh token stays in memory, and
        # the caller still gets the token the provider issued.
        during = token(d)
        assert "result" in during, during
        rotated = stub.last_issued_refresh
        assert rotated != saved
        assert "could not be written to the store" in d.log_text()
        # A sign-in must write: it fails with "secret store unavailable" and says to unlock.
        r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
        assert r.returncode == 8, (r.returncode, r.stderr)
        assert "unlock" in r.stderr and "locked" in r.stderr
        # The daemon keeps serving the account it holds in memory.
        again = token(d)
        assert "result" in again, again
        assert [a["state"] for a in d.rpc("account.list")["result"]["accounts"]] == ["ready"]
        # and never falls back to a file
        home = os.environ.get("AUTHBROKER_TEST_HOME", os.environ["HOME"])
        assert files_holding(stub.last_issued_refresh, home, d.dir) == []
    finally:
        unlock_login_keyring()
    # Unlocked again: the next rotation writes the newest refresh token.
    after = token(d)
    assert "result" in after, after
    assert fingerprint(stored_refresh_token(d.name)) == fingerprint(stub.last_issued_refresh)


def test_a_logout_the_locked_keyring_refuses_leaves_the_sign_in_working(stub, daemon):
    """`authctl logout` while the keyring is locked: its item cannot be removed, so the
    logout fails with a sentence that says to unlock the keyring, and changes nothing: the
    refresh token is not revoked (the account would be listed ready, and come back after a
    restart, with a dead one). Unlocked, the logout goes through."""
    d = daemon
    assert "result" in token(d)
    current = stub.last_issued_refresh
    try:
        lock_login_keyring()
        r = d.ctl("logout", "--provider", d.name)
        assert r.returncode != 0, r.stdout
        revoked = current in stub.revoked
        assert not revoked, "the refresh token was revoked although the sign-in stays"
        assert "unlock" in r.stderr and "still signed in" in r.stderr, r.stderr
        assert [a["state"] for a in d.rpc("account.list")["result"]["accounts"]] == ["ready"]
    finally:
        unlock_login_keyring()
    r = d.ctl("logout", "--provider", d.name)
    assert r.returncode == 0, r.stderr
    revoked = stub.last_issued_refresh in stub.revoked
    assert revoked, "the logout did not revoke the refresh token"
    assert stored_item(d.name) is None
    assert d.rpc("account.list")["result"]["accounts"] == []


def test_a_stop_stores_the_newest_refresh_token_the_keyring_refused_before(stub, daemon):
    """A rotation while the keyring is locked leaves the newest refresh token in memory only;
    the user unlocks the keyring and stops the daemon (a logout from the desktop, `systemctl
    --user stop`) before the background retry has written it. The stop writes it: the
    restarted daemon still serves the account (the STUB refuses the older refresh token, as
    rotating providers do)."""
    d = daemon
    assert "result" in token(d)
    try:
        lock_login_keyring()
        assert "result" in token(d)  # rotates; the write fails
        assert "could not be written to the store" in d.log_text()
    finally:
        unlock_login_keyring()
    assert d.stop() == 0
    assert fingerprint(stored_refresh_token(d.name)) == fingerprint(stub.last_issued_refresh)
    d.start()
    after = token(d)
    assert "result" in after, after


def test_a_stop_during_a_background_refresh_keeps_its_rotated_refresh_token():
    """SIGTERM while a background refresh (refresh_ahead) waits for the provider, which
    takes it and rotates the refresh token (STUB: tokens that live 8 s, and an answer held
    back 2 s, which Glewlwyd cannot be made to do). The stop waits for the answer and
    stores the rotated refresh token: the restarted daemon still serves the account."""
    s = StubProvider(access_token_life=8).start()
    asked = threading.Event()

    def slow_refresh(form):
        asked.set()
        time.sleep(2)
        return None  # then answered as usual: the refresh token rotates

    d = signed_in_at_stub(lambda name: stub_config(name, s, refresh_margin=2, http_timeout=5)
                          + 'access_tokens = "independent"\nrefresh_ahead = true\nrefresh_ahead_window = 60\n')
    try:
        assert "result" in token(d)
        before = s.last_issued_refresh
        s.refresh_refusal = slow_refresh
        assert asked.wait(20), "no background refresh"
        d.stop()
        wait_until(lambda: s.last_issued_refresh != before, 10, "the stub never rotated the refresh token")
        assert fingerprint(stored_refresh_token(d.name)) == fingerprint(s.last_issued_refresh)
        s.refresh_refusal = None
        d.start()
        after = token(d)
        assert "result" in after, after
    finally:
        d.cleanup()
        s.stop()


def refresh_held_at_provider(d, stub, seconds):
    """A token request whose refresh the STUB has taken (the refresh token rotated) and
    whose answer it holds back `seconds`: returns the caller's thread, to join."""
    before = stub.last_issued_refresh
    stub.refresh_answer_delay = seconds
    caller = threading.Thread(target=lambda: token(d))
    caller.start()
    wait_until(lambda: stub.last_issued_refresh != before, 10, "no refresh")
    return caller


def test_a_logout_during_a_refresh_stays_signed_out(stub):
    """`authctl logout` while the answer to a refresh is on its way: the provider has taken
    the refresh and rotated the refresh token (STUB: the answer held back 2 s after the
    rotation, which Glewlwyd cannot be made to do). The account stays signed out: not
    listed, no item left in the keyring, and the refresh token revoked is the newest one,
    not the rotated-away one."""
    d = signed_in_daemon(stub, http_timeout=5)
    try:
        caller = refresh_held_at_provider(d, stub, seconds=2)
        r = d.ctl("logout", "--provider", d.name)
        assert r.returncode == 0, r.stderr
        caller.join(15)
        assert d.rpc("account.list")["result"]["accounts"] == []
        assert stored_item(d.name) is None, "a refresh token is left in the keyring after the logout"
        newest_revoked = stub.last_issued_refresh in stub.revoked
        assert newest_revoked, "the refresh token that still works was not revoked"
    finally:
        d.cleanup()


def test_a_sign_in_during_a_refresh_keeps_the_new_sign_in(stub):
    """`authctl login` again while the answer to a refresh of the same account is on its
    way (STUB: the answer held back 3 s after the rotation, which Glewlwyd cannot be made
    to do). The new sign-in's refresh token is the one kept, in memory and in the keyring,
    and a logout afterwards revokes it: the late refresh does not put the old grant back."""
    d = signed_in_daemon(stub, http_timeout=10)
    try:
        caller = refresh_held_at_provider(d, stub, seconds=3)
        r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
        assert r.returncode == 0, r.stderr
        signed_in = stub.last_issued_refresh
        caller.join(20)
        stub.refresh_answer_delay = 0
        assert [a["state"] for a in d.rpc("account.list")["result"]["accounts"]] == ["ready"]
        assert fingerprint(stored_refresh_token(d.name)) == fingerprint(signed_in), \
            "the keyring holds the old grant's refresh token, not the new sign-in's"
        r = d.ctl("logout", "--provider", d.name)
        assert r.returncode == 0, r.stderr
        revoked = signed_in in stub.revoked
        assert revoked, "the logout left the new sign-in's refresh token alive at the provider"
    finally:
        d.cleanup()


def test_hanging_secret_service_gives_a_clear_error_in_bounded_time(stub):
    d = signed_in_daemon(stub, store_timeout=2)
    try:
        assert "result" in token(d)
        pid = keyring_pid()
        stop_process(pid)  # the real gnome-keyring stops answering
        try:
            # A sign-in gets "secret store unavailable" after store_timeout, not after
            # D-Bus's own 25 s (the RPC socket's timeout here is 15 s), and before the user
            # is asked to approve anything: the store is checked at login.start.
            c = RPC(d.socket, timeout=15)
            start = c.call("login.start", {"provider": d.name, "flow": "device"})
            c.close()
            assert start["error"]["code"] == -32005, start
            assert "did not answer within 2 s" in start["error"]["message"]
            assert "nothing was sent to" in start["error"]["message"]
            # The daemon is up and serves the account it holds in memory (the rotated
            # refresh token cannot be written; the token is served all the same).
            assert "result" in d.rpc("daemon.status")
            served = token(d)
            assert "result" in served, served
            assert d.proc.poll() is None
        finally:
            os.kill(pid, signal.SIGCONT)
        # The Secret Service is back: the next rotation is stored again.
        assert "result" in token(d)
        deadline = time.time() + 10
        while fingerprint(stored_refresh_token(d.name)) != fingerprint(stub.last_issued_refresh):
            assert time.time() < deadline, "the newest refresh token never reached the Secret Service"
            time.sleep(0.2)
    finally:
        d.cleanup()


def test_hanging_secret_service_at_start_starts_without_it_then_loads_the_accounts(stub):
    d = signed_in_daemon(stub, store_timeout=1)
    d.stop()
    pid = keyring_pid()
    stop_process(pid)
    try:
        d.start()  # up and answering, not exit 69 and a restart loop
        answer = token(d)
        assert answer["error"]["code"] == -32005, answer
        assert answer["error"]["data"]["reason"] == "timed_out", answer
        assert "did not answer within 1 s" in answer["error"]["message"]
        assert d.status()["store_unavailable"]["reason"] == "timed_out"
    finally:
        os.kill(pid, signal.SIGCONT)
    # The keyring answers again: the account is loaded without a restart.
    wait_until(lambda: "store_unavailable" not in d.status(), 15, "the accounts were never loaded")
    assert "result" in token(d)
    assert d.proc.poll() is None
    d.cleanup()


def test_locked_keyring_at_start_serves_once_unlocked(stub):
    d = signed_in_daemon(stub)
    d.stop()
    try:
        lock_login_keyring()
        d.start()
        answer = token(d)
        assert answer["error"]["code"] == -32005, answer
        assert answer["error"]["data"]["reason"] == "locked", answer
        # authctl prints the daemon's reason and exits with "secret store unavailable".
        r = d.ctl("token", "--resource", API, "--provider", d.name)
        assert r.returncode == 8, (r.returncode, r.stderr)
        assert "locked" in r.stderr and "unlock" in r.stderr, r.stderr
        # Signing in would end with a refresh token nobody can keep: refused at once, saying why.
        r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
        assert r.returncode == 8 and "cannot sign in" in r.stderr and "locked" in r.stderr, (r.returncode, r.stderr)
        shown = d.ctl("status")
        assert "unavailable (locked)" in shown.stdout, shown.stdout
    finally:
        unlock_login_keyring()
    wait_until(lambda: "store_unavailable" not in d.status(), 15, "the accounts were never loaded after the unlock")
    assert "result" in token(d)
    d.cleanup()


def test_keyring_started_after_the_daemon(stub):
    """No Secret Service on the bus when the daemon starts (a session whose keyring comes
    later): the daemon serves -32005 `unavailable`, and loads the account the keyring holds
    once a real gnome-keyring is started on that bus."""
    bus = PrivateSession()
    d = Daemon(None)
    d.env.update(DBUS_SESSION_BUS_ADDRESS=bus.address)
    try:
        bus.start_gnome_keyring()
        d.write_config(text=stub_config(d.name, stub))
        d.start()
        r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
        assert r.returncode == 0, r.stderr
        d.stop()
        bus.stop_gnome_keyring()

        d.start()
        answer = token(d)
        assert answer["error"]["code"] == -32005 and answer["error"]["data"]["reason"] == "unavailable", answer
        assert "no Secret Service is running" in answer["error"]["message"]
        bus.start_gnome_keyring()
        wait_until(lambda: "store_unavailable" not in d.status(), 15, "the accounts were never loaded")
        assert "result" in token(d)
    finally:
        d.cleanup()
        bus.close()


def test_keyring_killed_and_back_keeps_the_sign_in_with_rotation(glewlwyd):
    """gnome-keyring SIGKILLed while the daemon runs; the next Secret Service call starts a
    new one through D-Bus activation on the same bus and keyring file (a new unique bus
    name, the login keyring locked, as on a desktop), which the user then unlocks. A
    refresh during the outage rotates the refresh token at the real Glewlwyd: the new one
    is kept in memory, written once the keyring is back, and a restarted daemon still
    serves the account without a new sign-in."""
    d = Daemon(glewlwyd, refresh_margin=7200)  # Glewlwyd's tokens live 3600 s: every request refreshes
    try:
        d.start()
        d.login_device("alice")
        assert "result" in token(d, resource=API)
        os.kill(keyring_pid(), signal.SIGKILL)
        during = token(d, resource=API)  # rotates; the write fails
        assert "result" in during, during
        assert "could not be written to the store" in d.log_text()
        unlock_login_keyring()  # the keyring is back under a new bus name, unlocked
        newest = lambda: glewlwyd.refresh_token_enabled(stored_refresh_token(d.name))
        wait_until(newest, 15, "the newest refresh token never reached the restarted keyring")
        assert "the newest refresh token is stored now" in d.log_text()
        d.restart()
        after = token(d, resource=API)
        assert "result" in after, after
    finally:
        d.cleanup()


def test_a_rotating_provider_stopped_during_a_refresh_costs_a_retry_not_the_sign_in():
    """Glewlwyd with rotation (an instance of this test's own: it is stopped) SIGSTOPped
    for 6 s while a refresh is sent, longer than refresh_timeout (3 s here): the kernel
    still takes the connection and the request, and Glewlwyd, once continued, commits the
    rotation and answers. The caller gets -32004 at refresh_timeout with the daemon's
    sentence (long before authctl's 15 s); the daemon keeps reading the answer and stores
    the rotated refresh token, so the next request is served without a new sign-in and the
    refresh token in the keyring is the one Glewlwyd honours."""
    home = _provider("--refresh-token-one-use", "always")
    gl = Glewlwyd(home)
    with open(os.path.join(home, "glewlwyd.pid")) as f:
        pid = int(f.read().strip())
    d = Daemon(gl)
    with open(d.config) as f:
        text = f.read()
    d.write_config(text=text.replace("[daemon]\n", "[daemon]\nrefresh_timeout = 3\n", 1))
    try:
        d.start()
        d.login_device("alice")  # caches no access token: the first request refreshes
        signed_in = stored_refresh_token(d.name)
        stop_process(pid)
        try:
            started = time.monotonic()
            stalled = token(d, resource=API)
            waited = time.monotonic() - started
            time.sleep(max(0.0, 6 - waited))
        finally:
            os.kill(pid, signal.SIGCONT)
        assert stalled["error"]["code"] == -32004, stalled
        assert "still awaits its answer" in stalled["error"]["message"], stalled["error"]["message"]
        assert waited < 10, f"the caller waited {waited:.1f} s, past refresh_timeout (3 s) and near authctl's 15 s"
        wait_until(lambda: stored_refresh_token(d.name) != signed_in, 20,
                   "the rotated refresh token of the late answer never reached the keyring")
        assert gl.refresh_token_enabled(stored_refresh_token(d.name)), "the stored refresh token is not the one Glewlwyd honours"
        after = token(d, resource=API)
        assert "result" in after, after
        assert d.rpc("account.list")["result"]["accounts"][0]["state"] == "ready"
        assert "answered a refresh" in d.log_text() and "what it brought is kept" in d.log_text()
    finally:
        d.cleanup()
        _stop_provider(home)


def test_a_restarted_session_bus_is_found_again_and_gets_the_rotated_refresh_token(stub):
    """The session bus itself restarts: its dbus-daemon and gnome-keyring killed, a new
    dbus-daemon at the same address, then gnome-keyring again on it (the same keyring file).
    The store's own bus connection is opened again there (GIO's shared one stays closed):
    a refresh during the outage rotates the refresh token at the STUB (which refuses the
    older one, as rotating providers do), the newest one reaches the new keyring within
    seconds without a restart, `authctl status` no longer says it is only in memory, a new
    sign-in is kept, and a restarted daemon still serves the account."""
    bus = PrivateSession(fixed_address=True)
    d = Daemon(None)
    d.env.update(DBUS_SESSION_BUS_ADDRESS=bus.address)
    try:
        bus.start_gnome_keyring()
        d.write_config(text=stub_config(d.name, stub))
        d.start()
        assert d.ctl("login", "--device", "--provider", d.name, timeout=30).returncode == 0
        assert "result" in token(d)
        bus.restart_bus()
        during = token(d)  # the STUB's tokens live 60 s, the margin is 120 s: this rotates
        assert "result" in during, during
        wait_until(lambda: "could not be written to the store" in d.log_text(), 10, "the failed write was not logged")
        rotated = stub.last_issued_refresh
        status = d.ctl("status")
        assert "only in authbrokerd's memory" in status.stdout, status.stdout
        bus.start_gnome_keyring()
        stored = lambda: stored_refresh_token_on(bus, d.name) == rotated
        wait_until(stored, 20, "the rotated refresh token never reached the keyring on the restarted bus")
        assert "the newest refresh token is stored now" in d.log_text()
        wait_until(lambda: "only in authbrokerd's memory" not in d.ctl("status").stdout, 10, "status still says unsaved")
        status = d.ctl("status")
        assert status.returncode == 0 and "unavailable" not in status.stdout, status.stdout
        # A sign-in on the restarted bus is kept, not revoked.
        r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
        assert r.returncode == 0, (r.returncode, r.stderr)
        signed_in = stub.last_issued_refresh
        wait_until(lambda: stored_refresh_token_on(bus, d.name) == signed_in, 10, "the new sign-in was not stored")
        d.restart()
        after = token(d)
        assert "result" in after, after
    finally:
        d.cleanup()
        bus.close()


def stored_refresh_token_on(bus, provider):
    """The refresh token the Secret Service on `bus` holds for the provider, read with
    secret-tool as another client would (None when there is no item or no keyring)."""
    r = subprocess.run(["timeout", "10", "secret-tool", "search", "--all", "--unlock", "provider", provider],
                       env=bus.env, capture_output=True, text=True)
    found = re.search(r"^secret = (.*)$", r.stdout, re.M)
    if not found:
        return None
    try:
        return json.loads(found.group(1)).get("refresh_token")
    except ValueError:
        return None


# --- reloads ----------------------------------------------------------------------------

def reloads_done(d):
    return d.log_text().count("configuration reloaded") + d.log_text().count("still running on the previous one")


def sighup(d, text):
    """Writes the file, sends SIGHUP, and waits until the daemon has taken or refused it."""
    before = reloads_done(d)
    d.write_config(text=text)
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: reloads_done(d) > before, 20, "the reload never ended")


def test_callers_never_hear_not_signed_in_across_reloads(stub):
    """Callers ask in a loop while the file changes the provider and the daemon reloads,
    again and again: every answer is a token (the stub's tokens outlive the margin, so
    they come from the cache or a refresh, never "not signed in")."""
    d = signed_in_daemon(stub, refresh_margin=30)
    configs = [stub_config(d.name, stub, refresh_margin=30).replace(f'resources = ["{API}"]', f'resources = ["{API}", "https://git.example.test"]'),
               stub_config(d.name, stub, refresh_margin=30)]
    stop = threading.Event()
    answers = []

    def ask():
        c = RPC(d.socket, timeout=15)
        try:
            while not stop.is_set():
                answers.append(c.call("token.get", {"provider": d.name, "resource": API}))
        finally:
            c.close()

    callers = [threading.Thread(target=ask) for _ in range(3)]
    try:
        for t in callers:
            t.start()
        for round in range(6):
            # Callers busy before each reload, whatever the machine's load: the reload
            # lands among their requests, and the answers around it are all counted.
            asked = len(answers)
            wait_until(lambda: len(answers) >= asked + 10, 20, "the callers got no answers")
            sighup(d, configs[round % 2])
        asked = len(answers)
        wait_until(lambda: len(answers) >= asked + 10, 20, "the callers got no answers after the last reload")
        stop.set()
        for t in callers:
            t.join()
        errors = [a["error"] for a in answers if "error" in a]
        assert len(answers) > 50 and errors == [], (len(answers), errors[:3])
        assert d.log_text().count("configuration reloaded") == 6
    finally:
        stop.set()
        d.cleanup()


def test_a_reload_while_the_keyring_hangs_keeps_the_old_configuration_and_its_accounts(stub):
    """SIGHUP with another client_id for the provider while gnome-keyring is stopped
    (SIGSTOP): its accounts would have to come from the keyring, which does not answer, so
    the reload is refused and the old configuration keeps serving its account."""
    d = signed_in_daemon(stub, store_timeout=1)
    try:
        assert "result" in token(d)
        pid = keyring_pid()
        stop_process(pid)
        try:
            sighup(d, stub_config(d.name, stub, store_timeout=1).replace(
                f'client_id = "{stub.client_id}"', 'client_id = "another-client"'))
            assert "still running on the previous one" in d.log_text()
            answer = token(d)
            assert "result" in answer, answer
            status = d.status()
            assert status["providers"][0]["client_id"] == stub.client_id
            assert "did not answer within 1 s" in status["reload_refused"]["message"], status
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        d.cleanup()


def test_a_reload_that_removes_a_provider_keeps_its_newest_refresh_token(stub):
    """A rotation while the keyring is locked leaves the newest refresh token in memory
    only; the user then removes the provider from config.toml and reloads. While the
    keyring is locked the reload is refused (it would forget the only copy) and says to
    unlock it; unlocked, the reload writes the token first. Put back, the provider's
    account is served (the STUB refuses the older, rotated-away refresh token)."""
    other = f'[providers.other]\nissuer = "{stub.issuer}"\nclient_id = "{stub.client_id}"\nscopes = ["openid", "offline_access"]\n'
    d = signed_in_daemon(stub)
    with_both = stub_config(d.name, stub) + "\n" + other
    without = stub_config(d.name, stub).split(f"[providers.{d.name}]")[0] + other
    try:
        sighup(d, with_both)
        assert "result" in token(d)
        try:
            lock_login_keyring()
            assert "result" in token(d)  # rotates; the write fails
            assert "could not be written to the store" in d.log_text()
            sighup(d, without)
            refused = d.status().get("reload_refused")
            assert refused and "unlock" in refused["message"], refused
            assert [a["provider"] for a in d.rpc("account.list")["result"]["accounts"]] == [d.name]
        finally:
            unlock_login_keyring()
        sighup(d, without)
        assert d.status().get("reload_refused") is None, d.status()
        assert d.rpc("account.list")["result"]["accounts"] == []
        sighup(d, with_both)
        after = token(d)
        assert "result" in after, after
    finally:
        d.cleanup()


@pytest.mark.parametrize("change", ["removed", "another client"])
def test_a_sign_in_finishing_after_a_reload_removed_or_changed_its_provider_is_refused(stub, change):
    """`authctl login --device` is waiting for approval when the provider is removed from
    config.toml (or given another client_id) and the daemon reloads; the user then approves
    (STUB: authorization_pending until the test lets it through). The sign-in was made for
    a provider that is no longer configured: it fails with a sentence saying so, nothing is
    listed or stored for it, and what it issued is revoked."""
    other = f'[providers.other]\nissuer = "{stub.issuer}"\nclient_id = "{stub.client_id}"\nscopes = ["openid", "offline_access"]\n'
    d = Daemon(None)
    with_both = stub_config(d.name, stub) + "\n" + other
    if change == "removed":
        after = stub_config(d.name, stub).split(f"[providers.{d.name}]")[0] + other
    else:
        after = with_both.replace(f'client_id = "{stub.client_id}"', 'client_id = "another-client"', 1)
    stub.device_error = "authorization_pending"
    try:
        d.write_config(text=with_both)
        d.start()
        login = subprocess.Popen([AUTHCTL, "login", "--device",
                                  "--provider", d.name], env=d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, stdin=subprocess.DEVNULL)
        wait_until(lambda: any("device_code" in f for f in stub.token_forms), 10, "the sign-in never polled")
        sighup(d, after)
        assert d.status().get("reload_refused") is None, d.status()
        stub.device_error = None
        _, err = login.communicate(timeout=30)
        assert login.returncode != 0, "the sign-in for a provider no longer configured succeeded"
        assert "config" in err and d.name in err, err
        assert d.rpc("account.list")["result"]["accounts"] == []
        assert stored_item(d.name) is None, "the sign-in was stored for a provider no longer configured"
        revoked = stub.last_issued_refresh in stub.revoked
        assert revoked, "the sign-in's refresh token was left alive"
    finally:
        d.cleanup()


@pytest.mark.parametrize("change", ["removed", "another client"])
def test_a_refresh_answered_after_a_reload_removed_or_changed_its_provider_lists_no_account(stub, change):
    """A refresh is waiting for its answer (STUB: held back 3 s after the rotation, which
    Glewlwyd cannot be made to do) when the provider is removed from config.toml (or given
    another client_id) and the daemon reloads. The late answer does not put the old
    provider's account back: account.list stays empty, and the rotated refresh token is in
    the old provider's keyring item, so the provider put back is served."""
    other = f'[providers.other]\nissuer = "{stub.issuer}"\nclient_id = "{stub.client_id}"\nscopes = ["openid", "offline_access"]\n'
    d = signed_in_daemon(stub, http_timeout=10)
    with_both = stub_config(d.name, stub, http_timeout=10) + "\n" + other
    if change == "removed":
        after = stub_config(d.name, stub, http_timeout=10).split(f"[providers.{d.name}]")[0] + other
    else:
        after = with_both.replace(f'client_id = "{stub.client_id}"', 'client_id = "another-client"', 1)
    try:
        sighup(d, with_both)
        caller = refresh_held_at_provider(d, stub, seconds=3)
        sighup(d, after)
        assert d.status().get("reload_refused") is None, d.status()
        caller.join(20)
        stub.refresh_answer_delay = 0
        listed = [(a["provider"], a["state"]) for a in d.rpc("account.list")["result"]["accounts"]]
        assert listed == [], f"the late refresh put the old provider's account back: {listed}"
        assert fingerprint(stored_refresh_token(d.name)) == fingerprint(stub.last_issued_refresh), \
            "the keyring item keeps a rotated-away refresh token"
        sighup(d, with_both)
        assert "result" in token(d), d.log_text()
    finally:
        d.cleanup()


# --- crash safety ----------------------------------------------------------------------

def provider_busy(gl):
    """Whether any connection to Glewlwyd is open (`ss`): one a killed daemon left behind
    stays in CLOSE-WAIT, or waits to be accepted, until Glewlwyd has answered it and closed
    it, so a refresh it was still working on is committed once there is none."""
    port = urllib.parse.urlsplit(gl.base_url).port
    r = subprocess.run(["ss", "-Htn", "state", "established", "state", "close-wait", "state", "syn-recv",
                        "sport", "=", f":{port}"], capture_output=True, text=True, check=True)
    return r.stdout.strip() != ""


def test_sigkill_during_refreshes_with_rotation_never_loses_more_than_the_sign_in(glewlwyd, capsys):
    """SIGKILL at random moments while every request refreshes (refresh_margin beyond the
    token's life) with rotation on; after each restart the stored refresh token works, or the
    account says login_required. Nothing worse: no crash at start, no corrupt item."""
    d = Daemon(glewlwyd, refresh_margin=7200)  # Glewlwyd's tokens live 3600 s
    rng = random.Random(os.environ.get("AUTHBROKER_KILL_SEED", time.time()))
    outcomes = {"busy works": 0, "busy login_required": 0, "idle works": 0, "idle login_required": 0}
    refreshes_before_kill = []
    # A number of kills, not a time budget: as many on a busy machine as on a quiet one.
    # scripts/soak runs the long version of this (test_fault_soak.py).
    kills = int(os.environ.get("AUTHBROKER_KILL_ROUNDS", "12"))
    try:
        d.start()
        d.login_device("alice")
        rounds = 0
        while rounds < kills:
            rounds += 1
            stop = threading.Event()
            done = []

            def hammer():
                while not stop.is_set():
                    try:
                        c = RPC(d.socket, timeout=5)
                        answer = c.call("token.get", {"provider": d.name, "resource": API})
                        c.close()
                        if "result" in answer:
                            done.append(1)
                    except (OSError, ValueError):
                        return

            workers = [threading.Thread(target=hammer) for _ in range(2)]
            for w in workers:
                w.start()
            time.sleep(rng.uniform(0.02, 0.4))
            # Most kills land in the middle of refreshes; every third one after they stopped,
            # as the control: with no refresh in flight the stored token must always work.
            idle = rounds % 3 == 0
            if idle:
                stop.set()
                for w in workers:
                    w.join()
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            stop.set()
            for w in workers:
                w.join()
            refreshes_before_kill.append(len(done))

            item = stored_item(d.name)
            assert item is not None and item[1] and item[1].get("refresh_token"), \
                f"round {rounds}: the Secret Service item is missing or corrupt"
            # A refresh the provider was still answering when the daemon died is finished
            # (its rotation committed) before its verdict on the stored token is read.
            wait_until(lambda: not provider_busy(glewlwyd), 20, "Glewlwyd kept a killed daemon's connection open")
            # Whether the provider still honours the stored refresh token, read from its
            # database without using the token.
            usable = glewlwyd.refresh_token_enabled(item[1]["refresh_token"])
            d.start()  # raises if it does not come up
            answer = d.rpc("token.get", {"provider": d.name, "resource": API})
            kind = "idle" if idle else "busy"
            if "result" in answer:
                outcomes[kind + " works"] += 1
                assert usable, f"round {rounds}: a refresh token the provider had disabled worked"
            else:
                assert answer["error"]["code"] == -32001, f"round {rounds}: {answer['error']}"
                outcomes[kind + " login_required"] += 1
                assert not idle, f"round {rounds}: killed with no refresh in flight, yet the sign-in was lost"
                # Only the provider's verdict may cost the sign-in: a stored refresh token the
                # provider still honours must never be given up by the daemon.
                assert not usable, f"round {rounds}: login_required although the stored refresh token was valid"
                d.login_device("alice")
        with capsys.disabled():
            print(f"\nkill loop: {rounds} SIGKILLs, {sum(refreshes_before_kill)} refreshes served before them; "
                  f"after restart: {outcomes}")
        assert outcomes["idle works"] == kills // 3, outcomes
    finally:
        d.cleanup()
