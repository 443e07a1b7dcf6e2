"""The layout of a release authbrokerd's zero-initialised data: scripts/authbrokerd.ld, made
by `scripts/bench --daemon-layout FILE` (docs/performance.md, "The daemon's memory").

A daemon's `.bss` is private memory page by page: a page is anonymous, resident and the
daemon's own from the first write to it on. Most of authbrokerd's 620 KB of `.bss` are the
Swift runtime's lazy caches, one per type, conformance or global (3 500 conformance caches of
128 bytes alone, nearly 1 000 of them FoundationEssentials'), of which a daemon at work
writes a few hundred, one or two in a page: the linker lays them out by object file, so the
written ones were spread over 86 of the section's 157 pages after the benchmark's loads.

Here a running daemon's `.bss` is read (/proc/PID/mem, after the loads and a quiet spell), and
every input section of the link (one per object file, or per variable where a library was
built with data sections) that holds a written byte goes into `.bss.hot`, before `.bss`: the
caches a daemon writes then share pages, and the ones it never writes lie in pages it never
touches. After them, a rule: every object of the package's own modules (one pattern per folder
of Sources/), so that a file added or renamed since the run lands in `.bss.hot` too, among the
caches of its module that the run saw unwritten, and never in `.bss` where a started daemon
writing it would fail test_release_build.py. After the run's lines it costs nothing (68 pages
written after the quick benchmark's loads either way); instead of the run's lines for the
package's own objects it would cost 4 (72), and the same rule for the dependencies' modules
(NIO and the rest) 15 (83). What it cannot foresee is a library's or the Swift
runtime's section the run did not see written (a new toolchain, a dependency's new version, a
library type the code starts to use): that lands in `.bss`, costs a page, never correctness,
and test_release_build.py says so.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "Tests", "IntegrationTests", "support"))
from elf_image import read_sections  # noqa: E402

HEADER = """\
/* lld script for a release authbrokerd (Package.swift), made by `scripts/bench --daemon-layout`
   (scripts/lib/bench_bss.py): first the input sections a daemon wrote after the benchmark's
   loads, side by side in .bss.hot, so that its private pages hold them and not the caches it
   never uses (docs/performance.md); then every object of the package's own modules, so that a
   file added or renamed lands in .bss.hot too. Stale lines only cost pages. */
"""
OUTPUTS = (".bss.hot", ".bss")
SOURCES = os.path.join(os.path.dirname(__file__), "..", "..", "Sources")


def own_patterns():
    """One pattern per module of the package (a folder of Sources/): all its objects' `.bss`.
    test_release_build.py checks that scripts/authbrokerd.ld has each."""
    modules = sorted(m for m in os.listdir(SOURCES) if os.path.isdir(os.path.join(SOURCES, m)))
    return [f"*/{m}.build/*.o(.bss .bss.*)" for m in modules]


def dump(pid, binary, out):
    """Writes the running daemon's `.bss` (and `.bss.hot`) as they are now to `out`: one line
    per output section, its link address and its bytes in hex."""
    with open(out, "w") as f:
        for address, data in read_sections(pid, binary, OUTPUTS).values():
            f.write(f"{address:x} {data.hex()}\n")


def written(dump_path):
    """(address, bytes) of each dumped output section."""
    with open(dump_path) as f:
        return [(int(a, 16), bytes.fromhex(h)) for a, h in (line.split() for line in f)]


def link_map(binary, out):
    """Links the release `binary` again as SwiftPM last did (the
    command in its build manifest), with lld writing a map of every input section to `out`;
    the binary goes beside it and is removed."""
    binary = os.path.realpath(binary)  # BIN/release is a link to the triple's folder
    scratch = os.path.dirname(os.path.dirname(os.path.dirname(binary)))
    args = None
    with open(os.path.join(scratch, "release.yaml")) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == f'outputs: ["{binary}"]':
            command = next(x.strip() for x in lines[i:] if x.strip().startswith("args: "))
            args = json.loads(command[len("args: "):])
            break
    if args is None:
        raise SystemExit(f"bench_bss: no link command for {binary} in {scratch}/release.yaml")
    args[args.index("-o") + 1] = out + ".bin"
    subprocess.run(args + ["-Xlinker", f"-Map={out}"], check=True)
    os.remove(out + ".bin")


def input_sections(map_path, outputs):
    """(address, size, input section) of each input section of the output sections `outputs`,
    from lld's map ("VMA LMA Size Align Out In Symbol", In
    indented by 8)."""
    found, out = [], None
    line_re = re.compile(r"\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (.*)$")
    with open(map_path) as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            rest = m.group(3)
            indent = len(rest) - len(rest.lstrip(" "))
            if indent == 0:
                out = rest.strip()
            elif indent == 8 and out in outputs:
                found.append((int(m.group(1), 16), int(m.group(2), 16), rest.strip()))
    return found


def pattern(section):
    """lld's pattern for one input section: `*lib.a:member.o(.text)`, `*/dir/file.o(.text)`."""
    path, name = section.rsplit(":(", 1)
    name = name[:-1]
    if path.endswith(")"):
        archive, member = path[:-1].split("(", 1)
        return f"*{os.path.basename(archive)}:{member}({name})"
    return f"*/{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)}({name})"


def hot(sections, blocks):
    """The input sections (address, size, name) that hold a byte other than zero."""
    found = []
    for address, size, name in sections:
        for start, data in blocks:
            if start <= address < start + len(data) and any(data[address - start:address - start + size]):
                found.append(name)
                break
    return found


def write(binary, dump_path, out):
    """Writes the script `out` for the release authbrokerd `binary` whose `.bss` `dump_path`
    holds, from a map of the same link."""
    with tempfile.TemporaryDirectory() as work:
        map_path = os.path.join(work, "authbrokerd.map")
        link_map(binary, map_path)
        sections = input_sections(map_path, OUTPUTS)
    found = list(dict.fromkeys(pattern(s) for s in hot(sections, written(dump_path))))
    rules = own_patterns()
    with open(out, "w") as f:
        f.write(HEADER + "SECTIONS {\n  .bss.hot : {\n")
        f.write("".join(f"    {p}\n" for p in found))
        f.write("    /* every object of the package's own modules that the lines above do not name */\n")
        f.write("".join(f"    {p}\n" for p in rules))
        f.write("  }\n} INSERT BEFORE .bss;\n")
    print(f"{out}: {len(found)} input sections written, {len(rules)} modules")


def main(out):
    """A quick benchmark run (its loads, then 8 s quiet) with the daemon's .bss kept, then the
    script."""
    with tempfile.TemporaryDirectory() as work:
        kept = os.path.join(work, "bss")
        env = dict(os.environ, AUTHBENCH_BSS=kept)
        script = os.path.join(os.path.dirname(__file__), "bench.py")
        subprocess.run([sys.executable, script, "--quick", "--json"], env=env, stdout=subprocess.DEVNULL, check=True)
        import bench  # noqa: E402 (reads AUTHBROKER_BIN)
        write(bench.AUTHBROKERD, kept, out)


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
