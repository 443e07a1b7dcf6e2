"""clients/go, with Debian's Go (golang-go): `go test` plays the shared protocol cases
(clients/protocol-cases.json) and, given the real parts this test starts, gets tokens from
the real daemon (signed in at the real Glewlwyd) for a real API on loopback that checks
each token and DPoP proof (support/resource_server.py), and waits for a sign-in on demand
that this test finishes as the user would. Offline: the module has no
dependencies (GOFLAGS=-mod=mod, GOPROXY=off)."""
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import API, GIT, ROOT
from resource_server import ResourceServer
from test_sign_in_on_demand import finish_in_browser, on_demand_daemon
from test_client_python import served_by_nobody

MODULE = os.path.join(ROOT, "clients", "go")


@pytest.fixture(scope="module")
def go():
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    if not os.path.exists(go):
        pytest.fail("Debian's golang-go is not installed: run scripts/setup")
    return go


def foreign_socket():
    """A socket served by the user nobody (root only), or (None, None)."""
    if os.geteuid() != 0:
        return None, None
    path, listener, base = served_by_nobody()
    return path, (listener, base)


def finish_the_sign_in_it_shows(gl, page_file, stop):
    """The user: once the Go client has written the page it shows, sign in there."""
    while not stop.is_set():
        if os.path.exists(page_file) and os.path.getsize(page_file) > 0:
            with open(page_file) as f:
                finish_in_browser(gl, f.read().strip())
            return
        time.sleep(0.05)


def test_go_client_plays_the_protocol_cases_and_reaches_the_api(go, broker, daemon_factory, glewlwyd_static, glewlwyd,
                                                                tmp_path):
    api = ResourceServer(glewlwyd_static.discovery()["jwks_uri"], audience=API)
    dpop = daemon_factory(provider="static")
    with open(dpop.config, "a") as f:
        f.write("dpop = true\n")
    dpop.start()
    dpop.login_device("alice")
    unsigned = daemon_factory(provider="static", store="memory").start()
    on_demand = on_demand_daemon(daemon_factory)
    page_file = str(tmp_path / "sign-in-page")
    stop = threading.Event()
    user = threading.Thread(target=finish_the_sign_in_it_shows, args=(glewlwyd, page_file, stop), daemon=True)
    user.start()
    foreign, held = foreign_socket()
    try:
        env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GO111MODULE="on",
                   GOCACHE=os.environ.get("GOCACHE", os.path.join(tempfile.gettempdir(), "authbroker-go-cache")),
                   AUTHBROKER_TEST_SOCKET=broker.socket, AUTHBROKER_TEST_PROVIDER=broker.name,
                   AUTHBROKER_TEST_RESOURCE=API, AUTHBROKER_TEST_OTHER_RESOURCE=GIT, AUTHBROKER_TEST_API=api.url,
                   AUTHBROKER_TEST_SUBJECT=broker.rpc("account.list")["result"]["accounts"][0]["subject"],
                   AUTHBROKER_TEST_DPOP_SOCKET=dpop.socket, AUTHBROKER_TEST_DPOP_PROVIDER=dpop.name,
                   AUTHBROKER_TEST_UNSIGNED_SOCKET=unsigned.socket, AUTHBROKER_TEST_UNSIGNED_PROVIDER=unsigned.name,
                   AUTHBROKER_TEST_SIGNIN_SOCKET=on_demand.socket, AUTHBROKER_TEST_SIGNIN_PROVIDER=on_demand.name,
                   AUTHBROKER_TEST_SIGNIN_PAGE_FILE=page_file, AUTHBROKER_TEST_FOREIGN_SOCKET=foreign or "")
        env.pop("GOPATH", None)
        r = subprocess.run([go, "test", "-count=1", "-v", "./..."], cwd=MODULE, env=env, capture_output=True,
                           text=True, timeout=600)
        failures = [line for line in r.stdout.splitlines() if "--- FAIL" in line or "_test.go:" in line]
        assert r.returncode == 0, "\n".join(failures) + "\n" + r.stdout[-2000:] + r.stderr[-3000:]
        for name in ("TestProtocolCasesWithTheGenericCall", "TestProtocolCasesWithTheTypedTokenCall",
                     "TestIntegrationTokenAndTransport", "TestIntegrationDPoP", "TestIntegrationTypedErrors",
                     "TestIntegrationWaitForSignIn", "TestATimeoutLeavesTheConnectionUsable",
                     "TestADaemonThatDiesMidAnswerIsAConnectionLost",
                     "TestAnAnswerSplitAcrossTheDeadlineLeavesTheConnectionUsable",
                     "TestAContextCancelledAfterItsCallLeavesTheNextCallAlone",
                     "TestNothingListeningSaysWhatToDoInAndOutOfAnSSHSession"):
            assert f"--- PASS: {name} " in r.stdout, f"{name} did not run:\n{r.stdout[-3000:]}"
        assert "SKIP" not in r.stdout, r.stdout[-3000:]
        if held:
            out, _ = held[0].communicate(timeout=20)
            assert out.strip() == "0", "the other user's listener received bytes from the Go client"
    finally:
        stop.set()
        api.stop()
        if held:
            held[0].kill()
            shutil.rmtree(held[1], ignore_errors=True)
