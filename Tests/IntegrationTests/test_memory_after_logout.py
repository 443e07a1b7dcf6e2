"""A signed-out account's refresh tokens are gone from the daemon's memory (issue 38 item 5).

While an account is signed in its refresh token is the daemon's to hold; after `authctl
logout` nothing needs it, and a copy left in freed heap memory is one a reader of
`/proc/PID/mem` (root, or a core dump) would find long after the user signed out. The test
reads the daemon's memory as root, as the password test does (`test_sign_in_terminal.py`),
against the real Glewlwyd and the real gnome-keyring. No token is printed: the refresh
tokens are read from the keyring as another client would, and only counts are shown."""
import time
import urllib.parse

import pytest

from conftest import API, GIT, Daemon, stored_item
from test_sign_in_terminal import copies_in_memory


def stored_refresh_tokens(name):
    """The account's refresh tokens as the Secret Service holds them now."""
    item = stored_item(name)
    assert item is not None and isinstance(item[1], dict), "the account's item is not in the Secret Service"
    payload = item[1]
    return {payload["refresh_token"], *(payload.get("resource_refresh_tokens") or {}).values()}


# Glewlwyd with rotation narrows each rotated refresh token to the resource it was used
# for (docs/providers.md): there the requests are for the default audience only.
@pytest.mark.parametrize("provider,resources", [("glewlwyd", [None] * 4), ("glewlwyd_static", [None, API, GIT, None, API])],
                         ids=["rotating", "static"])
def test_a_signed_out_accounts_refresh_tokens_are_gone_from_the_daemons_memory(request, provider, resources):
    """Sign in, get tokens several times with a refresh before each (refresh_margin longer
    than a token lives; with rotation each refresh replaces the refresh token, so there are
    several to look for; without, for two resources and the default audience), then log out: two seconds
    later no copy of any of them is left in the daemon's memory, neither as issued nor as a
    form body carries it."""
    gl = request.getfixturevalue(provider)
    d = Daemon(gl, client="authbroker-confidential", refresh_margin=86400).start()
    try:
        d.login_device("alice")
        seen = stored_refresh_tokens(d.name)
        for resource in resources:
            answer = d.rpc("token.get", {"provider": d.name, **({"resource": resource} if resource else {})})
            assert "result" in answer, answer.get("error")
            seen |= stored_refresh_tokens(d.name)
        assert all(len(t) > 15 for t in seen), "a refresh token short enough to live inside a Swift String"
        pid = d.proc.pid
        assert sum(copies_in_memory(pid, t) for t in seen) > 0, "the live account's refresh token was not found: the scan sees nothing"

        r = d.ctl("logout", "--provider", d.name)
        assert r.returncode == 0, r.stderr
        assert stored_item(d.name) is None
        # A fixed time, not a poll until none is left: a copy freed unwiped is overwritten
        # sooner or later (later heap use, MemoryTrim once quiet for 5 s), so waiting longer
        # would hide it.
        time.sleep(2)
        left = [copies_in_memory(pid, t) for t in seen]
        encoded = [copies_in_memory(pid, urllib.parse.quote(t, safe="")) for t in seen
                   if urllib.parse.quote(t, safe="") != t]
        assert sum(left) == 0 and sum(encoded) == 0, \
            f"copies of the {len(seen)} refresh tokens left after the logout: {left}, form-encoded: {encoded}"
        assert d.proc.poll() is None
    finally:
        d.cleanup()
