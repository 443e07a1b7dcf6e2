"""The inside of scripts/bench: runs in the private keyring session scripts/with-keyring made.

Starts two local Glewlwyd providers (one rotating refresh tokens, one not, the latter
with dynamic registration for the discovery rows), authbrokerd with store =
"secret-service" (the real gnome-keyring), signs alice in to both with the device grant,
and measures what docs/performance.md describes; then the discovery rows
(bench_discovery.py) on daemons of their own. Prints one table, or with --json one JSON
document. Never prints a token. Talks only to 127.0.0.1 and Unix sockets.
"""
import argparse
import copy
import json
import os
import re
import shutil
import signal
import statistics
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "IntegrationTests", "support"))
from glewlwyd_api import Glewlwyd  # noqa: E402
import bench_peers  # noqa: E402
from bench_table import table  # noqa: E402
from bench_fill import fill, p50_in_turns  # noqa: E402
import bench_bss  # noqa: E402
from bench_proc import keep_smaps, minor_faults, private_kb, process_schedstats, rss_kb, thread_schedstat  # noqa: E402
import bench_scale  # noqa: E402
import bench_discovery  # noqa: E402
import bench_clouds  # noqa: E402

BIN = os.environ["AUTHBROKER_BIN"]
AUTHBENCH = os.environ.get("AUTHBENCH") or os.path.join(BIN, "authbench")
AUTHBROKERD = os.path.join(BIN, "authbrokerd")
AUTHCTL = os.path.join(BIN, "authctl")
API = "https://api.example.test"
GIT = "https://git.example.test"
SCOPES = ["openid", "profile", "email", "offline_access"]


def installed_authctl():
    """authctl as scripts/install and the package install it: stripped of its symbols. The
    process rounds time this copy, kept on the build's disk beside the binary (not in the
    tmpfs work folder: its pages must be evictable as an installed binary's are); the order
    file's trace (bench_order) keeps the symbols."""
    path = AUTHCTL + "-installed"
    if not shutil.which("strip"):
        return AUTHCTL
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(AUTHCTL):
        shutil.copyfile(AUTHCTL, path + ".tmp")
        subprocess.run(["strip", path + ".tmp"], check=True)
        os.chmod(path + ".tmp", 0o755)
        os.replace(path + ".tmp", path)
    return path


def log(text):
    print(f"bench: {text}", file=sys.stderr, flush=True)


def bench(*args):
    r = subprocess.run([AUTHBENCH, *map(str, args)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"bench: authbench {args[0]} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def rpc_line(method, params=None, id=1):
    req = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        req["params"] = params
    return json.dumps(req, separators=(",", ":"))


def call(path, method, params=None):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(path)
        s.sendall((rpc_line(method, params) + "\n").encode())
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit(f"bench: the daemon closed the connection answering {method}")
            buf += chunk
        return json.loads(buf.split(b"\n", 1)[0])


def policy_cost(daemon, line, seconds):
    """token.get with an [[allow]] rule in force (the caller identified at accept and checked
    per request), then the rule taken out again for the rest of the run."""
    with open(daemon.config) as f:
        base = f.read()
    params = json.loads(line)["params"]

    def reload(text, code):
        with open(daemon.config, "w") as f:
            f.write(text)
        os.kill(daemon.pid, signal.SIGHUP)
        for _ in range(100):  # this script is not authbench: the rule refuses it
            if call(daemon.socket, "token.get", params).get("error", {}).get("code") == code:
                return
            time.sleep(0.05)
        raise SystemExit(f"bench: the daemon did not take up its reloaded config; see {daemon.log}")

    reload(base + f'\n[[allow]]\nexe = "{os.path.realpath(AUTHBENCH)}"\nresources = ["*"]\n', -32002)
    try:
        r = {mode: bench("load", "--socket", daemon.socket, "--mode", mode, "--connections", 1, "--seconds", seconds,
                         "--line", line) for mode in ("connect", "persistent")}
    finally:
        reload(base, None)
    for mode, x in r.items():
        if x["errors"]:
            raise SystemExit(f"bench: {x['errors']} token.get refused or failed with the [[allow]] rule ({mode})")
    return r


def ended(pid):
    """Whether the process has exited: gone, or a zombie (the daemon's parent is the one
    that reaps it, PID 1 once authbench ready has exited, which may take seconds)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


class Daemon:
    def __init__(self, work, providers):
        self.work = work
        self.socket = os.path.join(work, "broker.sock")
        self.config = os.path.join(work, "config.toml")
        self.log = os.path.join(work, "authbrokerd.log")
        self.pid = None
        self.wrap = None
        self.env = dict(os.environ, AUTHBROKER_SOCKET=self.socket)
        text = '[daemon]\nstore = "secret-service"\nrefresh_margin = 60\ncache_misses_per_minute = 0\n'
        for name, (gl, resources, *extra) in providers.items():
            text += (f"\n[providers.{name}]\nissuer = \"{gl.issuer}\"\n"
                     f"client_id = \"{gl.client_id('authbroker')}\"\n"
                     f"scopes = {json.dumps(SCOPES)}\nresources = {json.dumps(resources)}\n"
                     # Glewlwyd's access tokens outlive later refreshes (docs/providers.md).
                     'access_tokens = "independent"\n' + "".join(extra))
        with open(self.config, "w") as f:
            f.write(text)

    def start(self):
        """Starts authbrokerd; returns ms from exec to the first answered request."""
        os.environ["AUTHBROKER_SOCKET"] = self.socket
        wrap = self.wrap.split() if self.wrap else []
        r = bench("ready", "--socket", self.socket, "--log", self.log, "--timeout", 60 if wrap else 20, "--",
                  *wrap, AUTHBROKERD, "--config", self.config)
        self.pid = r["pid"]
        return r["ready_ms"]

    def twin(self, folder):
        """A second daemon with this one's configuration, and so its accounts (the same
        keyring), listening on its own socket."""
        os.mkdir(folder)
        other = copy.copy(self)
        other.work, other.wrap, other.pid = folder, None, None
        other.socket, other.config, other.log = (os.path.join(folder, n) for n in ("broker.sock", "config.toml", "log"))
        other.env = dict(os.environ, AUTHBROKER_SOCKET=other.socket)
        shutil.copy(self.config, other.config)
        return other

    def stop(self, sig=signal.SIGTERM):
        """Ends the daemon (SIGTERM: an orderly stop) and waits for it, 10 s at most."""
        if self.pid:
            try:
                os.kill(self.pid, sig)
                for _ in range(1000):
                    if ended(self.pid):
                        break
                    time.sleep(0.01)
                else:
                    os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.pid = None

    def login(self, gl, provider):
        p = subprocess.Popen([AUTHCTL, "login", "--device", "--provider", provider], env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        code = None
        deadline = time.time() + 30
        while code is None and time.time() < deadline:
            line = p.stderr.readline()
            if not line:
                break
            m = re.search(r"enter the code ([A-Za-z0-9-]+)", line)
            if m:
                code = m.group(1)
        if code is None:
            p.kill()
            raise SystemExit(f"bench: authctl login printed no code; see {self.log}")
        gl.approve_device(gl.login_session("alice"), code, gl.client_id("authbroker"), SCOPES)
        p.communicate(timeout=60)
        if p.returncode != 0:
            raise SystemExit(f"bench: sign-in to {provider} failed ({p.returncode}); see {self.log}")

    def counters(self):
        return call(self.socket, "daemon.status")["result"]["counters"]


def profile(daemon, out):
    """Instructions per warm token.get, counted by callgrind: repeatable on a busy machine,
    unlike time. Only the requests are counted: instrumentation is off until the load starts."""
    daemon.stop()
    # Valgrind 3.19 cannot read the DWARF 5 that swiftc writes: profile a copy without it
    # (the symbol table stays, so functions keep their names).
    global AUTHBROKERD
    plain = os.path.join(daemon.work, "authbrokerd-nodebug")
    subprocess.run(["objcopy", "--strip-debug", AUTHBROKERD, plain], check=True)
    AUTHBROKERD = plain
    daemon.wrap = f"{shutil.which('valgrind')} --tool=callgrind --callgrind-out-file={out} --instr-atstart=no"
    daemon.start()
    line = rpc_line("token.get", {"provider": "rot", "resource": API})
    call(daemon.socket, "token.get", {"provider": "rot", "resource": API})
    # "alternating": two callers' requests in turn on one connection (two tokens, two
    # accounts); "eight": eight requests in turn, as many as the front door's memo keeps
    # answers, so each is found last of them (the most recently used are compared first);
    # "nine": one more in turn than it keeps, so none is found (each was the least recently
    # used, dropped for the one before it): the full path, with the memo's look-up and keeping.
    other = rpc_line("token.get", {"provider": "static", "resource": GIT})
    call(daemon.socket, "token.get", {"provider": "static", "resource": GIT})
    eight = [rpc_line("token.get", dict(p, **({"min_ttl": t} if t else {})))
             for p in ({"provider": "rot", "resource": API}, {"provider": "static", "resource": GIT})
             for t in (0, 100, 200, 300)]
    call(daemon.socket, "token.get", {"provider": "static", "resource": API})
    nine = eight + [rpc_line("token.get", {"provider": "static", "resource": API})]
    folder = os.path.dirname(out)
    for mode, extra in (("persistent", []), ("connect", []), ("alternating", ["--others", other]),
                        ("eight", ["--others", "\n".join(eight[1:])]), ("nine", ["--others", "\n".join(nine[1:])])):
        before = set(os.listdir(folder))
        subprocess.run(["callgrind_control", "-i", "on", str(daemon.pid)], check=True, stdout=subprocess.DEVNULL)
        r = bench("load", "--socket", daemon.socket, "--mode", "connect" if mode == "connect" else "persistent",
                  "--connections", 1, "--seconds", 3, "--warmup", 0, "--line", eight[0] if mode in ("eight", "nine") else line, *extra)
        subprocess.run(["callgrind_control", "-d", mode, str(daemon.pid)], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["callgrind_control", "-i", "off", str(daemon.pid)], check=True, stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        dumps = sorted(set(os.listdir(folder)) - before)
        total = 0
        for f in dumps:
            for text in open(os.path.join(folder, f), errors="replace"):
                # "summary:" can wrap around in callgrind 3.19 after a dump; "totals:" does not.
                if text.startswith("totals:"):
                    total = int(text.split()[1])
        # The warm-up's requests were instrumented too: count them by the daemon's counter.
        print(f"{mode}: {', '.join(os.path.join(folder, f) for f in dumps)}: {total:,} instructions, "
              f"{r['requests']} requests, {total // max(1, r['requests']):,} per request")
    n = daemon.counters()
    print(f"daemon counters: {json.dumps(n)}")
    daemon.stop()


def quiet_requests(a, daemon, echo, echo_line, agent, client_bin):
    """The occasional request: one request on a new connection after 7 s (and 60 s) in which
    nothing talked to the daemon, the echo floor or oidc-agent, all in the same rounds
    (authbench quiet); then the whole processes (authctl token, the C client, oidc-token)
    after the same quiet, in rounds of their own (each of them wakes its daemon)."""
    echo_sock, echo_proc = echo
    sockets = [("broker", ["--socket{i}", daemon.socket, "--line{i}", rpc_line("token.get", {"provider": "rot", "resource": API})]),
               ("echo", ["--socket{i}", echo_sock, "--line{i}", echo_line])]
    processes = [("authctl", ["--command{i}", f"{installed_authctl()} token --resource {API} --provider rot"]),
                 ("c_client", ["--command{i}", f"{client_bin} {API} rot"])]
    # The server side of each socket target, for its time on a CPU and waiting for one
    # during each request: the daemon's front door thread (the one that answers a cached
    # token), the echo server, oidc-agent's two processes (its socket side passes the
    # request to its token side).
    servers = {"broker": lambda: [thread_schedstat(daemon.pid, "authbroker-door")],
               "echo": lambda: process_schedstats([echo_proc.pid])}
    if agent:
        sockets.append(("oidc_agent", ["--socket{i}", agent.socket, "--line{i}", bench_peers.REQUEST, "--framing{i}", "close"]))
        processes.append(("oidc_token", ["--command{i}", f"{shutil.which('oidc-token')} {bench_peers.ACCOUNT}"]))
        os.environ["OIDC_SOCK"] = agent.socket
        servers["oidc_agent"] = lambda: process_schedstats(agent.pids())

    def rounds(targets, quiet, n):
        args = ["quiet", "--quiet", quiet, "--rounds", n]
        for i, (_, opts) in enumerate(targets):
            args += [o.format(i=i) if o.startswith("--") else o for o in opts]
        r = bench(*args)
        return {name: t for (name, _), t in zip(targets, r["targets"])}

    def watched(quiet, n):
        """The socket rounds one at a time, each target's first in turn, and where each
        request's time went (authbench, from schedstat, outside the timed part): this
        client's own wait for a CPU, and the server's time on a CPU and waiting for one from
        the connect to the answer; over all rounds, whether the daemon's answers were cache
        hits (a refresh would put the provider's round trip into the figure) and its page
        faults (issue 25: 8 and 14 ms after 60 s in two runs). A slow round whose server
        waited is the machine's on that server's side (other programs on the CPUs;
        docs/performance.md, "The first request after 60 s"); one whose server ran long is
        the server's own work; one whose client waited long is the measuring side's."""
        # The counters are asked of the daemon itself: outside the faults read.
        refreshes = daemon.counters()["refreshes"]
        faults = minor_faults(daemon.pid)
        per = {name: [] for name, _ in sockets}
        for k in range(n):
            order = sockets[k % len(sockets):] + sockets[:k % len(sockets)]
            order = [(name, opts + ["--schedstat{i}", " ".join(servers[name]())]) for name, opts in order]
            r = rounds(order, quiet, 1)
            for name, _ in sockets:
                t = r[name]
                per[name].append({key: t[key][0] for key in ("rounds_us", "client_wait_us", "server_run_us", "server_wait_us")})
        out = {}
        for name, rs in per.items():
            times = [x["rounds_us"] for x in rs]
            out[name] = {"p50_us": statistics.median(times), "min_us": min(times), "max_us": max(times),
                         "slowest": max(rs, key=lambda x: x["rounds_us"]), "rounds": rs}
        door = per["broker"]
        out["daemon"] = {"refreshes": daemon.counters()["refreshes"] - refreshes,
                         "minor_faults": minor_faults(daemon.pid) - faults,
                         "door_run_us": statistics.median(x["server_run_us"] for x in door),
                         "door_wait_us": statistics.median(x["server_wait_us"] for x in door)}
        return out

    out = {}
    log(f"first request after 7 s quiet: {a.quiet_rounds} rounds of {', '.join(n for n, _ in sockets)}")
    out["7"] = watched(7, a.quiet_rounds)
    log(f"whole process after 7 s quiet: {a.quiet_rounds} rounds of {', '.join(n for n, _ in processes)}")
    out["7_process"] = rounds(processes, 7, a.quiet_rounds)
    if a.long_quiet_rounds:
        log(f"first request after 60 s quiet: {a.long_quiet_rounds} rounds")
        out["60"] = watched(60, a.long_quiet_rounds)
    return out


def scale(a):
    """`--scale`: bench_scale's sweeps on daemons of their own, then its table and plot."""
    work = tempfile.mkdtemp(prefix="abs-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp")

    def make_daemon(name):
        folder = os.path.join(work, name)
        os.mkdir(folder)
        return Daemon(folder, {})

    started = time.time()
    load = os.getloadavg()[0]
    try:
        r = bench_scale.run(work, make_daemon, bench, AUTHCTL, max(0.25, a.seconds / 4), log)
    finally:
        if os.environ.get("AUTHBROKER_KEEP_HOME") != "1":
            shutil.rmtree(work, ignore_errors=True)
    r["machine"] = {"cores": os.cpu_count(), "load_before": load, "load_after": os.getloadavg()[0],
                    "seconds": round(time.time() - started)}
    note = bench_scale.plot(r, os.path.abspath(a.scale))
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        print(f"authbroker scaling: {r['machine']['cores']} cores, load {load:.1f} → {r['machine']['load_after']:.1f}, "
              f"{r['machine']['seconds']} s")
        print(bench_scale.table(r))
    log(note)


def main():
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    ap.add_argument("--seconds", type=float, default=2.0, help="measured seconds per load run (default 2)")
    ap.add_argument("--runs", type=int, default=200, help="process starts timed for authctl and the C client")
    ap.add_argument("--cold", type=int, default=1000, help="concurrent requests in the cold-cache test")
    ap.add_argument("--entries", type=int, default=10000, help="cache entries for the memory test")
    ap.add_argument("--quiet-rounds", type=int, default=5,
                    help="requests after 7 s of quiet, per target (default 5)")
    ap.add_argument("--long-quiet-rounds", type=int, default=3,
                    help="requests after 60 s of quiet, per target (default 3; 0 leaves them out)")
    ap.add_argument("--quick", action="store_true",
                    help="short runs (0.5 s, 50 starts, 1000 entries, 2 quiet rounds, no 60 s quiet, 10 discovery "
                         "runs): a smoke test")
    ap.add_argument("--discovery-runs", type=int, default=20,
                    help="first tokens of discovered resources timed per case (default 20)")
    ap.add_argument("--discovery-only", action="store_true",
                    help="only the discovery rows: a discovered resource's first token and its cached token against "
                         "a configured one's (~50 s)")
    ap.add_argument("--scale", metavar="PNG", nargs="?", const="bench-scale.png",
                    help="instead of the figures: how p50 and private memory grow with cached tokens and idle "
                         "connections, as a table and a plot written to PNG (default bench-scale.png); ~5 min")
    ap.add_argument("--profile", metavar="FILE",
                    help="instead of the figures: run the warm token.get path under callgrind and write its profile "
                         "to FILE (read it with callgrind_annotate)")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.runs, a.entries = 0.5, 50, min(a.entries, 1000)
        a.quiet_rounds, a.long_quiet_rounds = 2, 0
        a.discovery_runs = min(a.discovery_runs, 10)
    if a.scale:
        return scale(a)

    started = time.time()
    # tmpfs when there is one: Glewlwyd's sqlite fsyncs every refresh, and the provider's
    # disk is not what this measures.
    work = tempfile.mkdtemp(prefix="abb-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp")
    gl_dirs = [os.path.join(work, "gl-rot"), os.path.join(work, "gl-static")]
    daemon = echo = agent = stub = None
    results = {"machine": {"cores": os.cpu_count(), "load_before": os.getloadavg()[0]},
               "store": "secret-service (gnome-keyring, private session)"}

    def discovery(rot, static):
        """The discovery rows (bench_discovery.py), on daemons of their own: resources
        whose metadata names static, beside rot configured."""
        def make_daemon(name, text):
            folder = os.path.join(work, name)
            os.mkdir(folder)
            d = Daemon(folder, {})
            with open(d.config, "w") as f:
                f.write(text)
            return d
        results["discovery"] = bench_discovery.run(stub, rot, static, make_daemon, lambda d, gl, p: d.login(gl, p),
                                                   bench, a, log)

    def report():
        print(json.dumps(results, indent=2) if a.json else table(results))

    try:
        # The STUB resources and authorization servers of the discovery rows (bench_discovery.py);
        # one resource of it names the static Glewlwyd, which must allow it.
        stub = bench_discovery.StubServer()
        discovered = ["--dynamic-registration", "--resource", f"{stub.base}/mcp"]
        if a.discovery_only:
            results["store"] = "memory (and secret-service where a row says so)"
        else:
            log("compiling the C echo server and token client")
            support = os.path.join(ROOT, "scripts", "bench-support")
            echo_bin = os.path.join(work, "echo_server")
            client_bin = os.path.join(work, "token_client")
            for src, out in (("echo_server.c", echo_bin), ("token_client.c", client_bin)):
                subprocess.run(["cc", "-O2", "-o", out, os.path.join(support, src)], check=True)

        log("starting two Glewlwyd providers on 127.0.0.1 (rotating and static refresh tokens, the latter with "
            "dynamic registration)")
        for d, mode, extra in zip(gl_dirs, ("always", "never"), ([], discovered)):
            os.mkdir(d)
            subprocess.run([os.path.join(ROOT, "scripts", "glewlwyd"), "start", d, "--refresh-token-one-use", mode,
                            *extra], check=True, stdout=subprocess.DEVNULL)
        rot, static = Glewlwyd(gl_dirs[0]), Glewlwyd(gl_dirs[1])
        if a.discovery_only:
            discovery(rot, static)
            results["seconds_total"] = round(time.time() - started, 1)
            results["machine"]["load_after"] = os.getloadavg()[0]
            return report()
        # "dpop": the static provider again, with DPoP-bound tokens (docs/dpop.md).
        # The memory test fills the cache with 10 000 tokens of one account, each of its own
        # scope set, from 8 connections: the bounds on callers' choices are lifted for it.
        fill_bounds = "any_scopes = true\nmax_tokens_per_account = 100000\n"
        daemon = Daemon(work, {"rot": (rot, [API]), "static": (static, [API, GIT], fill_bounds),
                               "dpop": (static, [API], "dpop = true\n")})

        if bench_peers.available():
            log("starting oidc-agent and signing alice in to rot (password grant, confidential client)")
            agent = bench_peers.OidcAgent(work)
            agent.start()
            agent.sign_in(rot)
        else:
            log(f"oidc-agent-cli is not installed: no oidc-agent rows ({bench_peers.INSTALL})")

        log("starting authbrokerd and signing alice in to all three (device grant)")
        results["ready_empty_ms"] = daemon.start()
        daemon.login(rot, "rot")
        daemon.login(static, "static")
        daemon.login(static, "dpop")
        daemon.stop()

        if a.profile:
            return profile(daemon, os.path.abspath(a.profile))

        # A restart: the accounts come back from the keyring and the cache is empty.
        results["ready_ms"] = daemon.start()
        time.sleep(0.5)
        results["rss_idle_kb"] = rss_kb(daemon.pid)
        results["private_idle_kb"] = private_kb(daemon.pid)
        keep_smaps(daemon.pid, "")

        log(f"cold cache: {a.cold} concurrent token.get for one resource")
        before = daemon.counters()
        since = int(time.time())
        cold_line = rpc_line("token.get", {"provider": "rot", "resource": API})
        burst = bench("burst", "--socket", daemon.socket, "--count", a.cold, "--line", cold_line)
        time.sleep(1.1)  # Glewlwyd stores whole seconds
        events = rot.count_token_events(since, client_id=rot.client_id("authbroker"))
        after = daemon.counters()
        results["cold"] = {**burst, "provider_refreshes": sum(events["refreshes"].values()),
                           "daemon_refreshes": after["refreshes"] - before["refreshes"]}

        warm_line = cold_line
        answer = call(daemon.socket, "token.get", {"provider": "rot", "resource": API})
        if "result" not in answer:
            raise SystemExit(f"bench: token.get failed: {answer.get('error', {}).get('message')}")
        answer_len = len(json.dumps(answer, separators=(",", ":")))
        # The echo floor answers with the line it got: pad it to the broker's answer length
        # so that both move the same bytes back.
        pad = max(0, answer_len - len(warm_line) - len(',"pad":""'))
        echo_line = warm_line[:-1] + ',"pad":"' + "x" * pad + '"}'

        echo_sock = os.path.join(work, "echo.sock")
        echo = subprocess.Popen([echo_bin, echo_sock])
        for _ in range(200):
            if os.path.exists(echo_sock):
                break
            time.sleep(0.01)

        log("warm token.get and the echo floor: persistent and new connections, 1/16/64")
        loads = {}
        for mode in ("persistent", "connect"):
            for n in (1, 16, 64):
                for name, path, line in (("broker", daemon.socket, warm_line), ("echo", echo_sock, echo_line)):
                    loads[f"{name}.{mode}.{n}"] = bench("load", "--socket", path, "--mode", mode, "--connections", n,
                                                        "--seconds", a.seconds, "--line", line)
        results["load"] = loads
        if agent:
            log("oidc-agent: new connection per request, 1 and 16 clients")
            results["peer"] = {"load": bench_peers.loads(agent, bench, a.seconds)}

        log("the [[allow]] policy's cost: one rule naming authbench, new connection per request and persistent")
        results["policy"] = policy_cost(daemon, warm_line, a.seconds)

        log("warm dpop.proof: a proof signed (ES256) for each request, beside token.get of the same account")
        proof_line = rpc_line("dpop.proof", {"provider": "dpop", "resource": API, "htm": "GET", "htu": API + "/v1/items"})
        answer = call(daemon.socket, "dpop.proof", json.loads(proof_line)["params"])
        if "result" not in answer:
            raise SystemExit(f"bench: dpop.proof failed: {answer.get('error', {}).get('message')}")
        results["dpop"] = {
            "token": bench("load", "--socket", daemon.socket, "--mode", "persistent", "--connections", 1,
                           "--seconds", a.seconds, "--line", rpc_line("token.get", {"provider": "dpop", "resource": API})),
            "proof": bench("load", "--socket", daemon.socket, "--mode", "persistent", "--connections", 1,
                           "--seconds", a.seconds, "--line", proof_line),
        }

        log(f"authctl token and the C client, {a.runs} process starts each")
        results["authctl"] = bench("spawn", "--runs", a.runs, "--", installed_authctl(), "token", "--resource", API, "--provider", "rot")
        results["c_client"] = bench("spawn", "--runs", a.runs, "--", client_bin, API, "rot")
        results["clouds"] = bench_clouds.run(daemon, "static", bench, installed_authctl(), a, log)
        if agent:
            results["peer"]["oidc_token"] = bench_peers.token_process(agent, bench, a.runs)

        log("8 s quiet, then private and resident memory")
        time.sleep(8)
        results["private_quiet_kb"] = private_kb(daemon.pid)
        results["rss_quiet_kb"] = rss_kb(daemon.pid)
        keep_smaps(daemon.pid, ".quiet")
        if os.environ.get("AUTHBENCH_BSS"):  # scripts/bench --daemon-layout (bench_bss.py)
            bench_bss.dump(daemon.pid, AUTHBROKERD, os.environ["AUTHBENCH_BSS"])
        if agent:
            results["peer"]["private_quiet_kb"] = agent.private_kb()
            results["peer"]["rss_quiet_kb"] = agent.rss_kb()
            results["peer"]["processes"] = len(agent.pids())
        # What the first request after that quiet maps or allocates again.
        faults = minor_faults(daemon.pid)
        call(daemon.socket, "token.get", {"provider": "rot", "resource": API})
        time.sleep(0.2)
        results["rss_quiet_one_kb"] = rss_kb(daemon.pid)
        results["quiet_one_faults"] = minor_faults(daemon.pid) - faults

        results["quiet"] = quiet_requests(a, daemon, (echo_sock, echo), echo_line, agent, client_bin)

        log(f"filling the cache with {a.entries} entries (real refreshes at the static provider)")
        t0 = time.time()
        fill_errors = fill(daemon.socket, a.entries, lambda i: rpc_line(
            "token.get", {"provider": "static", "resource": API if i % 2 == 0 else GIT, "scopes": [f"bench.{i}"]}, id=i + 1))
        results["fill"] = {"entries": a.entries, "errors": fill_errors, "seconds": round(time.time() - t0, 1)}
        time.sleep(0.5)
        results["rss_full_kb"] = rss_kb(daemon.pid)
        # Against a second daemon with few entries, in turns: runs a minute apart (before and
        # after the fill) differed by more than the entries could make (docs/performance.md).
        twin = daemon.twin(os.path.join(work, "twin"))
        twin.start()
        os.environ["AUTHBROKER_SOCKET"] = daemon.socket  # start() pointed it at the twin
        try:
            entries_line = rpc_line("token.get", {"provider": "static", "resource": API})
            results["entries_p50"] = p50_in_turns(lambda d: bench(
                "load", "--socket", d.socket, "--mode", "persistent", "--connections", 1,
                "--seconds", max(0.25, a.seconds / 4), "--line", entries_line), many=daemon, few=twin)
        finally:
            twin.stop()
        # The daemon hands the refreshes' freed heap back once quiet for 5 s (MemoryTrim).
        time.sleep(7)
        results["rss_full_quiet_kb"] = rss_kb(daemon.pid)
        daemon.stop()
        discovery(rot, static)
        results["seconds_total"] = round(time.time() - started, 1)
        results["machine"]["load_after"] = os.getloadavg()[0]
    finally:
        if stub:
            stub.stop()
        if agent:
            agent.stop()
        if echo:
            echo.terminate()
            echo.wait()
        if daemon:
            daemon.stop()
        for d in gl_dirs:
            if os.path.isdir(d):
                subprocess.run([os.path.join(ROOT, "scripts", "glewlwyd"), "stop", d], stdout=subprocess.DEVNULL)
        if os.environ.get("AUTHBROKER_KEEP_HOME") != "1":
            shutil.rmtree(work, ignore_errors=True)

    report()


if __name__ == "__main__":
    main()
