"""The discovery rows of scripts/bench (issue 36, docs/performance.md): what a resource no
provider lists costs the daemon.

- **Its first token**, without the provider's own time: `discovery.resolve` and
  `discovery.trust` (`authctl login --resource URL` sends both) for a resource whose RFC
  9728 metadata, authorization server metadata (RFC 8414) and registration endpoint
  (RFC 7591) are all served by `StubServer`, a STUB HTTP server in this process that
  records how long it spends on each request; the figure is the calls' wall time, timed
  here on one connection, less the stub's time (beside it the daemon's threads' time on a
  CPU and waiting for one, from schedstat). Every run uses a resource of its own, so
  nothing is cached: a new server in a new daemon (`store = "memory"`, so that nothing is
  kept from one run to the next), a new server in a daemon that has enrolled one before,
  and a new resource of a server already enrolled (`discovery.resolve` alone: the server
  is trusted and its client reused, the resource's metadata is read and the provider kept
  in the store again).
- **A cached token of a discovered resource against a configured one's**, in one daemon:
  a provider in its config.toml (the benchmark's rotating Glewlwyd, device sign-in), and
  one it found from a resource's metadata (served by the stub, naming the static
  Glewlwyd, started with `--dynamic-registration`), registered a client at and signed alice
  in to through the browser flow, played through Glewlwyd's login API as
  test_mcp_discovery.py does. Both cached tokens are then asked for by authbench, as the
  configured rows are, in turns: request after request (answered by the front door's
  memo), nine different requests in turn (past the memo: the cache's own look-up), and
  16 connections.
"""
import json
import math
import os
import signal
import socket
import statistics
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

from glewlwyd_api import _request

# The resource's scope, as the MCP server of test_mcp_discovery.py lists it (scripts/glewlwyd
# --dynamic-registration lets alice have it).
SCOPE = "mcp"
# The cached token asked for in turn with eight more requests of the same token, so that the
# front door's memo (it keeps eight answers) answers none of them: the full path.
TTLS = [0, 100, 200, 300, 400, 500, 600, 700, 800]


class StubServer:
    """A STUB HTTP server on 127.0.0.1 in this process, standing in for protected resources
    and authorization servers: RFC 9728 metadata for each resource published, RFC 8414
    metadata for each issuer published, and a registration endpoint (RFC 7591) that
    registers every client asked for. It is not a real provider: it exists so that the
    benchmark can take its own time out of the daemon's. One request at a time (the daemon
    sends them one after another), one per connection (HTTP/1.0, as the daemon's client
    opens one per request); `seconds` adds up the time from each request's first line read
    to its answer ready to write. Not from the accept: the daemon writes its request a
    while after its connect completes, which is its own time. Nor to the answer written or
    the close: the daemon, woken by the answer, may take the stub thread's CPU before its
    write returns, and reads the answer by its Content-Length."""

    def __init__(self):
        stub = self
        self.lock = threading.Lock()
        self.routes = {}
        self.seconds = 0.0
        self.started = self.done = self.registered = 0
        self.paths = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def setup(self):
                with stub.lock:
                    stub.started += 1
                super().setup()

            def parse_request(self):
                # The request's first line is in: from here on the daemon waits for the stub.
                self.t0 = time.perf_counter()
                return super().parse_request()

            def do_GET(self):
                self.answer(*stub.routes.get(self.path, (404, b'{"error":"not_found"}')))

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/register":
                    return self.answer(404, b'{"error":"not_found"}')
                asked = json.loads(body)
                with stub.lock:
                    stub.registered += 1
                    n = stub.registered
                self.answer(201, json.dumps({
                    "client_id": f"stub-client-{n}", "client_id_issued_at": int(time.time()),
                    "redirect_uris": asked.get("redirect_uris", []), "grant_types": asked.get("grant_types", []),
                    "token_endpoint_auth_method": "none", "client_name": asked.get("client_name", "")}).encode())

            def answer(self, status, body):
                # One write, its time the daemon's: the daemon wakes as the answer comes in
                # and may take this thread's CPU before the write returns.
                head = (f"HTTP/1.0 {status} {self.responses[status][0]}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\n\r\n")
                self.t1 = time.perf_counter()
                self.wfile.write(head.encode() + body)

            def finish(self):
                super().finish()
                now = time.perf_counter()
                with stub.lock:
                    stub.seconds += getattr(self, "t1", now) - getattr(self, "t0", now)
                    stub.done += 1
                    stub.paths.append(f"{getattr(self, 'command', '-')} {getattr(self, 'path', '-')}")

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def resource(self, path, issuer, scopes=None):
        """Publishes the RFC 9728 metadata of resource BASE/PATH (at its path-inserted
        well-known URL, §3.1) naming `issuer`; returns the resource."""
        resource = f"{self.base}/{path}"
        doc = {"resource": resource, "authorization_servers": [issuer], "bearer_methods_supported": ["header"]}
        if scopes:
            doc["scopes_supported"] = scopes
        self.routes[f"/.well-known/oauth-protected-resource/{path}"] = (200, json.dumps(doc).encode())
        return resource

    def issuer(self, path):
        """Publishes the RFC 8414 metadata of the stub's authorization server BASE/PATH (at
        the path-inserted well-known URL); returns the issuer. Its endpoints but the
        registration endpoint answer 404: nobody signs in here."""
        issuer = f"{self.base}/{path}"
        doc = {"issuer": issuer, "authorization_endpoint": f"{issuer}/authorize", "token_endpoint": f"{issuer}/token",
               "registration_endpoint": f"{self.base}/register", "response_types_supported": ["code"],
               "grant_types_supported": ["authorization_code", "refresh_token"],
               "code_challenge_methods_supported": ["S256"], "token_endpoint_auth_methods_supported": ["none"],
               "scopes_supported": ["openid", "offline_access"]}
        self.routes[f"/.well-known/oauth-authorization-server/{path}"] = (200, json.dumps(doc).encode())
        return issuer

    def take(self):
        """The stub's seconds and requests since the last take, once every request it
        started has been timed (its last stream closes a moment after the daemon has the
        answer)."""
        deadline = time.time() + 5
        while time.time() < deadline:
            with self.lock:
                if self.done == self.started:
                    seconds, paths = self.seconds, self.paths
                    self.seconds, self.paths = 0.0, []
                    return seconds, paths
            time.sleep(0.0005)
        raise SystemExit("bench: the stub server did not finish a request")

    def calibrate(self, path, n=50):
        """What a request costs outside the stub's timed part (the connection until the stub
        wakes, accepts it and reads its first line; the close): a plain HTTP/1.0 GET from
        here, `n` times, less the stub's time. The median, in ms: an upper bound (this client's own
        Python is in it) of what the first-token rows still hold of the stub per request."""
        over = []
        host = self.httpd.server_address
        for _ in range(n):
            self.take()
            t0 = time.perf_counter()
            with socket.create_connection(host) as c:
                c.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
                while c.recv(65536):
                    pass
            wall = time.perf_counter() - t0
            handler, _ = self.take()
            over.append((wall - handler) * 1000)
        return statistics.median(over)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Connection:
    """One connection to a daemon, for requests timed one at a time."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(60)
        self.s.connect(path)
        self.buf = b""
        self.id = 0

    def send(self, method, params=None):
        self.id += 1
        req = {"jsonrpc": "2.0", "id": self.id, "method": method, **({"params": params} if params is not None else {})}
        self.s.sendall((json.dumps(req, separators=(",", ":")) + "\n").encode())

    def line(self, method):
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise SystemExit(f"bench: the daemon closed the connection answering {method}")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def read(self, method):
        answer = json.loads(self.line(method))
        if "error" in answer:
            raise SystemExit(f"bench: {method} failed: {answer['error'].get('message')}")
        return answer["result"]

    def ask(self, method, params=None):
        self.send(method, params)
        return self.read(method)

    def close(self):
        self.s.close()


def discard(daemon):
    """Ends a daemon whose memory store holds nothing worth keeping: SIGKILL, without the
    orderly stop (the new-daemon runs start twenty)."""
    daemon.stop(signal.SIGKILL)


def config_text(store, providers=""):
    return (f'[daemon]\nstore = "{store}"\ncache_misses_per_minute = 0\n\n'
            f'[discovery]\nmode = "ask"\n' + providers)


def percentile(values, q):
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def schedstat(pid):
    """The daemon's threads' time on a CPU and waiting for one so far, in ns
    (/proc/PID/task/TID/schedstat)."""
    run = wait = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                r, w, _ = f.read().split()
        except (FileNotFoundError, ValueError):
            continue
        run, wait = run + int(r), wait + int(w)
    return run, wait


def first_tokens(stub, make_daemon, runs, log):
    """The first token's discovery, `runs` times per case (a new daemon; a running one's
    new servers and new resources of a known server, with the memory store and with
    gnome-keyring): per run the daemon's time (wall less stub), and its threads' time on a
    CPU and waiting for one, in ms."""

    def timed(conn, pid, resource, issuer, trust):
        stub.take()
        run0, wait0 = schedstat(pid)
        t0 = time.perf_counter()
        found = conn.ask("discovery.resolve", {"resource": resource})
        if trust:
            if found["trusted"]:
                raise SystemExit(f"bench: {issuer} was trusted before discovery.trust: {found}")
            conn.ask("discovery.trust", {"resource": resource, "issuer": found["issuer"]})
        elif not found["trusted"]:
            raise SystemExit(f"bench: {issuer} is not trusted after its enrolment: {found}")
        wall = time.perf_counter() - t0
        run1, wait1 = schedstat(pid)
        stub_s, paths = stub.take()
        return {"wall_ms": wall * 1000, "stub_ms": stub_s * 1000, "daemon_ms": (wall - stub_s) * 1000,
                "cpu_ms": (run1 - run0) / 1e6, "cpu_wait_ms": (wait1 - wait0) / 1e6, "requests": paths}

    out = {}
    log(f"discovery: a new server's first token in a new daemon, {runs} daemons (store memory)")
    issuer = stub.issuer("as-fresh")
    fresh = []
    for i in range(runs):
        d = make_daemon(f"disc-fresh-{i}", config_text("memory"))
        d.start()
        conn = Connection(d.socket)
        try:
            fresh.append(timed(conn, d.pid, stub.resource(f"fresh/{i}/mcp", issuer), issuer, trust=True))
        finally:
            conn.close()
            discard(d)
    out["new_server_new_daemon"] = fresh

    for store in ("memory", "secret-service"):
        log(f"discovery: new servers and new resources of a known one in a running daemon (store {store})")
        tag = store.split("-")[0]
        d = make_daemon(f"disc-running-{tag}", config_text(store))
        d.start()
        conn = Connection(d.socket)
        try:
            known = stub.issuer(f"as-{tag}-known")
            timed(conn, d.pid, stub.resource(f"{tag}/known/warm/mcp", known), known, trust=True)  # enrolled, not counted
            new = []
            for i in range(runs):
                issuer = stub.issuer(f"as-{tag}-{i}")
                new.append(timed(conn, d.pid, stub.resource(f"{tag}/new/{i}/mcp", issuer), issuer, trust=True))
            again = [timed(conn, d.pid, stub.resource(f"{tag}/known/{i}/mcp", known), known, trust=False)
                     for i in range(runs)]
        finally:
            conn.close()
            if store == "memory":
                discard(d)
            else:
                d.stop()
        out[f"new_server_running.{store}"] = new
        out[f"known_server.{store}"] = again

    summary = {"stub_untimed_ms": stub.calibrate("/.well-known/oauth-authorization-server/as-fresh")}
    for name, rs in out.items():
        ms = [r["daemon_ms"] for r in rs]
        summary[name] = {"runs": len(rs), "p50_ms": statistics.median(ms), "p90_ms": percentile(ms, 0.9),
                         "min_ms": min(ms), "cpu_p50_ms": statistics.median(r["cpu_ms"] for r in rs),
                         "cpu_wait_p50_ms": statistics.median(r["cpu_wait_ms"] for r in rs),
                         "wall_p50_ms": statistics.median(r["wall_ms"] for r in rs),
                         "stub_p50_ms": statistics.median(r["stub_ms"] for r in rs),
                         "stub_requests": rs[0]["requests"], "daemon_ms": [round(x, 3) for x in ms],
                         "stub_ms": [round(r["stub_ms"], 3) for r in rs],
                         "requests_per_run": [len(r["requests"]) for r in rs]}
    return summary


def sign_in_discovered(daemon, gl, resource, log):
    """discovery.resolve and discovery.trust for `resource` (its metadata names Glewlwyd),
    then the browser sign-in of alice at the client the daemon registered there, played
    through Glewlwyd's login API; returns the provider's name."""
    conn = Connection(daemon.socket)
    try:
        found = conn.ask("discovery.resolve", {"resource": resource})
        trusted = conn.ask("discovery.trust", {"resource": resource, "issuer": found["issuer"]})
        if trusted.get("client") != "registered":
            raise SystemExit(f"bench: the daemon did not register a client at Glewlwyd: {trusted}")
        provider = trusted["provider"]
        start = conn.ask("login.start", {"provider": provider})
        conn.send("login.wait", {"login_id": start["login_id"]})
        url = start["authorization_url"]
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        session = gl.login_session("alice")
        gl.grant_scopes(session, q["client_id"][0], q["scope"][0].split())
        r = _request("GET", url + "&g_continue=", cookies=session.cookies)
        if r.status not in (301, 302, 303, 307) or not r.location:
            raise SystemExit(f"bench: Glewlwyd's authorization endpoint answered {r.status} to the played browser")
        _request("GET", r.location)  # the daemon's loopback redirect
        account = conn.read("login.wait")["account"]
        log(f"discovery: alice signed in to {provider}, found from {resource} ({account['state']})")
        return provider
    finally:
        conn.close()


def cached_tokens(stub, configured_gl, gl, make_daemon, login, bench, seconds, rounds, log):
    """Warm token.get of a discovered resource's cached token against a configured one's,
    in one daemon: the provider `configured` at `configured_gl` in config.toml, and the one
    it finds for a resource whose metadata names `gl` (Glewlwyd with dynamic registration).
    One daemon, so that both are answered by the same front door thread wherever the
    scheduler put it. The two are asked in turns: one round that is not counted, then
    `rounds`, which goes first alternating. Per measure the medians of each one's figures
    and of the rounds' ratios (discovered ÷ configured)."""
    resource = stub.resource("mcp", gl.issuer, [SCOPE])
    api = configured_gl.resources[0]
    providers = (f'\n[providers.configured]\nissuer = "{configured_gl.issuer}"\n'
                 f'client_id = "{configured_gl.client_id("authbroker")}"\n'
                 f'scopes = ["openid", "profile", "email", "offline_access"]\nresources = ["{api}"]\n'
                 'access_tokens = "independent"\n')
    log("discovery: a daemon with one provider configured (device sign-in) and one it finds from a resource")
    d = make_daemon("disc-cached", config_text("memory", providers))
    try:
        d.start()
        login(d, configured_gl, "configured")
        provider = sign_in_discovered(d, gl, resource, log)
        targets = {"configured": api, "discovered": resource}
        lines = {}
        out = {"provider": provider, "answer_bytes": {}}
        for name, res in targets.items():
            one = {"resource": res}
            conn = Connection(d.socket)
            try:
                conn.send("token.get", one)
                line = conn.line("token.get")
            finally:
                conn.close()
            got = json.loads(line).get("result")
            if not got:
                raise SystemExit(f"bench: token.get of the {name} resource failed: {line[:300]!r}")
            out["answer_bytes"][name] = len(line)
            if got.get("token_type", "Bearer").lower() != "bearer":
                raise SystemExit(f"bench: the {name} token is {got.get('token_type')}, not Bearer")
            lines[name] = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get",
                                       "params": dict(one, **({"min_ttl": t} if t else {}))}, separators=(",", ":"))
                           for t in TTLS]

        def load(connections, ls, others=()):
            return bench("load", "--socket", d.socket, "--mode", "persistent", "--connections", connections,
                         "--seconds", seconds, "--line", ls[0], *(["--others", "\n".join(others)] if others else []))

        measures = {"p50_1": lambda ls: load(1, ls), "past_memo_1": lambda ls: load(1, ls, ls[1:]),
                    "rps_16": lambda ls: load(16, ls)}
        log(f"discovery: warm token.get, discovered and configured in turns, {rounds} rounds of {seconds} s loads")
        runs = {m: {"configured": [], "discovered": []} for m in measures}
        for r in range(rounds + 1):
            order = ("configured", "discovered") if r % 2 else ("discovered", "configured")
            for m, measure in measures.items():
                for name in order:
                    x = measure(lines[name])
                    if x["errors"]:
                        raise SystemExit(f"bench: {x['errors']} token.get failed against the {name} resource ({m})")
                    if r:
                        runs[m][name].append({"p50_us": x["p50_us"], "p99_us": x["p99_us"], "rps": x["rps"]})
        # This VM answers a round trip in one of two modes (~12 µs or ~50 µs, by how deep
        # the CPUs sleep between requests; docs/performance.md, "Noise"), and a round's two
        # runs do not always fall in the same one: each one's best round (lowest p50,
        # highest rate) is what the code costs, and their ratio the comparison. The medians
        # and the median of the rounds' ratios are kept beside them.
        for m, per in runs.items():
            key = "rps" if m.startswith("rps") else "p50_us"
            best = max if key == "rps" else min
            out[m] = {name: {key: best(x[key] for x in rs), "median": statistics.median(x[key] for x in rs), "runs": rs}
                      for name, rs in per.items()}
            out[m]["ratio"] = out[m]["discovered"][key] / out[m]["configured"][key]
            out[m]["round_ratio"] = statistics.median(a[key] / b[key] for a, b in zip(per["discovered"], per["configured"]))
        out["rounds"] = rounds
        return out
    finally:
        discard(d)


def run(stub, configured_gl, gl, make_daemon, login, bench, a, log):
    """The whole section, `results["discovery"]`: `gl` is the Glewlwyd started with
    --dynamic-registration and --resource STUB/mcp, `configured_gl` another one."""
    started = time.time()
    out = {"first_token": first_tokens(stub, make_daemon, a.discovery_runs, log)}
    out["first_token_seconds"] = round(time.time() - started, 1)
    out["cached"] = cached_tokens(stub, configured_gl, gl, make_daemon, login, bench, max(0.25, a.seconds / 4), 8, log)
    out["seconds"] = round(time.time() - started, 1)
    return out


def rows(r, row, us, ms, rate):
    """The discovery rows of the table."""
    d = r.get("discovery")
    if not d:
        return
    f = d["first_token"]
    cases = [("new_server_new_daemon", "new server, new daemon (store memory)")]
    for store in ("memory", "secret-service"):
        cases += [(f"new_server_running.{store}", f"new server, running daemon (store {store})"),
                  (f"known_server.{store}", f"known server, new resource (store {store})")]
    for key, label in cases:
        x = f.get(key)
        if not x:
            continue
        calls = "resolve + trust" if key.startswith("new") else "resolve"
        n = len(x["stub_requests"])
        row(f"discovered resource, first token: {label}, p50 (p90)", f"{ms(x['p50_ms'])} ({ms(x['p90_ms'])})",
            f"{calls} {ms(x['wall_p50_ms'])} − stub {ms(x['stub_p50_ms'])}; on a CPU {ms(x['cpu_p50_ms'])}, "
            f"waiting {ms(x['cpu_wait_p50_ms'])}", f"{n} stub request{'s' if n > 1 else ''}")
    row("… the stub per request outside its timing (left in the figures; at most)", ms(f["stub_untimed_ms"]))
    c = d["cached"]
    for m, label, fmt, target, ok in (
            ("p50_1", f"cached token.get p50, 1 connection, best of {c['rounds']} rounds: discovered vs configured", us,
             "≤ 1.2×", lambda x: x <= 1.2),
            ("past_memo_1", "… nine requests in turn (past the memo), p50", us, "≤ 1.2×", lambda x: x <= 1.2),
            ("rps_16", "… 16 connections", rate, "≥ 0.8", lambda x: x >= 0.8)):
        x = c[m]
        key = "rps" if m.startswith("rps") else "p50_us"
        row(label, fmt(x["discovered"][key]), f"configured {fmt(x['configured'][key])}",
            f"{x['ratio']:.2f}" + ("" if key == "rps" else "×"), target, ok(x["ratio"]))
