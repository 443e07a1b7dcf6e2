"""The link order of a release authctl: `scripts/bench --order FILE` (docs/performance.md).

One warm `authctl token` runs under valgrind's lackey, which logs every instruction and
data address it touches. The symbols those addresses fall in, code in the order it first
ran and then data, become lld's --symbol-ordering-file: the linker puts them side by
side, so the process faults in a few blocks of its 12 MB image instead of one for every
function scattered through it.
"""
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile

import bench

HEADER = """\
# lld --symbol-ordering-file for a release authctl (Package.swift): the code and data one
# warm `authctl token` touches, code in the order it runs. Made by `scripts/bench --order`
# (docs/performance.md); stale or missing names only cost page faults, never correctness.
"""
# glibc picks a string function's variant by CPU, and valgrind's CPU is not the machine's:
# take every variant of a family the trace used (__memset_sse2_unaligned → __memset_avx2_…).
VARIANT = re.compile(r"^(__\w+?)_(sse2|ssse3|sse4_[12]|avx2?|evex|avx512)")


def symbols(binary):
    """(address, size, kind, name) of the binary's sized symbols, by address."""
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in "tTwWdDbBrRvV" and int(parts[1], 16) > 0:
            found.append((int(parts[0], 16), int(parts[1], 16), parts[2], parts[3]))
    return sorted(found)


def touched(binary, trace):
    """The names of the symbols the lackey trace touched: code by first use, then data."""
    table = symbols(binary)
    starts = [s[0] for s in table]
    lo, hi = table[0][0], table[-1][0] + table[-1][1]
    seen, code, data = set(), [], []
    with open(trace) as f:
        for line in f:
            if line.startswith("=="):
                continue
            address = int(line[2:].split(",")[0], 16)
            if not lo <= address < hi:
                continue
            i = bisect.bisect_right(starts, address) - 1
            # Symbols may overlap (aliases, an object and its members): look a few back.
            hit = next((table[j] for j in range(i, max(i - 8, -1), -1)
                        if table[j][0] <= address < table[j][0] + table[j][1]), None)
            if hit is None or hit[3] in seen:
                continue
            seen.add(hit[3])
            (code if hit[2] in "tTwW" else data).append(hit[3])
    families = {m.group(1) for m in map(VARIANT.match, code) if m}
    variants = [s[3] for s in table if (m := VARIANT.match(s[3])) and m.group(1) in families and s[3] not in seen]
    return code + variants + data


def write(authctl, work, env, args, out):
    """Traces `authctl <args>` (a warm token.get) and writes the ordering file `out`."""
    subprocess.run([authctl, *args], env=env, stdout=subprocess.DEVNULL, check=True)  # the token cached
    plain = os.path.join(work, "authctl-nodebug")
    # Valgrind 3.19 cannot read swiftc's DWARF 5; the symbol table stays.
    subprocess.run(["objcopy", "--strip-debug", authctl, plain], check=True)
    trace = os.path.join(work, "lackey.log")
    subprocess.run(["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={trace}", plain, *args],
                   env=env, stdout=subprocess.DEVNULL, check=True)
    names = touched(plain, trace)
    with open(out, "w") as f:
        f.write(HEADER + "".join(n + "\n" for n in names))
    print(f"{out}: {len(names)} symbols")


def main(out):
    """One Glewlwyd provider, authbrokerd with alice signed in, the trace; then all stopped."""
    work = tempfile.mkdtemp(prefix="abo-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp")
    glewlwyd, provider = os.path.join(bench.ROOT, "scripts", "glewlwyd"), os.path.join(work, "gl-rot")
    os.mkdir(provider)
    subprocess.run([glewlwyd, "start", provider, "--refresh-token-one-use", "always"], check=True, stdout=subprocess.DEVNULL)
    daemon = None
    try:
        rot = bench.Glewlwyd(provider)
        daemon = bench.Daemon(work, {"rot": (rot, [bench.API])})
        daemon.start()
        daemon.login(rot, "rot")
        write(bench.AUTHCTL, work, daemon.env, ["token", "--resource", bench.API, "--provider", "rot"], out)
    finally:
        if daemon:
            daemon.stop()
        subprocess.run([glewlwyd, "stop", provider], stdout=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
