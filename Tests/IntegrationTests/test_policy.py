"""Who may ask: peer credentials and the [[allow]] rules."""
import os
import stat
import subprocess

from conftest import API, AUTHCTL, GIT, RPC, Daemon, decode_jwt
from policy_callers import PYTHON


def test_allowed_executable_gets_its_resource_and_nothing_else(policy_daemon):
    d = policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
resources = ["{API}"]
""")
    c = RPC(d.socket)
    ok = c.call("token.get", {"resource": API})
    assert "result" in ok, ok
    assert decode_jwt(ok["result"]["access_token"])[1]["aud"] == API
    refused = c.call("token.get", {"resource": GIT})
    assert refused["error"]["code"] == -32002
    assert PYTHON in refused["error"]["message"] and GIT in refused["error"]["message"]
    claims = c.call("account.whoami", {})
    assert claims["error"]["code"] == -32002
    assert "result" in c.call("account.list")  # management reveals no token
    c.close()

    r = d.ctl("token", "--resource", API)
    assert r.returncode == 5, r.stderr
    assert "forbidden by policy" in r.stderr and AUTHCTL in r.stderr
    assert "token refused by policy" in d.log_text()


def test_rule_for_authctl_and_claims(policy_daemon):
    d = policy_daemon(f"""
[[allow]]
exe = "{os.path.realpath(AUTHCTL)}"
resources = ["*"]
claims = true
""")
    assert d.ctl("token", "--resource", GIT).returncode == 0
    assert d.ctl("whoami").returncode == 0
    c = RPC(d.socket)
    assert c.call("token.get", {"resource": API})["error"]["code"] == -32002
    c.close()


def as_nobody(d, script):
    """Opens the daemon's socket to every user and gives the command that runs `script`
    (its argv[1]: the socket) as the user nobody."""
    os.chmod(d.dir, 0o755)
    os.chmod(d.socket, 0o666)
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", PYTHON, "-c", script, d.socket]


def test_a_process_of_another_uid_is_refused_even_with_a_loosened_socket(daemon_factory):
    d = daemon_factory(store="memory").start()
    probe = (
        "import json,socket,sys\n"
        "s=socket.socket(socket.AF_UNIX);s.settimeout(10);s.connect(sys.argv[1])\n"
        "try: s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon.status\"}\\n')\n"
        "except OSError: pass\n"  # closed at once: the refusal may already be there to read
        "data=b''\n"
        "while True:\n"
        "    try: chunk=s.recv(65536)\n"
        "    except OSError: break\n"  # a reset after the answer: the request was never read
        "    if not chunk: break\n"
        "    data+=chunk\n"
        "print(data.decode())\n"
    )
    r = subprocess.run(as_nobody(d, probe), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert '"result"' not in r.stdout
    assert "-32002" in r.stdout and "uid" in r.stdout
    assert "result" in d.rpc("daemon.status")  # its own user is still served
    assert stat.S_IMODE(os.stat(d.socket).st_mode) == 0o666  # the test really loosened it


def test_another_uid_can_neither_take_the_connection_slots_nor_flood_the_log(glewlwyd):
    d = Daemon(glewlwyd)
    d.write_config(text=f"""
[daemon]
store = "memory"
max_connections = 2
[providers.{d.name}]
issuer = "{glewlwyd.issuer}"
client_id = "{glewlwyd.client_id('authbroker')}"
""")
    try:
        d.start()
        # 40 connections from another user, each kept open on its side.
        hog = (
            "import socket,sys,time\n"
            "held=[]\n"
            "for _ in range(40):\n"
            "    s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);held.append(s)\n"
            "print('held',flush=True)\n"
            "time.sleep(30)\n"
        )
        p = subprocess.Popen(as_nobody(d, hog), stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "held"
            for _ in range(2):
                assert "result" in d.rpc("daemon.status"), "the user's own connections are still served"
        finally:
            p.kill()
            p.wait()
        refusals = [line for line in d.log_text().splitlines() if "refused a connection from another user" in line]
        assert 1 <= len(refusals) <= 2, refusals  # at most one line per 10 s
    finally:
        d.cleanup()
