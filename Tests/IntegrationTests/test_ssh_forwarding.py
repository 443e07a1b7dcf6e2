"""Beyond one machine: the daemon's socket forwarded over a real ssh connection.

A real OpenSSH server (Debian's sshd, support/sshd.py) runs on 127.0.0.1 from a temporary
folder with its own host key and authorized key; `ssh -R REMOTE:LOCAL` forwards the
daemon's socket to a path on the "remote" side, where the ssh session (its environment:
SSH_CONNECTION set, AUTHBROKER_SOCKET the forwarded path) runs the real authctl. Both ends
are this machine, but every byte goes through sshd and the ssh client as it would between
two hosts. Real daemon, real Glewlwyd. The notification server is a STUB
(support/stub_notifications.py) on the tests' private session bus."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import API, AUTHCTL, GIT, ROOT, RPC, fingerprint, token_for
from device_login import approve_device_login
from policy_callers import ASK_ONCE, PYTHON
from sshd import SSH, Sshd
from test_sign_in_on_demand import (finish_in_browser, notifications, on_demand_daemon,  # noqa: F401 (fixture)
                                    page_from, pending_sign_in, wait_until)


@pytest.fixture(scope="module")
def sshd():
    root = tempfile.mkdtemp(prefix="ab-sshd-", dir="/tmp")
    server = Sshd.start(root)
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


class Remote:
    """The remote side of one daemon: where its socket is forwarded to, and authctl there."""

    def __init__(self, sshd, d):
        self.sshd = sshd
        self.d = d
        folder = tempfile.mkdtemp(prefix="remote-", dir=sshd.root)  # removed with sshd's folder
        self.socket = os.path.join(folder, "authbroker.sock")
        self.forward = ["-R", f"{self.socket}:{d.socket}"]

    def env(self, **more):
        # What a user sets on the remote host: the forwarded socket; nothing else of ours.
        return {"AUTHBROKER_SOCKET": self.socket, "BROWSER": "", **more}

    def ctl(self, *args, forward=True, env=None, timeout=60):
        return self.sshd.ssh(self.forward if forward else [], [AUTHCTL, *args],
                             env=env if env is not None else self.env(), timeout=timeout)

    def popen(self, *args):
        return self.sshd.popen(self.forward, [AUTHCTL, *args], env=self.env())


def test_device_sign_in_and_tokens_from_the_remote_side(sshd, daemon_factory):
    d = daemon_factory(store="memory").start()
    remote = Remote(sshd, d)

    p = remote.popen("login", "--device", "--provider", d.name)
    approve_device_login(p, d.gl, d.client, "alice", d.log_text)

    r = remote.ctl("token", "--provider", d.name, "--resource", API)
    assert r.returncode == 0, r.stderr + sshd.log_text()[-2000:]
    assert re.fullmatch(r"[\x21-\x7e]+\n", r.stdout)
    # The token came from this daemon: the same cached token locally.
    local = d.ctl("token", "--provider", d.name, "--resource", API)
    assert fingerprint(local.stdout.strip()) == fingerprint(r.stdout.strip())

    status = remote.ctl("status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["running"] is True


def test_sign_in_on_demand_from_the_remote_side_names_the_forwarding_program(sshd, daemon_factory, glewlwyd, notifications):
    d = on_demand_daemon(daemon_factory)
    remote = Remote(sshd, d)
    p = remote.popen("token", "--wait-for-sign-in", "--provider", d.name, "--resource", API)
    seen = []
    url = page_from(p, seen)
    assert url == pending_sign_in(d)["authorization_url"]
    # The desktop notification on the daemon's side says who waits: the ssh client that
    # carries the remote program's connection, and that it came over a forwarded socket.
    assert wait_until(lambda: len(notifications.calls("Notify")) == 1), d.log_text()
    body = notifications.calls("Notify")[0]["body"]
    assert re.search(r"ssh \(pid \d+\)", body) and "forwarded" in body, body

    finish_in_browser(glewlwyd, url)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, "".join(seen) + err
    assert re.fullmatch(r"[\x21-\x7e]+\n", out)


def test_a_missing_forward_is_named_on_the_remote_side(sshd, daemon_factory):
    d = daemon_factory(store="memory").start()
    remote = Remote(sshd, d)
    # No -R: the socket path leads nowhere on the remote side.
    r = remote.ctl("token", "--provider", d.name, "--resource", API, forward=False)
    assert r.returncode == 3, r.stderr
    assert "ssh" in r.stderr and "forward" in r.stderr, r.stderr
    assert "-R" in r.stderr and "authbrokerd &" not in r.stderr, r.stderr

    # Nor AUTHBROKER_SOCKET, nor XDG_RUNTIME_DIR (sshd without PAM sets none).
    r = remote.ctl("token", "--resource", API, forward=False, env={})
    assert r.returncode == 3, r.stderr
    assert "forward" in r.stderr and "AUTHBROKER_SOCKET" in r.stderr, r.stderr


def test_the_client_libraries_name_a_missing_forward_too(sshd, daemon_factory):
    """clients/python in an ssh session without the forward: the advice is to check the
    forward, not to start a daemon on the remote host (which has none of the sign-ins)."""
    d = daemon_factory(store="memory").start()
    remote = Remote(sshd, d)
    code = ("import sys, authbroker\n"
            "try:\n    authbroker.get_token(sys.argv[1])\n"
            "except authbroker.DaemonNotRunning as e:\n    print(e)\n    sys.exit(3)\n")
    r = sshd.ssh([], [sys.executable, "-c", code, API], timeout=60,
                 env=remote.env(PYTHONPATH=os.path.join(ROOT, "clients", "python", "src")))
    assert r.returncode == 3, r.stderr
    assert "ssh session" in r.stdout and "forward" in r.stdout and "-R" in r.stdout, r.stdout
    assert "systemctl" not in r.stdout, r.stdout


def test_a_forwarded_rule_grants_what_comes_over_ssh_and_nothing_local(sshd, policy_daemon):
    d = policy_daemon(f"""
[[allow]]
forwarded = true
resources = ["{GIT}"]

[[allow]]
exe = "{os.path.realpath(AUTHCTL)}"
resources = ["{API}"]
""")
    remote = Remote(sshd, d)
    r = remote.ctl("token", "--resource", GIT)
    assert r.returncode == 0, r.stderr + d.log_text()
    # The remote authctl is not the local authctl's rule: over ssh, the caller is ssh.
    r = remote.ctl("token", "--resource", API)
    assert r.returncode == 5, r.stderr
    assert SSH in r.stderr and "forwarded" in r.stderr, r.stderr
    # The forwarded rule grants nothing to a local program.
    assert d.ctl("token", "--resource", GIT).returncode == 5
    assert d.ctl("token", "--resource", API).returncode == 0


def test_an_exe_rule_does_not_grant_forwarded_callers_and_says_how(sshd, policy_daemon):
    d = policy_daemon(f"""
[[allow]]
exe = "{os.path.realpath(AUTHCTL)}"
resources = ["*"]
""")
    r = Remote(sshd, d).ctl("token", "--resource", API)
    assert r.returncode == 5, r.stderr
    assert "forwarded = true" in r.stderr, r.stderr


def confirm_daemon(policy_daemon):
    return policy_daemon(f"""
[[allow]]
forwarded = true
confirm = true
resources = ["{API}"]
""")


def python_confirm_daemon(policy_daemon, daemon=""):
    """A rule that asks before serving this test's own python (the caller)."""
    return policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
confirm = true
resources = ["{API}"]
""", daemon=daemon)


def asked(notifications, d, count=1):
    assert wait_until(lambda: len(notifications.calls("Notify")) == count), d.log_text()
    return notifications.calls("Notify")[-1]


def test_confirm_asks_the_user_and_allow_serves_the_token(sshd, policy_daemon, notifications):
    d = confirm_daemon(policy_daemon)
    p = Remote(sshd, d).popen("token", "--resource", API)
    note = asked(notifications, d)
    assert re.search(r"ssh \(pid \d+\)", note["body"]) and "forwarded" in note["body"], note
    assert API in note["body"] and d.name in note["body"]
    assert "allow" in note["actions"] and "deny" in note["actions"], note
    # It stays until answered or taken back: the daemon's own timer, not the server's.
    assert note["expire_timeout"] == 0, note
    notifications.click(note["id"], "allow")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err + d.log_text()
    assert re.fullmatch(r"[\x21-\x7e]+\n", out)


def test_confirm_deny_is_a_clear_refusal(sshd, policy_daemon, notifications):
    d = confirm_daemon(policy_daemon)
    p = Remote(sshd, d).popen("token", "--resource", API)
    note = asked(notifications, d)
    notifications.click(note["id"], "deny")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 5 and out == "", err
    assert "refused" in err and "notification" in err, err


def test_confirm_is_remembered_for_the_connection_only(policy_daemon, notifications):
    d = python_confirm_daemon(policy_daemon)
    c = RPC(d.socket, timeout=30)
    c.send_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get", "params": {"resource": API}}) + "\n")
    note = asked(notifications, d)
    assert f"(pid {os.getpid()})" in note["body"] and "forwarded" not in note["body"], note
    notifications.click(note["id"], "allow")
    assert "result" in c.read(), d.log_text()
    # Asked once per connection: the second request on it is served without a question.
    assert "result" in c.call("token.get", {"resource": API})
    assert len(notifications.calls("Notify")) == 1
    c.close()
    # A new connection asks again; a notification closed without an answer is a denial.
    c = RPC(d.socket, timeout=30)
    c.send_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get", "params": {"resource": API}}) + "\n")
    note = asked(notifications, d, 2)
    notifications.close(note["id"])
    answer = c.read()
    assert answer["error"]["code"] == -32002 and "notification" in answer["error"]["message"], answer
    c.close()


def test_an_answer_that_comes_before_notify_returns_is_the_answer(policy_daemon, notifications):
    """The STUB notification server sends the click (then the dismissal) before its answer
    to Notify, as a server can when the user is as quick as the bus: the daemon, which learns
    the notification's id only from that answer, still takes it, and does not wait for its
    own timer (which would deny the first)."""
    d = python_confirm_daemon(policy_daemon, daemon="confirm_timeout = 20")
    notifications.answer_next_early("allow")
    c = RPC(d.socket, timeout=30)
    assert "result" in c.call("token.get", {"resource": API}), d.log_text()
    c.close()
    notifications.answer_next_early("close")
    c = RPC(d.socket, timeout=30)
    answer = c.call("token.get", {"resource": API})
    assert answer["error"]["code"] == -32002 and "notification" in answer["error"]["message"], answer
    assert "closed without an answer" in answer["error"]["message"], answer
    c.close()
    assert len(notifications.calls("Notify")) == 2


def test_confirm_shows_status_and_events_only_after_a_yes(policy_daemon, notifications):
    """A program only a confirm rule grants learns nothing of the tokens other programs use
    before the user says yes (STUB notification server): daemon.status lists no cached token
    of its resource and events.subscribe tells it of no refresh, without a question. Once
    the user allows its token on the connection, that connection sees it and its refreshes."""
    d = policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
confirm = true
resources = ["{API}"]

[[allow]]
exe = "{os.path.realpath(AUTHCTL)}"
resources = ["*"]
""")
    c = RPC(d.socket, timeout=30)
    assert c.call("events.subscribe", {"kinds": ["token_refreshed"]})["result"]["subscribed"] is True
    assert d.ctl("token", "--resource", API).returncode == 0  # authctl's token: refreshed, cached now
    # An event told of that refresh would be sent before the answer to a request made after it.
    status = c.call("daemon.status")
    assert "result" in status, "a program the user never allowed heard of authctl's refresh: " + json.dumps(status)
    shown = [t["resource"] for p in status["result"]["providers"] for a in p["accounts"] for t in a["tokens"]]
    assert shown == [], shown
    assert notifications.calls("Notify") == []
    c.send_line(json.dumps({"jsonrpc": "2.0", "id": 10, "method": "token.get", "params": {"resource": API}}) + "\n")
    notifications.click(asked(notifications, d)["id"], "allow")
    assert "result" in c.read(), d.log_text()
    status = c.call("daemon.status")["result"]
    assert [t["resource"] for p in status["providers"] for a in p["accounts"] for t in a["tokens"]] == [API]
    # Allowed now: the next refresh of its resource is told to it (authctl's GIT token
    # dropped the API token: one live access token per refresh token).
    assert d.ctl("token", "--resource", GIT).returncode == 0
    assert d.ctl("token", "--resource", API).returncode == 0
    event = c.read()
    assert event.get("params", {}).get("resource") == API, event
    c.close()


def test_a_rejected_token_is_dropped_without_a_confirm_question(policy_daemon, notifications):
    """STUB notification server. A program only a confirm rule grants hands back a token its
    server refused (`git credential reject`: a new process, so a new connection). Dropping
    it gives nothing out: the user is not asked "Allow a token …?" for it (a Deny would
    keep the refused token, served again on the next yes), and the next token is a new one."""
    d = policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
confirm = true
resources = ["{API}"]

[[allow]]
exe = "{os.path.realpath(AUTHCTL)}"
resources = ["*"]
""", daemon="confirm_timeout = 2")
    held = token_for(d, API)
    answer = d.rpc("token.reject", {"access_token": held})
    assert "result" in answer, answer
    assert notifications.calls("Notify") == [], "the user was asked to allow a token for a reject"
    assert fingerprint(token_for(d, API)) != fingerprint(held), "the rejected token was served again"


def test_confirm_is_answered_only_by_the_notification_server(policy_daemon, notifications):
    """STUB notification server. A process of the user that sends ActionInvoked "allow"
    itself (here gdbus, as the asking program could) does not answer the question: only
    the server that showed it does, and the user's Deny stands."""
    d = python_confirm_daemon(policy_daemon)
    c = RPC(d.socket, timeout=30)
    c.send_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get", "params": {"resource": API}}) + "\n")
    note = asked(notifications, d)
    # GVariant text: the id is a uint32 (a bare number would be an int32, which no one takes).
    for signal, args in (("ActionInvoked", [f"uint32 {note['id']}", "'allow'"]),
                         ("NotificationClosed", [f"uint32 {note['id']}", "uint32 2"])):
        subprocess.run(["gdbus", "emit", "--session", "--object-path", "/org/freedesktop/Notifications",
                        "--signal", f"org.freedesktop.Notifications.{signal}", *args], check=True, timeout=10)
    notifications.click(note["id"], "deny")
    answer = c.read()
    served = "result" in answer  # never printed: it would hold the token
    assert not served, "a forged Allow was taken for the user's: " + d.log_text()
    assert answer["error"]["code"] == -32002 and "you refused" in answer["error"]["message"], answer
    c.close()


def test_confirm_without_an_answer_in_time_is_a_denial(policy_daemon, notifications):
    d = python_confirm_daemon(policy_daemon, daemon="confirm_timeout = 1")
    c = RPC(d.socket, timeout=30)
    answer = c.call("token.get", {"resource": API})
    assert answer["error"]["code"] == -32002 and "no answer" in answer["error"]["message"], answer
    assert len(notifications.calls("Notify")) == 1
    # The unanswered question is taken back.
    assert wait_until(lambda: len(notifications.calls("CloseNotification")) == 1)
    c.close()


def test_confirm_without_a_notification_server_is_a_denial_that_says_why(policy_daemon):
    d = policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
confirm = true
resources = ["{API}"]

[[allow]]
exe = "{os.path.realpath(AUTHCTL)}"
resources = ["{API}"]
""")
    # authctl's rule asks nothing: the token is cached now.
    assert d.ctl("token", "--resource", API).returncode == 0
    # A cached token is no way around the question.
    answer = d.rpc("token.get", {"resource": API})
    assert answer["error"]["code"] == -32002 and "cannot ask you" in answer["error"]["message"], answer


def pythons(tmp_path, count):
    """`count` copies of this test's python, each another file (inode): another program
    to the rules and to the fair shares."""
    paths = []
    for i in range(count):
        path = str(tmp_path / f"python-{i}")
        shutil.copy2(PYTHON, path)
        paths.append(path)
    return paths


def confirm_rules(*exes):
    return "".join(f"""
[[allow]]
exe = "{exe}"
confirm = true
resources = ["{API}"]
""" for exe in exes)


def ask_from(python, d):
    """A process of `python` asking for a token once (ASK_ONCE): it waits for its answer."""
    return subprocess.Popen([python, "-c", ASK_ONCE, d.socket, API], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_no_more_than_eight_questions_wait_at_once(policy_daemon, notifications, tmp_path):
    # Many programs that open connection after connection cannot flood the desktop: two
    # questions each of four programs fill it, and a fifth program's first is refused.
    copies = pythons(tmp_path, 5)
    d = policy_daemon(confirm_rules(*copies))
    waiting = [ask_from(python, d) for python in copies[:4] for _ in range(2)]
    asked(notifications, d, 8)
    fifth = ask_from(copies[4], d)
    out, err = fifth.communicate(timeout=60)
    assert out.startswith("-32009 ") and "8 questions" in out, out + err
    assert len(notifications.calls("Notify")) == 8
    for note in notifications.calls("Notify"):
        notifications.click(note["id"], "deny")
    for p in waiting:
        out, err = p.communicate(timeout=60)
        assert out.startswith("-32002 "), out + err


def test_one_programs_flood_of_questions_never_refuses_another_programs_first(policy_daemon, notifications, tmp_path):
    """Fair shares (issue 38 item 3): a program may have 2 questions waiting on the desktop;
    its third is refused at once naming it, and another program's first question is still
    shown. Each program is its executable's file, so new processes of the flooding program
    count against the same share."""
    flooder, other = pythons(tmp_path, 2)
    d = policy_daemon(confirm_rules(flooder, other))
    flood = [ask_from(flooder, d) for _ in range(2)]
    asked(notifications, d, 2)
    third = ask_from(flooder, d)
    out, err = third.communicate(timeout=60)
    assert out.startswith("-32009 ") and "2 questions of python-0" in out and "other programs are still asked" in out, out + err
    assert len(notifications.calls("Notify")) == 2
    first = ask_from(other, d)
    note = asked(notifications, d, 3)
    assert "python-1 (pid" in note["body"], note
    notifications.click(note["id"], "allow")
    out, err = first.communicate(timeout=60)
    assert out.strip() == "served", out + err + d.log_text()
    for note in notifications.calls("Notify")[:2]:
        notifications.click(note["id"], "deny")
    for p in flood:
        out, err = p.communicate(timeout=60)
        assert out.startswith("-32002 "), out + err


def test_a_local_forward_to_the_daemon_is_served_to_sshd_as_a_forwarded_caller(sshd, policy_daemon):
    # `ssh -L` from another host: there the ssh client listens, and on the daemon's host
    # sshd connects to the daemon's socket. The forwarded rule matches sshd too.
    d = policy_daemon(f"""
[[allow]]
forwarded = true
resources = ["{GIT}"]
""")
    local = os.path.join(tempfile.mkdtemp(prefix="local-", dir=sshd.root), "authbroker.sock")
    forward = subprocess.Popen(sshd.client_args("-N", "-L", f"{local}:{d.socket}"), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: os.path.exists(local) or forward.poll() is not None), "no local forward"
        assert forward.poll() is None, forward.stderr.read()
        env = dict(d.env, AUTHBROKER_SOCKET=local)
        r = subprocess.run([AUTHCTL, "token", "--resource", GIT], env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr + d.log_text()
        r = subprocess.run([AUTHCTL, "token", "--resource", API], env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 5 and "sshd" in r.stderr, r.stderr
    finally:
        forward.terminate()
        forward.wait(10)
