"""The layout of a release authctl's image: scripts/authctl.ld, made beside the order file by
`scripts/bench --order` (bench_order.py; docs/performance.md, "authctl after quiet").

When a page of a file mapping is not in memory, Linux reads more than the page: for code, from
the page on to the end of the mapping; for data, a window around the page. Both are
read_ahead_kb long (8 MB on the benchmark's VM), and only the pages missing from the page
cache are read. After a quiet spell in which some of authctl's pages were paged out, one
fault in its code therefore read back every paged-out page of the next 8 MB of code with it,
nearly all of them code that `authctl token` never runs. So:

- the code one `authctl token` runs goes in one output section, `.text.hot`, at the end of
  the executable segment: a fault in it reads on only to the segment's end, that is, code
  the token path runs (the standard library's one 1.6 MB section, which cannot be split,
  first, then the rest in the order it first ran);
- `.init` and `.fini`, which glibc calls at every start and lld puts at the segment's start,
  follow it there;
- the file part of each writable segment ends on a page boundary: the kernel zeroes the rest
  of a segment's last file page at exec (its `.bss` starts there), and that write read a
  window of the file around it before authctl ran at all.

The unit is the linker's input section: one per source file for our Swift modules and the
standard library, one per function where a library was built with function sections. The
read-only segment (headers, Swift metadata, .eh_frame) is not moved: authctl's entry point
marks it for random reads instead (Sources/CReadAdvice).
"""
import json
import os
import re
import subprocess

# What a real start runs that valgrind's does not: glibc's set-up of the vDSO (valgrind gives
# the program none), so the trace never shows it.
UNTRACED = ["libc.a:dl-object.o", "libc.a:dl-lookup.o", "libc.a:dl-lookup-direct.o",
            "libc.a:dl-misc.o", "libc.a:dl-setup_hash.o"]
# glibc picks a string function's variant by CPU, and valgrind's CPU is not the machine's:
# every variant of a family the trace used (memmove-avx-unaligned-erms.o → memmove-evex-…).
VARIANT = re.compile(r"libc\.a\(([a-z0-9_]+)-(?:sse2|ssse3|sse4|avx|avx2|evex|avx512)[^)]*\.o\)")
# An input section whose code is this large cannot be placed by function (the standard
# library's Swift.o): it goes first, so that the functions after it stay in one block.
LARGE = 256 * 1024

HEADER = """\
/* lld script for a release authctl (Package.swift), made with scripts/authctl.order by
   `scripts/bench --order` from one warm `authctl token` (scripts/lib/bench_layout.py):
   the code the token path runs at the end of the executable segment, and the writable
   segments' file parts ending on a page, so that reading back one paged-out page reads
   no code the command does not run (docs/performance.md). Stale lines only cost reads. */
"""
TAIL = """\
  .init : { KEEP(*(SORT_NONE(.init))) }
  .fini : { KEEP(*(SORT_NONE(.fini))) }
} INSERT AFTER .text;

/* The last relocated-read-only section padded to a page, so the segment needs no zeroed
   tail (.relro_padding becomes empty); and the same for the last writable file section. */
SECTIONS {
  .data.rel.ro : { *(.data.rel.ro .data.rel.ro.*) . = ALIGN(4096); }
} INSERT AFTER .got;
SECTIONS {
  .data.pagepad : { BYTE(0) . = ALIGN(4096); }
} INSERT AFTER .got.plt;
"""


def link_map(binary, out):
    """Links the release `binary` (authctl, authbrokerd) again as SwiftPM last did (the
    command in its build manifest), with lld writing a map of every input section to `out`;
    the binary goes beside it and is removed."""
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
        raise SystemExit(f"bench_layout: no link command for {binary} in {scratch}/release.yaml")
    args[args.index("-o") + 1] = out + ".bin"
    subprocess.run(args + ["-Xlinker", f"-Map={out}"], check=True)
    os.remove(out + ".bin")


def input_sections(map_path, outputs=(".text", ".text.hot")):
    """(address, size, input section) of each input section of the output sections `outputs`
    (the executable ones unless told), from lld's map ("VMA LMA Size Align Out In Symbol", In
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


def hot_sections(sections, trace):
    """The input sections the lackey trace ran code in, in the order it first did."""
    first, n = {}, 0
    with open(trace) as f:
        for line in f:
            if not line.startswith("I"):
                continue
            n += 1
            first.setdefault(int(line[2:].split(",")[0], 16) >> 4, n)
    ran = []
    for address, size, name in sections:
        when = min((first[g] for g in range(address >> 4, (address + size + 15) >> 4) if g in first), default=None)
        if when is not None:
            ran.append((when, size, name))
    ran.sort()
    names = [name for _, _, name in ran]
    families = {m.group(1) for m in map(VARIANT.search, names) if m}
    variants = [name for _, _, name in sections
                if (m := VARIANT.search(name)) and m.group(1) in families and name not in names]
    large = [name for _, size, name in ran if size >= LARGE]
    small = [name for _, size, name in ran if size < LARGE]
    return large + small + variants


def patterns(authctl, trace, work):
    """The script's input sections for the release `authctl` whose warm run `trace` recorded:
    read from a map of the same link, so made before the order file it was linked with is
    rewritten."""
    map_path = os.path.join(work, "authctl.map")
    link_map(authctl, map_path)
    found = [pattern(s) for s in hot_sections(input_sections(map_path), trace)]
    found += [f"*{u}(.text)" for u in UNTRACED]
    return list(dict.fromkeys(found))


def write(found, out):
    """Writes the script `out` with the input sections `found` (patterns())."""
    with open(out, "w") as f:
        f.write(HEADER + "SECTIONS {\n  .text.hot : {\n")
        f.write("".join(f"    {p}\n" for p in found))
        f.write("  }\n" + TAIL)
    print(f"{out}: {len(found)} input sections")
