"""The far sides of the cloud integrations (test_clouds.py).

- `MotoSTS`: moto's real server (PyPI `moto[server]`) on 127.0.0.1, started as its own
  process: AWS's STS API as the AWS SDKs meet it, credentials that boto3 then signs with.
- `CountingProxy`: a plain forwarder in front of it that counts the
  AssumeRoleWithWebIdentity requests reaching STS and keeps what they named (the web
  identity token only as a fingerprint): moto has no request log to ask.
- `StubGoogleSTS`: a STUB of Google's STS token endpoint (sts.googleapis.com cannot be
  reached here), which keeps what google-auth sent and answers an access token.
"""
import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


def _fingerprint(token):
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoSTS:
    """`python3 -m moto.server` on 127.0.0.1; `url` is its endpoint. A context manager."""

    def __init__(self, log_path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"moto.server exited with {self.proc.returncode}: see {log_path}")
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=1).read()
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.close()
        raise AssertionError(f"moto.server did not answer on {self.url}: see {log_path}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1 answering POSTs through `self.post(handler, body)`."""

    def __init__(self):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, content_type, answer = outer.post(self, body)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.lock = threading.Lock()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CountingProxy(_Server):
    """Forwards every POST to `target` (moto) and keeps, per AssumeRoleWithWebIdentity, the
    form's names and values but the token, which it keeps as `token_fingerprint`."""

    def __init__(self, target):
        self.target = target
        self.assumed = []
        super().__init__()

    def post(self, handler, body):
        form = dict(urllib.parse.parse_qsl(body.decode()))
        if form.get("Action") == "AssumeRoleWithWebIdentity":
            seen = {k: v for k, v in form.items() if k != "WebIdentityToken"}
            seen["token_fingerprint"] = _fingerprint(form.get("WebIdentityToken", ""))
            with self.lock:
                self.assumed.append(seen)
        request = urllib.request.Request(self.target + handler.path, data=body, method="POST",
                                         headers={"Content-Type": handler.headers.get("Content-Type", "")})
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, r.headers.get("Content-Type", "text/xml"), r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", "text/xml"), e.read()

    @property
    def count(self):
        with self.lock:
            return len(self.assumed)


class StubGoogleSTS(_Server):
    """STUB of Google's STS (`POST /v1/token`, RFC 8693 token exchange): keeps each form,
    the subject token as `subject_token_fingerprint`, and answers the access token
    `access_token` (a stand-in Google access token)."""

    access_token = "ya29.stub-google-access-token"

    def __init__(self):
        self.exchanges = []
        super().__init__()

    def post(self, handler, body):
        form = dict(urllib.parse.parse_qsl(body.decode()))
        seen = {k: v for k, v in form.items() if k != "subject_token"}
        seen["subject_token_fingerprint"] = _fingerprint(form.get("subject_token", ""))
        seen["path"] = handler.path
        with self.lock:
            self.exchanges.append(seen)
        if handler.path != "/v1/token" or form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
            return 400, "application/json", json.dumps({"error": "invalid_request"}).encode()
        answer = {"access_token": self.access_token, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                  "token_type": "Bearer", "expires_in": 3600}
        return 200, "application/json", json.dumps(answer).encode()
