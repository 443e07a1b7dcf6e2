"""What the benchmark reads about a process from /proc (scripts/lib/bench.py)."""


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


def minor_faults(pid):
    """Page faults served from memory (the page cache, zeroed pages) so far: what a request
    pays to map again the code and data a quiet trim handed back."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])
