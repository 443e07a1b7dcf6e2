"""Events (`events.subscribe`) from the real daemon, against a STUB provider (tokens of a
chosen short life and refreshes on demand, which the real Glewlwyd cannot be made to do on
cue): a subscriber is told of sign-in, refresh (key and expiry, never a token) and sign-out,
and one that stops reading is dropped while the daemon's memory stays bounded.

No test prints a token: the raw event lines are checked against every token the stub issued."""
import json
import time

import pytest

from conftest import RPC, Daemon


@pytest.fixture
def daemon(stub):
    d = Daemon(None)
    # The tests ask for many scope sets from one connection, each a new key and a refresh.
    d.write_config(text=(
        '[daemon]\nstore = "memory"\nrefresh_margin = 60\ncache_misses_per_minute = 0\n\n'
        f'[providers.{d.name}]\nissuer = "{stub.issuer}"\nclient_id = "{stub.client_id}"\n'
        'scopes = ["openid", "offline_access"]\nany_scopes = true\n'))
    d.start()
    yield d
    d.cleanup()


def subscribe(d, **params):
    c = RPC(d.socket, timeout=30)
    answer = c.call("events.subscribe", params or None)
    assert answer["result"]["subscribed"] is True, answer
    return c


def next_event(c):
    line = c.read_raw()
    message = json.loads(line)
    assert "id" not in message and message["method"] == "event", message
    return line, message["params"]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_subscriber_is_told_of_sign_in_refresh_and_sign_out_and_never_sees_a_token(stub, daemon):
    d = daemon
    watcher = subscribe(d)
    only_refreshes = subscribe(d, kinds=["token_refreshed"])

    r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
    assert r.returncode == 0, r.stderr
    _, signed_in = next_event(watcher)
    assert signed_in["kind"] == "signed_in" and signed_in["provider"] == d.name
    assert signed_in["subject"] == stub.subject

    got = d.rpc("token.get", {"provider": d.name, "scopes": ["read"]})["result"]
    raw, refreshed = next_event(watcher)
    assert refreshed == {"kind": "token_refreshed", "provider": d.name, "account": got["account"],
                         "subject": stub.subject, "scopes": ["read"], "expires_at": got["expires_at"]}
    raw_filtered, filtered = next_event(only_refreshes)
    assert filtered == refreshed, "the kinds filter left out the sign-in, not the refresh"

    # A cache hit reports nothing; the next event is the sign-out.
    d.rpc("token.get", {"provider": d.name, "scopes": ["read"]})
    assert d.ctl("logout", "--provider", d.name, "--local").returncode == 0
    raw_out, signed_out = next_event(watcher)
    assert signed_out["kind"] == "signed_out" and signed_out["subject"] == stub.subject

    for line in (raw, raw_filtered, raw_out):
        assert not any(t.encode() in line for t in stub.issued), "an event line carries a token"
    watcher.close()
    only_refreshes.close()


def test_a_subscriber_that_does_not_read_is_dropped_and_memory_stays_bounded(stub, daemon):
    d = daemon
    assert d.ctl("login", "--device", "--provider", d.name, timeout=30).returncode == 0
    reader = subscribe(d, kinds=["token_refreshed"])
    stalled = subscribe(d, kinds=["token_refreshed"])  # never read from here on
    pid = d.proc.pid
    client = RPC(d.socket, timeout=60)

    def refreshes(count, start):
        # Each token.get names a new scope: a new cache key, so each one is a refresh. The
        # scope is long (1 KiB), so that each event is too and a few hundred fill what the
        # socket and the daemon's high-water mark take. In steps of 100, after each of which
        # the reading subscriber reads its events.
        for step in range(start, start + count, 100):
            for i in range(step, step + 100):
                scope = f"s{i}." + "x" * 1024
                client.send_line(json.dumps({"jsonrpc": "2.0", "id": i, "method": "token.get",
                                             "params": {"provider": d.name, "scopes": [scope]}}) + "\n")
            for _ in range(100):
                assert "result" in client.read()
            for _ in range(100):
                next_event(reader)

    sent = 0
    while "stopped reading" not in d.log_text() and sent < 3000:
        refreshes(100, sent)
        sent += 100
    assert "stopped reading" in d.log_text(), f"the stalled subscriber was not dropped after {sent} events"
    dropped_after = sent
    before = rss_kib(pid)
    refreshes(500, sent)  # half a MiB of events after the drop
    sent += 500
    after = rss_kib(pid)
    print(f"dropped after {dropped_after} events; RSS {before} KiB -> {after} KiB over 500 more events")
    assert after - before < 16 * 1024, "the daemon's memory grew with events after the drop"

    # The stalled subscriber finds what was sent before the drop, then the end of the connection.
    stalled.sock.settimeout(10)
    received = 0
    with pytest.raises(ConnectionError):
        while True:
            next_event(stalled)
            received += 1
    assert 0 < received < dropped_after
    assert d.proc.poll() is None
    client.close()
    reader.close()


def wait_for_subscribers(d, base, count):
    """Waits until `count` subscriptions reached the daemon after `base` (its request counter
    before they started); each status call here counts as one request too."""
    calls = 0
    deadline = time.time() + 20
    while time.time() < deadline:
        calls += 1
        if d.status()["counters"]["requests"] >= base + calls + count:
            return
        time.sleep(0.05)
    raise AssertionError("the subscribers did not connect")


def test_a_subscriber_that_closed_its_writing_side_still_gets_its_events(stub, daemon):
    """The shell way to follow events: the subscription piped into socat, which half-closes
    when its input ends and reads on (-t). A half-close says the client has nothing more to
    ask, as for login.wait: the events keep coming until the client hangs up."""
    import socket
    d = daemon
    c = RPC(d.socket, timeout=30)
    c.send_line(b'{"jsonrpc":"2.0","id":1,"method":"events.subscribe","params":{"kinds":["signed_in"]}}\n')
    c.sock.shutdown(socket.SHUT_WR)
    assert c.read()["result"]["subscribed"] is True
    r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
    assert r.returncode == 0, r.stderr
    _, signed_in = next_event(c)
    assert signed_in["kind"] == "signed_in" and signed_in["subject"] == stub.subject
    c.close()


def test_authctl_events_follows_the_daemon_one_line_per_event(stub, daemon):
    """`authctl events` (the CLI side of events.subscribe): --json prints one object per line,
    --kind filters, plain lines name the kind, provider and resource; no token anywhere."""
    import subprocess

    from conftest import AUTHCTL
    d = daemon
    base = d.status()["counters"]["requests"]
    as_json = subprocess.Popen([AUTHCTL, "events", "--json", "--kind", "token_refreshed", "--kind", "signed_out"],
                               env=d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    plain = subprocess.Popen([AUTHCTL, "events"], env=d.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for_subscribers(d, base, 2)
        assert d.ctl("login", "--device", "--provider", d.name, timeout=30).returncode == 0
        got = d.rpc("token.get", {"provider": d.name, "scopes": ["read"]})["result"]
        assert d.ctl("logout", "--provider", d.name, "--local").returncode == 0

        first = json.loads(as_json.stdout.readline())
        assert first == {"kind": "token_refreshed", "provider": d.name, "account": got["account"],
                         "subject": stub.subject, "scopes": ["read"], "expires_at": got["expires_at"]}
        assert json.loads(as_json.stdout.readline())["kind"] == "signed_out", "--kind let another kind through"

        lines = [plain.stdout.readline() for _ in range(3)]
        assert [line.split()[1] for line in lines] == ["signed_in", "token_refreshed", "signed_out"], lines
        assert "(default audience)" in lines[1] and "scopes read" in lines[1] and "expires in" in lines[1]
    finally:
        for p in (as_json, plain):
            p.terminate()
        out = "".join(p.communicate(timeout=10)[0] for p in (as_json, plain))
    assert not any(t in out for t in stub.issued), "authctl events printed a token"


def test_authctl_events_says_so_when_the_daemon_goes_away(stub, daemon):
    import subprocess

    from conftest import AUTHCTL
    d = daemon
    base = d.status()["counters"]["requests"]
    p = subprocess.Popen([AUTHCTL, "events"], env=d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_subscribers(d, base, 1)
    d.proc.terminate()
    d.proc.wait(timeout=20)
    _, err = p.communicate(timeout=20)
    assert p.returncode != 0
    assert "closed the events connection" in err, err
