"""Providers that keep one live access token per refresh token (issue 10, item 1): every
refresh revokes the access token the previous one issued. Glewlwyd cannot be made to do
this, so a STUB provider does (support/stub_provider.py, `one_live_access_token`), with a
resource endpoint that tells a live token from a revoked one as an API would.

Also `token.reject`, `authctl token --fresh` and `authctl exec --retry-on-exit`, by which a
caller whose API refused a token gets a new one.

No test prints a token: tokens are compared through `fingerprint()`."""
import os
import sys
import textwrap

import pytest

from conftest import API, AUTHCTL, GIT, RPC, fingerprint, signed_in_at_stub
from stub_provider import StubProvider

PYTHON = os.path.realpath(sys.executable)


@pytest.fixture
def stub():
    # STUB provider: tokens live an hour, so only the revocation can make them unusable.
    s = StubProvider(access_token_life=3600).start()
    s.one_live_access_token = True
    yield s
    s.stop()


def config(name, stub, extra="", rules=""):
    return (f'[daemon]\nstore = "memory"\n\n'
            f"[providers.{name}]\nissuer = \"{stub.issuer}\"\nclient_id = \"{stub.client_id}\"\n"
            f'scopes = ["openid", "offline_access"]\nresources = ["{API}", "{GIT}"]\n{extra}\n{rules}')


def signed_in(stub, extra="", rules=""):
    return signed_in_at_stub(lambda name: config(name, stub, extra, rules))


@pytest.fixture
def daemon(stub):
    d = signed_in(stub)
    yield d
    d.cleanup()


def get(d, resource=None, **params):
    c = RPC(d.socket)
    try:
        if resource:
            params["resource"] = resource
        answer = c.call("token.get", dict(params, provider=d.name))
    finally:
        c.close()
    assert "result" in answer, f"{answer.get('error')}\n{d.log_text()}"
    return answer["result"]["access_token"]


def test_the_default_never_serves_a_token_a_later_refresh_revoked(stub, daemon):
    # Two resources and the default audience of one account, in alternation, three rounds:
    # each refresh revokes the token before it, so every token served must still be live.
    served = []
    for _ in range(3):
        for resource in (API, GIT, None):
            token = get(daemon, resource)
            assert stub.alive(token), f"served a revoked token for {resource or 'the default audience'}"
            served.append(fingerprint(token))
    assert len(set(served)) == len(served), "a token was served again after another refresh revoked it"
    assert all(stub.alive(get(daemon, r)) for r in (API, API, GIT, GIT))

    # `authctl userinfo` refreshes for the default audience like any other request, and
    # what that refresh revoked is not served afterwards.
    api = get(daemon, API)
    info = daemon.rpc("account.userinfo", {"provider": daemon.name})
    assert "result" in info, info
    assert not stub.alive(api)
    fresh = get(daemon, API)
    assert stub.alive(fresh) and fingerprint(fresh) != fingerprint(api)


def test_token_reject_never_echoes_the_token_and_refuses_mixed_params(stub, daemon):
    api = get(daemon, API)
    answer = daemon.rpc("token.reject", {"access_token": api, "resource": API})
    assert "either access_token" in answer["error"]["message"]
    assert api not in str(answer)
    answer = daemon.rpc("token.reject", {"access_token": 42})
    assert "error" in answer and "access_token" in answer["error"]["message"]
    assert api not in daemon.log_text()


def test_a_caller_may_reject_only_what_it_may_get(stub):
    rules = (f'[[allow]]\nexe = "{PYTHON}"\nresources = ["{GIT}"]\n\n'
             f'[[allow]]\nexe = "{os.path.realpath(AUTHCTL)}"\nresources = ["{API}"]\n')
    d = signed_in(stub, rules=rules)
    try:
        refused = d.rpc("token.reject", {"provider": d.name, "resource": API})
        assert refused["error"]["code"] == -32002 and API in refused["error"]["message"]
        # authctl may have API tokens; this caller may not drop them, not even by
        # presenting the token itself.
        api = d.ctl("token", "--provider", d.name, "--resource", API)
        assert api.returncode == 0, api.stderr
        refused = d.rpc("token.reject", {"access_token": api.stdout.strip()})
        assert refused["error"]["code"] == -32002 and api.stdout.strip() not in str(refused)
        git = get(d, GIT)
        assert d.rpc("token.reject", {"access_token": git})["result"] == {"dropped": True}
    finally:
        d.cleanup()


def test_authctl_token_fresh_gets_a_new_token(stub, daemon):
    first = daemon.ctl("token", "--provider", daemon.name, "--resource", API)
    assert first.returncode == 0, first.stderr
    stub.revoke(first.stdout.strip())
    fresh = daemon.ctl("token", "--provider", daemon.name, "--resource", API, "--fresh")
    assert fresh.returncode == 0, fresh.stderr
    assert fingerprint(fresh.stdout.strip()) != fingerprint(first.stdout.strip())
    assert stub.alive(fresh.stdout.strip())
    assert "--fresh" in daemon.ctl("token", "--help").stdout


def test_authctl_exec_retries_once_when_the_command_says_its_token_was_refused(stub, daemon, tmp_path):
    # The command stands for `curl` against the API: exit 77 on HTTP 401.
    script = tmp_path / "call_api.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, urllib.error, urllib.request
        req = urllib.request.Request("{stub.issuer}/resource",
                                     headers={{"Authorization": "Bearer " + os.environ["AUTHBROKER_TOKEN"]}})
        try:
            urllib.request.urlopen(req).read()
        except urllib.error.HTTPError as e:
            sys.exit(77 if e.code == 401 else 1)
        """))
    stub.revoke(get(daemon, API))
    run = daemon.ctl("exec", "--provider", daemon.name, "--resource", API, "--retry-on-exit", "77",
                     "--", PYTHON, str(script))
    assert run.returncode == 0, run.stderr + daemon.log_text()
    assert stub.resource_calls[-2:] == [False, True], "a refused call, then one with a new token"

    # Without the option the command's status is passed on as it is.
    stub.revoke(get(daemon, API))
    run = daemon.ctl("exec", "--provider", daemon.name, "--resource", API, "--", PYTHON, str(script))
    assert run.returncode == 77
    # A command that keeps failing is run twice, not more, and its status passed on.
    runs = tmp_path / "runs"
    run = daemon.ctl("exec", "--provider", daemon.name, "--resource", API, "--retry-on-exit", "3",
                     "--", "sh", "-c", f"echo run >> {runs}; exit 3")
    assert run.returncode == 3 and runs.read_text().count("run") == 2


def test_authctl_exec_retry_drops_only_the_token_it_handed_out(stub, daemon, tmp_path):
    """While the command ran, another program found the token refused and got a newer one
    (`authctl token --fresh`). When the command then says its token was refused, authctl
    exec must drop that token, not the newer one: with one live access token per refresh
    token, a second refresh would revoke the other program's token."""
    marker, other = tmp_path / "ran", tmp_path / "other"
    first_run = (f'test -e {marker} && exit 0; touch {marker}; '
                 f'{AUTHCTL} token --fresh --provider {daemon.name} --resource {API} > {other} || exit 1; exit 77')
    run = daemon.ctl("exec", "--provider", daemon.name, "--resource", API, "--retry-on-exit", "77",
                     "--", "sh", "-c", first_run)
    assert run.returncode == 0, run.stderr + daemon.log_text()
    newer = other.read_text().strip()
    still_alive = stub.alive(newer)  # not in the assertion, whose report would show the token
    assert still_alive, "the other program's token was revoked by a refresh it did not need"
    assert fingerprint(get(daemon, API)) == fingerprint(newer)


@pytest.mark.parametrize("rule,refreshes", [("one-per-refresh-token", 20), ("independent", 2)])
def test_what_the_safe_default_costs_when_one_account_alternates_resources(stub, rule, refreshes):
    # docs/providers.md quotes these numbers: 20 requests alternating two resources.
    d = signed_in(stub, extra=f'access_tokens = "{rule}"')
    try:
        _, before = stub.counts()
        for _ in range(10):
            get(d, API)
            get(d, GIT)
        assert stub.counts()[1] - before == refreshes
    finally:
        d.cleanup()
