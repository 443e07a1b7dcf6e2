"""An MCP client that uses the broker for a server nobody configured: resource-first
discovery (RFC 9728), dynamic client registration (RFC 7591), the user's trust asked at the
terminal, one sign-in for every agent process, no token in any file; the same with
DPoP-bound tokens (RFC 9449) for a server whose metadata requires them.

Real parts throughout: the MCP server and client of the official SDK (PyPI `mcp`), with
Glewlwyd (dynamic registration on) as the server's authorization server; the browser is
played through Glewlwyd's own login API as in test_sign_in.py."""
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from conftest import AUTHCTL, ROOT, Daemon, _provider, _stop_provider, decode_jwt, files_outside_the_keyring, secret_tool
from glewlwyd_api import Glewlwyd, _request
from test_dpop import b64e, thumbprint
from test_sign_in_on_demand import notifications, wait_until  # noqa: F401 (a fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
SUPPORT = os.path.join(HERE, "support")
CLIENT = os.path.join(SUPPORT, "mcp_agent.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mcp_server(port, gl, resource, log_path, *extra):
    """support/mcp_server.py on `port`, its stderr in `log_path`: (process, log file)."""
    log = open(log_path, "w")
    server = subprocess.Popen(
        [sys.executable, os.path.join(SUPPORT, "mcp_server.py"), "--port", str(port), "--issuer", gl.issuer,
         "--resource", resource, "--required-scope", "mcp", "--admin-scope", "mcp:admin", *extra],
        stdout=subprocess.PIPE, stderr=log, text=True)
    if server.stdout.readline().strip() != "ready":
        server.kill()
        server.wait(timeout=10)
        log.close()
        with open(log_path) as f:
            pytest.fail(f"the MCP server did not start: {f.read()[-2000:]}")
    return server, log


def stop_mcp_server(server, log):
    server.terminate()
    server.wait(timeout=10)
    log.close()


@pytest.fixture(scope="module")
def mcp_glewlwyd():
    """Glewlwyd with dynamic registration, knowing the resources of two MCP servers (the
    second one's, for the DPoP server, started only by the tests that need it): (Glewlwyd,
    its folder, [(port, resource), (port, resource)])."""
    servers = []
    for _ in range(2):
        port = free_port()
        servers.append((port, f"http://127.0.0.1:{port}/mcp"))
    d = _provider("--dynamic-registration", "--resource", servers[0][1], "--resource", servers[1][1])
    try:
        yield Glewlwyd(d), d, servers
    finally:
        _stop_provider(d)


@pytest.fixture(scope="module")
def mcp_world(mcp_glewlwyd):
    """Glewlwyd with dynamic registration and an MCP server whose metadata names it."""
    gl, d, servers = mcp_glewlwyd
    port, resource = servers[0]
    server, log = start_mcp_server(port, gl, resource, os.path.join(d, "mcp_server.log"))
    try:
        yield gl, resource
    finally:
        stop_mcp_server(server, log)


@pytest.fixture(scope="module")
def dpop_mcp_world(mcp_glewlwyd):
    """The same Glewlwyd (it allows DPoP) and an MCP server started with --dpop: its
    metadata requires DPoP-bound tokens, and it checks a proof on every request.
    (Glewlwyd, resource, the server's log path)."""
    gl, d, servers = mcp_glewlwyd
    port, resource = servers[1]
    log_path = os.path.join(d, "mcp_dpop_server.log")
    server, log = start_mcp_server(port, gl, resource, log_path, "--dpop")
    try:
        yield gl, resource, log_path
    finally:
        stop_mcp_server(server, log)


@pytest.fixture(autouse=True)
def no_trace_in_the_keyring(mcp_world):
    """The provider a daemon finds is kept in the keyring this worker's other tests share,
    where every later daemon would load it: its items (the provider's and its accounts',
    whatever their name) go before and after each test."""
    gl, _ = mcp_world
    secret_tool("clear", "issuer", gl.issuer)
    yield
    secret_tool("clear", "issuer", gl.issuer)


def discovery_daemon(gl, mode="ask", extra=""):
    """A daemon with no provider at all in config.toml."""
    d = Daemon(None)
    d.gl = gl
    d.write_config(text=f'[daemon]\nstore = "secret-service"\n\n[discovery]\nmode = "{mode}"\n{extra}')
    return d


def registered_clients(gl):
    """Client ids Glewlwyd registered dynamically so far."""
    r = gl.admin_request("GET", "/api/client/?limit=1000")
    assert r.status == 200, r.status
    return {c["client_id"] for c in json.loads(r.body)}


def sign_in_at_terminal(d, gl, resource, answer="y\n", user="alice"):
    """`authctl login --resource URL --no-browser`, answering the trust question with
    `answer` and playing the browser for the URL it prints."""
    p = subprocess.Popen([AUTHCTL, "login", "--resource", resource, "--no-browser"], env=d.env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdin.write(answer)
    p.stdin.close()
    lines = []
    url = None
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("http://127.0.0.1") and "/auth" in line:
            url = line.strip()
            break
    if url is None:
        p.wait(timeout=30)
        return p.returncode, "".join(lines) + p.stderr.read(), p.stdout.read()
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    session = gl.login_session(user)
    gl.grant_scopes(session, q["client_id"][0], q["scope"][0].split())
    r = _request("GET", url + "&g_continue=", cookies=session.cookies)
    assert r.status in (301, 302, 303, 307) and r.location, f"authorization endpoint answered {r.status}"
    _request("GET", r.location)
    p.stdin = None  # closed after the answer
    out, err = p.communicate(timeout=60)
    return p.returncode, "".join(lines) + err, out


def agent(d, resource, *args):
    """One agent process: an MCP client of the official SDK whose auth is the broker's."""
    env = dict(d.env, PYTHONPATH=os.path.join(ROOT, "clients", "python", "src"))
    return subprocess.run([sys.executable, CLIENT, resource, *args], env=env, capture_output=True, text=True, timeout=90)


def test_an_mcp_client_gets_its_tool_result_for_a_server_nobody_configured(mcp_world):
    gl, resource = mcp_world
    d = discovery_daemon(gl).start()
    try:
        # Untrusted: refused with both hosts named, and nothing sent to the server.
        before = registered_clients(gl)
        r = d.ctl("token", "--resource", resource)
        assert r.returncode == 13, r.stderr
        assert "127.0.0.1" in r.stderr and "authctl login --resource" in r.stderr, r.stderr
        assert registered_clients(gl) == before, "nothing is registered before the user says yes"

        # A "no" at the terminal trusts nothing.
        code, err, _ = sign_in_at_terminal(d, gl, resource, answer="n\n")
        assert code == 13 and "was not trusted" in err, err
        assert registered_clients(gl) == before

        # A yes: registered, signed in through the browser.
        code, err, out = sign_in_at_terminal(d, gl, resource)
        assert code == 0, err
        assert "Trust 127.0.0.1" in err and "Signed in to" in out, (err, out)
        assert len(registered_clients(gl) - before) == 1, "one registration"

        # The agent: lists tools and calls one, through the broker.
        r = agent(d, resource)
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)
        assert "whoami" in result["tools"] and result["whoami"]["username"] == "alice", result

        # A second agent process: the same sign-in, no browser, no new registration.
        r = agent(d, resource)
        assert r.returncode == 0, r.stderr
        assert len(registered_clients(gl) - before) == 1

        # An agent that takes a headers command (a "headers helper") instead of a library.
        h = d.ctl("headers", "--resource", resource)
        assert h.returncode == 0, h.stderr
        assert list(json.loads(h.stdout)) == ["Authorization"] and json.loads(h.stdout)["Authorization"].startswith("Bearer ")
        r = agent(d, resource, "--headers-command", f"{AUTHCTL} headers --resource {resource}")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["whoami"]["username"] == "alice"

        # Listed under its generated name.
        accounts = d.rpc("account.list")["result"]["accounts"]
        assert [a["provider"] for a in accounts] == ["127.0.0.1:" + gl.issuer.split(":")[2].split("/")[0]], accounts
        status = d.ctl("status")
        assert status.returncode == 0 and "127.0.0.1" in status.stdout, status.stdout

        # The discovered provider and its sign-in survive a restart.
        d.restart()
        r = agent(d, resource)
        assert r.returncode == 0, r.stderr
        assert len(registered_clients(gl) - before) == 1, "the registration was kept and reused"

        # The generated name can be renamed; the sign-in, the client and the resource move with it.
        generated = accounts[0]["provider"]
        r = d.ctl("rename-provider", generated, "work-mcp")
        assert r.returncode == 0 and "work-mcp now (1 account moved)" in r.stdout, (r.stdout, r.stderr)
        assert [a["provider"] for a in d.rpc("account.list")["result"]["accounts"]] == ["work-mcp"]
        d.restart()
        assert [a["provider"] for a in d.rpc("account.list")["result"]["accounts"]] == ["work-mcp"], "kept across a restart"
        r = agent(d, resource)
        assert r.returncode == 0, r.stderr
        assert len(registered_clients(gl) - before) == 1, "the renamed provider keeps its client"
        r = d.ctl("rename-provider", "work-mcp", "bad name")
        assert r.returncode == 9 and "letters, digits" in r.stderr, r.stderr

        # No token in any file under HOME or the daemon's folder.
        token = d.rpc("token.get", {"resource": resource})["result"]["access_token"]
        leaked = [path for path, data in files_outside_the_keyring(os.environ["HOME"], d.dir) if token.encode() in data]
        assert not leaked, leaked
    finally:
        d.cleanup()


def play_pending_sign_in(d, gl, provider, scopes_granted, user="alice", bound=60):
    """The sign-in on demand a waiting caller started: joined (login.start with join) and
    finished in the played browser, granting `scopes_granted`."""
    deadline = time.time() + bound
    start = None
    while time.time() < deadline:
        answer = d.rpc("login.start", {"provider": provider, "join": True})
        if "result" in answer and answer["result"].get("joined"):
            start = answer["result"]
            break
        time.sleep(0.2)
    assert start is not None, d.log_text()[-3000:]
    url = start["authorization_url"]
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert set(scopes_granted) <= set(q["scope"][0].split()), (q["scope"], d.log_text()[-3000:])
    session = gl.login_session(user)
    gl.grant_scopes(session, q["client_id"][0], q["scope"][0].split())
    r = _request("GET", url + "&g_continue=", cookies=session.cookies)
    assert r.status in (301, 302, 303, 307) and r.location
    _request("GET", r.location)


def test_a_tool_that_needs_more_scope_gets_one_step_up(mcp_world):
    gl, resource = mcp_world
    d = discovery_daemon(gl).start()
    try:
        code, err, _ = sign_in_at_terminal(d, gl, resource)
        assert code == 0, err
        provider = d.rpc("discovery.resolve", {"resource": resource})["result"]["provider"]
        env = dict(d.env, PYTHONPATH=os.path.join(ROOT, "clients", "python", "src"))
        # admin_echo answers 403 insufficient_scope scope="mcp:admin": the refresh cannot
        # widen the grant (Glewlwyd ignores scope on refresh), so the daemon starts one new
        # sign-in asking for it, which the waiting agent joins.
        p = subprocess.Popen([sys.executable, CLIENT, resource, "--tool", "admin_echo"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Joined once the step-up has asked for it (a join before would start a sign-in of its own).
        deadline = time.time() + 60
        while "the next sign-in asks for them" not in d.log_text() and time.time() < deadline and p.poll() is None:
            time.sleep(0.1)
        play_pending_sign_in(d, gl, provider, ["mcp", "mcp:admin"])
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err[-2000:]
        assert json.loads(out)["admin_echo"], out
        # One step-up, not one per request: a second agent needs no sign-in.
        r = agent(d, resource, "--tool", "admin_echo")
        assert r.returncode == 0, r.stderr
    finally:
        d.cleanup()


def test_a_waiting_agent_asks_the_desktop_before_trusting_a_server(mcp_world, notifications):
    """The agent runs with no terminal: the trust question goes to the desktop (the STUB
    notification server of test_sign_in_on_demand), naming both hosts; Deny refuses with
    nothing sent to the server, Trust registers and starts the sign-in the agent waits for."""
    gl, resource = mcp_world
    d = discovery_daemon(gl)
    d.env.pop("INVOCATION_ID", None)
    d.env["BROWSER"] = ""
    d.start()
    try:
        before = registered_clients(gl)
        env = dict(d.env, PYTHONPATH=os.path.join(ROOT, "clients", "python", "src"))
        denied = subprocess.Popen([sys.executable, CLIENT, resource], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        assert wait_until(lambda: len(notifications.calls("Notify")) == 1), d.log_text()
        asked = notifications.calls("Notify")[0]
        assert asked["summary"].startswith("Trust 127.0.0.1 for 127.0.0.1"), asked
        assert gl.issuer in asked["body"] and "has not used" in asked["body"], asked
        notifications.click(asked["id"], "deny")
        _, err = denied.communicate(timeout=60)
        assert denied.returncode != 0 and "you denied it on the desktop" in err, err[-2000:]
        assert registered_clients(gl) == before, "nothing is registered on a deny"

        trusting = subprocess.Popen([sys.executable, CLIENT, resource], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        assert wait_until(lambda: len(notifications.calls("Notify")) == 2), d.log_text()
        notifications.click(notifications.calls("Notify")[1]["id"], "allow")
        provider = None
        deadline = time.time() + 30
        while provider is None and time.time() < deadline:
            found = d.rpc("discovery.resolve", {"resource": resource}).get("result", {})
            provider = found.get("provider") if found.get("trusted") else None
            time.sleep(0.1)
        play_pending_sign_in(d, gl, provider, ["mcp"])
        out, err = trusting.communicate(timeout=90)
        assert trusting.returncode == 0, err[-2000:]
        assert json.loads(out)["whoami"]["username"] == "alice"
        assert len(registered_clients(gl) - before) == 1
    finally:
        d.cleanup()


def test_discovery_off_refuses_the_resource_and_those_found_before(mcp_world):
    gl, resource = mcp_world
    # mode = "allow": trusted without asking, so resolving enrols it (registration, no sign-in).
    d = discovery_daemon(gl, mode="allow").start()
    try:
        found = d.rpc("discovery.resolve", {"resource": resource})["result"]
        assert found["trusted"] and not found["configured"] and found["resource"] == resource, found
        # With discovery off (and one provider configured, as a file then needs), the
        # provider found before serves nothing, and no metadata decides anything.
        d.stop()
        d.write_config(text=(
            '[daemon]\nstore = "secret-service"\n\n[discovery]\nmode = "off"\n\n'
            f'[providers.corp]\nissuer = "{gl.issuer}"\nclient_id = "{gl.client_id("authbroker")}"\n'))
        d.start()
        r = d.ctl("token", "--resource", resource)
        assert r.returncode == 12, r.stderr
        assert 'mode = "off"' in r.stderr, r.stderr
        r = d.ctl("token", "--resource", "https://elsewhere.example.test/mcp")
        assert r.returncode in (9, 12) and 'mode = "off"' in r.stderr, r.stderr
    finally:
        d.cleanup()


def proof_of(key, htm, htu, token):
    """A DPoP proof (RFC 9449 §4.2) signed with `key` (ES256) for one request with
    `token`, as anyone with a key of their own can make: (proof, its public jwk)."""
    numbers = key.public_key().public_numbers()
    jwk = {"kty": "EC", "crv": "P-256", "x": b64e(numbers.x.to_bytes(32, "big")), "y": b64e(numbers.y.to_bytes(32, "big"))}
    header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk}
    claims = {"jti": b64e(os.urandom(16)), "htm": htm, "htu": htu, "iat": int(time.time()),
              "ath": b64e(hashlib.sha256(token.encode()).digest())}
    signing = b64e(json.dumps(header).encode()) + "." + b64e(json.dumps(claims).encode())
    r, s = decode_dss_signature(key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
    return signing + "." + b64e(r.to_bytes(32, "big") + s.to_bytes(32, "big")), jwk


def test_an_mcp_server_that_requires_dpop_gets_bound_tokens_and_a_proof_with_each_request(dpop_mcp_world):
    """The same flow with the server's metadata saying dpop_bound_access_tokens_required:
    the daemon turns DPoP on for the provider it finds (Glewlwyd lists ES256), the
    sign-in binds the grant to the daemon's key, and BrokerMCPAuth sends every request of
    the MCP session (the POSTs and the SSE GET) with a proof of its own for its method and
    URL, which the server checks (support/mcp_server.py --dpop); the token without its
    proof, or with someone else's, gets nowhere there."""
    import httpx

    gl, resource, server_log = dpop_mcp_world
    d = discovery_daemon(gl).start()
    try:
        code, err, out = sign_in_at_terminal(d, gl, resource)
        assert code == 0, err
        assert "Trust 127.0.0.1" in err and "Signed in to" in out, (err, out)

        with open(server_log) as f:
            before = len(f.readlines())
        r = agent(d, resource)
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)
        assert "whoami" in result["tools"] and result["whoami"]["username"] == "alice", result
        with open(server_log) as f:
            during = f.readlines()[before:]
        assert not [line for line in during if "DPoP refused" in line], during
        accepted = {line.split()[-2] for line in during if "DPoP proof accepted" in line}
        assert {"POST", "GET"} <= accepted, during

        # What the daemon serves is bound to its key.
        token = d.rpc("token.get", {"resource": resource})["result"]
        assert token["token_type"] == "DPoP", {k: v for k, v in token.items() if k != "access_token"}
        at = token["access_token"]
        assert decode_jwt(at)[1]["cnf"]["jkt"], "the token carries the key's thumbprint"

        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "thief", "version": "0"}}}
        mcp_headers = {"Accept": "application/json, text/event-stream"}

        def post(headers):
            return httpx.post(resource, json=initialize, headers=dict(mcp_headers, **headers), timeout=20)

        def refused(response):
            challenge = response.headers.get("WWW-Authenticate", "")
            return (response.status_code == 401 and challenge.startswith("DPoP ")
                    and 'error="invalid_token"' in challenge and "resource_metadata=" in challenge)

        # The token on its own, as a thief who copied it would send it: refused.
        assert refused(post({"Authorization": "Bearer " + at}))
        assert refused(post({"Authorization": "DPoP " + at}))
        # With a proof for another request, or a replayed proof: refused too.
        other = d.rpc("dpop.proof", {"resource": resource, "htm": "GET", "htu": resource})["result"]
        assert refused(post({"Authorization": "DPoP " + at, "DPoP": other["proof"]}))
        proof = d.rpc("dpop.proof", {"resource": resource, "htm": "POST", "htu": resource})["result"]
        assert proof["access_token"] == at
        assert post({"Authorization": "DPoP " + at, "DPoP": proof["proof"]}).status_code == 200
        assert refused(post({"Authorization": "DPoP " + at, "DPoP": proof["proof"]}))
        # A thief's own key signs a proof the server can check, for a token not bound to it.
        key = ec.generate_private_key(ec.SECP256R1())
        own, jwk = proof_of(key, "POST", resource, at)
        assert refused(post({"Authorization": "DPoP " + at, "DPoP": own}))
        # And a token altered to name the thief's key fails the SDK's verifier behind the gate
        # (its challenge goes out as DPoP too).
        h64, _, s64 = at.split(".")
        claims = dict(decode_jwt(at)[1], cnf={"jkt": thumbprint(jwk)})
        forged = f"{h64}.{b64e(json.dumps(claims).encode())}.{s64}"
        assert refused(post({"Authorization": "DPoP " + forged, "DPoP": proof_of(key, "POST", resource, forged)[0]}))
        with open(server_log) as f:
            log = f.read()
        assert "not bound to the proof's key" in log and "token refused: InvalidSignatureError" in log, log[-2000:]

        # No token in any file under HOME or the daemon's folder.
        leaked = [path for path, data in files_outside_the_keyring(os.environ["HOME"], d.dir) if at.encode() in data]
        assert not leaked, leaked
    finally:
        d.cleanup()


def test_a_dpop_provider_found_by_discovery_keeps_dpop_across_a_restart(dpop_mcp_world):
    gl, resource, _ = dpop_mcp_world
    d = discovery_daemon(gl).start()
    try:
        code, err, _ = sign_in_at_terminal(d, gl, resource)
        assert code == 0, err
        answer = d.rpc("token.get", {"resource": resource})
        # An error never carries a token: the daemon's sentence and its log say why.
        assert "result" in answer, (answer, d.log_text()[-3000:])
        first = answer["result"]
        assert first["token_type"] == "DPoP"
        # The refresh after the restart carries a proof with the stored key, and the new
        # token is bound to the same key.
        d.restart()
        r = agent(d, resource)
        assert r.returncode == 0, r.stderr[-2000:] + d.log_text()[-3000:]
        answer = d.rpc("token.get", {"resource": resource})
        assert "result" in answer, (answer, d.log_text()[-3000:])
        again = answer["result"]
        assert again["token_type"] == "DPoP", {k: v for k, v in again.items() if k != "access_token"}
        assert decode_jwt(again["access_token"])[1]["cnf"] == decode_jwt(first["access_token"])[1]["cnf"]
        leaked = [path for path, data in files_outside_the_keyring(os.environ["HOME"], d.dir)
                  if first["access_token"].encode() in data or again["access_token"].encode() in data]
        assert not leaked, leaked
    finally:
        d.cleanup()
