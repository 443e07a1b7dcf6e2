"""The browser sign-in's loopback listener and the sign-in's life around it: stray and
forged requests, a client that stalls, a fixed redirect_port used twice in a row, Ctrl-C
on `authctl login`, a second login replacing the first, $BROWSER, the end-session URL at
logout, and a daemon restarted during a sign-in.

The browser is played through Glewlwyd's own login API (test_sign_in.play_browser);
Glewlwyd matches redirect URIs exactly, port included, so every port is registered first."""
import os
import re
import signal
import socket
import stat
import subprocess
import threading
import time
import urllib.parse

from conftest import AUTHCTL, RPC, Daemon
from test_sign_in import follow, play_browser, start_browser_login, with_query


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fixed_port_daemon(daemon_factory, port):
    d = daemon_factory()
    with open(d.config, "a") as f:
        f.write(f"redirect_port = {port}\n")
    return d.start()


def redirect_port(start):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(start["authorization_url"]).query)
    return urllib.parse.urlsplit(q["redirect_uri"][0]).port


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def follow_as_a_browser(location):
    """The redirect followed as a browser does it: on a keep-alive connection the browser
    leaves open, so the daemon's side closes first (and its port has connections in
    TIME_WAIT afterwards). Returns the HTTP status."""
    parts = urllib.parse.urlsplit(location)
    s = socket.create_connection((parts.hostname, parts.port), timeout=30)
    s.sendall(f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: keep-alive\r\n\r\n".encode())
    answer = b""
    while chunk := s.recv(65536):
        answer += chunk
    s.close()
    return int(answer.split(b" ", 2)[1])


def wait_until(predicate, bound=20.0):
    """Polls until the predicate holds; False when it never did within the bound."""
    deadline = time.time() + bound
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_wrong_or_missing_state_gets_400_and_the_real_redirect_still_signs_in(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    c, start = start_browser_login(d)
    location = play_browser(glewlwyd, "authbroker", start["authorization_url"])
    # Any local program (or a web page) can send GETs to the port: none of them ends the sign-in.
    status, page = follow(with_query(location, state="forged-" + "x" * 40, error="access_denied"))
    assert status == 400 and "not for the sign-in in progress" in page
    assert follow(with_query(location, state=None))[0] == 400
    assert follow(with_query(location, state=""))[0] == 400
    port = redirect_port(start)
    assert follow(f"http://127.0.0.1:{port}/favicon.ico")[0] == 404
    assert follow(f"http://127.0.0.1:{port}/")[0] == 404

    status, page = follow(location)
    assert status == 200 and "You are signed in" in page
    done = c.call("login.wait", {"login_id": start["login_id"]})
    assert done["result"]["account"]["state"] == "ready", done
    assert not listening(port)  # the listener is gone once the sign-in is over


def raw_exchange(port, data):
    """Sends bytes to the listener as they are and reads until it closes: (status line,
    headers in lower case, body); the status line is None when it closed without a word."""
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    s.sendall(data)
    answer = b""
    try:
        while chunk := s.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    s.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict((k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:]))
    return (lines[0] or None), headers, body


def test_what_is_not_a_browsers_get_is_refused_and_the_redirect_still_signs_in(daemon_factory, glewlwyd):
    """Any local program can write to the sign-in's port: whatever it sends gets a plain
    HTTP refusal at once (not a wait for the head timeout) and leaves the sign-in waiting."""
    d = daemon_factory().start()
    c, start = start_browser_login(d)
    location = play_browser(glewlwyd, "authbroker", start["authorization_url"])
    port = redirect_port(start)
    query = urllib.parse.urlsplit(location).query

    status, headers, body = raw_exchange(port, f"POST /callback?{query} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}".encode())
    assert status == "HTTP/1.1 405 Method Not Allowed" and headers["allow"] == "GET" and body == b""
    for refused in [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS handshake, no line end
                    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
                    f"GET /callback?{query} HTTP/1.1\r\nHost : x\r\n\r\n".encode(),
                    b"GET /callback?" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n"]:
        status, headers, _ = raw_exchange(port, refused)
        assert status == "HTTP/1.1 400 Bad Request", refused[:40]
        assert headers["connection"] == "close" and headers["cache-control"] == "no-store"

    status, page = follow(location)
    assert status == 200 and "You are signed in" in page
    assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["account"]["state"] == "ready"


def test_a_stalled_client_does_not_hold_up_the_redirect(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    c, start = start_browser_login(d)
    location = play_browser(glewlwyd, "authbroker", start["authorization_url"])
    stop = threading.Event()

    def trickle():
        # A request head that never ends, one byte a second.
        s = socket.create_connection(("127.0.0.1", redirect_port(start)))
        s.sendall(b"GET /callback?state=x HTTP/1.1\r\n")
        try:
            while not stop.wait(1):
                s.sendall(b"X")
        except OSError:
            pass  # closed by the listener: it gives a head only so long
        finally:
            s.close()

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    try:
        time.sleep(0.5)
        status, _ = follow(location)
        assert status == 200
        assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["account"]["state"] == "ready"
    finally:
        stop.set()
        t.join(5)


def test_idle_connections_filling_the_listener_do_not_break_the_redirect(daemon_factory, glewlwyd):
    """Any local process may connect to the sign-in's port: 40 connections that send
    nothing (more than the listener's 32) must not cost the browser its redirect."""
    d = daemon_factory().start()
    c, start = start_browser_login(d)
    location = play_browser(glewlwyd, "authbroker", start["authorization_url"])
    idle = [socket.create_connection(("127.0.0.1", redirect_port(start)), timeout=10) for _ in range(40)]
    try:
        time.sleep(0.3)
        status, _ = follow(location)
        assert status == 200
        assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["account"]["state"] == "ready"
    finally:
        for s in idle:
            s.close()


def test_provider_error_with_the_right_state_ends_the_sign_in_on_an_escaped_page(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    c, start = start_browser_login(d)
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(start["authorization_url"]).query)
    location = q["redirect_uri"][0] + "?" + urllib.parse.urlencode({
        "state": q["state"][0], "error": "access_denied", "error_description": "<script>alert(1)</script> denied"})
    status, page = follow(location)
    assert status == 400 and "Sign-in failed" in page and "access_denied" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert f"authctl login --provider {d.name}" in page
    assert "prefers-color-scheme:dark" in page and "http://" not in page and "https://" not in page
    done = c.call("login.wait", {"login_id": start["login_id"]})
    assert done["error"]["code"] == -32007 and "access_denied" in done["error"]["message"]


def test_two_sign_ins_in_a_row_on_a_fixed_redirect_port(daemon_factory, glewlwyd):
    port = free_port()
    d = fixed_port_daemon(daemon_factory, port)
    for user in ("alice", "bob"):
        c, start = start_browser_login(d)
        assert redirect_port(start) == port
        assert follow_as_a_browser(play_browser(glewlwyd, "authbroker", start["authorization_url"], user)) == 200
        assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["account"]["state"] == "ready"
        c.close()
    names = sorted(a["username"] for a in d.rpc("account.list")["result"]["accounts"])
    assert names == ["alice@example.test", "bob@example.test"]


def test_two_sign_ins_started_at_once_on_a_fixed_redirect_port_are_not_another_program(daemon_factory, glewlwyd):
    """Two `authctl login` (or a login and a program waiting for a sign-in) in the same
    instant, with a fixed redirect_port: the newer replaces the older, as one after the
    other does; neither may fail because "another program holds that port", when the
    program is authbroker's own sign-in."""
    d = fixed_port_daemon(daemon_factory, free_port())
    for _ in range(15):
        barrier = threading.Barrier(2)
        answers = []

        def start():
            c = RPC(d.socket, timeout=30)
            barrier.wait()
            answers.append(c.call("login.start", {"provider": d.name}))
            c.close()

        threads = [threading.Thread(target=start) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        refused = [a["error"]["message"] for a in answers if "error" in a]
        assert not refused, refused
        assert len(answers) == 2
    # One of the two is left waiting, on the fixed port.
    assert listening(redirect_port(answers[-1]["result"]))


def start_authctl_login(d, *args, env=None):
    """`authctl login` as a user runs it; returns (process, the lines it printed up to the URL)."""
    p = subprocess.Popen([AUTHCTL, "login", "--provider", d.name, *args], env=env or d.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    seen = []
    while True:
        line = p.stderr.readline()
        assert line, "authctl login printed no URL:\n" + "".join(seen) + d.log_text()
        seen.append(line)
        if line.startswith("http"):
            return p, seen


def test_ctrl_c_on_authctl_login_ends_the_sign_in_and_frees_the_port(daemon_factory):
    d = daemon_factory().start()
    p, seen = start_authctl_login(d, "--no-browser")
    url = seen[-1].strip()
    port = redirect_port({"authorization_url": url})
    assert listening(port)
    p.send_signal(signal.SIGINT)
    p.wait(10)
    assert wait_until(lambda: not listening(port)), "the sign-in's port is still open after authctl went away\n" + d.log_text()
    assert d.rpc("account.list")["result"]["accounts"] == []


def test_a_second_login_replaces_the_first_and_takes_its_fixed_port(daemon_factory, glewlwyd):
    port = free_port()
    d = fixed_port_daemon(daemon_factory, port)
    first, one = start_browser_login(d)
    first.send_line('{"jsonrpc":"2.0","id":7,"method":"login.wait","params":{"login_id":"%s"}}\n' % one["login_id"])
    second, two = start_browser_login(d)
    assert redirect_port(two) == port
    old = first.read()
    assert old["id"] == 7 and old["error"]["code"] == -32007 and "replaced" in old["error"]["message"]
    status, _ = follow(play_browser(glewlwyd, "authbroker", two["authorization_url"]))
    assert status == 200
    assert second.call("login.wait", {"login_id": two["login_id"]})["result"]["account"]["state"] == "ready"


def browser_script(d, body):
    path = os.path.join(d.dir, "browser.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, stat.S_IRWXU)
    return path


def test_browser_variable_is_honoured_in_order(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    record = os.path.join(d.dir, "opened")
    script = browser_script(d, f'printf "%s\\n" "$2" > {record}')
    env = {k: v for k, v in d.env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["BROWSER"] = f"no-such-browser-{d.name}:{script} --new-tab %s"
    p, seen = start_authctl_login(d, env=env)
    url = seen[-1].strip()
    for _ in range(5):
        line = p.stderr.readline()
        seen.append(line)
        if "opened in your browser" in line:
            break
    assert any("opened in your browser" in line for line in seen), "".join(seen)
    with open(record) as f:
        assert f.read().strip() == url  # %s became the URL; the first command was skipped
    status, _ = follow(play_browser(glewlwyd, "authbroker", url))
    out, err = p.communicate(timeout=60)
    assert status == 200 and p.returncode == 0 and "Signed in" in out, err


def test_a_failing_browser_is_reported_and_the_sign_in_waits(daemon_factory):
    """The browser's failure is said, and the sign-in goes on waiting (for the URL copied by
    hand). What authctl adds after 30 s of silence is AuthctlTests.SilentBrowserTests': this
    test does not wait for it."""
    d = daemon_factory().start()
    env = dict(d.env, BROWSER=browser_script(d, "exit 3"))
    p, seen = start_authctl_login(d, env=env)
    try:
        text = "".join(seen)
        deadline = time.time() + 30
        while "exited with status 3" not in text and time.time() < deadline:
            text += p.stderr.readline()
        assert "could not open a browser" in text and "exited with status 3" in text
        assert "opened in your browser" not in text
        time.sleep(0.5)
        assert p.poll() is None, "the sign-in still waits"
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(10)


def test_logout_shows_the_end_session_url_when_revocation_fails(daemon_factory, glewlwyd):
    d = daemon_factory().start()  # the public client: Glewlwyd lets it revoke nothing (401)
    c, start = start_browser_login(d)
    assert follow(play_browser(glewlwyd, "authbroker", start["authorization_url"]))[0] == 200
    assert "result" in c.call("login.wait", {"login_id": start["login_id"]})
    r = d.ctl("logout", "--provider", d.name, "--no-browser")
    assert r.returncode == 0, r.stderr
    assert "could not revoke" in r.stdout
    url = r.stderr.strip().splitlines()[-1]
    assert url.startswith(glewlwyd.end_session_endpoint), r.stderr
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert q["client_id"] == [glewlwyd.client_id("authbroker")] and "id_token_hint" not in q


def test_a_daemon_restarted_during_a_sign_in_keeps_its_socket(glewlwyd):
    old = Daemon(glewlwyd)
    new = Daemon(glewlwyd, name=old.name)
    new.socket, new.env, new.config = old.socket, old.env, old.config
    try:
        old.start()
        c, start = start_browser_login(old)
        c.send_line('{"jsonrpc":"2.0","id":9,"method":"login.wait","params":{"login_id":"%s"}}\n' % start["login_id"])
        time.sleep(0.3)
        old.proc.send_signal(signal.SIGTERM)
        # The old daemon stops accepting at once but lingers over the pending sign-in.
        assert wait_until(lambda: not _accepts(old.socket), bound=10)
        new.start()
        old.proc.wait(30)
        assert os.path.exists(old.socket), "the old daemon removed the new daemon's socket"
        assert new.status()["pid"] == new.proc.pid
        # The old daemon told its waiter why the sign-in ended, and stopped cleanly.
        answer = c.read()
        assert answer["id"] == 9 and "stopped during the sign-in" in answer["error"]["message"]
        assert old.proc.returncode == 0 and "ERROR" not in old.log_text()
    finally:
        old.cleanup()
        new.cleanup()


def _accepts(path):
    try:
        RPC(path, timeout=2).close()
        return True
    except OSError:
        return False


def test_the_signed_in_page_names_the_account_and_provider(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    c, start = start_browser_login(d)
    status, page = follow(play_browser(glewlwyd, "authbroker", start["authorization_url"]))
    assert status == 200 and page.startswith("<!doctype html>")
    assert "authbroker" in page and d.name in page and "alice@example.test" in page
    assert re.search(r"<title>Signed in", page) and "prefers-color-scheme:dark" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)  # no external assets
    assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["account"]["state"] == "ready"
