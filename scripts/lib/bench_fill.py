"""Filling the daemon's cache for the benchmark (scripts/lib/bench.py), and what the
entries cost a warm request."""
import socket
import statistics
import threading


def fill(path, count, line):
    """`count` requests (`line(i)` writes the i-th), pipelined on 8 connections; the
    number of error answers. The benchmark asks for distinct cache entries (scope sets
    bench.0 … bench.N-1 over two resources), each a real refresh at Glewlwyd.

    Each connection sends from one thread and reads its answers in another, all at once:
    the daemon stops reading a connection whose answers are not read (back-pressure) and
    closes one whose answers stay unread for `request_line_timeout`, so a client that sent
    everything before reading, or read the connections one after another, would stall."""
    conns = 8
    errors = [0] * conns
    failed = []

    def one(c):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(120)
                s.connect(path)
                lines = []
                for i in range(c, count, conns):
                    lines.append(line(i))
                payload = ("\n".join(lines) + "\n").encode()
                threading.Thread(target=s.sendall, args=(payload,), daemon=True).start()
                want, buf = len(lines), b""
                while buf.count(b"\n") < want:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        failed.append(c)
                        return
                    buf += chunk
                errors[c] = sum(1 for line in buf.split(b"\n") if line and b'"error":' in line)
        except OSError as e:
            failed.append(f"{c}: {e}")

    workers = [threading.Thread(target=one, args=(c,)) for c in range(conns)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if failed:
        raise SystemExit(f"bench: the daemon closed a fill connection ({failed})")
    return sum(errors)


def p50_in_turns(load, many, few, rounds=4):
    """`load(daemon)`'s p50 on the filled daemon and on `few`, a second one of the same
    binary and accounts, run in turns so that both see the same machine: one round that
    caches the token and is not counted, then `rounds`, which of the two goes first
    alternating. Medians of the p50s, and the median of each round's ratio: the load of a
    shared machine drifts over seconds, so a round's two runs are the closest pair."""
    runs = {"many": [], "few": []}
    for r in range(rounds + 1):
        pair = (("many", many), ("few", few))
        for name, daemon in (pair if r % 2 else pair[::-1]):
            p50 = load(daemon)["p50_us"]
            if r:
                runs[name].append(p50)
    ratio = statistics.median(m / f for m, f in zip(runs["many"], runs["few"]))
    return {"ratio": ratio, **{name: {"p50_us": statistics.median(v), "runs": v} for name, v in runs.items()}}
