"""Sign-in on demand: callers that would rather wait than hear "not signed in" share the
daemon's one pending browser sign-in, which a desktop notification announces.

Real daemon, real Glewlwyd (the browser is played through its login API, as in
test_sign_in), real authctl. The notification server is a STUB
(support/stub_notifications.py) on the tests' private session bus: no real notification
daemon runs headless. It records Notify calls and emits ActionInvoked as a click would."""
import json
import os
import re
import subprocess
import threading
import time

import pytest

from conftest import API, AUTHCTL, ROOT, RPC, fingerprint
from test_sign_in import follow, play_browser

STUB = os.path.join(os.path.dirname(__file__), "support", "stub_notifications.py")
# The stub needs PyGObject (Debian's python3-gi), which the system python has.
SYSTEM_PYTHON = "/usr/bin/python3"
KUBE_V1 = "client.authentication.k8s.io/v1"


class Notifications:
    """The STUB notification server: what it was asked to show, and a click on a button."""

    def __init__(self, proc, record):
        self.proc = proc
        self.record = record

    def calls(self, kind=None):
        try:
            with open(self.record) as f:
                entries = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return [e for e in entries if kind is None or e["call"] == kind]

    def click(self, nid, action="sign-in"):
        self.proc.stdin.write(f"invoke {nid} {action}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "invoked"

    def answer_next_early(self, action):
        """The next notification is answered (`action`, or "close") before Notify returns."""
        self.proc.stdin.write(f"early {action}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "early"

    def close(self, nid):
        """The user dismisses the notification without choosing an action."""
        self.proc.stdin.write(f"close {nid}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "closed"


@pytest.fixture
def notifications(tmp_path):
    record = tmp_path / "notifications.jsonl"
    proc = subprocess.Popen([SYSTEM_PYTHON, STUB, str(record)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready", "the STUB notification server did not start"
    yield Notifications(proc, str(record))
    proc.stdin.close()
    proc.wait(10)


def wait_until(predicate, bound=30.0):
    deadline = time.time() + bound
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def browser_recorder(d):
    """A $BROWSER that writes down the page it was asked to open."""
    opened = os.path.join(d.dir, "opened")
    script = os.path.join(d.dir, "browser")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> {opened}\n")
    os.chmod(script, 0o755)
    return script, opened


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def on_demand_daemon(daemon_factory, **env):
    extra = {"BROWSER": "", **env}
    d = daemon_factory(extra_env=extra)
    # Not run by systemd here: the notification's action starts the browser directly.
    d.env.pop("INVOCATION_ID", None)
    return d.start()


def waiting_token_get(d, seconds=120):
    """A token.get that will wait for a sign-in, sent and not yet answered."""
    c = RPC(d.socket, timeout=90)
    c.send_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get",
                            "params": {"provider": d.name, "resource": API, "wait_for_sign_in": seconds}}) + "\n")
    return c


def pending_sign_in(d):
    """The pending sign-in as a caller joining it sees it (login.start with join)."""
    answer = d.rpc("login.start", {"provider": d.name, "join": True})
    assert "result" in answer, answer
    return answer["result"]


def announced_with_a_recorded_browser(daemon_factory, notifications):
    """An on-demand daemon whose $BROWSER writes down the pages it opens, and a caller
    waiting for the sign-in a notification has announced: (daemon, waiter, pages file)."""
    d = on_demand_daemon(daemon_factory)
    script, opened = browser_recorder(d)
    d.stop()
    d.env["BROWSER"] = script
    d.start()
    waiter = waiting_token_get(d)
    assert wait_until(lambda: len(notifications.calls("Notify")) == 1), d.log_text()
    return d, waiter, opened


def finish_in_browser(glewlwyd, url):
    status, page = follow(play_browser(glewlwyd, "authbroker", url))
    assert status == 200 and "You are signed in" in page


def test_three_waiting_callers_share_one_sign_in_and_one_notification(daemon_factory, glewlwyd, notifications):
    d = on_demand_daemon(daemon_factory)
    waiters = [waiting_token_get(d) for _ in range(3)]
    assert wait_until(lambda: len(notifications.calls("Notify")) >= 1), d.log_text()
    start = pending_sign_in(d)
    assert start["joined"] is True and start["notified"] is True

    finish_in_browser(glewlwyd, start["authorization_url"])
    answers = [w.read() for w in waiters]
    for a in answers:
        assert a.get("result", {}).get("access_token"), a
        assert a["result"]["provider"] == d.name
    print("tokens:", [fingerprint(a["result"]["access_token"]) for a in answers])

    shown = notifications.calls("Notify")
    assert len(shown) == 1, shown
    assert d.log_text().count("browser sign-in started") == 1
    note = shown[0]
    assert note["summary"] == f"Sign in to {d.name}"
    assert "default" in note["actions"] and "Sign in" in note["actions"]
    # The notification names the provider only: no page, state, code or token.
    assert "http" not in note["body"] and "state=" not in note["body"]
    # Withdrawn once the sign-in is over.
    assert wait_until(lambda: [c["id"] for c in notifications.calls("CloseNotification")] == [note["id"]])


def test_a_caller_that_does_not_wait_hears_login_required_at_once(daemon_factory, glewlwyd, notifications):
    d = on_demand_daemon(daemon_factory)
    waiter = waiting_token_get(d)
    assert wait_until(lambda: len(notifications.calls("Notify")) == 1), d.log_text()

    c = RPC(d.socket, timeout=10)
    plain = c.call("token.get", {"provider": d.name, "resource": API})
    assert plain["error"]["code"] == -32001, plain
    c.close()
    r = d.ctl("token", "--provider", d.name, "--resource", API, timeout=20)
    assert r.returncode == 4 and "not signed in" in r.stderr

    # The pending sign-in is untouched: no second one, and it still serves its waiter.
    finish_in_browser(glewlwyd, pending_sign_in(d)["authorization_url"])
    assert waiter.read()["result"]["access_token"]
    assert len(notifications.calls("Notify")) == 1


def test_the_notifications_sign_in_button_opens_the_page_with_BROWSER(daemon_factory, glewlwyd, notifications):
    d, waiter, opened = announced_with_a_recorded_browser(daemon_factory, notifications)
    url = pending_sign_in(d)["authorization_url"]
    assert read_lines(opened) == []  # nothing opens before the user asks

    notifications.click(notifications.calls("Notify")[0]["id"], "sign-in")
    assert wait_until(lambda: read_lines(opened) == [url]), d.log_text()
    # A click on another notification's id opens nothing.
    notifications.click(9999, "default")

    finish_in_browser(glewlwyd, read_lines(opened)[0])
    assert waiter.read()["result"]["access_token"]
    assert read_lines(opened) == [url]


def exec_info(interactive):
    return json.dumps({"apiVersion": KUBE_V1, "kind": "ExecCredential", "spec": {"interactive": interactive}})


def page_from(proc, seen):
    """The sign-in page authctl prints on stderr (its own line)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("http"):
            return line.strip()
    raise AssertionError("authctl printed no sign-in page:\n" + "".join(seen))


def test_kube_credential_waits_for_a_sign_in_only_when_kubectl_is_interactive(daemon_factory, glewlwyd, notifications):
    d = on_demand_daemon(daemon_factory)
    args = [AUTHCTL, "kube-credential", "--provider", d.name, "--resource", API]
    r = subprocess.run(args, env=dict(d.env, KUBERNETES_EXEC_INFO=exec_info(False)), capture_output=True, text=True,
                       timeout=20, stdin=subprocess.DEVNULL)
    assert r.returncode == 4 and "not signed in" in r.stderr and r.stdout == ""
    assert notifications.calls("Notify") == []  # nobody asked to wait: nothing shown

    p = subprocess.Popen(args, env=dict(d.env, KUBERNETES_EXEC_INFO=exec_info(True)), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    seen = []
    url = page_from(p, seen)
    assert url == pending_sign_in(d)["authorization_url"]
    finish_in_browser(glewlwyd, url)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, "".join(seen) + err
    credential = json.loads(out)
    assert credential["apiVersion"] == KUBE_V1 and credential["status"]["token"]
    assert len(notifications.calls("Notify")) == 1
    # The notification names the program that waits, so the user knows who asks.
    body = notifications.calls("Notify")[0]["body"]
    assert f"authctl (pid {p.pid})" in body and "forwarded" not in body, body


def test_without_a_notification_server_authctl_shows_and_opens_the_page(daemon_factory, glewlwyd):
    d = on_demand_daemon(daemon_factory)
    script, opened = browser_recorder(d)
    env = dict(d.env, BROWSER=script)
    p = subprocess.Popen([AUTHCTL, "token", "--wait-for-sign-in", "--provider", d.name, "--resource", API], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    seen = []
    url = page_from(p, seen)
    # A second waiting program joins the same sign-in: it shows the page but opens no second tab.
    q = subprocess.Popen([AUTHCTL, "token", "--wait-for-sign-in", "--provider", d.name, "--resource", API], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert page_from(q, []) == url
    assert wait_until(lambda: read_lines(opened) == [url])

    finish_in_browser(glewlwyd, url)
    for proc in (p, q):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, "".join(seen) + err
        assert re.fullmatch(r"[\x21-\x7e]+\n", out)
    assert read_lines(opened) == [url]
    assert "no desktop notification for the sign-in" in d.log_text()


def lines_until(stream, pattern, bound=20.0):
    """Reads `stream` until a line matches `pattern`: the match, or None when none came
    within `bound` s (the reading goes on in the background, so nothing blocks)."""
    found = []

    def read():
        for line in stream:
            m = re.search(pattern, line)
            if m:
                found.append(m)
                return

    threading.Thread(target=read, daemon=True).start()
    wait_until(lambda: found, bound)
    return found[0] if found else None


def test_wait_for_sign_in_that_joins_a_device_sign_in_says_how_to_finish_it(daemon_factory, glewlwyd):
    """`authctl login --device` is waiting for its code in one terminal; a program with
    --wait-for-sign-in joins that sign-in and must tell its user where to enter which code,
    not wait in silence."""
    d = on_demand_daemon(daemon_factory)
    login = subprocess.Popen([AUTHCTL, "login", "--device", "--provider", d.name], env=d.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    shown = lines_until(login.stderr, r"enter the code ([A-Za-z0-9-]+)")
    assert shown, d.log_text()
    waiter = subprocess.Popen([AUTHCTL, "token", "--wait-for-sign-in", "--provider", d.name, "--resource", API],
                              env=d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL)
    told = lines_until(waiter.stderr, r"enter the code ([A-Za-z0-9-]+)")
    # Approve either way, so that neither process is left waiting.
    d.gl.approve_device(d.gl.login_session("alice"), shown.group(1), d.gl.client_id(d.client),
                        ["openid", "profile", "email", "offline_access"])
    login.communicate(timeout=60)
    out, err = waiter.communicate(timeout=60)
    assert login.returncode == 0 and waiter.returncode == 0, err + d.log_text()
    assert told and told.group(1) == shown.group(1), "the waiting program did not say which code to enter"


def test_authctl_login_replaces_a_pending_sign_in_and_its_waiters_follow(daemon_factory, glewlwyd, notifications):
    d = on_demand_daemon(daemon_factory)
    waiter = waiting_token_get(d)
    assert wait_until(lambda: len(notifications.calls("Notify")) == 1), d.log_text()
    first = pending_sign_in(d)

    c = RPC(d.socket)
    newer = c.call("login.start", {"provider": d.name, "flow": "browser"})["result"]
    assert newer["login_id"] != first["login_id"]
    finish_in_browser(glewlwyd, newer["authorization_url"])
    assert c.call("login.wait", {"login_id": newer["login_id"]})["result"]["account"]["state"] == "ready"
    assert waiter.read()["result"]["access_token"]


def test_notifications_off_in_config_show_nothing_and_authctl_opens_the_page(daemon_factory, glewlwyd, notifications):
    d = daemon_factory(extra_env={"BROWSER": ""})
    d.env.pop("INVOCATION_ID", None)
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text.replace("[daemon]\n", "[daemon]\nsign_in_notifications = false\n", 1))
    d.start()
    script, opened = browser_recorder(d)
    p = subprocess.Popen([AUTHCTL, "token", "--wait-for-sign-in", "--provider", d.name, "--resource", API],
                         env=dict(d.env, BROWSER=script), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    url = page_from(p, [])
    assert pending_sign_in(d)["notified"] is False
    assert wait_until(lambda: read_lines(opened) == [url])
    finish_in_browser(glewlwyd, url)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert notifications.calls() == []


def test_clicking_the_notification_itself_opens_the_page(daemon_factory, glewlwyd, notifications):
    d, waiter, opened = announced_with_a_recorded_browser(daemon_factory, notifications)
    notifications.click(notifications.calls("Notify")[0]["id"], "default")
    assert wait_until(lambda: len(read_lines(opened)) == 1), d.log_text()
    finish_in_browser(glewlwyd, read_lines(opened)[0])
    assert waiter.read()["result"]["access_token"]
