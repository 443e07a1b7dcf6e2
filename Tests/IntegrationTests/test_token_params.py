"""`params` on token.get and `token_params` in the configuration: extra token request
parameters (Auth0's audience, Logto's organization_id, …). Glewlwyd ignores parameters it
does not know, so the provider here is a STUB that records every token request's form."""
import pytest

from conftest import fingerprint, signed_in_at_stub, token
from test_faults import stub_config


@pytest.fixture
def daemon(stub):
    # "independent": each token lives until it expires, so tokens of different params stay cached.
    d = signed_in_at_stub(lambda name: stub_config(name, stub, refresh_margin=60)
                          + 'token_params = { tenant = "t-1" }\naccess_tokens = "independent"\n'
                          + 'caller_params = ["organization_id", "claims"]\n')
    yield d
    d.cleanup()


def refresh_forms(stub):
    return [f for f in stub.token_forms if f.get("grant_type") == ["refresh_token"]]


def test_tokens_with_different_params_are_cached_apart_and_each_refresh_carries_its_own(stub, daemon):
    one = token(daemon, params={"organization_id": "org-1"})["result"]
    two = token(daemon, params={"organization_id": "org-2"})["result"]
    assert fingerprint(one["access_token"]) != fingerprint(two["access_token"])
    forms = refresh_forms(stub)
    assert [f.get("organization_id") for f in forms] == [["org-1"], ["org-2"]]
    # The provider's own parameters go with every refresh.
    assert all(f.get("tenant") == ["t-1"] for f in forms)

    # Each is served from the cache under its own params; no params is yet another token.
    assert fingerprint(token(daemon, params={"organization_id": "org-1"})["result"]["access_token"]) == fingerprint(one["access_token"])
    assert fingerprint(token(daemon, params={"organization_id": "org-2"})["result"]["access_token"]) == fingerprint(two["access_token"])
    assert len(refresh_forms(stub)) == 2
    plain = token(daemon)["result"]
    assert fingerprint(plain["access_token"]) not in (fingerprint(one["access_token"]), fingerprint(two["access_token"]))
    last = refresh_forms(stub)[-1]
    assert "organization_id" not in last and last.get("tenant") == ["t-1"]


def test_authctl_param_sends_them(stub, daemon):
    r = daemon.ctl("token", "--provider", daemon.name, "--param", "organization_id=org-9", "--param", "claims={\"a\":1}")
    assert r.returncode == 0, r.stderr
    form = refresh_forms(stub)[-1]
    assert form.get("organization_id") == ["org-9"] and form.get("claims") == ['{"a":1}']
    r = daemon.ctl("token", "--provider", daemon.name, "--param", "grant_type=x")
    assert r.returncode != 0 and "grant_type" in r.stderr, r.stderr
    r = daemon.ctl("token", "--provider", daemon.name, "--param", "novalue")
    assert r.returncode != 0 and "NAME=VALUE" in r.stderr, r.stderr


def test_the_protocols_own_names_are_refused(stub, daemon):
    before = len(stub.token_forms)
    for name in ("grant_type", "refresh_token", "resource", "scope", "client_id"):
        r = token(daemon, params={name: "x"})
        assert "error" in r and name in r["error"]["message"], r
    r = token(daemon, params={"ok": 1})
    assert r["error"]["code"] == -32602, r
    # A name caller_params does not list: each new one would be a new token and a refresh.
    r = token(daemon, params={"acr_values": "x"})
    assert r["error"]["code"] == -32602 and "caller_params" in r["error"]["message"], r
    assert len(stub.token_forms) == before, "a refused request reached the provider"


def test_authctl_token_fresh_with_params_drops_that_token_and_no_other(stub, daemon):
    """`authctl token --fresh --param …` after an API refused the token: the token of those
    params is dropped and a new one minted; the token without params is left alone."""
    plain = token(daemon)["result"]
    args = ("token", "--provider", daemon.name, "--param", "organization_id=org-1")
    r = daemon.ctl(*args)
    assert r.returncode == 0, r.stderr
    refused = fingerprint(r.stdout.strip())
    r = daemon.ctl(*args, "--fresh")
    assert r.returncode == 0, r.stderr
    served_again = fingerprint(r.stdout.strip()) == refused
    assert not served_again, "--fresh served the refused token again"
    assert refresh_forms(stub)[-1].get("organization_id") == ["org-1"]
    plain_kept = fingerprint(token(daemon)["result"]["access_token"]) == fingerprint(plain["access_token"])
    assert plain_kept, "--fresh with params dropped the token without them"
