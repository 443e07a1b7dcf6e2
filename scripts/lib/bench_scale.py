"""How cost grows (`scripts/bench --scale`, docs/performance.md): the warm token.get's p50
and the daemon's private memory against the number of cached tokens (1, 100, 10 000,
100 000) and of idle connections (1, 100, 1 000), as a table and a PNG plot.

The tokens come from the test suite's STUB provider (Tests/IntegrationTests/support/
stub_provider.py), not Glewlwyd: each cached token is a refresh at the provider, one at a
time, and Glewlwyd takes ~6 ms per refresh on this machine (100 000 would take ten minutes),
the stub about a tenth of that. Its access tokens are padded to 1 KB, the size of
Glewlwyd's JWTs, so that an entry costs what a real one does. The daemon keeps its refresh
token in memory (`store = "memory"`): a rotated refresh token written to the keyring per
entry would measure the keyring.

Each p50 is measured in turns against a second daemon of the same binary whose cache holds
one token and which has no idle connections (p50_in_turns): the load of a shared machine
drifts over seconds, the ratio in one round does not. Private memory is RssAnon + VmSwap
from /proc/PID/status, 6 s after the last request (after the daemon's quiet trim).
"""
import json
import resource
import socket
import subprocess
import time

from bench_fill import fill, p50_in_turns
from bench_proc import private_kb, rss_kb
from stub_provider import StubProvider

TOKENS = (1, 100, 10_000, 100_000)
CONNECTIONS = (1, 100, 1000)
RESOURCE = "https://api.example.test"
TOKEN_BYTES = 1024


class PaddedStub(StubProvider):
    """The stub, with access tokens as long as a provider's JWT (its own are 32 bytes)."""

    def _tokens(self, *args, **kwargs):
        answer = super()._tokens(*args, **kwargs)
        answer["access_token"] += "." + "x" * (TOKEN_BYTES - len(answer["access_token"]) - 1)
        return answer


def config(stub, name):
    return ('[daemon]\nstore = "memory"\ncache_misses_per_minute = 0\nmax_connections = 4096\n\n'
            f'[providers.{name}]\nissuer = "{stub.issuer}"\nclient_id = "{stub.client_id}"\n'
            'scopes = ["openid", "offline_access"]\n'
            f'resources = ["{RESOURCE}"]\naccess_tokens = "independent"\n'
            f"any_scopes = true\nmax_tokens_per_account = {max(TOKENS)}\n")


def sign_in(authctl, daemon, name):
    """`authctl login --device`: the stub approves every device code at once."""
    r = subprocess.run([authctl, "login", "--device", "--provider", name], env=daemon.env, capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"bench: sign-in at the stub failed ({r.returncode}); see {daemon.log}")


def rpc(i, scopes=None):
    params = {"provider": "scale", "resource": RESOURCE}
    if scopes:
        params["scopes"] = scopes
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "token.get", "params": params}, separators=(",", ":"))


def idle_connections(path, count, line):
    """`count` connections that asked for a token once each and are left open, idle."""
    held = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(path)
        s.sendall((line + "\n").encode())
        buf = b""
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("bench: the daemon closed an idle connection")
            buf += chunk
        held.append(s)
    return held


def run(work, make_daemon, bench, authctl, seconds, log):
    """Both sweeps; returns {"tokens": [...], "connections": [...]} with one point each."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    stub = PaddedStub(access_token_life=7200)
    stub.start()
    daemons = []
    try:
        many, few = make_daemon("scale"), make_daemon("scale-few")
        daemons += [many, few]
        for d in daemons:
            with open(d.config, "w") as f:
                f.write(config(stub, "scale"))
            d.start()
            sign_in(authctl, d, "scale")
        plain = rpc(1)

        def load(d):
            return bench("load", "--socket", d.socket, "--mode", "persistent", "--connections", 1,
                         "--seconds", seconds, "--line", plain)

        def point(d):
            time.sleep(6)  # past the daemon's quiet (5 s): the memory it keeps idle
            p = {"private_kb": private_kb(d.pid), "rss_kb": rss_kb(d.pid)}
            p.update(p50_in_turns(load, many=d, few=few, rounds=4))
            return p

        out = {"tokens": [], "connections": [], "stub": "Tests/IntegrationTests/support/stub_provider.py"}
        for n in CONNECTIONS:
            log(f"scale: {n} idle connection{'s' if n > 1 else ''}")
            held = idle_connections(many.socket, n, plain)
            try:
                out["connections"].append({"count": n, **point(many)})
            finally:
                for s in held:
                    s.close()
        filled = 1  # the plain token.get's
        for n in TOKENS:
            if n > filled:
                log(f"scale: filling the cache to {n:,} tokens")
                t0 = time.time()
                while filled < n:
                    # In steps the fill's connections can send within their time-out.
                    step = min(n - filled, 10_000)
                    errors = fill(many.socket, step, lambda i: rpc(i + 1, [f"s.{filled + i}"]))
                    if errors:
                        raise SystemExit(f"bench: {errors} of the cache fill's requests failed; see {many.log}")
                    filled += step
                log(f"scale: filled in {time.time() - t0:.0f} s")
            out["tokens"].append({"count": n, **point(many)})
        return out
    finally:
        for d in daemons:
            d.stop()
        stub.stop()


def per_unit(points):
    """Private memory per token or connection: the slope from the first point to the last."""
    a, b = points[0], points[-1]
    return (b["private_kb"] - a["private_kb"]) * 1024 / (b["count"] - a["count"])


def table(r):
    out = ["how cost grows: warm token.get p50 (1 connection) and private memory (RssAnon + swap, "
           "after 6 s quiet); p50 ratio against a daemon with 1 token, in turns",
           f"{'':>25}  {'p50':>8}  {'vs 1 token':>10}  {'private':>9}  {'RSS':>8}"]
    for kind, unit in (("tokens", "cached tokens"), ("connections", "idle connections")):
        for p in r[kind]:
            out.append(f"{p['count']:>8,} {unit:<16}  {p['many']['p50_us']:>6.1f}µs  {p['ratio']:>9.2f}×  "
                       f"{p['private_kb'] / 1024:>7.1f}MB  {p['rss_kb'] / 1024:>6.1f}MB")
    out.append(f"private memory per cached token: {per_unit(r['tokens']):,.0f} bytes; "
               f"per idle connection: {per_unit(r['connections']):,.0f} bytes")
    return "\n".join(out)


def plot(r, path):
    """The PNG: p50 and private memory against each count, log scale."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (python3 -m pip install matplotlib, or apt-get install python3-matplotlib)"
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for col, (kind, label) in enumerate((("tokens", "cached tokens"), ("connections", "idle connections"))):
        xs = [p["count"] for p in r[kind]]
        top, bottom = axes[0][col], axes[1][col]
        top.plot(xs, [p["many"]["p50_us"] for p in r[kind]], "o-", label="this daemon")
        top.plot(xs, [p["few"]["p50_us"] for p in r[kind]], "s--", label="1 token, no idle connections (same rounds)")
        top.set_ylabel("warm token.get p50 (µs)")
        top.set_ylim(bottom=0)
        top.legend(fontsize=8)
        bottom.plot(xs, [p["private_kb"] / 1024 for p in r[kind]], "o-", label="private (RssAnon + swap)")
        bottom.plot(xs, [p["rss_kb"] / 1024 for p in r[kind]], "s--", label="RSS")
        bottom.set_ylabel("memory after 6 s quiet (MB)")
        bottom.set_ylim(bottom=0)
        bottom.legend(fontsize=8)
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_xlabel(label)
            ax.grid(True, alpha=0.3)
    fig.suptitle("authbrokerd: how cost grows (scripts/bench --scale)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"plot: {path}"
