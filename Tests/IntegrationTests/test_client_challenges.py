"""clients/python's reading of `WWW-Authenticate` (authbroker.challenges) and what its
auth classes (requests, httpx sync and async, MCP) do about a 401 or 403: against a
STUB authbrokerd on a real Unix socket and a STUB resource server on 127.0.0.1
(support/stub_broker.py). Needs neither the Swift daemon nor a provider; the tokens are
made-up strings."""
import asyncio
import json
import os
import random
import subprocess
import sys

import httpx
import pytest
import requests

from conftest import ROOT
from stub_broker import Reply, StubBroker, StubResource

sys.path.insert(0, os.path.join(ROOT, "clients", "python", "src"))
import authbroker  # noqa: E402
from authbroker.challenges import Challenge, decide, parse  # noqa: E402
from authbroker.httpx_auth import BrokerAuth as HttpxAuth  # noqa: E402
from authbroker.mcp import BrokerMCPAuth, canonical_resource, mcp_headers  # noqa: E402
from authbroker.requests_auth import BrokerAuth as RequestsAuth  # noqa: E402

API = "https://api.example.test"


# -- The parser -----------------------------------------------------------------------

@pytest.mark.parametrize("header,expected", [
    ('Bearer realm="example", error="invalid_token", error_description="The access token expired"',
     [("bearer", {"realm": "example", "error": "invalid_token", "error_description": "The access token expired"}, None)]),
    # RFC 9110 §11.6.1's own example: two challenges, an escaped quote, a token value.
    ('Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"',
     [("newauth", {"realm": "apps", "type": "1", "title": 'Login to "apps"'}, None), ("basic", {"realm": "simple"}, None)]),
    ("Basic dXNlcjpwYXNz==, Bearer", [("basic", {}, "dXNlcjpwYXNz=="), ("bearer", {}, None)]),
    ("Negotiate abc/+~.-_=, DPoP algs=ES256", [("negotiate", {}, "abc/+~.-_="), ("dpop", {"algs": "ES256"}, None)]),
    ("Bearer error = invalid_token ,scope= \"a b\"", [("bearer", {"error": "invalid_token", "scope": "a b"}, None)]),
    ('DPoP algs="ES256 PS256", error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"',
     [("dpop", {"algs": "ES256 PS256", "error": "use_dpop_nonce",
                "error_description": "Resource server requires nonce in DPoP proof"}, None)]),
    ('BEARER ERROR="x", Error="second"', [("bearer", {"error": "x"}, None)]),  # names lowercased; first kept
    ('Bearer realm="a,b", scope="x"', [("bearer", {"realm": "a,b", "scope": "x"}, None)]),
    ('Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"',
     [("bearer", {"resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"}, None)]),
    ('Bearer realm=""', [("bearer", {"realm": ""}, None)]),
    ('Bearer a="\\\\"', [("bearer", {"a": "\\"}, None)]),
    (", ,Bearer,, Basic ,", [("bearer", {}, None), ("basic", {}, None)]),
    # Malformed elements are skipped; what parses around them is kept.
    ('Bearer realm="unterminated', [("bearer", {}, None)]),
    ("Bearer error=invalid token, scope=a", [("bearer", {"scope": "a"}, None)]),
    ('error="orphan", Bearer', [("bearer", {}, None)]),
    ('Bearer "x", error="not Bearer\'s"', [("bearer", {}, None)]),
    ('Basic realm="a", Bad/scheme x, error="not Basic\'s"', [("basic", {"realm": "a"}, None)]),
    ("Bearer =x, =, ==", []),  # "Bearer =x" is an auth-param (BWS) with no challenge before it
    ("Bearer  , =, ==", [("bearer", {}, None)]),
    ("Bearer realm=", [("bearer", {}, "realm=")]),
    ("", []), (",,,", []), ("   ", []), ('"', []), ("\\", []), ("é Bearer", []), (None, []),
    (["Bearer error=a", 'DPoP error="b"'], [("bearer", {"error": "a"}, None), ("dpop", {"error": "b"}, None)]),
])
def test_the_parser_reads_rfc_9110_challenges(header, expected):
    assert [(c.scheme, c.params, c.token68) for c in parse(header)] == expected


def test_no_header_makes_the_parser_or_the_decision_raise():
    rng = random.Random(9110)
    pieces = ["Bearer", "DPoP", "Basic", "bearer", " ", "\t", ",", "=", '"', "\\", "error", "invalid_token",
              "insufficient_scope", "scope", "resource_metadata", "a/b", "x==", "é", "\x00", ";", "realm", "max_age"]
    for _ in range(3000):
        header = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        for c in parse(header):
            assert c.scheme == c.scheme.lower() and c.scheme
            assert all(k == k.lower() for k in c.params)
        for status in (401, 403):
            decide(status, header, sent_token=rng.random() < 0.5, scopes=["a"], dpop=True, dpop_nonce="n")


# -- The decision ---------------------------------------------------------------------

@pytest.mark.parametrize("status,header,kw,action,fields", [
    (401, 'Bearer error="invalid_token"', {}, "new_token", {}),
    (401, 'Bearer realm="api"', {}, None, {}),
    (401, 'Bearer resource_metadata="https://r/.well-known/oauth-protected-resource"', {}, "discover",
     {"resource_metadata": "https://r/.well-known/oauth-protected-resource"}),
    # An error code decides before resource_metadata (RFC 9728 §5.1 names where, not what).
    (401, 'Bearer error="invalid_token", resource_metadata="https://r/m"', {}, "new_token", {}),
    (401, 'Bearer resource_metadata="https://r/m"', {"sent_token": False}, "discover", {"resource_metadata": "https://r/m"}),
    (401, 'Bearer realm="mcp"', {"sent_token": False}, "discover", {"resource_metadata": None}),
    (401, 'Bearer error="invalid_token"', {"sent_token": False}, "discover", {}),
    (403, 'Bearer resource_metadata="https://r/m"', {}, None, {}),
    (403, 'Bearer error="insufficient_scope", scope="files:write files:read"', {"scopes": ["files:read"]},
     "more_scopes", {"scopes": ("files:read", "files:write")}),
    (403, 'Bearer error="insufficient_scope", scope="b"', {"scopes": "a c"}, "more_scopes", {"scopes": ("a", "c", "b")}),
    (403, 'Bearer error="insufficient_scope", scope="a"', {"scopes": ["a"]}, None, {}),
    (403, 'Bearer error="insufficient_scope"', {"scopes": ["a"]}, None, {}),
    (401, 'Bearer error="insufficient_user_authentication", acr_values="mfa phr", max_age="0"', {},
     "user_authentication", {"acr_values": "mfa phr", "max_age": "0"}),
    (401, 'Bearer error="insufficient_user_authentication", max_age="soon"', {}, "user_authentication",
     {"acr_values": None, "max_age": None}),
    (401, 'DPoP error="use_dpop_nonce"', {"dpop": True, "dpop_nonce": "n1"}, "nonce", {"nonce": "n1"}),
    (401, 'DPoP error="use_dpop_nonce"', {"dpop": True}, None, {}),
    (401, 'DPoP error="use_dpop_nonce"', {"dpop_nonce": "n1"}, None, {}),
    # The token's scheme first: a DPoP token heeds the DPoP challenge, a Bearer token the Bearer one.
    (401, 'Bearer error="invalid_token", DPoP error="use_dpop_nonce"', {"dpop": True, "dpop_nonce": "n"}, "nonce", {}),
    (401, 'DPoP error="use_dpop_nonce", Bearer error="invalid_token"', {}, "new_token", {}),
    (401, 'Basic realm="x", error="invalid_token"', {}, None, {}),
    (401, "", {}, None, {}),
    (401, 'Bearer error="invalid_request"', {}, None, {}),
])
def test_what_a_challenge_asks_for(status, header, kw, action, fields):
    d = decide(status, header, **kw)
    assert d.action == action, d
    for k, v in fields.items():
        assert getattr(d, k) == v
    assert decide(200, header, **kw) is None and decide(500, header, **kw) is None


def test_the_reason_says_what_the_server_answered_and_nothing_unprintable():
    d = decide(403, ['Bearer error="insufficient_scope", scope="admin", error_description="Needs\x07 admin"'], scopes=["admin"])
    assert d.reason == '403 insufficient_scope: "Needs admin" (scope "admin"), and the token has those scopes already'
    assert decide(401, "Basic realm=x").reason == "401 without a Bearer or DPoP challenge"
    assert decide(401, [Challenge("bearer", {"error": "x" * 500})]).reason == "401 " + "x" * 64 + "…"


@pytest.mark.parametrize("url,canonical", [
    ("HTTPS://MCP.Example.COM/mcp/", "https://mcp.example.com/mcp"),
    ("https://mcp.example.com/", "https://mcp.example.com/"),
    ("https://mcp.example.com", "https://mcp.example.com"),
    ("https://mcp.example.com:8443/a/b/#frag", "https://mcp.example.com:8443/a/b"),
    ("http://[::1]:8080/Server/MCP?tenant=A#x", "http://[::1]:8080/Server/MCP?tenant=A"),
])
def test_the_mcp_servers_canonical_url(url, canonical):
    assert canonical_resource(url) == canonical


@pytest.mark.parametrize("url", ["mcp.example.com/mcp", "ftp://x/", "https://user:pw@x.example/", "https:///x"])
def test_what_is_no_mcp_servers_url_is_refused(url):
    with pytest.raises(ValueError):
        canonical_resource(url)


# -- The auth classes against a STUB daemon and a STUB resource server ------------------

KINDS = ["requests", "httpx", "httpx-async"]


def send(kind, auth, url, method="GET", content=None):
    if kind == "requests":
        return requests.request(method, url, data=content, auth=auth, timeout=10)
    if kind == "httpx":
        with httpx.Client(auth=auth, timeout=10) as client:
            return client.request(method, url, content=content)

    async def main():
        async with httpx.AsyncClient(auth=auth, timeout=10) as client:
            return await client.request(method, url, content=content)
    return asyncio.run(main())


def auth_for(kind, resource=API, **kw):
    return (RequestsAuth if kind == "requests" else HttpxAuth)(resource, timeout=5, **kw)


def token_of(request):
    value = request.headers.get("Authorization") or ""
    return value.split(" ", 1)[1] if " " in value else None


def answering(accept, status, challenge, extra=None):
    """A STUB resource server's answer: 200 and the body back when `accept(token)`, else
    `status` with `challenge`."""
    def answer(request):
        if token_of(request) and accept(token_of(request)):
            return 200, {"Content-Type": "text/plain"}, b"ok:" + request.body
        return status, dict({"WWW-Authenticate": challenge}, **(extra or {})), b"refused"
    return answer


@pytest.fixture
def broker():
    with StubBroker(known=[API]) as b:
        yield b


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_token_rejects_it_and_sends_once_more_with_its_body(broker, kind):
    with StubResource(answering(lambda t: t == "tok-2", 401, 'Bearer error="invalid_token"')) as api:
        r = send(kind, auth_for(kind, path=broker.path), api.url + "/v1/items", "POST", b"payload")
        assert (r.status_code, r.content) == (200, b"ok:payload")
        assert api.statuses() == [401, 200] and [e[2] for e in api.log] == ["Bearer tok-1", "Bearer tok-2"]
    assert broker.methods() == ["token.get", "token.reject", "token.get"]
    assert broker.calls[1][1] == {"access_token": "tok-1"}
    assert not hasattr(r, "authbroker_reason")


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_that_refuses_every_token_is_asked_twice_and_the_answer_says_why(broker, kind):
    refusal = 'Bearer error="invalid_token", error_description="revoked"'
    with StubResource(answering(lambda t: False, 401, refusal)) as api:
        r = send(kind, auth_for(kind, path=broker.path), api.url + "/v1/items?secret=s3")
        assert r.status_code == 401 and len(api.log) == 2
        assert r.authbroker_reason == (f'{api.url}/v1/items refused the request again with 401 invalid_token: '
                                       f'"revoked", after a fresh token')


@pytest.mark.parametrize("kind", KINDS)
def test_insufficient_scope_steps_up_once_to_the_union_and_keeps_it(broker, kind):
    challenge = 'Bearer error="insufficient_scope", scope="files:read files:write"'
    with StubResource(answering(lambda t: "files:write" in t, 403, challenge)) as api:
        auth = auth_for(kind, scopes=["files:read", "mail"], path=broker.path)
        assert send(kind, auth, api.url + "/f", "PUT", b"x").status_code == 200
        assert send(kind, auth, api.url + "/g").status_code == 200
        assert api.statuses() == [403, 200, 200]
    wider = ["files:read", "mail", "files:write"]
    assert [p.get("scopes") for m, p in broker.calls] == [["files:read", "mail"], wider, wider]


def test_a_step_up_the_daemon_refuses_is_raised_and_not_kept(broker):
    def token_get(params):
        if "admin" in params.get("scopes", []):
            raise Reply(-32602, "invalid params for token.get: the scopes admin read are not one of scope_sets")
        return broker._token("token.get", params)
    broker.on["token.get"] = token_get
    with StubResource(answering(lambda t: False, 403, 'Bearer error="insufficient_scope", scope="admin"')) as api:
        auth = auth_for("requests", scopes=["read"], path=broker.path)
        with pytest.raises(authbroker.InvalidParams) as e:
            send("requests", auth, api.url + "/admin")
        assert e.value.authbroker_reason == f'{api.url}/admin refused the request with 403 insufficient_scope (scope "admin")'
        with pytest.raises(authbroker.InvalidParams):
            send("requests", auth, api.url + "/other")  # asks with its own scopes first again
    assert [p["scopes"] for _, p in broker.calls] == [["read"], ["read", "admin"], ["read"], ["read", "admin"]]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("challenge,why", [
    ('Bearer error="insufficient_scope", scope="read"', ', and the token has those scopes already'),
    ('Bearer error="insufficient_scope"', ", naming no scope to ask for"),
])
def test_a_step_up_that_asks_for_nothing_new_is_not_tried(broker, kind, challenge, why):
    with StubResource(answering(lambda t: False, 403, challenge)) as api:
        r = send(kind, auth_for(kind, path=broker.path), api.url + "/x")
        assert r.status_code == 403 and len(api.log) == 1
        assert r.authbroker_reason.startswith(f"{api.url}/x refused the request with 403 insufficient_scope")
        assert r.authbroker_reason.endswith(why)
    assert broker.methods() == ["token.get"]


@pytest.mark.parametrize("kind", KINDS)
def test_insufficient_user_authentication_says_which_sign_in_to_run(broker, kind):
    challenge = ('Bearer error="insufficient_user_authentication", '
                 'error_description="A different authentication level is required", acr_values="myACR", max_age="5"')
    with StubResource(answering(lambda t: False, 401, challenge)) as api:
        with pytest.raises(authbroker.UserAuthenticationRequired) as e:
            send(kind, auth_for(kind, path=broker.path), api.url + "/x")
        assert len(api.log) == 1
    assert (e.value.acr_values, e.value.max_age, e.value.url) == ("myACR", "5", api.url + "/x")
    assert e.value.authbroker_reason.startswith(f"{api.url}/x refused the request with 401 insufficient_user_auth")
    assert str(e.value) == (
        f'{api.url}/x refused the request with 401 insufficient_user_authentication: "A different authentication '
        f'level is required" (acr_values "myACR", max_age "5"): it asks for a new sign-in with acr_values=myACR and '
        f'max_age=5 (RFC 9470), which authbrokerd does not ask the provider for on a program\'s behalf: run '
        f'`authctl login --resource {API} --param acr_values=myACR --param max_age=5`, then try again')


@pytest.mark.parametrize("kind", KINDS)
def test_a_dpop_nonce_is_sent_with_a_fresh_proof(kind):
    def answer(request):
        if (request.headers.get("DPoP") or "").endswith("-n1") and token_of(request) == "tok-1":
            return 200, {}, b"ok"
        return 401, {"WWW-Authenticate": 'DPoP algs="ES256", error="use_dpop_nonce"', "DPoP-Nonce": "n1"}, b""
    with StubBroker(known=[API], dpop=True) as b, StubResource(answer) as api:
        assert send(kind, auth_for(kind, path=b.path), api.url + "/d", "POST", b"x").status_code == 200
        assert [e[2] for e in api.log] == ["DPoP tok-1"] * 2
        proofs = [p for m, p in b.calls if m == "dpop.proof"]
        assert [p.get("nonce") for p in proofs] == [None, "n1"]
        assert proofs[1]["htm"] == "POST" and proofs[1]["htu"] == api.url + "/d"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("challenge", [
    'Bearer error="unterminated', '"', "", "Basic realm=x", "Bearer, , ,error=", "Bearer error=invalid token",
    "Bearer =,=,=", "\\\\\\", "Bearer " + "a=b, " * 300, "DPoP error=use_dpop_nonce",
])
def test_a_malformed_or_foreign_challenge_is_not_retried_and_crashes_nothing(broker, kind, challenge):
    with StubResource(answering(lambda t: False, 401, challenge)) as api:
        r = send(kind, auth_for(kind, path=broker.path), api.url + "/x")
        assert r.status_code == 401 and len(api.log) == 1
        assert r.authbroker_reason.startswith(f"{api.url}/x refused the request with 401")


def test_resource_metadata_without_a_resource_to_discover_is_not_retried(broker):
    challenge = 'Bearer resource_metadata="https://x/.well-known/oauth-protected-resource"'
    with StubResource(answering(lambda t: False, 401, challenge)) as api:
        r = send("httpx", auth_for("httpx", None, provider="stub", path=broker.path), api.url + "/x")
        assert r.status_code == 401 and len(api.log) == 1 and broker.methods() == ["token.get"]
        assert r.authbroker_reason.endswith("401 without an error code, and no resource was given to discover")


def test_a_403_without_a_challenge_is_not_retried(broker):
    with StubResource(lambda request: (403, {}, b"no")) as api:
        r = send("requests", auth_for("requests", path=broker.path), api.url + "/x")
        assert r.status_code == 403 and len(api.log) == 1
        assert r.authbroker_reason == f"{api.url}/x refused the request with 403 without a Bearer or DPoP challenge"


# -- MCP: resource-first discovery ------------------------------------------------------

def mcp_server(broker_token_ok):
    """A STUB MCP server's HTTP face: a request without an accepted token gets the 401 of
    MCP authorization, naming its metadata (RFC 9728 §5.1)."""
    def answer(request):
        if token_of(request) and broker_token_ok(token_of(request)):
            return 200, {"Content-Type": "application/json"}, b'{"ok":true}'
        metadata = f"http://127.0.0.1:{request.server.server_port}/.well-known/oauth-protected-resource/mcp"
        return 401, {"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'}, b""
    return answer


@pytest.mark.parametrize("kind", ["httpx", "httpx-async"])
def test_the_mcp_auth_discovers_an_unknown_server_and_waits_for_the_sign_in(kind):
    with StubResource(mcp_server(lambda t: t == "tok-1")) as server:
        resource = server.url + "/mcp"
        with StubBroker(discoverable={resource: {"issuer": "https://auth.example.test", "trusted": True}}) as b:
            auth = BrokerMCPAuth("HTTP" + server.url[4:] + "/mcp/", socket_path=b.path)
            assert auth.resource == resource
            r = send(kind, auth, server.url + "/mcp/", "POST", b'{"jsonrpc":"2.0"}')
            assert r.status_code == 200, getattr(r, "authbroker_reason", None)
            assert [(e[2], e[4]) for e in server.log] == [(None, 401), ("Bearer tok-1", 200)]
            assert b.methods() == ["token.get", "discovery.resolve", "token.get"]
            assert b.calls[0][1] == b.calls[2][1] == {"resource": resource, "wait_for_sign_in": 120}
            assert b.calls[1][1] == {"resource": resource,
                                     "resource_metadata": server.url + "/.well-known/oauth-protected-resource/mcp"}
            # Discovered now: the next request goes with a token at once.
            assert send(kind, auth, server.url + "/mcp/").status_code == 200 and len(server.log) == 3


@pytest.mark.parametrize("kind", ["httpx", "httpx-async"])
def test_the_mcp_auth_never_trusts_a_server_itself(kind):
    with StubResource(mcp_server(lambda t: True)) as server:
        resource = server.url + "/mcp"
        with StubBroker(discoverable={resource: {"issuer": "https://evil.example.test", "trusted": False}}) as b:
            with pytest.raises(authbroker.UntrustedServer) as e:
                send(kind, BrokerMCPAuth(resource, socket_path=b.path, wait_for_sign_in=None), resource)
            assert "discovery.trust" not in b.methods() and len(server.log) == 1
    assert e.value.code == -32011 and e.value.issuer == "https://evil.example.test" and e.value.resource == resource
    assert f"authctl login --resource {resource}" in str(e.value)
    assert e.value.authbroker_reason == f"{resource} refused the request with 401 without an error code"


def test_the_mcp_auth_steps_up_a_known_server_once():
    challenge = 'Bearer error="insufficient_scope", scope="tools:call", resource_metadata="https://x/m"'
    with StubResource(answering(lambda t: "tools:call" in t, 403, challenge)) as server:
        with StubBroker(known=[server.url + "/mcp"]) as b:
            r = send("httpx", BrokerMCPAuth(server.url + "/mcp", socket_path=b.path, scopes=["tools:list"]),
                     server.url + "/mcp", "POST", b"{}")
            assert r.status_code == 200 and server.statuses() == [403, 200]
            assert [p["scopes"] for _, p in b.calls] == [["tools:list"], ["tools:list", "tools:call"]]


def test_mcp_headers_bearer_dpop_and_the_headers_command():
    url = "https://MCP.example.test/mcp/"
    with StubBroker(known=["https://mcp.example.test/mcp"]) as b:
        assert mcp_headers(url, socket_path=b.path) == {"Authorization": "Bearer tok-1"}
        env = dict(os.environ, AUTHBROKER_SOCKET=b.path, PYTHONPATH=os.path.join(ROOT, "clients", "python", "src"))
        r = subprocess.run([sys.executable, "-m", "authbroker.mcp", url], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 0 and json.loads(r.stdout) == {"Authorization": "Bearer tok-1"}, r.stderr
        r = subprocess.run([sys.executable, "-m", "authbroker.mcp", "https://other.example.test/"], capture_output=True,
                           text=True, env=env, timeout=60)
        assert r.returncode == 1 and r.stdout == "" and r.stderr.startswith("authbroker: the metadata of")
    with StubBroker(discoverable={"https://mcp.example.test/mcp": {"issuer": "https://a", "trusted": True}},
                    dpop=True) as b:
        h = mcp_headers(url, socket_path=b.path)
        assert h["Authorization"] == "DPoP tok-1" and h["DPoP"].startswith("proof-")
        assert b.methods() == ["token.get", "discovery.resolve", "token.get", "dpop.proof"]
        assert b.calls[1][1] == {"resource": "https://mcp.example.test/mcp"}
        assert b.calls[3][1]["htm"] == "POST" and b.calls[3][1]["htu"] == url


def test_a_daemon_error_on_the_retry_is_raised_with_its_sentence():
    with StubResource(mcp_server(lambda t: True)) as server:
        with StubBroker() as b:  # resolve fails: the metadata cannot be fetched
            with pytest.raises(authbroker.ProviderUnreachable) as e:
                send("httpx", BrokerMCPAuth(server.url + "/mcp", socket_path=b.path), server.url + "/mcp")
    assert str(e.value) == f"the metadata of {server.url}/mcp could not be fetched"
    assert e.value.authbroker_reason == f"{server.url}/mcp refused the request with 401 without an error code"


# -- The MCP Python SDK ---------------------------------------------------------------

def mcp_sdk_server(token_ok):
    """A STUB MCP server speaking enough of streamable HTTP (JSON answers) for the SDK's
    client to initialize and list tools, behind MCP authorization's 401."""
    def answer(request):
        if not (token_of(request) and token_ok(token_of(request))):
            return mcp_server(lambda t: False)(request)
        if request.command != "POST":
            return 405, {}, b""
        message = json.loads(request.body)
        if "id" not in message:
            return 202, {}, b""
        result = {"tools": []} if message["method"] == "tools/list" else {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {},
            "serverInfo": {"name": "stub", "version": "0"}}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        return 200, {"Content-Type": "application/json"}, body
    return answer


@pytest.mark.filterwarnings("ignore:Use `streamable_http_client` instead:DeprecationWarning")
def test_the_mcp_sdk_client_lists_tools_through_discovery():
    mcp = pytest.importorskip("mcp")
    from importlib.metadata import version
    from mcp.client.streamable_http import streamable_http_client
    major = int(version("mcp").split(".")[0])
    http_lib = pytest.importorskip("httpx2") if major >= 2 else httpx

    async def session(streams):
        async with mcp.ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            return await session.list_tools()

    async def main(url, path):
        async with http_lib.AsyncClient(auth=BrokerMCPAuth(url, socket_path=path), timeout=10) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                return await session(streams)

    async def deprecated(url, path):  # 1.x only: streamablehttp_client(url, auth=…)
        from mcp.client.streamable_http import streamablehttp_client
        async with streamablehttp_client(url, auth=BrokerMCPAuth(url, socket_path=path)) as streams:
            return await session(streams)

    for connect in [main] + ([deprecated] if major < 2 else []):
        with StubResource(mcp_sdk_server(lambda t: t == "tok-1")) as server:
            url = server.url + "/mcp"
            with StubBroker(discoverable={url: {"issuer": "https://auth.example.test", "trusted": True}}) as b:
                assert asyncio.run(connect(url, b.path)).tools == []
                assert b.methods()[:3] == ["token.get", "discovery.resolve", "token.get"]
                assert "discovery.trust" not in b.methods() and server.statuses()[:2] == [401, 200]


def test_the_mcp_auth_is_an_httpx2_auth_too():
    httpx2 = pytest.importorskip("httpx2")
    with StubResource(mcp_server(lambda t: t == "tok-1")) as server:
        url = server.url + "/mcp"
        with StubBroker(discoverable={url: {"issuer": "https://a", "trusted": True}}) as b:
            auth = BrokerMCPAuth(url, socket_path=b.path)
            assert isinstance(auth, httpx2.Auth)
            with httpx2.Client(auth=auth, timeout=10) as client:
                assert client.post(url, content=b"{}").status_code == 200

            async def main():
                async with httpx2.AsyncClient(auth=auth, timeout=10) as client:
                    return (await client.post(url, content=b"{}")).status_code
            assert asyncio.run(main()) == 200
            assert server.statuses() == [401, 200, 200]
