"""KeePassXC as the Secret Service: the real KeePassXC (Debian's, headless with Qt's
offscreen platform) on a private session bus of the test's own, its database opened at
start with --pw-stdin, against the real daemon and a STUB provider whose every token.get
rotates the refresh token (tokens live 60 s, refresh_margin is 120 s).

KeePassXC's own questions (its "Access Request" dialog, its database unlock dialog) are
drawn off screen where nobody answers them, which is what a user away from the desktop, or
a daemon on a server, meets: the broker must say it waits on them, not time out.

No test prints a token: refresh tokens are compared, never shown."""
import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import Daemon, token
from private_session import PrivateSession
from stub_provider import StubProvider
from test_faults import stub_config
from waiting import wait_until

NOTIFICATIONS_STUB = os.path.join(os.path.dirname(__file__), "support", "stub_notifications.py")
SYSTEM_PYTHON = "/usr/bin/python3"  # PyGObject is Debian's

pytestmark = pytest.mark.skipif(shutil.which("keepassxc") is None or shutil.which("keepassxc-cli") is None,
                                reason="KeePassXC is not installed (scripts/setup installs Debian's keepassxc)")


def keepassxc_session(confirm_access):
    """A private session (support/private_session.py) with KeePassXC as its Secret Service."""
    session = PrivateSession(prefix="ab-kpx-")
    session.start_keepassxc(confirm_access)
    return session


@pytest.fixture
def stub():
    s = StubProvider(access_token_life=60).start()
    yield s
    s.stop()


def daemon_on(session, stub):
    d = Daemon(None)
    d.env.update(DBUS_SESSION_BUS_ADDRESS=session.address, XDG_RUNTIME_DIR=session.env["XDG_RUNTIME_DIR"])
    d.write_config(text=stub_config(d.name, stub))
    d.start()
    r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
    assert r.returncode == 0, f"sign-in at the STUB failed ({r.returncode}): {r.stderr}\n{d.log_text()}"
    return d


def account(d):
    [one] = d.rpc("account.list")["result"]["accounts"]
    return one


def test_keepassxc_without_access_confirmation_keeps_sign_in_and_rotations_across_restarts(stub):
    """ConfirmAccessItem off (docs/configuration.md): a sign-in, and each refresh with
    rotation by a restarted daemon (a new client to KeePassXC), is written at once and
    read back after the next restart. KeePassXC 2.7.4 answers CreateItem for an item that
    exists with its access dialog even so; the store updates such an item with SetSecret."""
    session = keepassxc_session(confirm_access=False)
    d = None
    try:
        d = daemon_on(session, stub)
        assert session.keepassxc.stored_refresh_token(d.name) == stub.last_issued_refresh
        for _ in range(2):
            d.restart()
            started = time.monotonic()
            answer = token(d)  # rotates: the STUB's tokens live 60 s, the margin is 120 s
            assert "result" in answer, answer
            assert time.monotonic() - started < 5, "the refresh waited on the store"
            assert "unsaved" not in account(d), account(d)
            assert session.keepassxc.stored_refresh_token(d.name) == stub.last_issued_refresh
        d.restart()
        assert "result" in token(d)
        assert "could not be written" not in d.log_text()
    finally:
        if d:
            d.cleanup()
        session.close()


def test_keepassxc_access_confirmation_is_reported_as_its_prompt(stub):
    """ConfirmAccessItem on: a restarted daemon is a new client, so KeePassXC asks (its
    Access Request dialog, unanswered here) before it gives the item. The daemon says it
    waits on KeePassXC's access prompt and what to allow or set, in `authctl status` and
    in the request's error, at once rather than after store_timeout (10 s) as a time-out."""
    session = keepassxc_session(confirm_access=True)
    d = None
    # The STUB notification server (support/stub_notifications.py) on KeePassXC's bus: the
    # user at the desktop is told too, once, naming the store and what to allow.
    record = os.path.join(session.dir, "notifications.jsonl")
    notices = subprocess.Popen([SYSTEM_PYTHON, NOTIFICATIONS_STUB, record], env=session.env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert notices.stdout.readline().strip() == "ready", "the STUB notification server did not start"
        d = daemon_on(session, stub)
        d.restart()
        wait_until(lambda: (d.status().get("store_unavailable") or {}).get("reason") == "prompt", 8,
                   "status never said the store waits on its prompt")

        def told():
            try:
                with open(record) as f:
                    return [n for n in map(json.loads, f) if n["call"] == "Notify"]
            except FileNotFoundError:
                return []
        wait_until(lambda: told(), 8, "the desktop was not told that the store waits on its prompt")
        [notice] = told()
        assert "secret store" in notice["summary"], notice
        assert "KeePassXC" in notice["body"] and "allow authbrokerd" in notice["body"], notice
        status = d.ctl("status")
        assert "waiting for KeePassXC's access prompt" in status.stdout, status.stdout
        assert "ConfirmAccessItem" in status.stdout, status.stdout
        started = time.monotonic()
        answer = token(d)
        assert time.monotonic() - started < 5, "the request waited for the store's time-out"
        error = answer.get("error")
        assert error and error["code"] == -32005 and error["data"]["reason"] == "prompt", answer
        assert "waiting for KeePassXC's access prompt: allow authbrokerd there" in error["message"], error
        assert "did not answer within" not in d.log_text()
        assert len(told()) == 1, "the store's prompt was notified more than once"
    finally:
        if d:
            d.cleanup()
        notices.stdin.close()
        notices.wait(10)
        session.close()


def test_a_locked_keepassxc_database_is_reported_as_locked(stub):
    """KeePassXC's database locked while the daemon runs: the rotated refresh token cannot
    be written (KeePassXC asks to unlock the database, unanswered here). The token is
    still served, and the account says its newest refresh token waits on the locked
    database, not on a store that hangs."""
    session = keepassxc_session(confirm_access=False)
    d = None
    try:
        d = daemon_on(session, stub)
        session.keepassxc.lock()
        started = time.monotonic()
        answer = token(d)
        assert "result" in answer, answer
        assert time.monotonic() - started < 5, "the refresh waited for the store's time-out"
        one = account(d)
        assert one.get("unsaved_reason") == "locked", one
        assert "KeePassXC is asking to unlock its database" in one.get("unsaved", ""), one
        status = d.ctl("status")
        assert "KeePassXC is asking to unlock its database" in status.stdout, status.stdout
        assert "did not answer within" not in d.log_text()
    finally:
        if d:
            d.cleanup()
        session.close()
