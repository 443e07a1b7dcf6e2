#!/usr/bin/env python3
"""Self-check of the Glewlwyd fixture and of glewlwyd_api.py.

Starts scripts/glewlwyd in a temporary directory, runs the flows the
integration tests rely on over plain HTTP, asserts the Glewlwyd behaviour
documented in docs/testing.md, and stops the server. Exit status 0 = all good.
Prints aud claims, token lengths and statuses, never token values.

  python3 Tests/IntegrationTests/support/selfcheck_glewlwyd.py [--keep]
"""

import base64
import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)

from glewlwyd_api import Glewlwyd, GlewlwydError, decode_jwt  # noqa: E402

API = "https://api.example.test"
GIT = "https://git.example.test"
SCOPES = ["openid", "profile", "email", "offline_access"]

failures = []


def check(cond, what):
    print(("  ok   " if cond else "  FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def aud(tok):
    return decode_jwt(tok["access_token"])[1].get("aud")


def show(label, tok):
    h, p = decode_jwt(tok["access_token"])
    print(f"  {label}: aud={p.get('aud')!r} scope={tok.get('scope')!r} "
          f"alg={h.get('alg')} kid={h.get('kid')} "
          f"access_token={len(tok['access_token'])} chars, "
          f"refresh_token="
          f"{len(tok['refresh_token']) if 'refresh_token' in tok else 'none'}",
          flush=True)


def main():
    keep = "--keep" in sys.argv
    d = tempfile.mkdtemp(prefix="glewlwyd-selfcheck-")
    script = os.path.join(ROOT, "scripts", "glewlwyd")
    t_start = time.monotonic()
    subprocess.run([script, "start", d], check=True, timeout=120)
    print(f"glewlwyd started in {time.monotonic() - t_start:.1f}s ({d})")
    try:
        run(Glewlwyd(os.path.join(d, "env.json")))
    except Exception as e:  # noqa: BLE001
        failures.append(f"exception: {type(e).__name__}: {e}")
        print(f"  FAIL exception: {type(e).__name__}: {e}")
    finally:
        subprocess.run([script, "stop", d], timeout=60)
        if keep or failures:
            print(f"kept {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)
    if failures:
        print(f"\n{len(failures)} FAILED:")
        for f in failures:
            print("  - " + f)
        return 1
    print("\nselfcheck: all good")
    return 0


def run(gw):
    print("== discovery")
    disc = gw.discovery()
    check(disc["issuer"] == gw.issuer, f"issuer {gw.issuer}")
    for k in ("device_authorization_endpoint", "revocation_endpoint",
              "token_endpoint", "introspection_endpoint",
              "end_session_endpoint"):
        check(bool(disc.get(k)), f"discovery has {k}")
    import json
    import urllib.request
    with urllib.request.urlopen(gw.jwks_uri, timeout=10) as r:
        keys = {k["kid"]: k["alg"] for k in json.load(r)["keys"]}
    check(keys == {"rsa-1": "RS256", "ec-1": "ES256"}, f"jwks {keys}")

    t0 = int(time.time())
    cid = gw.client_id("authbroker")

    print("== device flow (public client, resource=api)")
    da = gw.device_authorize(cid, SCOPES, API)
    check(da.status == 200, f"device_authorization HTTP {da.status}")
    da = da.json
    pending = gw.token_request({"grant_type":
                                "urn:ietf:params:oauth:grant-type:device_code",
                                "device_code": da["device_code"]}, cid)
    check(pending.status == 400 and
          pending.json.get("error") == "authorization_pending",
          f"before approval: {pending.status} {pending.json}")
    s = gw.login_session("alice")
    gw.approve_device(s, da["user_code"], cid, SCOPES)
    tok = gw.poll_device(cid, da["device_code"], interval=da["interval"])
    check(tok.status == 200, f"device token HTTP {tok.status}")
    tok = tok.json
    show("device", tok)
    check(aud(tok) == API, "device token aud == api resource (a string)")
    check(tok["scope"].split() == SCOPES, "granted scopes")
    check(tok["expires_in"] == gw.env["access_token_duration"],
          f"expires_in {tok['expires_in']} == configured duration")
    _, idt = decode_jwt(tok["id_token"])
    check(idt["aud"] == cid and idt["iss"] == gw.issuer, "id_token aud/iss")
    try:
        gw.approve_device(s, da["user_code"], cid, SCOPES)
        check(False, "approving a used user code fails")
    except GlewlwydError:
        check(True, "approving a used user code fails (deviceCodeError)")

    print("== refresh with resource=api (rotation)")
    rt0 = tok["refresh_token"]
    r = gw.refresh(cid, rt0, resource=API, scope="openid")
    check(r.status == 200, f"refresh HTTP {r.status}")
    t1 = r.json
    show("refresh api", t1)
    check(aud(t1) == API, "aud == api")
    check(t1["scope"].split() == SCOPES, "scope on refresh is ignored")
    rt1 = t1.get("refresh_token")
    check(bool(rt1) and rt1 != rt0, "a new refresh token is returned")
    check(gw.refresh_token_enabled(rt0) is False, "old refresh token disabled")
    check(gw.refresh_token_enabled(rt1) is True, "new refresh token enabled")
    check(gw.refresh_token_state(rt1)["resource"] == API,
          "new refresh token bound to api")

    print("== refresh the api-bound chain with resource=git")
    r = gw.refresh(cid, rt1, resource=GIT)
    check(r.status == 400 and (r.json or {}).get("error") == "invalid_target",
          f"resource outside the refresh token's grant -> {r.status} "
          f"{(r.json or {}).get('error')}")
    check(gw.refresh_token_enabled(rt1) is True,
          "a rejected resource does not consume the refresh token")

    print("== reuse of a used refresh token")
    r = gw.refresh(cid, rt0, resource=API)
    check(r.status == 400 and r.body == b"",
          f"reused refresh token -> HTTP {r.status}, body {len(r.body)} bytes")
    check(gw.refresh_token_enabled(rt1) is False,
          "replay disabled the newest token of the chain too")
    check(not gw.refresh_token_works(cid, rt1), "chain is dead")

    print("== device flow with resource=api AND resource=git, then git")
    tok = gw.device_flow_tokens(cid, SCOPES, [API, GIT])  # first one only
    check(aud(tok) == API, "device_flow_tokens sends the first resource")
    r = gw.device_authorize(cid, SCOPES, [API, GIT])
    check(r.status == 200, "two resource parameters accepted")
    gw.approve_device(gw.login_session("alice"), r.json["user_code"], cid,
                      SCOPES)
    tok = gw.poll_device(cid, r.json["device_code"]).json
    show("device api+git", tok)
    check(aud(tok) == " ".join(SCOPES),
          "with two resources the aud is the scope list")
    check(gw.refresh_token_state(tok["refresh_token"])["resource"] ==
          f"{API},{GIT}", "stored resource is 'api,git'")
    r = gw.refresh(cid, tok["refresh_token"], resource=GIT)
    check(r.status == 200, f"refresh git HTTP {r.status}")
    show("refresh git", r.json)
    check(aud(r.json) == GIT, "aud == git")
    r2 = gw.refresh(cid, r.json["refresh_token"], resource=API)
    check(r2.status == 400, "rotated token is narrowed to git: api -> 400 "
          f"({(r2.json or {}).get('error')})")

    print("== provider-side counts")
    ev = gw.count_token_events(t0, client_id=cid)
    print(f"  {ev}")
    check(ev["refreshes"] == {API: 1, GIT: 1},
          "exactly one successful refresh per resource")
    check(ev["device"].get(API) == 2, "two device grants with aud api")

    print("== ES256-signed tokens (client authbroker-es256)")
    es = gw.device_flow_tokens(gw.client_id("authbroker-es256"),
                               ["openid", "offline_access"], API)
    check(decode_jwt(es["access_token"])[0].get("alg") == "ES256" and
          decode_jwt(es["access_token"])[0].get("kid") == "ec-1" and
          decode_jwt(es["id_token"])[0].get("alg") == "ES256",
          "access and id tokens signed ES256 with kid ec-1")

    print("== client credentials (machine)")
    for res in (API, GIT):
        r = gw.client_credentials("machine", "api", res)
        check(r.status == 200, f"client_credentials {res} HTTP {r.status}")
        if r.status == 200:
            show(f"machine {res}", r.json)
            check(aud(r.json) == res, f"aud == {res}")
            check("refresh_token" not in r.json, "no refresh token")
    r = gw.client_credentials("machine", "api", "https://other.example.test")
    check(r.status == 400, f"unknown resource -> {r.status} "
          f"{(r.json or {}).get('error')}")

    print("== revocation / introspection")
    pub = gw.device_flow_tokens(cid, ["openid", "offline_access"], API)
    r = gw.revoke(pub["refresh_token"], cid)
    check(r.status == 401, f"public client /revoke -> {r.status}")
    ccid = gw.client_id("authbroker-confidential")
    conf = gw.device_flow_tokens(ccid, ["openid", "offline_access"], API)
    show("confidential device", conf)
    i = gw.introspect(conf["access_token"], ccid)
    check(i.status == 200 and i.json.get("active") is True,
          f"introspect access token -> {i.status} active="
          f"{(i.json or {}).get('active')}")
    r = gw.revoke(conf["refresh_token"], ccid)
    check(r.status == 200, f"confidential client /revoke -> {r.status}")
    check(gw.refresh_token_enabled(conf["refresh_token"]) is False,
          "revoked refresh token disabled in the DB")
    r = gw.refresh(ccid, conf["refresh_token"])
    check(r.status == 400 and r.body == b"",
          f"revoked refresh token -> {r.status}, {len(r.body)} bytes")

    print("== authorization code + PKCE (loopback redirect)")
    s = gw.login_session("alice")
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redirect = "http://127.0.0.1:49152/callback"
    try:
        gw.authorize_code(s, cid, redirect, "openid offline_access", "st",
                          "nonce", challenge, resource=GIT)
        check(False, "unregistered loopback port rejected")
    except GlewlwydError as e:
        check(e.status == 403, f"unregistered loopback port -> {e.status}")
    gw.add_redirect_uri("authbroker", redirect)
    loc = gw.authorize_code(s, cid, redirect, "openid offline_access", "st",
                            "nonce", challenge, resource=GIT)
    u = urllib.parse.urlsplit(loc)
    q = urllib.parse.parse_qs(u.query)
    check(loc.startswith(redirect + "?") and q.get("state") == ["st"] and
          "code" in q, f"redirect to {u.scheme}://{u.netloc}{u.path} with "
          f"{sorted(q)}")
    bad = gw.exchange_code(cid, q["code"][0], redirect, "wrong" * 10)
    check(bad.status != 200, f"wrong code_verifier -> {bad.status}")
    loc = gw.authorize_code(s, cid, redirect, "openid offline_access", "st",
                            "nonce", challenge, resource=GIT)
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(loc).query)["code"][0]
    r = gw.exchange_code(cid, code, redirect, verifier)
    check(r.status == 200, f"code exchange HTTP {r.status}")
    show("code", r.json)
    check(aud(r.json) == GIT, "aud == git")
    check(decode_jwt(r.json["id_token"])[1].get("nonce") == "nonce",
          "id_token nonce")
    r = gw.exchange_code(cid, code, redirect, verifier)
    check(r.status in (400, 403), f"code replay -> {r.status}")


if __name__ == "__main__":
    sys.exit(main())
