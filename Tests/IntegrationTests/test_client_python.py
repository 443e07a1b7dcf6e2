"""clients/python against the real daemon, the real Glewlwyd and a real HTTP API on
loopback (support/resource_server.py) that checks each token's signature through
Glewlwyd's JWKS, its audience, and the DPoP proof of a bound token.

No test prints a token: tokens are compared through `fingerprint()`."""
import asyncio
import json
import os
import pwd
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import httpx
import pytest
import requests

from conftest import API, GIT, ROOT, fingerprint
from resource_server import ResourceServer
from test_sign_in_on_demand import finish_in_browser, on_demand_daemon, wait_until
from test_socket_owner import LISTENER

CLIENT = os.path.join(ROOT, "clients", "python")
sys.path.insert(0, os.path.join(CLIENT, "src"))
import authbroker  # noqa: E402
from authbroker.httpx_auth import BrokerAuth as HttpxAuth  # noqa: E402
from authbroker.requests_auth import BrokerAuth as RequestsAuth  # noqa: E402


@pytest.fixture(scope="module")
def api(glewlwyd_static):
    """The API whose resource indicator is API, at a loopback URL."""
    s = ResourceServer(glewlwyd_static.discovery()["jwks_uri"], audience=API)
    yield s
    s.stop()


def subject(d):
    return d.rpc("account.list")["result"]["accounts"][0]["subject"]


def test_get_token_and_the_requests_auth_reach_the_api(broker, api):
    token = authbroker.get_token(API, provider=broker.name, path=broker.socket)
    assert token.token_type == "Bearer" and token.provider == broker.name and token.resource == API
    assert token.expires_at > time.time()
    assert token.access_token not in repr(token) and token.access_token not in str(token)

    auth = RequestsAuth(API, provider=broker.name, path=broker.socket)
    r = requests.get(api.url + "/v1/items?page=2", auth=auth, timeout=20)
    assert r.status_code == 200, (r.status_code, r.headers.get("WWW-Authenticate"))
    assert r.json()["sub"] == subject(broker)
    # The API refuses a token for another audience: it really checks.
    r = requests.get(api.url + "/v1/items", auth=RequestsAuth(GIT, provider=broker.name, path=broker.socket), timeout=20)
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["WWW-Authenticate"]


def test_a_revoked_token_is_rejected_and_the_request_sent_once_more(broker, api):
    before = authbroker.get_token(API, provider=broker.name, path=broker.socket)
    api.refuse(before.access_token)
    del api.log[:]
    r = requests.post(api.url + "/v1/items", data=b'{"name":"x"}', timeout=20,
                      auth=RequestsAuth(API, provider=broker.name, path=broker.socket))
    assert r.status_code == 200, r.headers.get("WWW-Authenticate")
    assert r.json()["body"] == '{"name":"x"}', "the body went again with the second try"
    assert [entry[2] for entry in api.log] == [401, 200]
    assert len(r.history) == 1 and r.history[0].status_code == 401
    after = authbroker.get_token(API, provider=broker.name, path=broker.socket)
    assert fingerprint(after.access_token) != fingerprint(before.access_token), "token.reject made the daemon refresh"

    # An API that refuses every token is asked twice, not more.
    del api.log[:]
    r = requests.get(api.url + "/x", auth=RequestsAuth(GIT, provider=broker.name, path=broker.socket), timeout=20)
    assert r.status_code == 401 and len(api.log) == 2


def test_the_httpx_auth_sync_and_async_with_one_retry(broker, api):
    auth = HttpxAuth(API, provider=broker.name, path=broker.socket)
    with httpx.Client(auth=auth, timeout=20) as client:
        r = client.get(api.url + "/v1/items")
        assert r.status_code == 200 and r.json()["sub"] == subject(broker)
        api.refuse(authbroker.get_token(API, provider=broker.name, path=broker.socket).access_token)
        del api.log[:]
        r = client.put(api.url + "/v1/items/1", content=b"payload")
        assert r.status_code == 200 and [e[2] for e in api.log] == [401, 200]

    async def main():
        async with httpx.AsyncClient(auth=auth, timeout=20) as client:
            first = await client.get(api.url + "/a")
            api.refuse(authbroker.get_token(API, provider=broker.name, path=broker.socket).access_token)
            del api.log[:]
            second = await client.get(api.url + "/b")
            return first.status_code, second.status_code, [e[2] for e in api.log]
    assert asyncio.run(main()) == (200, 200, [401, 200])


def dpop_broker(daemon_factory):
    d = daemon_factory(provider="static")
    with open(d.config, "a") as f:
        f.write("dpop = true\n")
    d.start()
    d.login_device("alice")
    return d


def test_a_dpop_bound_token_goes_with_a_fresh_proof_per_request(daemon_factory, api):
    d = dpop_broker(daemon_factory)
    auth = RequestsAuth(API, provider=d.name, path=d.socket)
    del api.log[:]
    for path in ("/v1/items", "/v1/items", "/v1/other"):
        r = requests.get(api.url + path, auth=auth, timeout=20)
        assert r.status_code == 200, r.headers.get("WWW-Authenticate")
    assert [(e[2], e[3]) for e in api.log] == [(200, "DPoP")] * 3  # a replayed proof would be refused

    # httpx, sync and async, and a resource server that wants a nonce (RFC 9449 §9).
    api.nonce = "server-nonce-1"
    try:
        del api.log[:]
        hauth = HttpxAuth(API, provider=d.name, path=d.socket)
        with httpx.Client(auth=hauth, timeout=20) as client:
            assert client.post(api.url + "/v1/items", content=b"x").status_code == 200

        async def main():
            async with httpx.AsyncClient(auth=hauth, timeout=20) as client:
                return (await client.get(api.url + "/v1/async")).status_code
        assert asyncio.run(main()) == 200
        assert [e[4] for e in api.log] == ["use_dpop_nonce", None, "use_dpop_nonce", None]
    finally:
        api.nonce = None

    # The same bound token without a proof is refused: the API checks the binding.
    token = authbroker.get_token(API, provider=d.name, path=d.socket)
    assert token.dpop_bound
    r = requests.get(api.url + "/v1/items", headers={"Authorization": token.authorization}, timeout=20)
    assert r.status_code == 401


def test_typed_errors_carry_the_daemons_code_and_sentence(daemon_factory, tmp_path):
    d = daemon_factory(provider="static", store="memory").start()
    with pytest.raises(authbroker.LoginRequired) as e:
        authbroker.get_token(API, provider=d.name, path=d.socket)
    assert e.value.code == -32001 and e.value.provider == d.name
    assert e.value.message == f"not signed in to {d.name}: run `authctl login --provider {d.name}`"
    with pytest.raises(authbroker.UnknownProvider) as e:
        authbroker.get_token(API, provider="nosuch", path=d.socket)
    assert e.value.code == -32006 and "nosuch" in str(e.value)
    with pytest.raises(authbroker.InvalidParams) as e:
        authbroker.get_token(API, provider=d.name, min_ttl=-1, path=d.socket)
    assert e.value.code == -32602 and "min_ttl" in e.value.message
    with pytest.raises(authbroker.DaemonNotRunning) as e:
        authbroker.get_token(API, path=str(tmp_path / "nothing-here"))
    assert "systemctl --user start authbroker.socket" in str(e.value)
    env = {k: v for k, v in os.environ.items() if k not in ("AUTHBROKER_SOCKET", "XDG_RUNTIME_DIR")}
    r = subprocess.run([sys.executable, "-c", "import authbroker; authbroker.get_token('x')"], capture_output=True,
                       text=True, env=dict(env, PYTHONPATH=os.path.join(CLIENT, "src")))
    assert "NoSocketPath" in r.stderr and "neither AUTHBROKER_SOCKET nor XDG_RUNTIME_DIR" in r.stderr


def test_a_daemon_that_never_answers_is_a_timeout_and_the_connection_stays_usable(tmp_path):
    # A STUB: a socket that accepts and never answers (what a hung daemon looks like).
    path = str(tmp_path / "sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    try:
        b = authbroker.Broker(path, timeout=0.3)
        started = time.monotonic()
        with pytest.raises(authbroker.BrokerTimeout) as e:
            b.token(API)
        assert str(e.value) == "authbrokerd did not answer token.get within 300 ms"
        assert time.monotonic() - started < 10
        conn, _ = server.accept()
        # The late answer to request 1 is skipped; request 2's answer is taken.
        conn.sendall(b'{"jsonrpc":"2.0","id":1,"result":{"late":true}}\n{"jsonrpc":"2.0","id":2,"result":{"accounts":[]}}\n')
        assert b.accounts(timeout=5) == []
        b.close()
        conn.close()
    finally:
        server.close()


def answering(path, results):
    """A STUB daemon on `path`: answers the requests, in the order they come, with `results`
    (one connection at a time, each request's own id)."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(4)
    left = list(results)

    def serve():
        while left:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as lines:
                for line in lines:
                    answer = {"jsonrpc": "2.0", "id": json.loads(line)["id"], "result": left.pop(0)}
                    conn.sendall(json.dumps(answer).encode() + b"\n")
                    if not left:
                        break

    threading.Thread(target=serve, daemon=True).start()
    return server


@pytest.mark.parametrize("results", [
    [{"token_type": "Bearer", "expires_at": 1, "provider": "p"}],  # no access_token
    [["not", "an", "object"]],
    [{"access_token": "t", "token_type": "DPoP", "expires_at": 1, "provider": "p"}, {"proof": "p"}],
    [{"access_token": "t", "token_type": "DPoP", "expires_at": 1, "provider": "p"},
     {"access_token": "t", "token_type": "DPoP", "expires_at": 1, "provider": "p"}],  # no proof
])
def test_a_token_answer_of_another_shape_is_a_bad_response_from_the_auth_classes(tmp_path, results):
    """STUB: a socket whose answers lack what a token answer has (another program on the
    path, a daemon of another version): the requests auth raises BadResponse with a
    sentence, as Broker.token does, not a KeyError traceback."""
    path = str(tmp_path / "sock")
    server = answering(path, results)
    try:
        with pytest.raises(authbroker.BadResponse) as e:
            requests.get("http://127.0.0.1:9/", auth=RequestsAuth(API, path=path, timeout=5))
        assert str(e.value).startswith("authbrokerd answered something unexpected")
    finally:
        server.close()


def test_events_between_the_answers_of_a_subscribed_connection_are_skipped(broker):
    """A program that subscribes (events.subscribe) and calls on the same connection: the
    daemon writes its event notifications between the answers (docs/protocol.md)."""
    with authbroker.Broker(broker.socket, timeout=20) as b:
        b.call("events.subscribe", {"kinds": ["token_refreshed"]})
        # Another program makes the daemon refresh a token: an event on b's connection.
        with authbroker.Broker(broker.socket, timeout=20) as other:
            other.call("token.reject", {"resource": GIT, "provider": broker.name})
            other.token(GIT, provider=broker.name)
        assert select.select([b._sock], [], [], 20)[0], "no event came"
        assert b.status()["version"]
        assert b.accounts()[0]["provider"] == broker.name


def served_by_nobody():
    """A socket served by the user nobody, in a folder nobody owns: (path, listener process,
    folder to remove). The listener prints how many bytes it received once the peer closes."""
    if os.geteuid() != 0:
        pytest.skip("needs root to serve a socket as another user (setpriv --reuid=nobody)")
    base = tempfile.mkdtemp(prefix="ab-", dir="/tmp")
    os.chmod(base, 0o755)
    theirs = os.path.join(base, "theirs")
    os.mkdir(theirs, 0o755)
    os.chown(theirs, pwd.getpwnam("nobody").pw_uid, -1)
    path = os.path.join(theirs, "sock")
    listener = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                 os.path.realpath(sys.executable), "-c", LISTENER, path], stdout=subprocess.PIPE, text=True)
    assert listener.stdout.readline().strip() == "ready"
    return path, listener, base


def test_nothing_is_sent_to_a_socket_another_user_serves():
    path, listener, base = served_by_nobody()
    try:
        with pytest.raises(authbroker.WrongServer) as e:
            with authbroker.Broker(path) as b:
                b.reject_token("a-token-that-must-not-leave")
        assert f"served by uid {pwd.getpwnam('nobody').pw_uid}" in str(e.value) and "nothing was sent" in str(e.value)
        out, _ = listener.communicate(timeout=20)
        assert out.strip() == "0", "the other user's listener received bytes"
    finally:
        listener.kill()
        shutil.rmtree(base, ignore_errors=True)


def test_get_token_waits_for_a_sign_in_on_demand(daemon_factory, glewlwyd):
    d = on_demand_daemon(daemon_factory)
    pages, answers = [], []

    def wait():
        answers.append(authbroker.get_token(API, provider=d.name, path=d.socket, wait_for_sign_in=120,
                                            on_sign_in=pages.append))

    t = threading.Thread(target=wait)
    t.start()
    assert wait_until(lambda: pages), d.log_text()
    assert pages[0]["authorization_url"].startswith(glewlwyd.issuer)
    finish_in_browser(glewlwyd, pages[0]["authorization_url"])
    t.join(60)
    assert answers and answers[0].provider == d.name and answers[0].resource == API


def test_pip_installs_it_and_five_lines_of_requests_get_an_api_answer(broker, api, tmp_path):
    venv = tmp_path / "venv"
    # Without its own pip (ensurepip takes seconds): this interpreter's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # From a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    source = tmp_path / "python"
    shutil.copytree(CLIENT, source)
    # No index: the core needs nothing, and requests comes from the system's site-packages.
    r = subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-index", "--no-build-isolation",
                        "--no-deps", str(source)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    script = tmp_path / "five.py"
    script.write_text(
        "import sys, requests\n"
        "from authbroker.requests_auth import BrokerAuth\n"
        f"auth = BrokerAuth({API!r}, provider={broker.name!r})\n"
        "r = requests.get(sys.argv[1], auth=auth, timeout=20)\n"
        "print(r.status_code, r.json()['sub'])\n")
    r = subprocess.run([py, str(script), api.url + "/v1/me"], capture_output=True, text=True, timeout=60,
                       env=dict(broker.env), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["200", subject(broker)]
    shown = subprocess.run([py, "-c", "import authbroker; print(authbroker.__file__)"], capture_output=True, text=True)
    assert shown.stdout.startswith(str(venv)), "the installed copy was used"
