"""A release binary's ELF layout (`readelf -W`) and, for a process running it, the bytes of
its sections as they are now (/proc/PID/mem): what test_release_build.py checks and what
scripts/lib/bench_bss.py lays out the daemon's .bss from."""
import os
import subprocess


def sections(binary):
    """{name: (address, size)} of the binary's sections."""
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 5 and parts[0].startswith("[") and parts[0][1:-1].isdigit():
            found[parts[1]] = (int(parts[3], 16), int(parts[5], 16))
    return found


def segments(binary):
    """[(flags, vaddr, filesz, memsz)] of the binary's loadable segments."""
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == "LOAD":
            found.append((" ".join(parts[6:-1]), int(parts[2], 16), int(parts[4], 16), int(parts[5], 16)))
    return found


def image_base(pid, binary):
    """The address the running process `pid` loaded `binary` at (its mapping at offset 0)."""
    real = os.path.realpath(binary)
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[2] == "00000000" and os.path.realpath(parts[5]) == real:
                return int(parts[0].split("-")[0], 16)
    raise LookupError(f"{binary} is not mapped in process {pid}")


def read_sections(pid, binary, names):
    """{name: (address, bytes)} of the sections `names` the binary has, as the running
    process `pid` holds them now (addresses are the link's)."""
    table, base = sections(binary), image_base(pid, binary)
    found = {}
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for name in names:
            if name in table:
                address, size = table[name]
                mem.seek(base + address)
                found[name] = (address, mem.read(size))
    return found
