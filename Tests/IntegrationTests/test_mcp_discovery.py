"""An MCP client that uses the broker for a server nobody configured: resource-first
discovery (RFC 9728), dynamic client registration (RFC 7591), the user's trust asked at the
terminal, one sign-in for every agent process, no token in any file.

Real parts throughout: the MCP server and client of the official SDK (PyPI `mcp`), with
Glewlwyd (dynamic registration on) as the server's authorization server; the browser is
played through Glewlwyd's own login API as in test_sign_in.py."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse

import pytest

from conftest import AUTHCTL, ROOT, Daemon, _provider, _stop_provider, files_outside_the_keyring, secret_tool
from glewlwyd_api import Glewlwyd, _request
from test_sign_in_on_demand import notifications, wait_until  # noqa: F401 (a fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
SUPPORT = os.path.join(HERE, "support")
CLIENT = os.path.join(SUPPORT, "mcp_agent.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mcp_world():
    """Glewlwyd with dynamic registration and an MCP server whose metadata names it."""
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    d = _provider("--dynamic-registration", "--resource", resource)
    gl = Glewlwyd(d)
    log = open(os.path.join(d, "mcp_server.log"), "w")
    server = subprocess.Popen(
        [sys.executable, os.path.join(SUPPORT, "mcp_server.py"), "--port", str(port), "--issuer", gl.issuer,
         "--resource", resource, "--required-scope", "mcp", "--admin-scope", "mcp:admin"],
        stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        yield gl, resource
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
        _stop_provider(d)


def discovery_daemon(gl, mode="ask", extra=""):
    """A daemon with no provider at all in config.toml, and no trace in the keyring of the
    provider an earlier test's daemon found (its items are named for the issuer's host)."""
    secret_tool("clear", "provider", urllib.parse.urlsplit(gl.issuer).netloc)
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
