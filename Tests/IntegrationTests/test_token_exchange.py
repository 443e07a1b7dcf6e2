"""`token.exchange` / `authctl token --exchange-for`: RFC 8693 token exchange. Neither
Glewlwyd nor any other provider run here implements it, so the provider is a STUB
(support/stub_exchange.py) that checks the form RFC 8693 §2.1 gives and mints a token."""
import json
import os

from conftest import API, AUTHCTL, RPC, fingerprint, signed_in_at_stub
from stub_exchange import ACCESS, GRANT, ID, enable
from test_faults import stub_config

DOWNSTREAM = "https://downstream.example.com"


def signed_in(stub, extra=""):
    # The downstream service is one of the provider's resources, as token.get would need.
    return signed_in_at_stub(lambda name: stub_config(name, stub, refresh_margin=60).replace(
        f'resources = ["{API}"]', f'resources = ["{API}", "{DOWNSTREAM}"]') + extra)


def exchange_forms(stub):
    return [f for f in stub.token_forms if f.get("grant_type") == [GRANT]]


def test_exchange_sends_the_accounts_token_and_caches_the_new_one(stub):
    exchanges = enable(stub)
    d = signed_in(stub)
    try:
        own = d.rpc("token.get", {})["result"]["access_token"]
        r = d.ctl("token", "--exchange-for", "orders-api", "--resource", DOWNSTREAM, "--json")
        assert r.returncode == 0, r.stderr
        new = json.loads(r.stdout)
        assert new["resource"] == DOWNSTREAM and new["token_type"] == "Bearer"
        assert fingerprint(new["access_token"]) != fingerprint(own)
        [form] = exchange_forms(stub)
        assert form["subject_token_type"] == [ACCESS] and form["audience"] == ["orders-api"]
        assert form["resource"] == [DOWNSTREAM]
        assert fingerprint(form["subject_token"][0]) == fingerprint(own)
        assert "requested_token_type" not in form

        # Cached under its own key: the second call reaches no provider.
        before = len(stub.token_forms)
        again = d.ctl("token", "--exchange-for", "orders-api", "--resource", DOWNSTREAM)
        assert again.returncode == 0, again.stderr
        assert fingerprint(again.stdout.strip()) == fingerprint(new["access_token"])
        assert len(stub.token_forms) == before
        # …and token.get still serves the account's own token.
        assert fingerprint(d.rpc("token.get", {})["result"]["access_token"]) == fingerprint(own)

        # Another audience or the ID token as subject: other tokens.
        other = d.ctl("token", "--exchange-for", "billing-api", "--subject-token-type", "id_token",
                      "--requested-token-type", "jwt")
        assert other.returncode == 0, other.stderr
        form = exchange_forms(stub)[-1]
        assert form["subject_token_type"] == [ID] and form["audience"] == ["billing-api"]
        assert form["requested_token_type"] == ["urn:ietf:params:oauth:token-type:jwt"]
        assert [kind for _, kind in exchanges] == ["access", "id"]
        for text in (r.stdout + r.stderr + again.stderr + other.stderr, d.log_text()):
            assert form["subject_token"][0] not in text and own not in text
    finally:
        d.cleanup()


def test_a_provider_without_token_exchange_gets_a_clear_sentence(stub):
    d = signed_in(stub)  # the stub without stub_exchange: unsupported_grant_type
    try:
        r = d.ctl("token", "--exchange-for", "orders-api")
        assert r.returncode != 0
        assert "does not offer token exchange (RFC 8693)" in r.stderr, r.stderr
        assert "`authctl token`" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        c = RPC(d.socket)
        refused = c.call("token.exchange", {"audience": "orders-api"})
        assert refused["error"]["code"] == -32010, refused
        bad = c.call("token.exchange", {"provider": d.name})
        assert "audience or a resource" in bad["error"]["message"], bad
        bad = c.call("token.exchange", {"audience": "a", "subject_token_type": "refresh_token"})
        assert "subject_token_type must be access_token or id_token" in bad["error"]["message"], bad
        bad = c.call("token.exchange", {"audience": "a", "min_ttl": 86401})
        assert "min_ttl must be between 0 and 86400 seconds" in bad["error"]["message"], bad
        c.close()
        assert d.ctl("status").returncode == 0  # the daemon is still there
    finally:
        d.cleanup()


def test_exchange_is_refused_where_the_policy_does_not_allow_the_resource(stub):
    enable(stub)
    # The rule names both what the exchange names: its resource and its audience.
    d = signed_in(stub, f'\n[[allow]]\nexe = "{os.path.realpath(AUTHCTL)}"\nresources = ["{DOWNSTREAM}", "orders-api"]\n')
    try:
        ok = d.ctl("token", "--exchange-for", "orders-api", "--resource", DOWNSTREAM)
        assert ok.returncode == 0, ok.stderr
        before = len(stub.token_forms)
        refused = d.ctl("token", "--exchange-for", "billing-api")
        assert refused.returncode == 5, refused.stderr
        assert "forbidden by policy" in refused.stderr and "billing-api" in refused.stderr
        assert len(stub.token_forms) == before
    finally:
        d.cleanup()
