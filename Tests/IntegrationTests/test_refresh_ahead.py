"""`refresh_ahead = true` on the real daemon, against a STUB provider (tokens that live 8 s,
which the real Glewlwyd cannot be set to per test): a token asked for once is refreshed in
the background before `refresh_margin`, and the next caller gets it without the provider
being asked at its time. Count-based: the stub counts refreshes."""
import time

import pytest

from conftest import RPC, Daemon, fingerprint
from stub_provider import StubProvider


@pytest.fixture
def stub():
    s = StubProvider(access_token_life=8).start()
    yield s
    s.stop()


def daemon_with(stub, extra):
    d = Daemon(None)
    d.write_config(text=(
        # Refreshed ahead at 8 - 2 - 0.5 s; the refreshed token then serves for about 6 s.
        '[daemon]\nstore = "memory"\nrefresh_margin = 2\n\n'
        f'[providers.{d.name}]\nissuer = "{stub.issuer}"\nclient_id = "{stub.client_id}"\n'
        'scopes = ["openid", "offline_access"]\nscope_sets = [["read"]]\n' + extra))
    return d


def test_a_token_asked_for_once_is_refreshed_in_the_background_before_the_margin(stub):
    d = daemon_with(stub, 'access_tokens = "independent"\nrefresh_ahead = true\nrefresh_ahead_window = 60\n')
    try:
        d.start()
        assert d.ctl("login", "--device", "--provider", d.name, timeout=30).returncode == 0
        watcher = RPC(d.socket, timeout=40)
        assert watcher.call("events.subscribe", {"kinds": ["token_refreshed"]})["result"]["subscribed"]

        first = d.rpc("token.get", {"provider": d.name, "scopes": ["read"]})["result"]
        asked = stub.counts()[1]
        event = watcher.read()  # the caller's own refresh
        assert event["params"]["expires_at"] == first["expires_at"]

        # Nobody asks; the daemon refreshes the token in use on its own before the margin.
        event = watcher.read()
        assert event["method"] == "event" and event["params"]["scopes"] == ["read"]
        assert stub.counts()[1] == asked + 1, "one background refresh"
        assert event["params"]["expires_at"] > first["expires_at"]

        second = d.rpc("token.get", {"provider": d.name, "scopes": ["read"]})["result"]
        assert stub.counts()[1] == asked + 1, "the second caller waited for a refresh"
        assert fingerprint(second["access_token"]) != fingerprint(first["access_token"])
        assert second["expires_at"] == event["params"]["expires_at"]
        watcher.close()
    finally:
        d.cleanup()
