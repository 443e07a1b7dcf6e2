"""Sign-in the way native apps do it: browser + PKCE with a loopback redirect, verified ID
tokens, whoami/userinfo, several providers, machine accounts, RP-initiated logout.

The browser is played through Glewlwyd's own login API: sign in with the password,
grant the scopes, follow the daemon's authorization URL, and hand the redirect to the
daemon's loopback port the way a browser would."""
import html.parser
import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import API, AUTHCTL, GIT, RPC, Daemon, decode_jwt, fingerprint, secret_tool, stored_item
from glewlwyd_api import _request
from stub_http import StubHTTPServer

SCOPES = ["openid", "profile", "email", "offline_access"]


def start_browser_login(d, **params):
    c = RPC(d.socket)
    start = c.call("login.start", {"provider": d.name, "flow": "browser", **params})
    assert "result" in start, start
    return c, start["result"]


def play_browser(gl, client, url, user="alice"):
    """What the user's browser does: sign in at the provider and come back with a code.
    Returns the redirect Location, not yet followed."""
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    redirect_uri = q["redirect_uri"][0]
    assert redirect_uri.startswith("http://127.0.0.1:") and redirect_uri.endswith("/callback")
    # Glewlwyd matches redirect URIs exactly, port included (RFC 8252 asks otherwise).
    gl.add_redirect_uri(client, redirect_uri)
    session = gl.login_session(user)
    gl.grant_scopes(session, gl.client_id(client), SCOPES)
    r = _request("GET", url + "&g_continue=", cookies=session.cookies)
    assert r.status in (301, 302, 303, 307) and r.location, f"authorization endpoint answered {r.status}"
    assert r.location.startswith(redirect_uri), "the provider sent the browser back to the daemon"
    return r.location


def follow(location):
    """The browser following the redirect to the daemon: (status, page text)."""
    try:
        with urllib.request.urlopen(location, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def with_query(location, **changes):
    parts = urllib.parse.urlsplit(location)
    q = dict(urllib.parse.parse_qsl(parts.query))
    for k, v in changes.items():
        if v is None:
            q.pop(k, None)
        else:
            q[k] = v
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(q)))


def browser_login(d, gl, client="authbroker", user="alice"):
    c, start = start_browser_login(d)
    page = follow(play_browser(gl, client, start["authorization_url"], user))
    done = c.call("login.wait", {"login_id": start["login_id"]})
    c.close()
    return page, done


@pytest.mark.parametrize("client", ["authbroker", "authbroker-confidential", "authbroker-es256"])
def test_browser_sign_in_with_pkce(daemon_factory, glewlwyd, client):
    d = daemon_factory(client=client).start()
    c, start = start_browser_login(d)
    url = start["authorization_url"]
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert q["response_type"] == ["code"] and q["code_challenge_method"] == ["S256"]
    assert len(q["state"][0]) >= 32 and len(q["nonce"][0]) >= 32 and len(q["code_challenge"][0]) == 43
    assert sorted(q["resource"]) == [API, GIT]  # RFC 8707 at sign-in

    status, page = follow(play_browser(glewlwyd, client, url))
    assert status == 200 and "close this tab" in page and "Signed in" in page
    done = c.call("login.wait", {"login_id": start["login_id"]})
    assert done["result"]["account"]["state"] == "ready"
    # the ID token was verified with the provider's key for its algorithm
    header, _ = decode_jwt(stored_item(d.name)[1]["id_token"])
    assert header["alg"] == ("ES256" if client == "authbroker-es256" else "RS256")

    r = d.ctl("token", "--resource", API, "--provider", d.name)
    assert r.returncode == 0, r.stderr
    assert decode_jwt(r.stdout.strip())[1]["aud"] == API
    # the loopback port is free again
    port = urllib.parse.urlsplit(urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["redirect_uri"][0]).port
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/callback", timeout=5)


def test_whoami_and_userinfo_give_alices_claims(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    browser_login(d, glewlwyd)
    who = d.ctl("whoami", "--provider", d.name, "--json")
    assert who.returncode == 0, who.stderr
    claims = json.loads(who.stdout)["claims"]
    assert claims["iss"] == glewlwyd.issuer and claims["aud"] in (glewlwyd.client_id("authbroker"), [glewlwyd.client_id("authbroker")])
    assert claims["email"] == "alice@example.test" and claims["name"] == "Alice Example"
    text = d.ctl("whoami", "--provider", d.name).stdout
    assert "email:" in text and "alice@example.test" in text

    info = d.ctl("userinfo", "--provider", d.name, "--json")
    assert info.returncode == 0, info.stderr
    answer = json.loads(info.stdout)
    assert answer["subject"] == claims["sub"] and answer["claims"]["sub"] == claims["sub"]
    assert answer["claims"].get("email") == "alice@example.test" or answer["claims"].get("name") == "Alice Example"


def test_wrong_iss_is_refused(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    c, start = start_browser_login(d)
    location = play_browser(glewlwyd, "authbroker", start["authorization_url"])
    status, _ = follow(with_query(location, iss="https://evil.example.test"))
    assert status == 400
    done = c.call("login.wait", {"login_id": start["login_id"]})
    assert done["error"]["code"] == -32007 and "iss" in done["error"]["message"]
    assert d.rpc("account.list")["result"]["accounts"] == []


def test_an_error_from_another_issuer_is_not_shown_as_the_providers(daemon_factory, glewlwyd):
    """RFC 9207 §2.4: an error response whose iss is not the provider's is refused as such,
    and its error text is not passed off as the provider's (a mix-up could put words in it)."""
    d = daemon_factory().start()
    c, start = start_browser_login(d)
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(start["authorization_url"]).query)
    lure = "your account is locked: call the help desk at 555-0100"
    location = q["redirect_uri"][0] + "?" + urllib.parse.urlencode({
        "state": q["state"][0], "error": "access_denied", "error_description": lure, "iss": "https://evil.example.test"})
    status, page = follow(location)
    assert status == 400 and lure not in page
    done = c.call("login.wait", {"login_id": start["login_id"]})
    message = done["error"]["message"]
    assert done["error"]["code"] == -32007 and "iss" in message and lure not in message, message


def test_replayed_code_is_refused(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    c1, first = start_browser_login(d)
    location = play_browser(glewlwyd, "authbroker", first["authorization_url"])
    assert follow(location)[0] == 200
    assert "result" in c1.call("login.wait", {"login_id": first["login_id"]})
    d.ctl("logout", "--provider", d.name, "--local")

    c2, second = start_browser_login(d)
    q2 = urllib.parse.parse_qs(urllib.parse.urlsplit(second["authorization_url"]).query)
    replay = with_query(location, state=q2["state"][0])
    replay = replay.replace(urllib.parse.urlsplit(location).netloc, urllib.parse.urlsplit(q2["redirect_uri"][0]).netloc)
    status, _ = follow(replay)
    assert status == 400
    done = c2.call("login.wait", {"login_id": second["login_id"]})
    assert done["error"]["code"] == -32007 and "authorization code" in done["error"]["message"]
    assert d.rpc("account.list")["result"]["accounts"] == []


def test_callback_after_timeout_is_refused_and_the_port_freed(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    c, start = start_browser_login(d, timeout=1)
    location = play_browser(glewlwyd, "authbroker", start["authorization_url"])
    done = c.call("login.wait", {"login_id": start["login_id"]})
    assert done["error"]["code"] == -32007 and "timed out" in done["error"]["message"]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(location, timeout=5)
    assert d.rpc("account.list")["result"]["accounts"] == []


def test_extra_authorization_parameters(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    c, start = start_browser_login(d, params={"login_hint": "alice", "prompt": "login", "ui_locales": "fr"})
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(start["authorization_url"]).query)
    assert q["login_hint"] == ["alice"] and q["prompt"] == ["login"] and q["ui_locales"] == ["fr"]
    for owned in ["state", "redirect_uri", "client_id", "nonce", "code_challenge", "scope", "response_type"]:
        refused = c.call("login.start", {"provider": d.name, "flow": "browser", "params": {owned: "x"}})
        assert refused["error"]["code"] == -32602 and owned in refused["error"]["message"]
    c.close()
    r = d.ctl("login", "--provider", d.name, "--param", "state=x", "--no-browser")
    assert r.returncode == 9 and "state" in r.stderr


def test_machine_account_needs_no_sign_in(glewlwyd):
    d = Daemon(glewlwyd, name="machine")
    d.write_config(text=f"""
[daemon]
store = "memory"
[providers.machine]
issuer = "{glewlwyd.issuer}"
client_id = "{glewlwyd.client_id('machine')}"
client_secret = "{glewlwyd.client_secret('machine')}"
grant = "client_credentials"
scopes = ["api"]
resources = ["{API}", "{GIT}"]
""")
    try:
        d.start()
        r = d.ctl("token", "--provider", "machine", "--resource", API)
        assert r.returncode == 0, r.stderr + d.log_text()
        _, claims = decode_jwt(r.stdout.strip())
        assert claims["aud"] == API
        again = d.ctl("token", "--provider", "machine", "--resource", API)
        assert fingerprint(again.stdout) == fingerprint(r.stdout)
        assert d.status()["counters"]["cache_hits"] == 1
        git = d.ctl("token", "--provider", "machine", "--resource", GIT)
        assert decode_jwt(git.stdout.strip())[1]["aud"] == GIT
    finally:
        d.cleanup()


def test_machine_account_with_its_secret_set_by_authctl_set_secret(glewlwyd):
    """grant = "client_credentials" without client_secret in the file: the daemon starts,
    a token request says to run `authctl set-secret` (exit 12), and once the secret is set
    the machine account gets tokens, also after a restart (docs/configuration.md, `grant`)."""
    d = Daemon(glewlwyd)  # a provider name of its own: no secret stored by an earlier run
    d.write_config(text=f"""
[daemon]
store = "secret-service"
[providers.{d.name}]
issuer = "{glewlwyd.issuer}"
client_id = "{glewlwyd.client_id('machine')}"
grant = "client_credentials"
scopes = ["api"]
resources = ["{API}"]
""")
    secret = glewlwyd.client_secret("machine")
    try:
        d.start()
        r = d.ctl("token", "--provider", d.name, "--resource", API)
        assert r.returncode == 12 and r.stdout == "", r.stderr + d.log_text()
        assert f"authctl set-secret --provider {d.name}" in r.stderr
        r = subprocess.run([AUTHCTL, "set-secret", "--provider", d.name], input=secret + "\n",
                           env=d.env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        for _ in range(2):
            t = d.ctl("token", "--provider", d.name, "--resource", API)
            assert t.returncode == 0, t.stderr + d.log_text()
            assert decode_jwt(t.stdout.strip())[1]["aud"] == API
            d.restart()  # the secret comes back from the Secret Service
        assert secret not in open(d.config).read() and secret not in d.log_text()
    finally:
        d.cleanup()


def test_two_providers_keep_separate_accounts_tokens_and_items(glewlwyd_static):
    gl = glewlwyd_static
    d = Daemon(gl, name="ignored")
    a, b = "a" + d.name, "b" + d.name
    d.write_config(text=f"""
[daemon]
store = "secret-service"
[providers.{a}]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('authbroker')}"
resources = ["{API}", "{GIT}"]
[providers.{b}]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('authbroker-confidential')}"
client_secret = "{gl.client_secret('authbroker-confidential')}"
resources = ["{API}", "{GIT}"]
""")
    try:
        d.start()
        d.name = a
        browser_login(d, gl, "authbroker", "alice")
        d.name = b
        browser_login(d, gl, "authbroker-confidential", "bob")
        accounts = {(x["provider"], x["username"]) for x in d.rpc("account.list")["result"]["accounts"]}
        assert accounts == {(a, "alice@example.test"), (b, "bob@example.test")}
        ta = d.ctl("token", "--provider", a, "--resource", API).stdout.strip()
        tb = d.ctl("token", "--provider", b, "--resource", API).stdout.strip()
        assert decode_jwt(ta)[1]["sub"] != decode_jwt(tb)[1]["sub"]
        assert stored_item(a)[0]["client_id"] == gl.client_id("authbroker")
        assert stored_item(b)[0]["client_id"] == gl.client_id("authbroker-confidential")
        unnamed = d.ctl("token", "--resource", API)
        assert unnamed.returncode == 9 and "--provider" in unnamed.stderr
        d.ctl("logout", "--provider", a)
        assert stored_item(a) is None and stored_item(b) is not None
    finally:
        d.cleanup()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


class _Form(html.parser.HTMLParser):
    """The sign-out page's form, as a browser reads it."""

    def __init__(self):
        super().__init__()
        self.action, self.method, self.fields = None, None, {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.action, self.method = a.get("action"), a.get("method")
        elif tag == "input" and a.get("type") == "hidden":
            self.fields[a["name"]] = a["value"]


def test_logout_ends_the_provider_session_with_the_id_token_as_hint_and_local_only_keeps_the_token(daemon_factory, glewlwyd):
    """RP-Initiated Logout 1.0 §2 recommends id_token_hint (some providers refuse
    post_logout_redirect_uri without it), but no output may carry a token: `authctl logout`
    prints a one-time loopback page whose form posts the hint to the provider, and the
    provider's URL without the hint for a browser elsewhere."""
    d = daemon_factory(client="authbroker-confidential").start()
    browser_login(d, glewlwyd, "authbroker-confidential")
    _, payload = stored_item(d.name)
    id_token = payload["id_token"]
    r = d.ctl("logout", "--provider", d.name, "--no-browser")
    assert r.returncode == 0, r.stderr
    assert "end your session" in r.stderr
    assert id_token not in r.stdout + r.stderr  # no token in any output
    urls = [line for line in r.stderr.splitlines() if line.startswith("http")]
    page, direct = urls
    assert page.startswith("http://127.0.0.1:") and "/end-session?page=" in page, r.stderr
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(direct).query)
    assert direct.startswith(glewlwyd.end_session_endpoint) and q["client_id"] == [glewlwyd.client_id("authbroker-confidential")]
    assert "id_token_hint" not in q
    assert glewlwyd.refresh_token_enabled(payload["refresh_token"]) is False

    # Without the page's key the port answers nothing of it.
    wrong = page.split("?")[0] + "?page=guess"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(wrong, timeout=5)
    assert refused.value.code == 404 and id_token not in refused.value.read().decode()
    with urllib.request.urlopen(page, timeout=5) as answer:
        assert answer.headers["Cache-Control"] == "no-store"
        form = _Form()
        form.feed(answer.read().decode())
    assert form.method == "get" and form.action == glewlwyd.end_session_endpoint
    assert form.fields["id_token_hint"] == id_token
    assert form.fields["client_id"] == glewlwyd.client_id("authbroker-confidential")
    # The browser's request: with the hint Glewlwyd ends this client's session (its
    # end_session prompt names the session and the client); with a hint it cannot verify it
    # knows neither and falls back to a generic single logout.
    opener = urllib.request.build_opener(_NoRedirect)

    def sign_out_goes_to(fields):
        try:
            answer = opener.open(form.action + "?" + urllib.parse.urlencode(fields), timeout=10)
            return answer.status, answer.headers.get("Location", "")
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Location", "")

    status, where = sign_out_goes_to(dict(form.fields, id_token_hint=id_token[:-8] + "AAAAAAAA"))
    assert status == 302 and "prompt=end_session" not in where
    status, where = sign_out_goes_to(form.fields)
    assert status == 302 and "prompt=end_session" in where and "sid=" in where, where
    # Once: the page and the ID token it held are gone.
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(page, timeout=5)

    browser_login(d, glewlwyd, "authbroker-confidential")
    _, payload = stored_item(d.name)
    r = d.ctl("logout", "--provider", d.name, "--local")
    assert r.returncode == 0 and "locally" in r.stdout
    assert stored_item(d.name) is None
    assert glewlwyd.refresh_token_enabled(payload["refresh_token"]) is True


def _stub_issuer(request):
    """STUB provider: Glewlwyd cannot advertise RFC 9207's
    authorization_response_iss_parameter_supported, so this stub serves only a discovery
    document that does; the test never reaches its token endpoint."""
    base = f"http://127.0.0.1:{request.server.server_port}"
    doc = {"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
           "jwks_uri": base + "/jwks", "authorization_response_iss_parameter_supported": True}
    return "application/json", json.dumps(doc).encode()


def test_missing_iss_is_refused_when_the_provider_promises_it():
    server = StubHTTPServer(_stub_issuer)
    d = Daemon(None, name="stub")
    d.write_config(text=f'[daemon]\nstore = "memory"\n[providers.stub]\nissuer = "{server.url}"\nclient_id = "x"\n')
    try:
        d.start()
        c, start = start_browser_login(d)
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(start["authorization_url"]).query)
        location = q["redirect_uri"][0] + "?" + urllib.parse.urlencode({"code": "abc", "state": q["state"][0]})
        status, page = follow(location)
        assert status == 400 and "iss" in page
        done = c.call("login.wait", {"login_id": start["login_id"]})
        assert done["error"]["code"] == -32007 and "RFC 9207" in done["error"]["message"]
    finally:
        d.cleanup()
        server.close()


def test_client_secret_kept_in_the_secret_service(glewlwyd):
    gl = glewlwyd
    d = Daemon(gl, client="authbroker-confidential")
    d.write_config(text=f"""
[daemon]
store = "secret-service"
[providers.{d.name}]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('authbroker-confidential')}"
resources = ["{API}"]
""")
    secret = gl.client_secret("authbroker-confidential")
    try:
        d.start()
        r = subprocess.run([AUTHCTL, "set-secret", "--provider", d.name], input=secret + "\n",
                           env=d.env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert secret not in r.stdout + r.stderr
        browser_login(d, gl, "authbroker-confidential")
        d.restart()  # the secret comes back from the Secret Service
        t = d.ctl("token", "--provider", d.name, "--resource", API)
        assert t.returncode == 0, t.stderr
        assert secret not in open(d.config).read()
        assert secret not in d.log_text()
        items = secret_tool("search", "--all", "provider", d.name).stdout
        assert "client secret of" in items
    finally:
        d.cleanup()


def test_two_accounts_of_one_provider(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    browser_login(d, glewlwyd, user="alice")
    browser_login(d, glewlwyd, user="bob")
    names = sorted(a["username"] for a in d.rpc("account.list")["result"]["accounts"])
    assert names == ["alice@example.test", "bob@example.test"]
    unnamed = d.ctl("token", "--provider", d.name, "--resource", API)
    assert unnamed.returncode == 9 and "--account" in unnamed.stderr
    alice = d.ctl("token", "--provider", d.name, "--account", "alice@example.test", "--resource", API).stdout.strip()
    bob = d.ctl("token", "--provider", d.name, "--account", "bob@example.test", "--resource", API).stdout.strip()
    assert decode_jwt(alice)[1]["sub"] != decode_jwt(bob)[1]["sub"]
    assert "bob@example.test" in d.ctl("whoami", "--provider", d.name, "--account", "bob@example.test").stdout
