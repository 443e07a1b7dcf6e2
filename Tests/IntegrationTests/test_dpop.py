"""DPoP (RFC 9449) against the real Glewlwyd: tokens bound to a key that stays in the daemon,
proofs from `dpop.proof`, each checked here with the public key in its own header."""
import base64
import hashlib
import json
import time
import urllib.error
import urllib.request

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from conftest import API, GIT, decode_jwt, fingerprint, stored_item


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def thumbprint(jwk):
    """RFC 7638 §3."""
    required = {"EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x"), "RSA": ("e", "kty", "n")}[jwk["kty"]]
    text = json.dumps({k: jwk[k] for k in required}, separators=(",", ":"), sort_keys=True)
    return b64e(hashlib.sha256(text.encode()).digest())


def verified_proof(proof):
    """The proof's header and claims, after its signature was checked with its header's key."""
    h64, c64, s64 = proof.split(".")
    header, claims, signature = json.loads(b64d(h64)), json.loads(b64d(c64)), b64d(s64)
    assert header["typ"] == "dpop+jwt"
    jwk = header["jwk"]
    assert "d" not in jwk and "p" not in jwk, "a private member in the proof's header"
    message = (h64 + "." + c64).encode()
    if header["alg"] == "ES256":
        assert jwk["kty"] == "EC" and jwk["crv"] == "P-256" and len(signature) == 64
        key = ec.EllipticCurvePublicNumbers(int.from_bytes(b64d(jwk["x"]), "big"), int.from_bytes(b64d(jwk["y"]), "big"),
                                            ec.SECP256R1()).public_key()
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
        key.verify(der, message, ec.ECDSA(hashes.SHA256()))
    elif header["alg"] == "EdDSA":
        ed25519.Ed25519PublicKey.from_public_bytes(b64d(jwk["x"])).verify(signature, message)
    else:
        assert header["alg"] == "RS256"
        key = rsa.RSAPublicNumbers(int.from_bytes(b64d(jwk["e"]), "big"), int.from_bytes(b64d(jwk["n"]), "big")).public_key()
        key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
    return header, claims


def dpop_daemon(daemon_factory, dpop="true", provider="static"):
    d = daemon_factory(provider=provider)
    with open(d.config, "a") as f:
        f.write(f"dpop = {dpop}\n")
    return d.start()


def get(url, headers):
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_bound_token_works_at_userinfo_with_a_proof_and_not_as_bearer(daemon_factory):
    d = dpop_daemon(daemon_factory)
    d.login_device("alice")
    userinfo = d.gl.discovery()["userinfo_endpoint"]

    token = d.rpc("token.get", {"provider": d.name})["result"]
    assert token["token_type"] == "DPoP"
    at = token["access_token"]

    answer = d.rpc("dpop.proof", {"provider": d.name, "htm": "GET", "htu": userinfo + "?x=1#f"})["result"]
    assert fingerprint(answer["access_token"]) == fingerprint(at)
    assert answer["token_type"] == "DPoP"
    header, claims = verified_proof(answer["proof"])
    assert claims["htm"] == "GET" and claims["htu"] == userinfo
    assert abs(claims["iat"] - time.time()) < 30
    assert claims["ath"] == b64e(hashlib.sha256(at.encode()).digest())
    # The provider bound the token to the daemon's key.
    assert decode_jwt(at)[1]["cnf"]["jkt"] == thumbprint(header["jwk"])

    status, body = get(userinfo, {"Authorization": "DPoP " + at, "DPoP": answer["proof"]})
    assert status == 200, status
    assert json.loads(body)["sub"]

    # The same token without a proof, as a thief who copied it would send it.
    status, _ = get(userinfo, {"Authorization": "Bearer " + at})
    assert status in (400, 401, 403), status
    status, _ = get(userinfo, {"Authorization": "DPoP " + at})
    assert status in (400, 401, 403), status

    # A replayed proof is refused.
    status, _ = get(userinfo, {"Authorization": "DPoP " + at, "DPoP": answer["proof"]})
    assert status in (400, 401, 403), status

    # Each proof is fresh.
    again = d.rpc("dpop.proof", {"provider": d.name, "htm": "GET", "htu": userinfo})["result"]
    assert verified_proof(again["proof"])[1]["jti"] != claims["jti"]
    status, _ = get(userinfo, {"Authorization": "DPoP " + at, "DPoP": again["proof"]})
    assert status == 200, status


def test_the_daemons_own_userinfo_request_sends_the_bound_token_with_a_proof(daemon_factory):
    d = dpop_daemon(daemon_factory)
    d.login_device("alice")
    r = d.ctl("userinfo", "--provider", d.name, "--json")
    assert r.returncode == 0, r.stderr + d.log_text()
    assert json.loads(r.stdout)["claims"]["sub"]


def test_refresh_needs_the_proof_and_the_key_survives_a_restart(daemon_factory):
    d = dpop_daemon(daemon_factory)
    d.login_device("alice")
    first = d.rpc("token.get", {"provider": d.name, "resource": API})["result"]
    assert first["token_type"] == "DPoP"

    attrs, payload = stored_item(d.name)
    assert payload.get("dpop_alg") == "ES256" and payload.get("dpop_key")
    # The refresh token is bound to the daemon's key: without a proof Glewlwyd refuses it.
    r = d.gl.refresh(d.gl.client_id(d.client), payload["refresh_token"], resource=GIT)
    assert r.status in (400, 401, 403), r.status

    # The daemon's refreshes carry one, also after a restart (the key comes from the store).
    d.restart()
    other = d.rpc("token.get", {"provider": d.name, "resource": GIT})["result"]
    assert other["token_type"] == "DPoP", other
    assert decode_jwt(other["access_token"])[1]["cnf"]["jkt"] == decode_jwt(first["access_token"])[1]["cnf"]["jkt"]

    # The private key never leaves: not in status, not in the log.
    key = payload["dpop_key"]
    assert key not in json.dumps(d.status()) and key not in d.log_text()


def test_authctl_prints_both_headers_and_exec_hands_them_on(daemon_factory):
    d = dpop_daemon(daemon_factory, dpop='"EdDSA"')
    d.login_device("alice")
    userinfo = d.gl.discovery()["userinfo_endpoint"]
    r = d.ctl("token", "--provider", d.name, "--header", "--method", "GET", "--url", userinfo)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Authorization: DPoP ") and lines[1].startswith("DPoP: ")
    header, claims = verified_proof(lines[1][len("DPoP: "):])
    assert header["alg"] == "EdDSA" and claims["htu"] == userinfo
    status, _ = get(userinfo, dict(line.split(": ", 1) for line in lines))
    assert status == 200, status

    r = d.ctl("exec", "--provider", d.name, "--method", "GET", "--url", userinfo, "--",
              "sh", "-c", 'printf "%s\\n%s\\n%s\\n" "$AUTHBROKER_TOKEN_TYPE" "$AUTHBROKER_TOKEN" "$AUTHBROKER_DPOP"')
    assert r.returncode == 0, r.stderr
    kind, at, proof = r.stdout.splitlines()
    assert kind == "DPoP"
    status, _ = get(userinfo, {"Authorization": "DPoP " + at, "DPoP": proof})
    assert status == 200, status


def test_proofs_follow_the_caller_policy_and_need_dpop(daemon_factory):
    d = dpop_daemon(daemon_factory)
    d.login_device("alice")
    r = d.rpc("dpop.proof", {"provider": d.name, "htm": "GET WITH SPACE", "htu": "https://api.example.test/"})
    assert r["error"]["code"] == -32602 or "htm" in r["error"]["message"], r
    r = d.rpc("dpop.proof", {"provider": d.name, "htm": "GET", "htu": "not a url"})
    assert "htu" in r["error"]["message"], r
    # A policy that does not name this program refuses its proofs as it refuses its tokens.
    with open(d.config, "a") as f:
        f.write('\n[[allow]]\nexe = "/usr/bin/nothing-like-this"\n')
    d.restart()
    t = d.rpc("token.get", {"provider": d.name})
    p = d.rpc("dpop.proof", {"provider": d.name, "htm": "GET", "htu": "https://api.example.test/"})
    assert t["error"]["code"] == p["error"]["code"] == -32002, (t, p)


def test_code_redemption_and_client_credentials_carry_proofs(daemon_factory, glewlwyd):
    from test_sign_in import browser_login
    d = dpop_daemon(daemon_factory, provider="rotating")
    _, done = browser_login(d, glewlwyd)
    assert done["result"]["account"]["state"] == "ready", done
    token = d.rpc("token.get", {"provider": d.name})["result"]
    assert token["token_type"] == "DPoP"
    proof = d.rpc("dpop.proof", {"provider": d.name, "htm": "GET", "htu": glewlwyd.issuer + "/userinfo"})["result"]
    assert decode_jwt(proof["access_token"])[1]["cnf"]["jkt"] == thumbprint(verified_proof(proof["proof"])[0]["jwk"])

    m = daemon_factory(name="machine" + d.name)
    m.write_config(text=f"""
[daemon]
store = "memory"
[providers.{m.name}]
issuer = "{glewlwyd.issuer}"
client_id = "{glewlwyd.client_id('machine')}"
client_secret = "{glewlwyd.client_secret('machine')}"
grant = "client_credentials"
scopes = ["api"]
resources = ["{API}"]
dpop = "EdDSA"
""")
    m.start()
    answer = m.rpc("dpop.proof", {"provider": m.name, "resource": API, "htm": "POST", "htu": API + "/v1/x"})
    assert "result" in answer, answer
    header, claims = verified_proof(answer["result"]["proof"])
    assert header["alg"] == "EdDSA" and claims["htm"] == "POST"
    assert decode_jwt(answer["result"]["access_token"])[1]["cnf"]["jkt"] == thumbprint(header["jwk"])
