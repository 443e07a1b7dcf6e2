"""Who may ask: peer credentials and the [[allow]] rules."""
import os
import stat
import subprocess
import time

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
        # The front door hands another user's connections to the event loop, which refuses
        # and logs them on its own time: the user's own requests, answered by the front
        # door, can be done first on a loaded machine (one clean-clone run read no line yet).
        deadline = time.monotonic() + 15
        while True:
            refusals = [line for line in d.log_text().splitlines() if "refused a connection from another user" in line]
            if refusals or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert 1 <= len(refusals) <= 2, refusals  # at most one line per 10 s
    finally:
        d.cleanup()


def test_under_rules_status_and_events_show_a_caller_only_what_it_may_get(policy_daemon):
    """Under rules a program learns nothing of the tokens other programs use: which
    resources, when they were refreshed, when they expire."""
    d = policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
resources = ["{API}"]

[[allow]]
exe = "{os.path.realpath(AUTHCTL)}"
resources = ["*"]
""")
    sub = RPC(d.socket)
    assert sub.call("events.subscribe", {"kinds": ["token_refreshed"]})["result"]["subscribed"] is True
    c = RPC(d.socket)
    assert "result" in c.call("token.get", {"resource": API})
    assert d.ctl("token", "--resource", GIT).returncode == 0  # another program's token, cached now
    status = c.call("daemon.status")["result"]
    shown = [t["resource"] for p in status["providers"] for a in p["accounts"] for t in a["tokens"]]
    assert GIT not in shown, shown
    # authctl, which may have every token, sees it.
    r = d.ctl("status", "--json")
    assert r.returncode == 0 and GIT in r.stdout, r.stdout
    # The git token's refresh was not told to this subscriber: its next events are its own.
    # (One live access token per refresh token here: the git token's refresh dropped the
    # API token, so this is a refresh too.)
    assert "result" in c.call("token.get", {"resource": API})
    first, second = sub.read(), sub.read()
    assert [first["params"]["resource"], second["params"]["resource"]] == [API, API], (first, second)
    c.close()
    sub.close()


def test_rules_without_yama_are_warned_about_at_start(policy_daemon, daemon_factory):
    """Without Yama (this machine has no /proc/sys/kernel/yama) any process of the user may
    ptrace an allowed program and take what it is given: the daemon says so at start when
    rules are in force, and not otherwise."""
    assert not os.path.exists("/proc/sys/kernel/yama/ptrace_scope")
    d = policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
resources = ["{API}"]
""")
    assert "ptrace_scope" in d.log_text()
    plain = daemon_factory(store="memory").start()
    assert "ptrace_scope" not in plain.log_text()
