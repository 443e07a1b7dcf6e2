"""The daemon's front door (docs/architecture.md, "The request path" and "One connection
lifecycle"): a thread of its own accepts every connection and answers what it can at once
(cached tokens, the status) straight from the socket; anything else goes to the NIO
pipeline, which goes on from where the front door stopped. These tests cause each hand-over
a caller can cause and check that the caller sees one consistent conversation: every answer,
in order, with its own id, nothing lost."""
import json
import time

import pytest

from conftest import API, fingerprint


@pytest.fixture
def signed_in(daemon_factory):
    d = daemon_factory(store="memory")
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text.replace("[daemon]\n", "[daemon]\nrequest_line_timeout = 1\n"))
    d.start()
    d.login_device()
    return d


def line(rid, method, params=None):
    req = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        req["id"] = rid
    if params is not None:
        req["params"] = params
    return (json.dumps(req) + "\n").encode()


def test_cached_answers_then_a_refresh_then_cached_again_on_one_connection(signed_in):
    """A cached token (front door), a request answered later (handed to NIO with the request
    taken in), a token that must be fetched first, then a cached one again (NIO now): all on
    one connection, in order, each with its own id."""
    d = signed_in
    warm = d.rpc("token.get", {"provider": d.name, "resource": API})["result"]
    c = d.connect()
    hit = c.call("token.get", {"provider": d.name, "resource": API})
    assert hit["id"] == 1 and fingerprint(hit["result"]["access_token"]) == fingerprint(warm["access_token"])
    dropped = c.call("token.reject", {"provider": d.name, "resource": API})
    assert dropped["id"] == 2 and dropped["result"] == {"dropped": True}
    refreshes = d.status()["counters"]["refreshes"]
    fetched = c.call("token.get", {"provider": d.name, "resource": API})
    assert fetched["id"] == 3 and d.status()["counters"]["refreshes"] == refreshes + 1
    assert fingerprint(fetched["result"]["access_token"]) != fingerprint(warm["access_token"])
    again = c.call("token.get", {"provider": d.name, "resource": API})
    assert again["id"] == 4
    assert fingerprint(again["result"]["access_token"]) == fingerprint(fetched["result"]["access_token"])
    assert c.call("daemon.status")["id"] == 5
    c.close()


def test_pipelined_lines_and_a_line_in_pieces_are_all_answered_by_id(signed_in):
    d = signed_in
    d.rpc("token.get", {"provider": d.name, "resource": API})
    c = d.connect()
    # Three lines in one write, one of them a notification (never answered).
    c.send_line(line(10, "token.get", {"provider": d.name, "resource": API})
                + line(None, "daemon.status") + line(11, "daemon.status"))
    assert [c.read()["id"], c.read()["id"]] == [10, 11]
    # One request written in two pieces, the second after a pause.
    whole = line(12, "token.get", {"provider": d.name, "resource": API})
    c.send_line(whole[:20])
    time.sleep(0.2)
    c.send_line(whole[20:])
    answer = c.read()
    assert answer["id"] == 12 and "access_token" in answer["result"]
    c.close()


def test_a_notification_is_not_answered_and_the_connection_goes_on(signed_in):
    d = signed_in
    c = d.connect()
    c.send_line(line(None, "daemon.status"))
    time.sleep(0.2)  # read by the daemon on its own
    c.send_line(line(7, "daemon.status"))
    assert c.read()["id"] == 7
    # The blank line between requests is tolerated, as it always was.
    c.send_line(b"\n")
    time.sleep(0.1)
    assert c.call("daemon.status")["id"] == 1
    c.close()


def test_the_daemon_stops_at_once_with_idle_connections_open(signed_in):
    d = signed_in
    held = [d.connect() for _ in range(3)]
    for c in held:
        assert "result" in c.call("daemon.status")
    assert d.stop() == 0  # on SIGTERM, within the 10 s before the fixture would kill it
    for c in held:
        with pytest.raises((ConnectionError, OSError)):
            c.read()
        c.close()
