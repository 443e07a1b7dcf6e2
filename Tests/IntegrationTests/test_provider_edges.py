"""Token endpoint answers at the edges of the standards, each played by a STUB provider
(support/stub_provider.py) because Glewlwyd never answers this way: a lifetime too large
for a clock, a refusal that echoes the refresh token it was sent, a provider that says
"too many requests" or "temporarily unavailable" and when to come back.

Every test asserts what a user sees: the token answer, the sentence, the daemon staying
up. No test prints a token: tokens are compared via fingerprint()."""
import email.utils
import re
import subprocess
import time
import uuid

import pytest

from conftest import AUTHCTL, Daemon, fingerprint, signed_in_at_stub, token
from stub_provider import StubProvider

API = "https://api.example.test"


def stub_config(name, stub, refresh_margin=120):
    # Stub tokens live 60 s; refresh_margin 120 s makes every token request refresh first.
    return (f'[daemon]\nstore = "secret-service"\nrefresh_margin = {refresh_margin}\n'
            "http_timeout = 2\nrefresh_timeout = 2\n\n"
            f"[providers.{name}]\nissuer = \"{stub.issuer}\"\nclient_id = \"{stub.client_id}\"\n"
            f'scopes = ["openid", "offline_access"]\nresources = ["{API}"]\n'
            'access_tokens = "independent"\n')


@pytest.fixture
def stub():
    s = StubProvider(access_token_life=60).start()
    yield s
    s.stop()


@pytest.fixture
def signed_in(stub):
    made = []

    def make(**config):
        d = signed_in_at_stub(lambda name: stub_config(name, stub, **config))
        made.append(d)
        return d

    yield make
    for d in made:
        d.cleanup()


# --- expires_in beyond any clock --------------------------------------------------------

@pytest.mark.parametrize("expires_in", ["9223372036854775807", 9223372036854774784],
                         ids=["int64-max-as-string", "largest-double-below-2**63"])
def test_stub_enormous_expires_in_is_served_and_the_daemon_stays_up(stub, signed_in, expires_in):
    d = signed_in(refresh_margin=60)
    stub.refresh_answer_extra = {"expires_in": expires_in}
    answer = token(d, resource=API)
    assert "result" in answer, f"token.get failed: {answer.get('error')}\n{d.log_text()[-2000:]}"
    assert d.proc.poll() is None, "authbrokerd died on a token whose expires_in is enormous"
    assert answer["result"]["expires_at"] > time.time() + 86400
    # A second request is a cache hit: the daemon keeps the token it answered with.
    _, refreshes = stub.counts()
    again = token(d, resource=API)
    assert fingerprint(again["result"]["access_token"]) == fingerprint(answer["result"]["access_token"])
    assert stub.counts()[1] == refreshes
    status = d.ctl("status")
    assert status.returncode == 0, status.stderr
    assert d.proc.poll() is None


# --- a refusal that echoes what it was sent ---------------------------------------------

def test_stub_refusal_echoing_the_refresh_token_never_shows_it(stub, signed_in):
    """Some providers quote the parameter they refuse in error_description. The refresh
    token must not reach the caller's sentence, authctl's output or the daemon's log."""
    d = signed_in()
    stub.refresh_refusal = lambda form: (400, {
        "error": "invalid_scope",
        "error_description": f"scope not allowed for grant {form['refresh_token'][0]} of client {form['client_id'][0]}"}, {})
    r = d.ctl("token", "--provider", d.name, "--resource", API)
    assert r.returncode != 0
    refresh_token = stub.last_issued_refresh
    assert refresh_token and refresh_token in stub.valid_refresh
    shown = r.stdout + r.stderr
    assert "invalid_scope" in shown, "the provider's refusal is no longer shown"
    assert "scope not allowed for grant" in shown, "the provider's description is no longer shown"
    # Booleans first, so that a failure prints no token.
    in_output = refresh_token in shown or refresh_token[:16] in shown
    in_log = refresh_token in d.log_text() or refresh_token[:16] in d.log_text()
    assert not in_output, "authctl printed (a prefix of) the refresh token the provider echoed"
    assert not in_log, "the daemon logged (a prefix of) the refresh token the provider echoed"


# --- "come back later" ------------------------------------------------------------------

def _http_date(seconds_from_now):
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


BUSY = {
    # Auth0's rate limit answer: HTTP 429 with an OAuth-style error.
    "429-json-retry-after-seconds": lambda: (429, {"error": "too_many_requests", "error_description": "Global limit has been reached"}, {"Retry-After": "40"}),
    "429-retry-after-http-date": lambda: (429, {"message": "slow down"}, {"Retry-After": _http_date(40)}),
    "503-retry-after-seconds": lambda: (503, {"error": "temporarily_unavailable"}, {"Retry-After": "40"}),
    # RFC 6749 §4.1.2.1's code, as some providers also answer it at the token endpoint.
    "400-temporarily-unavailable": lambda: (400, {"error": "temporarily_unavailable", "error_description": "try later"}, {"Retry-After": "40"}),
}


@pytest.mark.parametrize("answer", list(BUSY), ids=list(BUSY))
def test_stub_busy_provider_serves_the_cached_token_and_waits_as_asked(stub, signed_in, answer):
    """A provider that says it is busy has not refused the grant: the cached token that is
    still good is served, and no refresh is sent before the Retry-After it gave."""
    d = signed_in()  # tokens live 60 s, refresh_margin 120 s: every request refreshes first
    first = token(d, resource=API)
    assert "result" in first, first.get("error")
    stub.refresh_refusal = lambda form: BUSY[answer]()
    served = token(d, resource=API)
    assert "result" in served, f"the still-valid cached token was not served: {served.get('error')}"
    assert fingerprint(served["result"]["access_token"]) == fingerprint(first["result"]["access_token"])
    _, refreshes = stub.counts()
    # A token the cache cannot give (it lives 60 s) waits for the provider's time.
    waiting = token(d, resource=API, min_ttl=3000)
    error = waiting.get("error")
    assert error and error["code"] == -32004, f"expected 'provider unreachable', got {error}"
    assert error["data"]["retry_after"] >= 20, f"Retry-After not honoured: {error}"
    assert stub.counts()[1] == refreshes, "a refresh was sent inside the provider's Retry-After"
    assert d.ctl("status").returncode == 0


@pytest.mark.parametrize("offset", [3600, -3600], ids=["provider-clock-an-hour-ahead", "provider-clock-an-hour-behind"])
def test_stub_retry_after_http_date_is_read_by_the_providers_own_clock(stub, signed_in, offset):
    """A STUB provider whose clock is an hour off says "come back in 40 s" as an HTTP-date by
    that clock, beside its Date header: the wait is 40 s, not 40 s plus or minus an hour
    (ahead: callers refused for the 300 s cap; behind: the provider asked again at once)."""
    d = signed_in()  # tokens live 60 s, refresh_margin 120 s: every request refreshes first
    assert "result" in token(d, resource=API)
    stub.clock_offset = offset
    stub.refresh_refusal = lambda form: (429, {"message": "slow down"}, {"Retry-After": _http_date(offset + 40)})
    waiting = token(d, resource=API, min_ttl=3000)
    error = waiting.get("error")
    assert error and error["code"] == -32004, f"expected 'provider unreachable', got {error}"
    assert 20 <= error["data"]["retry_after"] <= 45, f"Retry-After read by the wrong clock: {error}"


def test_stub_provider_clock_minutes_behind_is_logged_once_with_its_size(stub, signed_in):
    """A STUB provider 3 minutes behind, as its Date headers show (issue 37, item 3): the
    daemon logs the difference once, naming the provider and which clock to correct, not
    once per refresh."""
    d = signed_in()  # every request refreshes
    stub.clock_offset = -180
    for _ in range(3):
        assert "result" in token(d, resource=API)
    lines = [l for l in d.log_text().splitlines() if f"the clock of {d.name} is" in l]
    assert len(lines) == 1, lines
    assert re.search(r"is 1(79|80|81) s behind this computer's \(by its Date header\)", lines[0]), lines[0]


# --- a rotated refresh token that is no token -------------------------------------------

@pytest.mark.parametrize("rotated", ["", "   "], ids=["empty", "blank"])
def test_stub_empty_refresh_token_in_a_refresh_answer_keeps_the_one_that_works(stub, signed_in, rotated):
    """`"refresh_token": ""` in a refresh answer is no new refresh token (some providers send
    it when they do not rotate): the account keeps the one it has and stays signed in."""
    d = signed_in()  # every request refreshes
    stub.refresh_answer_extra = {"refresh_token": rotated}
    # The stub keeps the presented refresh token valid, as a provider that does not rotate.
    stub.valid_refresh_keep = True
    for _ in range(3):
        answer = token(d, resource=API)
        assert "result" in answer, f"token.get failed after a refresh answer with an empty refresh token: {answer.get('error')}"
    assert d.rpc("account.list")["result"]["accounts"][0]["state"] == "ready"
    assert all(f["refresh_token"][0].strip() for f in stub.token_forms if f.get("grant_type") == ["refresh_token"]), \
        "the daemon sent an empty refresh token"


# --- an unusable access token with a rotated refresh token ------------------------------

UNUSABLE = {
    "no-token-type": {"token_type": None},
    "token-type-n-a": {"token_type": "N_A"},
    "expires-in-with-unit": {"expires_in": "3600s"},
    "empty-access-token": {"access_token": ""},
}


@pytest.mark.parametrize("odd", list(UNUSABLE), ids=list(UNUSABLE))
def test_stub_unusable_refresh_answer_still_keeps_the_rotated_refresh_token(stub, signed_in, odd):
    """A refresh answer whose access token cannot be served still carries the provider's
    new refresh token, and the one sent is spent (rotation): the account must keep the new
    one, or the next refresh signs it out."""
    d = signed_in()  # every request refreshes; the stub rotates refresh tokens
    stub.refresh_answer_extra = UNUSABLE[odd]
    refused = token(d, resource=API)
    assert "error" in refused, "an unusable access token was served"
    assert "authctl login" not in refused["error"]["message"]
    stub.refresh_answer_extra = {}
    answer = token(d, resource=API)
    for _ in range(5):  # the daemon backs off after a broken answer: wait as it says
        if answer.get("error", {}).get("code") != -32004:
            break
        time.sleep(answer["error"]["data"]["retry_after"])
        answer = token(d, resource=API)
    assert "result" in answer, f"the account lost its refresh token: {answer.get('error')}"
    assert d.rpc("account.list")["result"]["accounts"][0]["state"] == "ready"


# --- the client refused ------------------------------------------------------------------

def test_stub_invalid_client_says_which_keys_to_check(stub, signed_in):
    """invalid_client (RFC 6749 §5.2: client authentication failed) is about the client,
    not the account: the sentence says where the client's identity is set."""
    d = signed_in()
    stub.refresh_refusal = lambda form: (401, {"error": "invalid_client", "error_description": "Client authentication failed"},
                                         {"WWW-Authenticate": 'Basic realm="token"'})
    r = d.ctl("token", "--provider", d.name, "--resource", API)
    assert r.returncode != 0
    assert "invalid_client" in r.stderr
    assert f"client_id and client_secret under [providers.{d.name}]" in r.stderr, r.stderr
    assert "authctl set-secret" in r.stderr, r.stderr
    assert d.rpc("account.list")["result"]["accounts"][0]["state"] == "ready"


def test_stub_password_grant_refusal_quoting_the_password_never_shows_it(stub):
    """The typed password is no String in the daemon; a provider that quotes it back in
    error_description must not make it one in a sentence or a log line either."""
    d = Daemon(None)
    try:
        d.write_config(text=stub_config(d.name, stub) + "password_grant = true\n")
        d.start()
        stub.grant_handlers["password"] = lambda form: (400, {
            "error": "invalid_request",
            "error_description": f"password {form['password'][0]} has characters this server does not take"})
        password = "Typed-Pa55word-" + uuid.uuid4().hex[:8]
        r = subprocess.run([AUTHCTL, "login", "--terminal", "--provider", d.name], env=d.env,
                           input=f"alice\n{password}\n", capture_output=True, text=True, timeout=60)
        assert r.returncode != 0
        assert "invalid_request" in r.stderr, r.stderr
        assert "not shown: it quoted the password" in r.stderr
        leaked = password in r.stdout + r.stderr + d.log_text() or password[:10] in r.stdout + r.stderr + d.log_text()
        assert not leaked, "the password the provider quoted was shown or logged"
    finally:
        d.cleanup()


def test_stub_busy_discovery_is_asked_again_only_after_its_retry_after(stub, signed_in):
    """The discovery document is read at start-up's first request; a provider that answers
    it with 429 and Retry-After is not asked again before then."""
    d = signed_in()
    d.stop()
    stub.discovery_refusal = (429, {"message": "rate limited"}, {"Retry-After": "40"})
    d.start()
    first = token(d, resource=API)
    error = first.get("error")
    assert error and error["code"] == -32004, error
    assert error["data"]["retry_after"] >= 20, f"Retry-After not honoured: {error}"
    asked = stub.discovery_requests
    again = token(d, resource=API)
    assert again["error"]["code"] == -32004
    assert stub.discovery_requests == asked, "discovery was asked again inside its Retry-After"
