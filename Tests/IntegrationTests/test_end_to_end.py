"""The broker end to end: device sign-in against Glewlwyd, refresh tokens in gnome-keyring,
per-resource access tokens over the socket."""
import concurrent.futures
import json
import time

from conftest import API, GIT, RPC, Daemon, decode_jwt, fingerprint, stored_item


def token_via_ctl(d, resource, *extra):
    r = d.ctl("token", "--resource", resource, "--provider", d.name, *extra)
    assert r.returncode == 0, f"authctl token failed ({r.returncode}): {r.stderr}\n{d.log_text()}"
    return r.stdout.strip()


def test_device_login_then_a_token_per_resource(daemon_factory):
    d = daemon_factory(provider="static").start()
    out = d.login_device("alice")
    assert "alice" in out

    api = token_via_ctl(d, API)
    git = token_via_ctl(d, GIT)
    assert fingerprint(api) != fingerprint(git)
    assert decode_jwt(api)[1]["aud"] in (API, [API])
    assert decode_jwt(git)[1]["aud"] in (GIT, [GIT])

    # --json carries the whole answer; --header the HTTP header line.
    j = json.loads(token_via_ctl(d, API, "--json"))
    assert fingerprint(j["access_token"]) == fingerprint(api)
    assert j["resource"] == API and j["provider"] == d.name and j["token_type"].lower() == "bearer"
    assert j["expires_at"] > time.time() + 60
    assert token_via_ctl(d, API, "--header") == "Authorization: Bearer " + api

    accounts = d.rpc("account.list")["result"]["accounts"]
    assert [(a["provider"], a["username"], a["state"]) for a in accounts] == [(d.name, "alice@example.test", "ready")]


def test_second_request_is_served_from_cache(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    d.login_device("alice")
    first = token_via_ctl(d, API)
    before = d.status()["counters"]
    time.sleep(1.1)
    since = int(time.time())
    second = token_via_ctl(d, API)
    after = d.status()["counters"]

    assert fingerprint(first) == fingerprint(second)
    assert after["cache_hits"] == before["cache_hits"] + 1
    assert after["refreshes"] == before["refreshes"]
    events = glewlwyd.count_token_events(since_epoch=since, client_id=glewlwyd.client_id("authbroker"))
    assert events["refreshes"] == {}, "the provider was asked again"
    # status lists the cached token, never its value
    status = d.ctl("status")
    assert status.returncode == 0
    assert API in status.stdout
    assert first not in status.stdout and first not in json.dumps(d.status())


def test_restart_reads_the_refresh_token_from_the_secret_service(daemon_factory, glewlwyd):
    d = daemon_factory().start()
    d.login_device("alice")
    first = token_via_ctl(d, API)

    item = stored_item(d.name)
    assert item is not None, "the account's item is visible to another Secret Service client"
    attrs, payload = item
    assert attrs["issuer"] == glewlwyd.issuer
    assert attrs["client_id"] == glewlwyd.client_id("authbroker")
    assert attrs["subject"]
    assert payload["refresh_token"]

    d.restart()
    assert [a["state"] for a in d.rpc("account.list")["result"]["accounts"]] == ["ready"]
    again = token_via_ctl(d, API)
    assert fingerprint(again) != fingerprint(first), "a new token was minted from the stored refresh token"
    assert decode_jwt(again)[1]["aud"] in (API, [API])


def concurrent_token_gets(d, params, workers=20, per_worker=10):
    """workers connections, each pipelining per_worker token.get calls; returns every answer."""
    def burst(worker):
        c = RPC(d.socket)
        try:
            for i in range(per_worker):
                p = params[(worker * per_worker + i) % len(params)]
                c.send_line(json.dumps({"jsonrpc": "2.0", "id": i, "method": "token.get", "params": p}) + "\n")
            return [c.read() for _ in range(per_worker)]
        finally:
            c.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return [a for batch in pool.map(burst, range(workers)) for a in batch]


def assert_all_succeeded(answers, n):
    assert len(answers) == n
    errors = [a["error"] for a in answers if "error" in a]
    assert errors == [], f"{len(errors)} requests failed, first: {errors[:1]}"


def test_cold_cache_concurrency_with_rotation_uses_each_refresh_token_once(daemon_factory, glewlwyd):
    """Three cache keys of one account (one resource, three scope sets) on a cold cache,
    200 concurrent callers: each key is refreshed once, the refreshes queue behind each other,
    each uses the refresh token the previous one left. A second use of any refresh token
    would make Glewlwyd refuse it and disable the whole chain."""
    d = daemon_factory().start()
    d.login_device("alice")
    d.restart()  # cold cache; the refresh token comes from the store
    time.sleep(1.1)  # Glewlwyd counts whole seconds: keep the sign-in's tokens out of the count
    since = int(time.time())
    params = [{"resource": API}, {"resource": API, "scopes": ["openid"]}, {"resource": API, "scopes": ["profile", "openid"]}]

    answers = concurrent_token_gets(d, params)

    assert_all_succeeded(answers, 200)
    distinct = {fingerprint(a["result"]["access_token"]) for a in answers}
    assert len(distinct) == 3
    events = glewlwyd.count_token_events(since_epoch=since, client_id=glewlwyd.client_id("authbroker"))
    assert events["refreshes"] == {API: 3}
    assert events["refresh_tokens_issued"] == 3 and events["refresh_tokens_disabled"] == 2
    assert d.status()["counters"]["refreshes"] == 3
    assert [a["state"] for a in d.rpc("account.list")["result"]["accounts"]] == ["ready"]
    # the last rotated refresh token is the one in the Secret Service, and it still works
    _, payload = stored_item(d.name)
    assert glewlwyd.refresh_token_enabled(payload["refresh_token"]) is True


def test_cold_cache_concurrency_one_refresh_per_resource(daemon_factory, glewlwyd_static):
    d = daemon_factory(provider="static").start()
    d.login_device("alice")
    d.restart()
    time.sleep(1.1)
    since = int(time.time())

    answers = concurrent_token_gets(d, [{"resource": API}, {"resource": GIT}])

    assert_all_succeeded(answers, 200)
    by_resource = {}
    for a in answers:
        by_resource.setdefault(a["result"]["resource"], set()).add(fingerprint(a["result"]["access_token"]))
    assert {r: len(t) for r, t in by_resource.items()} == {API: 1, GIT: 1}
    events = glewlwyd_static.count_token_events(since_epoch=since, client_id=glewlwyd_static.client_id("authbroker"))
    assert events["refreshes"] == {API: 1, GIT: 1}


def test_revoked_refresh_token_means_login_required_at_once(daemon_factory, glewlwyd):
    d = daemon_factory(client="authbroker-confidential").start()
    d.login_device("alice")
    _, payload = stored_item(d.name)
    r = glewlwyd.revoke(payload["refresh_token"], glewlwyd.client_id("authbroker-confidential"))
    assert r.status == 200
    assert glewlwyd.refresh_token_enabled(payload["refresh_token"]) is False

    started = time.monotonic()
    res = d.ctl("token", "--resource", API, "--provider", d.name)
    elapsed = time.monotonic() - started
    assert res.returncode == 4, res.stderr
    assert f"authctl login --provider {d.name}" in res.stderr
    assert elapsed < 10  # answered, not retried or hung
    accounts = d.rpc("account.list")["result"]["accounts"]
    assert [a["state"] for a in accounts] == ["login_required"]
    # and it stays that way without asking the provider again, across a restart too
    again = d.rpc("token.get", {"resource": GIT})
    assert again["error"]["code"] == -32001
    d.restart()
    assert [a["state"] for a in d.rpc("account.list")["result"]["accounts"]] == ["login_required"]


def test_logout_revokes_and_removes_the_item(daemon_factory, glewlwyd):
    d = daemon_factory(client="authbroker-confidential").start()
    d.login_device("alice")
    token_via_ctl(d, API)
    _, payload = stored_item(d.name)
    refresh_token = payload["refresh_token"]

    r = d.ctl("logout", "--provider", d.name)
    assert r.returncode == 0, r.stderr
    assert "revoked" in r.stdout
    assert glewlwyd.refresh_token_enabled(refresh_token) is False
    assert stored_item(d.name) is None
    assert d.rpc("account.list")["result"]["accounts"] == []
    assert d.status()["providers"][0]["accounts"] == []
    res = d.ctl("token", "--resource", API, "--provider", d.name)
    assert res.returncode == 4


def test_a_new_sign_in_revokes_the_refresh_token_it_replaces(daemon_factory, glewlwyd):
    """Issue 38 item 5: signing in again (the usual answer to a refresh token that may have
    been copied) revokes the replaced refresh token at the real Glewlwyd, which revokes that
    one token only (RFC 7009): the new sign-in's stays enabled and serves, and authctl says so."""
    d = daemon_factory(client="authbroker-confidential").start()
    d.login_device("alice")
    _, payload = stored_item(d.name)
    replaced = payload["refresh_token"]
    assert glewlwyd.refresh_token_enabled(replaced) is True

    out = d.login_device("alice")
    assert "Signed in to" in out and f"The refresh token of the sign-in it replaced was revoked at {d.name}." in out, out
    assert glewlwyd.refresh_token_enabled(replaced) is False, "the replaced refresh token is still valid at the provider"
    _, payload = stored_item(d.name)
    assert payload["refresh_token"] != replaced
    assert glewlwyd.refresh_token_enabled(payload["refresh_token"]) is True
    token_via_ctl(d, API)
    assert replaced not in d.log_text()


def test_memory_store_keeps_nothing_across_restarts(daemon_factory):
    d = daemon_factory(store="memory").start()
    d.login_device("alice")
    token_via_ctl(d, API)
    assert stored_item(d.name) is None
    d.restart()
    assert d.rpc("account.list")["result"]["accounts"] == []
    assert d.ctl("token", "--resource", API, "--provider", d.name).returncode == 4


def test_a_sign_in_outlasts_the_connection_idle_timeout(glewlwyd):
    """login.wait may wait for the user for minutes: an idle timeout must not cut it."""
    d = Daemon(glewlwyd)
    d.write_config()
    with open(d.config) as f:
        text = f.read()
    d.write_config(text=text.replace("[daemon]\n", "[daemon]\nconnection_idle_timeout = 1\n"))
    try:
        d.start()
        c = RPC(d.socket)
        start = c.call("login.start", {"provider": d.name, "flow": "device"})["result"]
        c.send_line(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "login.wait",
                                "params": {"login_id": start["login_id"]}}) + "\n")
        time.sleep(2.5)  # longer than the idle timeout, with the wait pending
        session = glewlwyd.login_session("alice")
        glewlwyd.approve_device(session, start["user_code"], glewlwyd.client_id("authbroker"),
                                ["openid", "profile", "email", "offline_access"])
        done = c.read()
        assert done["id"] == 99 and done["result"]["account"]["state"] == "ready"
        c.close()
    finally:
        d.cleanup()


def private_kb(pid):
    """RssAnon + VmSwap: what the daemon alone holds (heap, stacks), as against file pages
    the kernel drops and reads again by itself (docs/performance.md)."""
    with open(f"/proc/{pid}/status") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith(("RssAnon:", "VmSwap:")))


def test_a_quiet_daemon_trims_after_a_burst_and_still_serves_its_cache(daemon_factory):
    # A burst of refreshes from several programs at once grows the heap by more than the
    # trim's threshold (1 MB, most of it the 400 tokens themselves); once the daemon is quiet
    # (5 s) it trims (docs/performance.md), and nothing it needs may go with it. (It no
    # longer unmaps its code pages: issue 25, test_quiet_request.py.)
    d = daemon_factory(provider="static")
    with open(d.config) as f:
        text = f.read()
    d.write_config(text=text.replace("[daemon]\n", "[daemon]\ncache_misses_per_minute = 0\n")
                   + "any_scopes = true\nmax_tokens_per_account = 1000\n")
    d.start()
    d.login_device("alice")
    first = token_via_ctl(d, API)
    time.sleep(1)  # start-up's trim is done
    before_burst = private_kb(d.proc.pid)

    def asks(k):  # 50 tokens of their own scope sets: 50 refreshes at Glewlwyd
        c = d.connect()
        try:
            return all("result" in c.call("token.get", {"resource": API, "scopes": [f"burst.{k}.{i}"]})
                       for i in range(50))
        finally:
            c.close()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:  # 8 programs at once
        assert all(pool.map(asks, range(8)))
    busy = private_kb(d.proc.pid)
    time.sleep(6)  # longer than the daemon's quiet (5 s); reading /proc is not a request
    quiet = private_kb(d.proc.pid)
    print(f"private memory: {before_burst} kB, {busy} kB after the burst, {quiet} kB when quiet")
    assert quiet <= busy, "the quiet daemon's private memory grew"

    before = d.status()["counters"]
    assert fingerprint(token_via_ctl(d, API)) == fingerprint(first)
    assert fingerprint(token_via_ctl(d, GIT)) != fingerprint(first)
    after = d.status()["counters"]
    assert after["cache_hits"] == before["cache_hits"] + 1
    assert after["refreshes"] == before["refreshes"] + 1
    assert d.proc.poll() is None
