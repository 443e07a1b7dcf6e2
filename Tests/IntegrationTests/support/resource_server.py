"""A real HTTP API on 127.0.0.1 that checks the tokens it is sent, as a resource server
must: the JWS signature against Glewlwyd's JWKS, `exp`, `aud` (its own URL), and for a
DPoP-bound token (`cnf.jkt`) the DPoP proof (RFC 9449 §4.3: signature by the key in its
header, that key's thumbprint, `htm`, `htu`, `ath`, a fresh `jti`, a recent `iat`).

It answers 200 with the caller's `sub`, or 401 with a `WWW-Authenticate` challenge naming
the error. `refuse(token)` makes it refuse one token as revoked (`invalid_token`), as an
API does when the provider revoked the token early. Never logs or answers a token."""
import base64
import hashlib
import http.server
import json
import threading
import time
import urllib.request

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64e(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def public_key(jwk):
    if jwk["kty"] == "RSA":
        return rsa.RSAPublicNumbers(int.from_bytes(b64d(jwk["e"]), "big"), int.from_bytes(b64d(jwk["n"]), "big")).public_key()
    curve = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1()}[jwk["crv"]]
    return ec.EllipticCurvePublicNumbers(int.from_bytes(b64d(jwk["x"]), "big"), int.from_bytes(b64d(jwk["y"]), "big"),
                                         curve).public_key()


def verify_jws(token, key_for):
    """(header, claims) of a compact JWS whose signature checks with `key_for(header)`; raises otherwise."""
    h64, c64, s64 = token.split(".")
    header, claims, signature = json.loads(b64d(h64)), json.loads(b64d(c64)), b64d(s64)
    message = (h64 + "." + c64).encode()
    key = key_for(header)
    alg = header["alg"]
    if alg in ("RS256", "RS384", "RS512"):
        key.verify(signature, message, padding.PKCS1v15(), getattr(hashes, "SHA" + alg[2:])())
    elif alg in ("PS256",):
        key.verify(signature, message, padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256())
    elif alg in ("ES256", "ES384"):
        n = len(signature) // 2
        der = encode_dss_signature(int.from_bytes(signature[:n], "big"), int.from_bytes(signature[n:], "big"))
        key.verify(der, message, ec.ECDSA(getattr(hashes, "SHA" + alg[2:])()))
    else:
        raise ValueError(f"algorithm {alg} is not accepted")
    return header, claims


def thumbprint(jwk):
    required = {"EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x"), "RSA": ("e", "kty", "n")}[jwk["kty"]]
    text = json.dumps({k: jwk[k] for k in required}, separators=(",", ":"), sort_keys=True)
    return b64e(hashlib.sha256(text.encode()).digest())


class ResourceServer:
    def __init__(self, jwks_uri, audience=None):
        with urllib.request.urlopen(jwks_uri, timeout=20) as r:
            self.keys = json.load(r)["keys"]
        self.audience = audience
        self.refused = set()
        self.seen_jti = set()
        self.log = []  # (method, path, status, scheme, error): what a test may look at
        self.nonce = None  # when set, proofs must carry it (RFC 9449 §9)
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                server.handle(self)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.body = self.rfile.read(length)
                server.handle(self)

            do_PUT = do_POST

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.audience = audience or self.url
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def refuse(self, token):
        self.refused.add(hashlib.sha256(token.encode()).hexdigest())

    def _key_for(self, header):
        for k in self.keys:
            if k.get("kid") == header.get("kid") or (header.get("kid") is None and k.get("alg") == header["alg"]):
                return public_key(k)
        raise ValueError("no key in the JWKS for this token")

    def check(self, method, url, authorization, proof):
        """(status, sub or error, scheme)."""
        if not authorization or " " not in authorization:
            return 401, "invalid_request", "Bearer"
        scheme, token = authorization.split(" ", 1)
        try:
            _, claims = verify_jws(token, self._key_for)
        except Exception:
            return 401, "invalid_token", scheme
        aud = claims.get("aud")
        if self.audience not in (aud if isinstance(aud, list) else [aud]):
            return 401, "invalid_token", scheme
        if claims.get("exp", 0) <= time.time():
            return 401, "invalid_token", scheme
        if hashlib.sha256(token.encode()).hexdigest() in self.refused:
            return 401, "invalid_token", scheme
        jkt = (claims.get("cnf") or {}).get("jkt")
        if jkt:
            if scheme != "DPoP" or not proof:
                return 401, "invalid_token", "DPoP"
            try:
                header, pc = verify_jws(proof, lambda h: public_key(h["jwk"]))
            except Exception:
                return 401, "invalid_dpop_proof", "DPoP"
            ok = (header.get("typ") == "dpop+jwt" and thumbprint(header["jwk"]) == jkt
                  and pc.get("htm") == method and pc.get("htu") == url.split("?")[0]
                  and pc.get("ath") == b64e(hashlib.sha256(token.encode()).digest())
                  and abs(pc.get("iat", 0) - time.time()) < 60 and pc.get("jti") not in self.seen_jti)
            if not ok:
                return 401, "invalid_dpop_proof", "DPoP"
            self.seen_jti.add(pc["jti"])
            if self.nonce and pc.get("nonce") != self.nonce:
                return 401, "use_dpop_nonce", "DPoP"
        elif scheme != "Bearer":
            return 401, "invalid_token", "Bearer"
        return 200, claims.get("sub"), scheme

    def control(self, h):
        """For tests in other languages (clients/go): `POST /_control/refuse` with a token's
        SHA-256 in hex refuses it; `GET /_control/log` is the log; `POST /_control/clear` empties it."""
        if h.path == "/_control/refuse":
            self.refused.add(h.body.decode().strip())
            body = b"{}"
        elif h.path == "/_control/clear":
            del self.log[:]
            body = b"{}"
        else:
            body = json.dumps(self.log).encode()
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def handle(self, h):
        if h.path.startswith("/_control/"):
            return self.control(h)
        url = self.url + h.path
        status, what, scheme = self.check(h.command, url, h.headers.get("Authorization"), h.headers.get("DPoP"))
        self.log.append((h.command, h.path, status, scheme, None if status == 200 else what))
        if status == 200:
            body = json.dumps({"sub": what, "method": h.command, "path": h.path,
                               "body": getattr(h, "body", b"").decode(errors="replace")}).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
        else:
            body = b'{"error":"' + what.encode() + b'"}'
            h.send_response(401)
            h.send_header("WWW-Authenticate", f'{scheme} error="{what}"')
            if what == "use_dpop_nonce":
                h.send_header("DPoP-Nonce", self.nonce)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
