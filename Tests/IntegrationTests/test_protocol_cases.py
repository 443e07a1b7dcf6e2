"""The shared protocol cases (clients/protocol-cases.json) for clients/python, and the
real daemon's answers behind them.

Each case is played by a STUB daemon (a Unix socket in this test that checks the request
line and sends the case's replies): a real daemon does not answer a chosen error, a blank
line or garbage on demand. The cases marked `daemon` are then sent to a real authbrokerd,
which must answer what the file says, so the file cannot drift from the daemon. The Swift
BrokerClient (Tests/BrokerClientTests/ProtocolCasesTests.swift) and clients/go
(protocol_cases_test.go, run by test_client_go.py) play the same file."""
import json
import os
import socket
import sys
import tempfile
import threading

import pytest

from conftest import ROOT, Daemon

sys.path.insert(0, os.path.join(ROOT, "clients", "python", "src"))
import authbroker  # noqa: E402

CASES_FILE = os.path.join(ROOT, "clients", "protocol-cases.json")
with open(CASES_FILE) as f:
    CASES = json.load(f)["cases"]


def fill(value, request_id):
    if value == "$id":
        return request_id
    if isinstance(value, dict):
        return {k: fill(v, request_id) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, request_id) for v in value]
    return value


class StubDaemon:
    """A STUB daemon for one case: reads one request line, sends the case's replies."""

    def __init__(self, case):
        self.case = case
        self.dir = tempfile.mkdtemp(prefix="ab-case-")
        self.path = os.path.join(self.dir, "sock")
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(self.path)
        self.server.listen(1)
        self.request = None
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        conn, _ = self.server.accept()
        conn.settimeout(10)
        buf = b""
        while b"\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
        self.request = json.loads(buf.split(b"\n", 1)[0])
        for reply in self.case["replies"]:
            line = reply if isinstance(reply, str) else json.dumps(fill(reply, self.request.get("id")))
            conn.sendall(line.encode() + b"\n")
        if self.case.get("close"):
            conn.close()
            return
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
        conn.close()

    def stop(self):
        self.server.close()
        self.thread.join(10)
        for name in os.listdir(self.dir):
            os.remove(os.path.join(self.dir, name))
        os.rmdir(self.dir)


def check_request(stub, case):
    r = stub.request
    assert r is not None, "the client sent no request line"
    assert r["jsonrpc"] == "2.0" and isinstance(r["id"], int), r.keys()
    assert r["method"] == case["call"]["method"]
    assert r.get("params", {}) == case["call"]["params"]


def check_error(error, expect):
    e = expect["error"]
    assert isinstance(error, authbroker.RPCError)
    assert (error.code, error.message, error.data) == (e["code"], e["message"], e.get("data", {}))
    if e["code"] == -32001:
        assert isinstance(error, authbroker.LoginRequired) and error.provider == e["data"]["provider"]


def play(case, call):
    stub = StubDaemon(case)
    try:
        expect = case["expect"]
        if "result" in expect:
            got = call(stub.path)
            check_request(stub, case)
            return got
        if "error" in expect:
            with pytest.raises(authbroker.RPCError) as raised:
                call(stub.path)
            check_request(stub, case)
            check_error(raised.value, expect)
            return None
        kind = {"bad_response": authbroker.BadResponse, "connection_lost": authbroker.ConnectionLost}[expect["failure"]]
        with pytest.raises(kind) as raised:
            call(stub.path)
        check_request(stub, case)
        assert "eyJ" not in str(raised.value)
        return None
    finally:
        stub.stop()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_python_client_plays_the_case_with_its_generic_call(case):
    def call(path):
        with authbroker.Broker(path, timeout=10) as b:
            return b.call(case["call"]["method"], case["call"]["params"])
    got = play(case, call)
    if "result" in case["expect"]:
        assert got == case["expect"]["result"]


TOKEN_CASES = [c for c in CASES if c["call"]["method"] == "token.get"]


@pytest.mark.parametrize("case", TOKEN_CASES, ids=[c["name"] for c in TOKEN_CASES])
def test_python_client_plays_the_token_cases_with_get_token(case):
    p = case["call"]["params"]

    def call(path):
        return authbroker.get_token(p.get("resource"), scopes=p.get("scopes"), provider=p.get("provider"),
                                    account=p.get("account"), min_ttl=p.get("min_ttl"), params=p.get("params"),
                                    path=path, timeout=10)
    got = play(case, call)
    if "result" in case["expect"]:
        want = case["expect"]["result"]
        for member in ("access_token", "token_type", "expires_at", "scope", "resource", "provider", "account"):
            assert getattr(got, member) == want[member], member
        assert want["access_token"] not in repr(got)


def test_the_files_daemon_answers_are_the_real_daemons():
    """Every `daemon` case sent to a real authbrokerd: provider corp, not signed in."""
    d = Daemon(None, name="corp", store="memory")
    d.write_config(text='[daemon]\nstore = "memory"\n[providers.corp]\nissuer = "https://login.example.test"\n'
                        'client_id = "authbroker"\nresources = ["https://api.example.test"]\n')
    try:
        d.start()
        marked = [c for c in CASES if c.get("daemon")]
        assert marked
        for case in marked:
            answer = d.rpc(case["call"]["method"], case["call"]["params"])
            want = case["expect"]["error"]
            got = answer.get("error")
            assert got is not None, (case["name"], answer.keys())
            assert (got["code"], got["message"], got.get("data", {})) == (want["code"], want["message"], want.get("data", {})), case["name"]
    finally:
        d.cleanup()
