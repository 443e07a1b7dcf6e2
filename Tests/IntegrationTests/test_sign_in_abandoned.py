"""Abandoned sign-ins (issue 21, item 4): sign-ins that were cancelled, replaced or left by
their caller hold no slot, sign-ins on demand that programs keep abandoning are paced, and
a program the rules give no token of a provider cannot start its sign-in on demand.

Real daemon, real Glewlwyd (the browser played through its login API, as in test_sign_in).
The notification server is the STUB of test_sign_in_on_demand (no real one runs headless);
the device sign-ins started at once are played by the STUB provider (support/stub_provider.py)."""
import concurrent.futures
import os

from conftest import AUTHCTL, RPC, Daemon
from test_faults import stub_config
from test_sign_in import follow, play_browser, start_browser_login
from test_sign_in_on_demand import notifications, on_demand_daemon, wait_until, waiting_token_get  # noqa: F401


def test_seventeen_abandoned_sign_ins_then_a_new_one_signs_in(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    for i in range(17):
        c, start = start_browser_login(d)
        if i % 2:
            # As Ctrl-C on `authctl login`: the waiter hangs up.
            c.send_line('{"jsonrpc":"2.0","id":9,"method":"login.wait","params":{"login_id":"%s"}}\n' % start["login_id"])
        c.close()  # the others are replaced by the next login.start
    c, start = start_browser_login(d)
    status, _ = follow(play_browser(glewlwyd, "authbroker", start["authorization_url"]))
    assert status == 200
    assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["account"]["state"] == "ready"


def test_programs_that_abandon_sign_ins_on_demand_are_paced_and_authctl_login_still_works(daemon_factory, glewlwyd, notifications):  # noqa: F811
    d = on_demand_daemon(daemon_factory)
    for i in range(3):
        waiter = waiting_token_get(d)
        assert wait_until(lambda: len(notifications.calls("Notify")) == i + 1), d.log_text()
        waiter.close()  # the program gives up before the user finished
        assert wait_until(lambda: len(notifications.calls("CloseNotification")) == i + 1), d.log_text()
    # The daemon books the last one in a task beside the one that withdrew its notification,
    # and says so in its log: nothing it answers shows the booking without starting a
    # sign-in of its own (which the next token.get would).
    abandoned = "sign-in on demand abandoned by the program that asked"
    assert wait_until(lambda: d.log_text().count(abandoned) == 3), d.log_text()
    # The next ones are told at once, with no new notification and no new sign-in.
    for _ in range(5):
        c = waiting_token_get(d)
        answer = c.read()
        c.close()
        assert answer["error"]["code"] == -32001, answer
        assert "paused" in answer["error"]["message"] and "authctl login" in answer["error"]["message"]
    assert len(notifications.calls("Notify")) == 3
    # The user's own sign-in is never paced.
    c, start = start_browser_login(d)
    status, _ = follow(play_browser(glewlwyd, "authbroker", start["authorization_url"]))
    assert status == 200
    assert c.call("login.wait", {"login_id": start["login_id"]})["result"]["account"]["state"] == "ready"
    assert "access_token" in d.rpc("token.get", {"provider": d.name})["result"]


def test_a_program_with_no_token_of_the_provider_cannot_start_its_sign_in(policy_daemon):
    d = policy_daemon(f"""
[[allow]]
exe = "{os.path.realpath(AUTHCTL)}"
resources = ["*"]
""")
    c = RPC(d.socket)
    refused = c.call("login.start", {"provider": d.name, "join": True})
    c.close()
    assert refused["error"]["code"] == -32002, refused
    assert "forbidden by policy" in refused["error"]["message"] and "sign" in refused["error"]["message"]
    assert "sign-in on demand refused by policy" in d.log_text()
    assert "browser sign-in started" not in d.log_text()


def test_stub_a_device_sign_in_refused_for_the_cap_polls_nothing(stub):
    """Five device sign-ins started at once: the cap of 4 running sign-ins refuses one, and
    the daemon must then not poll the provider with the code that caller was never shown
    (left polling, it would run outside the bookkeeping until the code expires, and each
    refused start would add one). STUB: a device authorization answer that takes a while
    and a code nobody approves, which Glewlwyd does not give on cue."""
    stub.device_delay = 2
    stub.device_error = "authorization_pending"
    d = Daemon(None)
    try:
        d.write_config(text=stub_config(d.name, stub, http_timeout=10))
        d.start()
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            answers = list(pool.map(lambda _: d.rpc("login.start", {"provider": d.name, "flow": "device"}), range(5)))
        refused = [a["error"]["message"] for a in answers if "error" in a]
        assert len(refused) == 1 and "already waiting" in refused[0], answers

        def polls():
            with stub.lock:
                codes = [f["device_code"][0] for f in stub.token_forms if "device_code" in f]
            return {code: codes.count(code) for code in codes}
        # Each sign-in still running polls once a second. Once four codes have been polled
        # twice, a code left polling (all five were asked for at once) has had its turn too.
        assert wait_until(lambda: sum(n >= 2 for n in polls().values()) >= 4, 20), sorted(polls().values())
        assert len(polls()) == 4, f"{len(polls())} device codes polled for 4 sign-ins"
    finally:
        d.cleanup()
