"""What the benchmark reads about a process from /proc (scripts/lib/bench.py)."""
import os
import shutil
import subprocess


def rss_kb(pid):
    """Resident memory (VmRSS) in kB; 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def private_kb(pid):
    """Private memory in kB: RssAnon + VmSwap, what the process alone holds (its heap,
    stacks, copied-on-write data), as against file pages the kernel can drop and read again
    by itself. 0 once the process is gone."""
    total = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "VmSwap:")):
                    total += int(line.split()[1])
    except FileNotFoundError:
        pass
    return total


def minor_faults(pid):
    """Page faults served from memory (the page cache, zeroed pages) so far."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def thread_schedstat(pid, name):
    """/proc/PID/task/TID/schedstat of the process's thread called `name` (its time on a
    CPU and waiting for one), or /dev/null when there is no such thread."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    return f"/proc/{pid}/task/{tid}/schedstat"
        except FileNotFoundError:
            continue
    return "/dev/null"


def process_schedstats(pids):
    """The schedstat files of every thread of the processes `pids`."""
    found = []
    for pid in pids:
        try:
            found += [f"/proc/{pid}/task/{tid}/schedstat" for tid in os.listdir(f"/proc/{pid}/task")]
        except FileNotFoundError:
            continue
    return found


def keep_smaps(pid, suffix):
    """With AUTHBENCH_SMAPS=FILE set, copies the process's /proc/PID/smaps to FILE+suffix and
    its threads' names to FILE+suffix+".threads", to see where its memory is
    (docs/performance.md, "The daemon's memory")."""
    base = os.environ.get("AUTHBENCH_SMAPS")
    if not base:
        return
    shutil.copy(f"/proc/{pid}/smaps", base + suffix)
    with open(base + suffix + ".threads", "w") as out:
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                out.write(f"{tid} {f.read()}")
    walker = os.path.join(os.path.dirname(__file__), "..", "heap-walk")
    with open(base + suffix + ".heaps", "w") as out:
        subprocess.run([walker, str(pid), "--chunks"], stdout=out, stderr=subprocess.STDOUT, check=False)
