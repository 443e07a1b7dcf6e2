"""The discovery rows of scripts/bench (issue 36, docs/performance.md): what a resource no
provider lists costs the daemon.

- **Its first token**, without the provider's own time: `discovery.resolve` and
  `discovery.trust` (`authctl login --resource URL` sends both) for a resource whose RFC
  9728 metadata, authorization server metadata (RFC 8414) and registration endpoint
  (RFC 7591) are all served by `StubServer`, a STUB HTTP server in this process that
  records how long it spends on each request; the figure is the calls' wall time, timed
  here on one connection, less the stub's time. Every run uses a resource of its own, so
  nothing is cached: a new server in a new daemon (`store = "memory"`, so that nothing is
  kept from one run to the next), a new server in a daemon that has enrolled one before,
  and a new resource of a server already enrolled (`discovery.resolve` alone: the server
  is trusted and its client reused, the resource's metadata is read and the provider kept
  in the store again).
- **A cached token of a discovered resource against a configured one's**: two daemons of
  the same binary and provider (the benchmark's real Glewlwyd, started with
  `--dynamic-registration`), one with the provider in config.toml, one that found it from
  a resource's metadata (served by the stub, naming that Glewlwyd), registered a client
  there and signed alice in through the browser flow, played through Glewlwyd's login API
  as test_mcp_discovery.py does. Both are then asked for their cached token by authbench,
  as the configured rows are, in turns.
"""
import json
import math
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
    to its answer written and the connection's stream closed."""

    def __init__(self):
        stub = self
        self.lock = threading.Lock()
        self.routes = {}
        self.seconds = 0.0
        self.started = self.done = self.registered = 0
        self.paths = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def parse_request(self):
                self.t0 = time.perf_counter()
                with stub.lock:
                    stub.started += 1
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
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def finish(self):
                super().finish()
                t0 = getattr(self, "t0", None)
                if t0 is not None:
                    with stub.lock:
                        stub.seconds += time.perf_counter() - t0
                        stub.done += 1
                        stub.paths.append(f"{self.command} {self.path}")

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


def config_text(store, providers=""):
    return (f'[daemon]\nstore = "{store}"\ncache_misses_per_minute = 0\n\n'
            f'[discovery]\nmode = "ask"\n' + providers)


def percentile(values, q):
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def first_tokens(stub, make_daemon, runs, log):
    """The first token's discovery, in three cases, `runs` times each: the daemon's time
    (wall less stub) per run, in ms."""

    def timed(conn, resource, issuer, trust):
        stub.take()
        t0 = time.perf_counter()
        found = conn.ask("discovery.resolve", {"resource": resource})
        if trust:
            if found["trusted"]:
                raise SystemExit(f"bench: {issuer} was trusted before discovery.trust: {found}")
            conn.ask("discovery.trust", {"resource": resource, "issuer": found["issuer"]})
        elif not found["trusted"]:
            raise SystemExit(f"bench: {issuer} is not trusted after its enrolment: {found}")
        wall = time.perf_counter() - t0
        stub_s, paths = stub.take()
        return {"wall_ms": wall * 1000, "stub_ms": stub_s * 1000, "daemon_ms": (wall - stub_s) * 1000, "requests": paths}

    out = {}
    log(f"discovery: a new server's first token in a new daemon, {runs} daemons (store memory)")
    issuer = stub.issuer("as-fresh")
    fresh = []
    for i in range(runs):
        d = make_daemon(f"disc-fresh-{i}", config_text("memory"))
        d.start()
        conn = Connection(d.socket)
        try:
            fresh.append(timed(conn, stub.resource(f"fresh/{i}/mcp", issuer), issuer, trust=True))
        finally:
            conn.close()
            d.stop()
    out["new_server_new_daemon"] = fresh

    for store in ("memory", "secret-service"):
        log(f"discovery: new servers and new resources of a known one in a running daemon (store {store})")
        tag = store.split("-")[0]
        d = make_daemon(f"disc-running-{tag}", config_text(store))
        d.start()
        conn = Connection(d.socket)
        try:
            known = stub.issuer(f"as-{tag}-known")
            timed(conn, stub.resource(f"{tag}/known/warm/mcp", known), known, trust=True)  # enrolled, not counted
            new = []
            for i in range(runs):
                issuer = stub.issuer(f"as-{tag}-{i}")
                new.append(timed(conn, stub.resource(f"{tag}/new/{i}/mcp", issuer), issuer, trust=True))
            again = [timed(conn, stub.resource(f"{tag}/known/{i}/mcp", known), known, trust=False) for i in range(runs)]
        finally:
            conn.close()
            d.stop()
        out[f"new_server_running.{store}"] = new
        out[f"known_server.{store}"] = again

    summary = {}
    for name, rs in out.items():
        ms = [r["daemon_ms"] for r in rs]
        summary[name] = {"runs": len(rs), "p50_ms": statistics.median(ms), "p90_ms": percentile(ms, 0.9),
                         "wall_p50_ms": statistics.median(r["wall_ms"] for r in rs),
                         "stub_p50_ms": statistics.median(r["stub_ms"] for r in rs),
                         "stub_requests": rs[0]["requests"], "daemon_ms": [round(x, 3) for x in ms]}
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


def cached_tokens(stub, gl, make_daemon, login, bench, seconds, rounds, log):
    """Warm token.get of a discovered resource's cached token against a configured one's,
    each in its own daemon (same binary, same Glewlwyd), in turns: one round that is not
    counted, then `rounds`, which goes first alternating. Per measure the medians of each
    daemon's figures and of the rounds' ratios (discovered ÷ configured)."""
    resource = stub.resource("mcp", gl.issuer, [SCOPE])
    api = gl.resources[0]
    providers = (f'\n[providers.static]\nissuer = "{gl.issuer}"\nclient_id = "{gl.client_id("authbroker")}"\n'
                 f'scopes = ["openid", "profile", "email", "offline_access"]\nresources = ["{api}"]\n'
                 'access_tokens = "independent"\n')
    log("discovery: a daemon with the provider configured (device sign-in) and one that finds it from a resource")
    conf = make_daemon("disc-configured", config_text("memory", providers))
    disc = make_daemon("disc-discovered", config_text("memory"))
    try:
        conf.start()
        login(conf, gl, "static")
        disc.start()
        provider = sign_in_discovered(disc, gl, resource, log)
        targets = {"configured": (conf, api), "discovered": (disc, resource)}
        lines = {}
        out = {"provider": provider, "answer_bytes": {}}
        for name, (d, res) in targets.items():
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
        measures = {
            "p50_1": lambda d, ls: bench("load", "--socket", d.socket, "--mode", "persistent", "--connections", 1,
                                         "--seconds", seconds, "--line", ls[0]),
            "rps_16": lambda d, ls: bench("load", "--socket", d.socket, "--mode", "persistent", "--connections", 16,
                                          "--seconds", seconds, "--line", ls[0]),
            "past_memo_1": lambda d, ls: bench("load", "--socket", d.socket, "--mode", "persistent", "--connections", 1,
                                               "--seconds", seconds, "--line", ls[0], "--others", "\n".join(ls[1:])),
        }
        log(f"discovery: warm token.get, discovered and configured in turns, {rounds} rounds of {seconds} s loads")
        runs = {m: {"configured": [], "discovered": []} for m in measures}
        for r in range(rounds + 1):
            order = ("configured", "discovered") if r % 2 else ("discovered", "configured")
            for m, load in measures.items():
                for name in order:
                    d, _ = targets[name]
                    x = load(d, lines[name])
                    if x["errors"]:
                        raise SystemExit(f"bench: {x['errors']} token.get failed against the {name} resource ({m})")
                    if r:
                        runs[m][name].append({"p50_us": x["p50_us"], "p99_us": x["p99_us"], "rps": x["rps"]})
        for m, per in runs.items():
            key = "rps" if m.startswith("rps") else "p50_us"
            out[m] = {name: {key: statistics.median(x[key] for x in rs), "runs": rs} for name, rs in per.items()}
            out[m]["ratio"] = statistics.median(d[key] / c[key] for d, c in zip(per["discovered"], per["configured"]))
        return out
    finally:
        conf.stop()
        disc.stop()


def run(work, gl, stub, make_daemon, login, bench, a, log):
    """The whole section: `results["discovery"]`."""
    started = time.time()
    out = {"first_token": first_tokens(stub, make_daemon, a.discovery_runs, log)}
    out["first_token_seconds"] = round(time.time() - started, 1)
    out["cached"] = cached_tokens(stub, gl, make_daemon, login, bench, max(0.25, a.seconds / 2), 4, log)
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
        row(f"discovered resource, first token: {label}, p50 (p90)", f"{ms(x['p50_ms'])} ({ms(x['p90_ms'])})",
            f"{calls} {ms(x['wall_p50_ms'])} − stub {ms(x['stub_p50_ms'])}", f"{len(x['stub_requests'])} stub request{'s' if len(x['stub_requests']) > 1 else ''}")
    c = d["cached"]
    for m, label, fmt, target, ok in (
            ("p50_1", "cached token.get p50, 1 connection: discovered vs configured", us, "≤ 1.2×",
             lambda x: x <= 1.2),
            ("past_memo_1", "… nine requests in turn (past the memo), p50", us, "≤ 1.2×", lambda x: x <= 1.2),
            ("rps_16", "… 16 connections", rate, "≥ 0.8", lambda x: x >= 0.8)):
        x = c[m]
        key = "rps" if m.startswith("rps") else "p50_us"
        row(label, fmt(x["discovered"][key]), f"configured {fmt(x['configured'][key])}",
            f"{x['ratio']:.2f}" + ("" if key == "rps" else "×"), target, ok(x["ratio"]))
