"""`authctl login --terminal`: the daemon drives the sign-in and asks its questions through
`login.wait`; authctl asks the user and answers with `login.answer`. The password grant
(`password_grant = true`) against the real Glewlwyd, client authbroker-password, answered
from a pipe and from a pseudo-terminal (secrets typed there are not echoed). The typed
password must appear in no output, log line or file.

The OAuth 2.0 for First-Party Applications draft (the authorization challenge endpoint)
against a STUB provider (support/stub_first_party.py): neither Glewlwyd nor any provider run
here implements the draft. The STUB asks user name, password, a code sent by e-mail and an
MFA code, then gives a code the daemon redeems with its PKCE verifier."""
import json
import os
import pty
import select
import signal
import subprocess
import termios
import time

import pytest

import stub_first_party as fpa
from conftest import API, AUTHCTL, RPC, Daemon, files_outside_the_keyring
from test_faults import stub_config


def password_daemon(gl, password_grant=True):
    d = Daemon(gl, client="authbroker-password")
    with open(d.config, "a") as f:
        f.write(f"password_grant = {'true' if password_grant else 'false'}\n")
    return d.start()


def login_from_pipe(d, answers, *args):
    return subprocess.run([AUTHCTL, "login", "--terminal", "--provider", d.name, *args], env=d.env,
                          input="".join(a + "\n" for a in answers), capture_output=True, text=True, timeout=60)


def assert_nowhere(secret, d, *texts):
    for text in texts + (d.log_text(),):
        assert secret not in text
    for path, data in files_outside_the_keyring(d.dir):
        assert secret.encode() not in data, path


def test_password_grant_from_a_pipe_signs_in_and_keeps_no_password(glewlwyd_static):
    gl = glewlwyd_static
    d = password_daemon(gl)
    try:
        password = gl.user_password("alice")
        r = login_from_pipe(d, ["alice", password])
        assert r.returncode == 0, f"{r.stderr}\n{d.log_text()}"
        assert "User name at" in r.stderr and "Password" in r.stderr
        assert f"Signed in to {d.name} as alice@" in r.stdout
        # The account's refresh token works. (Glewlwyd's password grant ignores `resource`,
        # which the daemon sends: its grant is for the default audience only, and a token
        # for API is refused with invalid_target — docs/providers.md.)
        token = d.rpc("token.get", {})
        assert "result" in token, token
        narrowed = d.rpc("token.get", {"resource": API})
        assert narrowed["error"]["data"]["oauth_error"] == "invalid_target", narrowed
        assert d.rpc("account.list")["result"]["accounts"][0]["username"].startswith("alice")
        assert_nowhere(password, d, r.stdout, r.stderr)
    finally:
        d.cleanup()


def test_wrong_password_is_one_sentence_and_not_repeated(glewlwyd_static):
    d = password_daemon(glewlwyd_static)
    try:
        wrong = "not-alices-password-4711"
        r = login_from_pipe(d, ["alice", wrong])
        assert r.returncode != 0
        assert "the user name or password is wrong" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()[-1:]) == 1
        assert d.rpc("account.list")["result"]["accounts"] == []
        assert_nowhere(wrong, d, r.stdout, r.stderr)
    finally:
        d.cleanup()


def test_without_password_grant_the_terminal_sign_in_says_what_to_set(glewlwyd_static):
    d = password_daemon(glewlwyd_static, password_grant=False)
    try:
        r = login_from_pipe(d, [])
        assert r.returncode != 0
        assert "password_grant = true" in r.stderr and "authctl login --device" in r.stderr, r.stderr
    finally:
        d.cleanup()


def test_input_that_ends_early_fails_plainly(glewlwyd_static):
    d = password_daemon(glewlwyd_static)
    try:
        r = login_from_pipe(d, ["alice"])
        assert r.returncode != 0
        assert "input ended" in r.stderr, r.stderr
    finally:
        d.cleanup()


def test_terminal_sign_ins_left_at_a_question_do_not_lock_out_the_next(glewlwyd_static):
    """Five times the user leaves `authctl login --terminal` at the password question (input
    that ends, as Ctrl-C there: no login.wait is waiting then). The sixth sign-in starts at
    once and signs in: a new `authctl login` replaces the one in progress (docs/sign-in.md)."""
    gl = glewlwyd_static
    d = password_daemon(gl)
    try:
        for _ in range(5):
            left = login_from_pipe(d, ["alice"])
            assert "input ended" in left.stderr, left.stderr
        r = login_from_pipe(d, ["alice", gl.user_password("alice")])
        assert r.returncode == 0, r.stderr
        assert f"Signed in to {d.name} as alice@" in r.stdout
    finally:
        d.cleanup()


def test_a_program_waiting_for_a_sign_in_joins_the_terminal_sign_in_in_progress(glewlwyd_static):
    """While the user answers `authctl login --terminal`, a program that would rather wait
    for a sign-in (login.start with join, then token.get with wait_for_sign_in) joins that
    sign-in (docs/protocol.md: "the provider's sign-in in progress … (any flow)") instead
    of starting a browser sign-in that cancels the user's."""
    gl = glewlwyd_static
    d = password_daemon(gl)
    try:
        c = RPC(d.socket)
        start = c.call("login.start", {"provider": d.name, "flow": "terminal"})["result"]
        assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["prompt"]["name"] == "username"
        joined = d.rpc("login.start", {"provider": d.name, "join": True})
        assert "result" in joined, joined.get("error")
        same = joined["result"]["login_id"] == start["login_id"]
        assert same and joined["result"]["joined"] is True, f"a {joined['result']['flow']} sign-in was started instead"
        waiter = RPC(d.socket, timeout=90)
        waiter.send_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get",
                                     "params": {"provider": d.name, "wait_for_sign_in": 60}}) + "\n")
        for answer in ["alice", gl.user_password("alice")]:
            assert c.call("login.answer", {"login_id": start["login_id"], "value": answer})["result"]["accepted"]
            step = c.call("login.wait", {"login_id": start["login_id"]})
        assert step["result"]["account"]["state"] == "ready", step.get("error")
        assert "access_token" in waiter.read().get("result", {})
    finally:
        d.cleanup()


def test_a_program_that_stops_waiting_leaves_the_terminal_sign_in_to_its_user(glewlwyd_static):
    """A program that joined the terminal sign-in and stops waiting (its wait_for_sign_in
    runs out) while the user types the password does not cancel the user's sign-in: the
    user's authctl waits for no answer while they type, so the program is no last waiter."""
    gl = glewlwyd_static
    d = password_daemon(gl)
    try:
        c = RPC(d.socket)
        start = c.call("login.start", {"provider": d.name, "flow": "terminal"})["result"]
        assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["prompt"]["name"] == "username"
        assert c.call("login.answer", {"login_id": start["login_id"], "value": "alice"})["result"]["accepted"]
        assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["prompt"]["name"] == "password"
        gave_up = d.rpc("token.get", {"provider": d.name, "wait_for_sign_in": 1})
        assert gave_up["error"]["code"] == -32001, gave_up.get("error")
        answered = c.call("login.answer", {"login_id": start["login_id"], "value": gl.user_password("alice")})
        assert "result" in answered, answered.get("error")
        step = c.call("login.wait", {"login_id": start["login_id"]})
        assert step.get("result", {}).get("account", {}).get("state") == "ready", step.get("error")
    finally:
        d.cleanup()


def test_an_answer_after_the_sign_in_ended_says_why_it_ended(glewlwyd_static):
    """The user types the password after the terminal sign-in timed out: authctl's
    login.answer hears why the sign-in ended and what to run, not a protocol hint."""
    d = password_daemon(glewlwyd_static)
    try:
        c = RPC(d.socket)
        start = c.call("login.start", {"provider": d.name, "flow": "terminal", "timeout": 1})["result"]
        assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["prompt"]["name"] == "username"
        time.sleep(2)
        late = c.call("login.answer", {"login_id": start["login_id"], "value": "alice"})
        message = late["error"]["message"]
        assert late["error"]["code"] == -32007, late["error"]
        assert "not finished within 1 s" in message and "authctl login --terminal" in message, message
    finally:
        d.cleanup()


def read_until(fd, marker, seen, timeout=30):
    deadline = time.time() + timeout
    while marker not in seen[0]:
        assert time.time() < deadline, f"no {marker!r} in {seen[0]!r}"
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                chunk = os.read(fd, 4096).decode(errors="replace")
            except OSError:
                break
            if not chunk:
                break
            seen[0] += chunk


def test_password_typed_on_a_terminal_is_not_echoed(glewlwyd_static):
    gl = glewlwyd_static
    d = password_daemon(gl)
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([AUTHCTL, "login", "--terminal", "--provider", d.name], env=d.env,
                             stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        seen = [""]
        read_until(master, "User name at", seen)
        os.write(master, b"alice\n")
        read_until(master, "Password: ", seen)
        password = gl.user_password("alice")
        os.write(master, password.encode() + b"\n")
        read_until(master, "Signed in to", seen)
        assert p.wait(timeout=30) == 0, seen[0]
        assert "alice" in seen[0]  # the user name is echoed as typed
        assert password not in seen[0], "the password was echoed"
        assert_nowhere(password, d)
    finally:
        os.close(master)
        d.cleanup()


def test_ctrl_c_at_the_password_question_gives_the_terminal_its_echo_back(glewlwyd_static):
    d = password_daemon(glewlwyd_static)
    master, slave = pty.openpty()
    try:
        echo_before = termios.tcgetattr(slave)[3] & termios.ECHO
        assert echo_before
        p = subprocess.Popen([AUTHCTL, "login", "--terminal", "--provider", d.name], env=d.env,
                             stdin=slave, stdout=slave, stderr=slave, close_fds=True, start_new_session=True)
        seen = [""]
        read_until(master, "User name at", seen)
        os.write(master, b"alice\n")
        read_until(master, "Password: ", seen)
        assert not termios.tcgetattr(slave)[3] & termios.ECHO  # echo is off while the password is typed
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=30) == 130
        assert termios.tcgetattr(slave)[3] & termios.ECHO, "Ctrl-C left the terminal without echo"
    finally:
        os.close(slave)
        os.close(master)
        d.cleanup()


def first_party_daemon(stub, extra=""):
    d = Daemon(None)
    d.write_config(text=stub_config(d.name, stub, refresh_margin=60) + extra)
    return d.start()


FPA_ANSWERS = [fpa.USERNAME, fpa.PASSWORD, fpa.EMAIL_CODE, fpa.MFA_CODE]


def test_first_party_flow_asks_each_step_and_redeems_the_code_with_pkce(stub):
    forms = fpa.enable(stub)
    # The challenge endpoint is preferred to the password grant when both are there.
    d = first_party_daemon(stub, "password_grant = true\n")
    try:
        r = login_from_pipe(d, FPA_ANSWERS)
        assert r.returncode == 0, f"{r.stderr}\n{d.log_text()}"
        assert f"Signed in to {d.name}" in r.stdout
        for label in ("User name at", "Password", "Code sent by e-mail", "MFA code"):
            assert label in r.stderr, r.stderr
        assert len(forms) == 4
        first = forms[0]
        assert first["code_challenge_method"] == ["S256"] and first["client_id"] == [stub.client_id]
        assert first["resource"] == [API] and "openid" in first["scope"][0] and "auth_session" not in first
        assert all("auth_session" in f for f in forms[1:])
        [redeem] = [f for f in stub.token_forms if f.get("grant_type") == ["authorization_code"]]
        assert redeem.get("code_verifier") and "redirect_uri" not in redeem
        assert not [f for f in stub.token_forms if f.get("grant_type") == ["password"]]
        assert "result" in d.rpc("token.get", {}), d.log_text()
        for secret in (fpa.PASSWORD, fpa.EMAIL_CODE, fpa.MFA_CODE):
            assert_nowhere(secret, d, r.stdout, r.stderr)
    finally:
        d.cleanup()


def test_first_party_flow_with_a_wrong_code_is_one_sentence(stub):
    fpa.enable(stub)
    d = first_party_daemon(stub)
    try:
        wrong = "em-000000-wrong"
        r = login_from_pipe(d, [fpa.USERNAME, fpa.PASSWORD, wrong])
        assert r.returncode != 0
        assert "refused the sign-in after the code was given" in r.stderr, r.stderr
        assert d.rpc("account.list")["result"]["accounts"] == []
        assert not [f for f in stub.token_forms if f.get("grant_type") == ["authorization_code"]]
        for secret in (fpa.PASSWORD, wrong):
            assert_nowhere(secret, d, r.stdout, r.stderr)
    finally:
        d.cleanup()


def test_first_party_flow_sent_to_the_web_says_to_use_the_browser(stub):
    fpa.enable(stub, redirect_to_web=True)
    d = first_party_daemon(stub)
    try:
        r = login_from_pipe(d, [fpa.USERNAME])
        assert r.returncode != 0
        assert "finished in a browser" in r.stderr and f"authctl login --provider {d.name}" in r.stderr, r.stderr
    finally:
        d.cleanup()


def test_first_party_flow_through_the_configured_endpoint_key(stub):
    fpa.enable(stub)
    del stub.discovery_extra["authorization_challenge_endpoint"]  # discovery names none
    d = first_party_daemon(stub, f'authorization_challenge_endpoint = "{stub.issuer}{fpa.PATH}"\n')
    try:
        r = login_from_pipe(d, FPA_ANSWERS)
        assert r.returncode == 0, f"{r.stderr}\n{d.log_text()}"
        assert "MFA code" in r.stderr
    finally:
        d.cleanup()


def test_authorization_challenge_endpoint_key_is_checked_like_the_issuer(stub):
    d = Daemon(None)
    try:
        d.write_config(text=stub_config(d.name, stub)
                       + 'authorization_challenge_endpoint = "http://idp.example.test/challenge"\n')
        d.start(wait=False)
        assert d.proc.wait(timeout=20) != 0
        log = d.log_text()
        assert f"providers.{d.name}.authorization_challenge_endpoint" in log and "must use https" in log, log
    finally:
        d.cleanup()


def copies_in_memory(pid, secret):
    """How many times `secret` appears in the process's memory (root reads /proc/PID/mem
    of a process that is not dumpable). Every readable, private or anonymous mapping."""
    found = 0
    needle = secret.encode()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if not fields[1].startswith("r") or (len(fields) > 5 and fields[5].startswith("[v")):
                continue
            try:
                mem.seek(start)
                found += mem.read(end - start).count(needle)
            except (OSError, ValueError, OverflowError):
                pass
    return found


@pytest.mark.parametrize("right", [True, False], ids=["alices-password", "a-long-wrong-one"])
def test_a_typed_password_is_gone_from_the_daemons_memory_after_the_sign_in(glewlwyd_static, right):
    """The password grant's password is read into a buffer that is wiped once the request
    is sent: a few seconds later no copy is left in the daemon's memory, neither as typed
    nor form-encoded. A long wrong one (40 bytes, a quote, a backslash and non-ASCII: JSON
    escapes, and longer than a Swift String keeps inline) takes the same path to Glewlwyd,
    which refuses it."""
    import urllib.parse
    gl = glewlwyd_static
    d = password_daemon(gl)
    try:
        password = gl.user_password("alice") if right else 'Wr0ng"pass\\wörd-with-a-long-tail-4711'
        r = login_from_pipe(d, ["alice", password])
        assert (r.returncode == 0) == right, f"{r.stderr}\n{d.log_text()}"
        # A fixed time, not a poll until none is left: a copy freed unwiped is overwritten
        # sooner or later (later heap use, MemoryTrim once quiet for 5 s), so waiting longer
        # would hide it.
        time.sleep(3)
        assert copies_in_memory(d.proc.pid, password) == 0
        assert copies_in_memory(d.proc.pid, urllib.parse.quote(password, safe="-._~")) == 0
    finally:
        d.cleanup()
