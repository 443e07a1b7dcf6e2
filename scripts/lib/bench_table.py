"""The table scripts/bench prints: one row per figure, its floor or peer, the ratio, the
target of the issue it belongs to (docs/performance.md) and whether this run met it."""
import bench_discovery
import bench_clouds
import bench_peers


def ms(v):
    return f"{v:.2f} ms" if v < 100 else f"{v:.0f} ms"


def us(v):
    return f"{v:.0f} µs"


def rate(v):
    return f"{v:,.0f}/s"


def _rows():
    rows = []

    def row(what, value, floor="", ratio="", target="", ok=None):
        mark = "" if ok is None else ("ok" if ok else "MISS")
        rows.append((what, value, floor, ratio, target, mark))
    return rows, row


def _render(r, rows, notes=()):
    head = ("measure", "authbrokerd", "floor / other", "ratio", "target", "")
    widths = [max(len(x[i]) for x in rows + [head]) for i in range(6)]
    m = r["machine"]
    out = [f"authbroker benchmark: {m['cores']} cores, load {m['load_before']:.1f} → "
           f"{m['load_after']:.1f}, store {r['store']}, {r['seconds_total']} s"]
    for x in [head] + rows:
        out.append("  ".join(x[i].ljust(widths[i]) for i in range(6)).rstrip())
    return "\n".join(out + list(notes))


def table(r):
    rows, row = _rows()
    if "load" not in r:  # scripts/bench --discovery-only
        bench_discovery.rows(r, row, us, ms, rate)
        return _render(r, rows)
    L = r["load"]

    def slowest(x):
        """Where a quiet round's time went (bench.py's watched())."""
        return f"{us(x['rounds_us'])}: {us(x['client_wait_us'])}; {us(x['server_run_us'])}, {us(x['server_wait_us'])}"

    b, e = L["broker.persistent.1"], L["echo.persistent.1"]
    row("warm token.get p50, 1 connection", us(b["p50_us"]), us(e["p50_us"]), f"{b['p50_us'] / e['p50_us']:.2f}×",
        "≤ 1.2× floor", b["p50_us"] <= 1.2 * e["p50_us"])
    row("warm token.get p99, 1 connection", us(b["p99_us"]), us(e["p99_us"]), f"{b['p99_us'] / e['p99_us']:.2f}×")
    for n in (1, 16, 64):
        b, e = L[f"broker.persistent.{n}"], L[f"echo.persistent.{n}"]
        target, ok = ("≥ 0.6 floor", b["rps"] >= 0.6 * e["rps"]) if n == 16 else ("", None)
        row(f"warm token.get, {n} connection{'s' if n > 1 else ''}", rate(b["rps"]), rate(e["rps"]),
            f"{b['rps'] / e['rps']:.2f}", target, ok)
    t, p = r["dpop"]["token"], r["dpop"]["proof"]
    row("warm dpop.proof p50, 1 connection", us(p["p50_us"]), f"token.get {us(t['p50_us'])}", f"{p['p50_us'] / t['p50_us']:.2f}×")
    row("warm dpop.proof, 1 connection", rate(p["rps"]), f"token.get {rate(t['rps'])}", f"{p['rps'] / t['rps']:.2f}")
    b, e = L["broker.connect.1"], L["echo.connect.1"]
    row("new connection per request p50", us(b["p50_us"]), us(e["p50_us"]), f"{b['p50_us'] / e['p50_us']:.2f}×")
    for n in (1, 16, 64):
        b, e = L[f"broker.connect.{n}"], L[f"echo.connect.{n}"]
        row(f"new connection per request, {n} at once", rate(b["rps"]), rate(e["rps"]), f"{b['rps'] / e['rps']:.2f}")
    none, rule = L["broker.connect.1"], r["policy"]["connect"]
    row("new connection per request p50, one [[allow]] rule", us(rule["p50_us"]), f"no rule {us(none['p50_us'])}",
        f"{rule['p50_us'] / none['p50_us']:.2f}×")
    none, rule = L["broker.persistent.1"], r["policy"]["persistent"]
    row("warm token.get p50, 1 connection, one [[allow]] rule", us(rule["p50_us"]), f"no rule {us(none['p50_us'])}",
        f"{rule['p50_us'] / none['p50_us']:.2f}×")
    ac, cc = r["authctl"], r["c_client"]
    row("authctl token, whole process, median", ms(ac["p50_ms"]), f"C {ms(cc['p50_ms'])}",
        f"{ac['p50_ms'] / cc['p50_ms']:.2f}×", "≤ 2× C", ac["p50_ms"] <= 2 * cc["p50_ms"])
    bench_clouds.rows(r, row, ms)
    c = r["cold"]
    row(f"cold: {c['count']} concurrent, refreshes at provider", str(c["provider_refreshes"]),
        f"daemon {c['daemon_refreshes']}", "", "1", c["provider_refreshes"] == 1 and c["errors"] == 0)
    row(f"cold: {c['count']} concurrent, all answered", ms(c["all_ms"]), f"first {ms(c['first_ms'])}",
        f"{c['errors']} errors" + (f" (first {c['first_error_code']})" if c["errors"] else ""))
    row("private memory idle 0.5 s after start (accounts loaded)", f"{r['private_idle_kb'] / 1024:.1f} MB",
        f"RSS {r['rss_idle_kb'] / 1024:.1f} MB")
    for quiet in ("7", "60"):
        q = r["quiet"].get(quiet)
        if not q:
            continue
        b, e = q["broker"], q["echo"]
        row(f"first request after {quiet} s quiet, new connection, median", us(b["p50_us"]), us(e["p50_us"]),
            f"{b['p50_us'] / e['p50_us']:.2f}×", "≤ 2× floor", b["p50_us"] <= 2 * e["p50_us"])
        row("… its rounds, fastest and slowest", f"{us(b['min_us'])}–{us(b['max_us'])}", f"{us(e['min_us'])}–{us(e['max_us'])}")
        if "slowest" in b:
            row("… the slowest: client waited; server ran, waited", slowest(b["slowest"]), slowest(e["slowest"]))
        d = q.get("daemon")
        if d:
            row("… the daemon in those rounds: refreshes, faults", f"{d['refreshes']} refreshes", f"{d['minor_faults']} minor faults")
            row("… its front door per request, median: on a CPU, waiting for one", us(d["door_run_us"]), f"waiting {us(d['door_wait_us'])}")
    q = r["quiet"]["7_process"]
    row("authctl token after 7 s quiet, whole process, median", ms(q["authctl"]["p50_us"] / 1000),
        f"C {ms(q['c_client']['p50_us'] / 1000)}", f"{q['authctl']['p50_us'] / q['c_client']['p50_us']:.2f}×")
    if "major_faults" in q["authctl"]:
        # Pages read from disk: this VM's page cache evicts a static image's pages between
        # runs (docs/performance.md, "Figures"), which is what makes this row move.
        others = ", ".join(f"{label} {int(sum(q[n]['major_faults']))}"
                           for n, label in (("c_client", "C"), ("oidc_token", "oidc-token")) if n in q)
        row("… major faults in those rounds (pages read from disk)", f"{int(sum(q['authctl']['major_faults']))}", others)
    row("private memory (RssAnon + swap) after load, quiet 8 s", f"{r['private_quiet_kb'] / 1024:.1f} MB")
    row("RSS after load, quiet 8 s (reported, not a target)", f"{r['rss_quiet_kb'] / 1024:.1f} MB")
    row("… then one token.get", f"{r['rss_quiet_one_kb'] / 1024:.1f} MB", f"{r['quiet_one_faults']} minor faults")
    f = r["fill"]
    row(f"RSS with {f['entries']:,} cache entries", f"{r['rss_full_kb'] / 1024:.1f} MB", f"filled in {f['seconds']} s",
        f"{f['errors']} errors")
    row(f"RSS with {f['entries']:,} entries, quiet 7 s", f"{r['rss_full_quiet_kb'] / 1024:.1f} MB")
    e = r["entries_p50"]
    row(f"p50 with {f['entries']:,} entries vs few", us(e["many"]["p50_us"]), f"2nd daemon {us(e['few']['p50_us'])}",
        f"{e['ratio']:.2f}×", "≤ 1.2×", e["ratio"] <= 1.2)
    row("start to ready (accounts in keyring)", ms(r["ready_ms"]), f"empty {ms(r['ready_empty_ms'])}", "",
        "< 100 ms", r["ready_ms"] < 100)
    notes = bench_peers.rows(r, row, us, ms, rate, slowest)
    bench_discovery.rows(r, row, us, ms, rate)
    return _render(r, rows, notes)
