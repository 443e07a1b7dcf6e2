"""The clouds rows of scripts/bench (issue 39, docs/performance.md): `authctl
aws-credentials` and `authctl gcloud-credential` as the AWS and Google tools run them, a
whole process per call, beside `authctl token`; and what the first `aws.credentials` of a
role costs the daemon, without STS's own time.

- **Warm, whole processes**: authbench's `spawn` starts `authctl aws-credentials` (its
  credentials already in the daemon's memory) and `authctl gcloud-credential` (the
  account's ID token, which the daemon holds from the sign-in) `--runs` times each, as it
  starts `authctl token`.
- **The first call**: `aws.credentials` for a role session name never asked before, so
  that each run asks STS: `StubSTS`, a STUB of AWS STS in this process (AssumeRoleWithWebIdentity
  answered at once, with made-up credentials), records the time from each request's first
  line read to its answer written; the figure is the call's wall time on one connection,
  less the stub's. A Google credential has no such first call in the daemon: the exchange
  at Google's STS is the library's, and the ID token is served from memory.
"""
import json
import socket
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

ROLE = "arn:aws:iam::123456789012:role/bench"
ANSWER = """<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIABENCH{n}</AccessKeyId>
<SecretAccessKey>bench-secret-{n}</SecretAccessKey><SessionToken>bench-session-{n}</SessionToken>
<Expiration>{expiration}</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/bench/{n}</Arn></AssumedRoleUser>
</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"""


class StubSTS:
    """A STUB of AWS STS on 127.0.0.1 in this process: every POST is an
    AssumeRoleWithWebIdentity answered with credentials that live an hour. It exists so that
    the benchmark can take its own time out of the daemon's: `seconds` adds up each
    request's time here, first line read to stream closed."""

    def __init__(self):
        stub = self
        self.lock = threading.Lock()
        self.seconds = 0.0
        self.started = self.done = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def parse_request(self):
                self.t0 = time.perf_counter()
                with stub.lock:
                    stub.started += 1
                    self.n = stub.started
                return super().parse_request()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                expiration = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
                body = ANSWER.format(n=self.n, expiration=expiration).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def finish(self):
                super().finish()
                with stub.lock:
                    stub.seconds += time.perf_counter() - self.t0
                    stub.done += 1

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def take(self):
        """The stub's seconds and requests since the last take, once each is timed."""
        deadline = time.time() + 5
        while time.time() < deadline:
            with self.lock:
                if self.done == self.started:
                    seconds, self.seconds = self.seconds, 0.0
                    count, self.started, self.done = self.done, 0, 0
                    return seconds, count
            time.sleep(0.001)
        raise SystemExit("bench: the STUB STS did not finish its requests")

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _call(sock, line):
    sock.sendall(line.encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("bench: authbrokerd closed the connection")
        buf += chunk
    return json.loads(buf)


def run(daemon, provider, bench, authctl, a, log):
    """The clouds figures against `daemon`'s `provider` (signed in, with an ID token)."""
    stub = StubSTS()
    try:
        log(f"clouds: first aws.credentials of a role, {a.discovery_runs} runs, less the STUB STS's time")
        costs, walls, stubs = [], [], []
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(daemon.socket)
        for i in range(a.discovery_runs):
            params = {"provider": provider, "role_arn": ROLE, "sts_endpoint": stub.url, "role_session_name": f"bench-{i}-{time.time_ns()}"}
            line = json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "aws.credentials", "params": params}) + "\n"
            t0 = time.perf_counter()
            answer = _call(sock, line)
            wall = time.perf_counter() - t0
            if "result" not in answer or answer["result"]["cached"]:
                raise SystemExit(f"bench: aws.credentials failed: {answer.get('error', {}).get('message')}")
            seconds, count = stub.take()
            if count != 1:
                raise SystemExit(f"bench: aws.credentials sent {count} requests to the STUB STS, not 1")
            walls.append(wall * 1000)
            stubs.append(seconds * 1000)
            costs.append((wall - seconds) * 1000)
        sock.close()
        q = statistics.quantiles(costs, n=10) if len(costs) > 1 else costs * 9
        first = {"p50_ms": statistics.median(costs), "p90_ms": q[8], "wall_p50_ms": statistics.median(walls),
                 "stub_p50_ms": statistics.median(stubs), "runs": len(costs)}

        aws = ["aws-credentials", "--role-arn", ROLE, "--provider", provider, "--sts-endpoint", stub.url]
        warm = daemon_call(daemon, {"provider": provider, "role_arn": ROLE, "sts_endpoint": stub.url})
        if "result" not in warm:
            raise SystemExit(f"bench: aws.credentials failed: {warm.get('error', {}).get('message')}")
        stub.take()
        log(f"clouds: authctl aws-credentials and gcloud-credential, warm, {a.runs} process starts each")
        results = {"aws_first": first,
                   "aws_process": bench("spawn", "--runs", a.runs, "--", authctl, *aws),
                   "gcloud_process": bench("spawn", "--runs", a.runs, "--", authctl, "gcloud-credential", "--provider", provider)}
        _, asked = stub.take()
        results["aws_process"]["sts_requests"] = asked
        return results
    finally:
        stub.close()


def daemon_call(daemon, params):
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(daemon.socket)
    try:
        return _call(sock, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "aws.credentials", "params": params}) + "\n")
    finally:
        sock.close()


def rows(r, row, ms):
    """The clouds rows of the table."""
    c = r.get("clouds")
    if not c:
        return
    token = r["authctl"]["p50_ms"]
    for key, label in (("aws_process", "authctl aws-credentials, warm, whole process, median"),
                       ("gcloud_process", "authctl gcloud-credential, warm, whole process, median")):
        x = c[key]
        extra = f", {x['sts_requests']} STS requests" if "sts_requests" in x else ""
        row(label, ms(x["p50_ms"]), f"token {ms(token)}{extra}", f"{x['p50_ms'] / token:.2f}×")
    f = c["aws_first"]
    row("aws.credentials, first of a role, less STS's time, p50 (p90)", f"{ms(f['p50_ms'])} ({ms(f['p90_ms'])})",
        f"call {ms(f['wall_p50_ms'])} − STUB STS {ms(f['stub_p50_ms'])}", f"{f['runs']} runs")
