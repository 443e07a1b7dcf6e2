"""Provider behaviours Glewlwyd never shows (docs/providers.md), each played by a STUB
provider (support/stub_provider.py) switched to behave like a real, standards-following
provider does: no ID token on device answers, a discovery document that lists fewer
endpoints than it serves, a userinfo endpoint that checks the token's audience, ID
tokens without a name, a token endpoint that moved.

Every test asserts what the user sees and that nothing the broker gave up on is left
alive at the provider. No test prints a token: tokens are compared via fingerprint()."""
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import AUTHCTL, RPC, Daemon, fingerprint
from stub_provider import StubProvider

API = "https://api.example.test"


def provider_config(name, stub, resources=(), extra="", http_timeout=2):
    # Stub tokens live 60 s; refresh_margin 120 s makes every token request refresh.
    res = ", ".join(f'"{r}"' for r in resources)
    return (f'[daemon]\nstore = "secret-service"\nrefresh_margin = 120\nhttp_timeout = {http_timeout}\n\n'
            f"[providers.{name}]\nissuer = \"{stub.issuer}\"\nclient_id = \"{stub.client_id}\"\n"
            'scopes = ["openid", "offline_access"]\n'
            f"resources = [{res}]\n" + extra)


@pytest.fixture
def stub():
    s = StubProvider(access_token_life=60, subject="1").start()
    yield s
    s.stop()


@pytest.fixture
def make_daemon():
    made = []

    def make(stub, **config):
        d = Daemon(None)
        d.write_config(text=provider_config(d.name, stub, **config))
        d.start()
        made.append(d)
        return d

    yield make
    for d in made:
        d.cleanup()


def login(d):
    return d.ctl("login", "--device", "--provider", d.name, timeout=30)


def accounts(d):
    return d.rpc("account.list")["result"]["accounts"]


def issued_at_sign_in(stub):
    """Every access and refresh token the stub handed out (device codes aside)."""
    return [t for t in stub.issued if t.startswith(("stub-at-", "stub-rt-"))]


# --- item 3: device answers without an ID token ---------------------------------------

def test_stub_device_answer_without_id_token_is_identified_by_userinfo(stub, make_daemon):
    stub.device_id_token = False
    stub.userinfo_claims = {"preferred_username": "kim"}
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 0, r.stderr + d.log_text()
    assert "no ID token" not in r.stderr
    assert f"Signed in to {d.name} as kim." in r.stdout
    assert [(a["subject"], a["display_name"]) for a in accounts(d)] == [("1", "kim")]
    got = d.rpc("token.get", {"provider": d.name})
    assert "result" in got, got
    assert stub.revoked == set()
    # whoami has no ID token to show, and says so plainly.
    w = d.ctl("whoami", "--provider", d.name)
    assert w.returncode != 0 and "no ID token" in w.stderr and "authctl userinfo" in w.stderr


def test_stub_device_answer_without_id_token_refreshes_for_an_audience_checking_userinfo(stub, make_daemon):
    # The sign-in's token is restricted to the configured resource, which this userinfo
    # endpoint refuses; a token asked without `resource` is not.
    stub.device_id_token = False
    stub.userinfo_checks_audience = True
    stub.discovery_omits = {"introspection_endpoint"}
    stub.userinfo_claims = {"email": "kim@example.test"}
    d = make_daemon(stub, resources=[API])
    r = login(d)
    assert r.returncode == 0, r.stderr + d.log_text()
    assert f"as kim@example.test." in r.stdout
    # The refresh at sign-in rotated the refresh token: the stored one is the newest.
    got = d.rpc("token.get", {"provider": d.name, "resource": API})
    assert "result" in got, got


def test_stub_device_answer_without_any_identity_is_refused_and_revoked(stub, make_daemon):
    stub.device_id_token = False
    stub.discovery_omits = {"userinfo_endpoint", "introspection_endpoint"}
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 10, r.stdout + r.stderr
    assert "returned no ID token" in r.stderr
    assert "could not find out who signed in" in r.stderr
    assert "userinfo_endpoint" in r.stderr and "introspection_endpoint" in r.stderr
    assert "the tokens it issued were revoked" in r.stderr
    issued = issued_at_sign_in(stub)
    assert issued, "the stub issued nothing"
    assert stub.live_tokens(issued) == [], "a refused sign-in left tokens alive at the provider"
    assert accounts(d) == []
    for t in issued:
        assert t not in r.stderr + r.stdout + d.log_text()


def test_stub_configured_introspection_endpoint_names_the_account(stub, make_daemon):
    # Discovery names neither userinfo nor introspection, but the provider serves the
    # latter: config.toml names it.
    stub.device_id_token = False
    stub.discovery_omits = {"userinfo_endpoint", "introspection_endpoint"}
    d = make_daemon(stub, extra=f'introspection_endpoint = "{stub.issuer}/introspect"\n')
    r = login(d)
    assert r.returncode == 0, r.stderr + d.log_text()
    shown = f"1@127.0.0.1"
    assert f"as {shown}." in r.stdout
    assert stub.revoked == set()


# --- item 4: discovery that lists fewer endpoints than the provider serves -------------

def test_stub_missing_device_endpoint_is_a_configuration_error_naming_the_key(stub, make_daemon):
    stub.discovery_omits = {"device_authorization_endpoint", "revocation_endpoint"}
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 12, r.stdout + r.stderr
    assert "device_authorization_endpoint" in r.stderr
    assert f"[providers.{d.name}]" in r.stderr
    assert "refused" not in r.stderr
    answer = d.rpc("login.start", {"provider": d.name, "flow": "device"})
    assert answer["error"]["code"] == -32010, answer
    assert "oauth_error" not in (answer["error"].get("data") or {})

    # Naming the endpoints in config.toml makes the sign-in and the sign-out work.
    d.stop()
    d.write_config(text=provider_config(d.name, stub, extra=(
        f'device_authorization_endpoint = "{stub.issuer}/device"\n'
        f'revocation_endpoint = "{stub.issuer}/revoke"\n')))
    d.start()
    r = login(d)
    assert r.returncode == 0, r.stderr + d.log_text()
    refresh = stub.last_issued_refresh
    out = d.ctl("logout", "--provider", d.name, "--no-browser")
    assert out.returncode == 0, out.stderr
    assert stub.live_tokens([refresh]) == [], "the sign-out did not revoke at the configured endpoint"


# --- item 5: a userinfo endpoint that checks the token's audience ----------------------

def test_stub_audience_checking_userinfo_gets_a_token_without_resource(stub, make_daemon):
    stub.userinfo_checks_audience = True
    stub.userinfo_claims = {"name": "Kim Doe"}
    d = make_daemon(stub, resources=[API])
    assert login(d).returncode == 0
    assert "result" in d.rpc("token.get", {"provider": d.name, "resource": API})
    r = d.ctl("userinfo", "--provider", d.name)
    assert r.returncode == 0, r.stderr + d.log_text()
    assert "Kim Doe" in r.stdout


def test_stub_audience_checking_userinfo_that_still_refuses_says_so_plainly(stub, make_daemon):
    stub.userinfo_checks_audience = True
    stub.restrict_default_audience = True
    d = make_daemon(stub, resources=[API])
    assert login(d).returncode == 0
    r = d.ctl("userinfo", "--provider", d.name)
    assert r.returncode == 6, r.stdout + r.stderr
    assert "userinfo endpoint refused the access token" in r.stderr
    assert "asked for it without a resource" in r.stderr
    assert "authctl whoami" in r.stderr
    w = d.ctl("whoami", "--provider", d.name)
    assert w.returncode == 0, w.stderr
    assert '"sub"' in w.stdout or "sub" in w.stdout


# --- item 6: names, sentences, discovery refetch ---------------------------------------

def test_stub_account_without_names_is_shown_with_the_issuers_host(stub, make_daemon):
    stub.id_token_names = False
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 0, r.stderr
    shown = "1@127.0.0.1"
    assert f"Signed in to {d.name} as {shown}." in r.stdout
    assert [(a["subject"], a.get("username"), a["display_name"]) for a in accounts(d)] == [("1", None, shown)]
    table = d.ctl("accounts").stdout
    assert re.search(rf"{d.name}\s+{re.escape(shown)}\s+1\s+ready", table), table
    assert f"account {shown} (subject 1)" in d.ctl("status").stdout
    # Both the subject and the shown name select the account.
    for name in ("1", shown):
        t = d.ctl("token", "--provider", d.name, "--account", name)
        assert t.returncode == 0, t.stderr


def test_stub_account_without_names_in_the_id_token_takes_the_userinfo_name(stub, make_daemon):
    stub.id_token_names = False
    stub.userinfo_claims = {"name": "Kim Doe"}
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 0, r.stderr
    assert f"as Kim Doe." in r.stdout
    assert accounts(d)[0]["display_name"] == "Kim Doe"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


def stub_redirect(start):
    """The redirect back to the daemon's listener that the STUB's authorization endpoint
    answers a browser sign-in's `authorization_url` with (not followed)."""
    try:
        urllib.request.build_opener(_NoRedirect).open(start["authorization_url"], timeout=10)
        raise AssertionError("the stub did not redirect")
    except urllib.error.HTTPError as e:
        return e.headers["Location"]


def test_stub_browser_sign_in_abandoned_by_a_failing_provider_says_to_sign_in_again(stub, make_daemon):
    d = make_daemon(stub)
    c = RPC(d.socket)
    start = c.call("login.start", {"provider": d.name, "flow": "browser"})["result"]
    location = stub_redirect(start)
    stub.mode = "http500"  # the provider fails as the browser comes back
    try:
        urllib.request.urlopen(location, timeout=30).read()
    except urllib.error.HTTPError:
        pass
    answer = c.call("login.wait", {"login_id": start["login_id"]})
    c.close()
    message = answer["error"]["message"]
    assert answer["error"]["code"] == -32007, answer
    assert f"run `authctl login --provider {d.name}` again" in message
    assert not re.search(r"try again in \d+ s$", message), message
    assert accounts(d) == []


def test_stub_device_sign_in_whose_code_runs_out_while_the_provider_fails_says_so(stub, make_daemon):
    stub.device_expires_in = 3
    stub.mode = "http500"
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 10, r.stdout + r.stderr
    assert "abandoned because the provider failed" in r.stderr
    assert f"run `authctl login --device --provider {d.name}` again" in r.stderr
    assert "expired before it was approved" not in r.stderr
    assert "try again in" not in r.stderr


def test_stub_device_sign_in_whose_interval_outlasts_its_code_still_polls_in_time(stub, make_daemon):
    """STUB: the provider asks for 20 s between polls but its code lives 4 s. Waiting the
    whole interval would poll only after the code expired, and the user who approved it at
    once would be told it expired; the daemon must poll while the code is still good."""
    stub.device_expires_in = 4
    stub.device_interval = 20
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert accounts(d) != []


def test_stub_browser_sign_in_replaced_while_its_code_is_redeemed_leaves_nothing_alive(stub, make_daemon):
    """STUB: the provider has issued the tokens for the code and is still answering when a
    newer `authctl login` replaces the sign-in. Cutting the answer off would leave a
    refresh token alive at the provider that nobody holds; the daemon must take the answer
    and revoke what it issued (RFC 7009)."""
    d = make_daemon(stub, http_timeout=10)
    c = RPC(d.socket)
    start = c.call("login.start", {"provider": d.name, "flow": "browser"})["result"]
    location = stub_redirect(start)
    stub.code_answer_hold = threading.Event()

    def browser():
        try:
            urllib.request.urlopen(location, timeout=30).read()
        except (urllib.error.HTTPError, OSError):
            pass

    def replace():
        other = RPC(d.socket, timeout=30)
        answers.append(other.call("login.start", {"provider": d.name, "flow": "browser"}))
        other.close()

    answers = []
    threads = [threading.Thread(target=browser)]
    threads[0].start()
    assert stub.code_redeeming.wait(20), d.log_text()
    threads.append(threading.Thread(target=replace))
    threads[1].start()
    threads[1].join(1)  # the replacement cancels this sign-in while the provider answers
    stub.code_answer_hold.set()
    for t in threads:
        t.join(30)
    done = c.call("login.wait", {"login_id": start["login_id"]})
    c.close()
    assert "error" in done and re.search("cancelled|replaced", done["error"]["message"]), done
    issued = stub.last_issued_refresh
    revoked = issued is not None and issued in stub.revoked  # not in the assert: its report would show the token
    assert revoked, "the refresh token issued for the replaced sign-in's code is still alive at the provider"
    assert accounts(d) == []


@pytest.mark.parametrize("refusal", ["access_denied", "expired_token"])
def test_stub_refused_or_expired_device_sign_in_says_to_sign_in_again_with_the_device(stub, make_daemon, refusal):
    """The next step a device sign-in's refusal names is a device sign-in: on a machine
    without a browser, `authctl login` alone would start a browser sign-in the user cannot finish."""
    stub.device_error = refusal
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 10, r.stdout + r.stderr
    assert f"run `authctl login --device --provider {d.name}` again" in r.stderr, r.stderr


def test_stub_endpoint_answering_404_makes_the_daemon_read_discovery_again(stub, make_daemon):
    d = make_daemon(stub)
    assert login(d).returncode == 0
    assert stub.discovery_requests == 1
    stub.token_path = "/token-v2"  # the provider moved its token endpoint
    first = d.rpc("token.get", {"provider": d.name})
    assert "error" in first and "404" in first["error"]["message"], first
    assert "discovery document again" in first["error"]["message"]
    second = d.rpc("token.get", {"provider": d.name})
    assert "result" in second, second
    assert stub.discovery_requests == 2
    assert fingerprint(second["result"]["access_token"]) != fingerprint(stub.last_issued_refresh)


def test_stub_sign_in_without_a_refresh_token_names_prompt_consent(stub, make_daemon):
    """A provider that grants offline_access only with prompt=consent (OIDC Core §11)
    answers the sign-in without a refresh token: the sentence names both remedies."""
    stub.device_refresh_token = False
    d = make_daemon(stub)
    r = login(d)
    assert r.returncode == 10, r.stdout + r.stderr
    assert "issued no refresh token" in r.stderr
    assert "the browser sign-in" in r.stderr and "prompt=consent" in r.stderr, r.stderr
    assert "offline_access" in r.stderr
    assert accounts(d) == []


def test_a_reload_that_moves_a_provider_to_another_issuer_or_client_drops_its_stored_secret():
    """A secret stored with `authctl set-secret` belongs to one issuer and client_id. A
    reload that gives the provider another issuer (or client) must not send that secret to
    the new one: the provider then has no secret, as after a restart, and says to set one."""
    stubs = [StubProvider().start(), StubProvider().start()]
    sent = {0: [], 1: []}
    for i, s in enumerate(stubs):
        s.discovery_extra["token_endpoint_auth_methods_supported"] = ["client_secret_post"]

        def machine_token(form, i=i):
            sent[i].append(form.get("client_secret", [None])[0])
            return 200, {"access_token": f"stub-at-cc-{i}-{len(sent[i])}", "token_type": "Bearer", "expires_in": 600}
        s.grant_handlers["client_credentials"] = machine_token

    def config(stub, client_id="bot"):
        return (f'[daemon]\nstore = "memory"\n[providers.{d.name}]\nissuer = "{stub.issuer}"\n'
                f'client_id = "{client_id}"\ngrant = "client_credentials"\nresources = ["{API}"]\n')

    def reload(text):
        before = d.log_text().count("configuration reloaded")
        d.write_config(text=text)
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while d.log_text().count("configuration reloaded") == before:
            assert time.monotonic() < deadline, "the reload never ended:\n" + d.log_text()
            time.sleep(0.05)

    secret = "not-a-real-secret-of-bot-at-the-first-issuer"
    d = Daemon(None)
    try:
        d.write_config(text=config(stubs[0]))
        d.start()
        r = subprocess.run([AUTHCTL, "set-secret", "--provider", d.name], input=secret + "\n", env=d.env,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert d.ctl("token", "--provider", d.name, "--resource", API).returncode == 0
        assert sent[0] == [secret]

        # Another issuer: nothing reaches it with the first one's secret.
        reload(config(stubs[1]))
        r = d.ctl("token", "--provider", d.name, "--resource", API)
        assert r.returncode == 12 and "authctl set-secret" in r.stderr, r.stderr
        assert sent[1] == []

        # Back to the first issuer with another client_id: not that client's secret either.
        reload(config(stubs[0], client_id="other-bot"))
        r = d.ctl("token", "--provider", d.name, "--resource", API)
        assert r.returncode == 12, r.stderr
        assert sent[0] == [secret]

        # Back to the issuer and client it was set for: the stored secret is read again.
        reload(config(stubs[0]))
        assert d.ctl("token", "--provider", d.name, "--resource", API).returncode == 0
        assert sent == {0: [secret, secret], 1: []}
        assert secret not in d.log_text()
    finally:
        d.cleanup()
        for s in stubs:
            s.stop()
