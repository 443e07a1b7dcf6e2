"""The daemon under abuse by a process of its own user: a client that sends requests and
never reads the answers, and a flood of token.get notifications. The daemon must keep its
memory bounded, keep serving other clients, and not let one caller make the provider work
for it without end. Memory is read from /proc/PID/status (VmHWM, the peak resident size):
bounded memory is something a user notices; no test here asserts a wall-clock time.

Tokens come from the real Glewlwyd, except where the test counts the provider's token
requests: that counter exists only in the STUB provider (support/stub_provider.py)."""
import json
import os
import socket
import time

from conftest import API, RPC, Daemon, fingerprint
from stub_provider import StubProvider

# A generous bound: the daemon idles at ~25 MB; before back-pressure a client that never
# read drove it past 200 MB.
RSS_BOUND_KB = 80 * 1024


def memory_kb(d, field):
    with open(f"/proc/{d.proc.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{d.proc.pid}/status")


def with_daemon_settings(d, settings):
    """Adds `settings` (TOML lines) to the [daemon] table of the daemon's config."""
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text.replace("[daemon]\n", "[daemon]\n" + settings, 1))


def settled_request_count(d):
    """The daemon's request counter once it stops moving: the daemon read all it will read."""
    last = -1
    for _ in range(120):
        now = d.status()["counters"]["requests"]
        if now == last:
            return now
        last = now
        time.sleep(0.5)
    return last


def flood(sock, line, batches, per_batch=1000):
    """Writes `batches` × `per_batch` copies of `line` without reading; returns how many
    requests went out before the daemon stopped taking them (the write blocked for 3 s)."""
    batch = line * per_batch
    sock.settimeout(3)
    sent = 0
    try:
        for _ in range(batches):
            sock.sendall(batch)
            sent += per_batch
    except socket.timeout:
        pass
    return sent


def test_a_client_that_never_reads_cannot_grow_the_daemon(daemon_factory):
    d = daemon_factory(provider="static")
    with_daemon_settings(d, "request_line_timeout = 3\n")
    d.start()
    d.login_device()
    first = d.rpc("token.get", {"resource": API})
    assert "result" in first, first
    expected = fingerprint(first["result"]["access_token"])
    before_requests = d.status()["counters"]["requests"]

    greedy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    greedy.connect(d.socket)
    line = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get", "params": {"resource": API}}) + "\n").encode()
    sent = flood(greedy, line, batches=200)
    read_by_daemon = settled_request_count(d) - before_requests
    peak = memory_kb(d, "VmHWM")
    print(f"\nnon-reading client: {sent} requests written, {read_by_daemon} read by the daemon, "
          f"peak RSS {peak // 1024} MB, RSS now {memory_kb(d, 'VmRSS') // 1024} MB")

    # Others are served meanwhile.
    other = d.rpc("token.get", {"resource": API})
    assert fingerprint(other["result"]["access_token"]) == expected
    assert peak < RSS_BOUND_KB, f"peak RSS {peak // 1024} MB with a client that never reads"
    assert read_by_daemon < 200_000, "the daemon kept reading from a client that did not read"

    # The daemon gives up on the client once it has not read for request_line_timeout.
    deadline = time.time() + 30
    while "does not read its answers" not in d.log_text() and time.time() < deadline:
        time.sleep(0.2)
    assert "does not read its answers" in d.log_text()
    greedy.settimeout(10)
    answers = 0
    try:
        while True:
            chunk = greedy.recv(1 << 20)
            if not chunk:
                break  # closed by the daemon
            answers += chunk.count(b"\n")
    except ConnectionResetError:
        pass  # closed by the daemon with our requests unread
    greedy.close()
    assert answers < read_by_daemon, "the daemon kept the connection and answered everything"
    assert "result" in d.rpc("daemon.status")
    print(f"after it was closed: RSS {memory_kb(d, 'VmRSS') // 1024} MB")
