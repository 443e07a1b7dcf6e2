"""The occasional request (issue 25): a daemon left alone for a while answers the next request
without first mapping its code and heap back in.

The daemon hands memory back when it goes quiet (MemoryTrim, docs/performance.md). It used
to unmap its code pages too, and trim the heap after every request: the next request then
page-faulted all of it back in (about 60 minor faults of code, more of heap), which made the
first request after a quiet spell several times slower than a warm one. What a user notices
is that slowness; what the test can see without timing anything is its cause, in
/proc/PID/status and /proc/PID/stat."""
from conftest import API, fingerprint
import time


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def minor_faults(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def test_a_request_after_a_quiet_spell_finds_the_daemon_mapped(daemon_factory):
    d = daemon_factory(store="memory").start()
    d.login_device()
    params = {"provider": d.name, "resource": API}
    first = d.rpc("token.get", params)["result"]
    # Warm: the path a cached token takes has run, start-up's trim (0.3 s of quiet) is done.
    time.sleep(1)
    for _ in range(3):
        d.rpc("token.get", params)
    pid = d.proc.pid
    warm_faults = minor_faults(pid)
    d.rpc("token.get", params)
    warm_cost = minor_faults(pid) - warm_faults
    code_before = status_kb(pid, "RssFile")

    # Longer than the daemon's quiet (5 s): a trim, if there is one, has run.
    time.sleep(6)
    code_after = status_kb(pid, "RssFile")
    faults = minor_faults(pid)
    again = d.rpc("token.get", params)["result"]
    quiet_cost = minor_faults(pid) - faults

    assert fingerprint(again["access_token"]) == fingerprint(first["access_token"])
    # The code a request runs stays mapped: the kernel can drop clean file pages by itself
    # when it needs the memory, and the daemon does not do it for it.
    assert code_after >= code_before - 256, (code_before, code_after)
    # The request after the quiet spell faults in about what a warm one does, not the
    # ~60 code pages and the trimmed heap it used to.
    assert quiet_cost <= warm_cost + 8, (warm_cost, quiet_cost)
