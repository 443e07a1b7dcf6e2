"""The release build, as scripts/install and scripts/package make it (`swift build -c release
--static-swift-stdlib`), and what only it can show: scripts/authctl.order, the link order
lld gives a release authctl (Package.swift), names only symbols that authctl has.

The order file saves a third of `authctl token`'s whole process (measured: 76 page faults
instead of 136, 0.74 ms of CPU instead of 1.17 ms, docs/performance.md), but lld is told
not to warn about names it does not find (`--no-warn-symbol-ordering`: the standard
library's names differ between toolchains), so a renamed or removed function would make it
go stale without a word. This test says so instead.

The build is the suite's one release build (conftest.release_bin_dir: scripts/lib/build-release,
which scripts/test starts early and the package test uses too). AUTHBROKER_INSTALL_BIN
(prebuilt release binaries, as test_install.py takes them) skips the build."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import elf_image
from conftest import ROOT, release_bin_dir

sys.path.insert(0, os.path.join(ROOT, "scripts", "lib"))
import bench_bss  # noqa: E402 (the layout's own rule for the package's modules)

ORDER = os.path.join(ROOT, "scripts", "authctl.order")


@pytest.fixture(scope="module")
def release_authctl():
    return os.path.join(release_bin_dir(), "authctl")


def defined_symbols(binary):
    """(address, type, name) of every symbol the binary defines (`nm --defined-only`; the
    name may hold spaces: Swift's `symbolic …` names do)."""
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    return [(int(p[0], 16), p[1], p[2]) for p in (line.split(" ", 2) for line in out.splitlines()) if len(p) == 3]


def symbols(binary):
    """Every name the binary's symbol table defines."""
    return {name for _, _, name in defined_symbols(binary)}


def order_names():
    with open(ORDER) as f:
        return [line for line in f.read().splitlines() if line and not line.startswith("#")]


def test_the_order_file_names_only_symbols_the_release_authctl_has(release_authctl):
    names = order_names()
    assert len(names) > 100, "scripts/authctl.order lost its names"
    have = symbols(release_authctl)
    gone = [n for n in names if n not in have]
    assert gone == [], (
        f"scripts/authctl.order names {len(gone)} symbols the release authctl no longer has "
        f"(first: {gone[:5]}): remake it with `scripts/bench --order scripts/authctl.order` "
        "(docs/performance.md), then delete the release authctl so that it relinks")


def test_the_release_authctl_takes_its_arguments_from_start_up_not_from_proc(release_authctl):
    """Sources/CCommandLine: the release authctl keeps argc and argv from glibc's call of its
    initialisers, so the static Swift runtime's argv search (a static initialiser reading
    /proc/self/maps with fgets and sscanf before main, a fifth of an `authctl token`
    process) is not linked in; and the arguments still arrive whole, through ArgumentParser
    (CommandLine.arguments) as through the token fast path (CommandLine.unsafeArgv)."""
    have = symbols(release_authctl)
    grabber = [n for n in have if "argvGrabber" in n]
    assert grabber == [], f"the Swift runtime's /proc/self/maps search is linked into authctl: {grabber}"
    assert "_swift_stdlib_getUnsafeArgvArgc" in have
    env = dict(os.environ, AUTHBROKER_SOCKET="/nonexistent/authbroker.sock")
    out = subprocess.run([release_authctl, "status", "--bogus-ü", "x y"], capture_output=True, text=True, env=env)
    assert out.returncode != 0 and "Unknown option '--bogus-ü'" in out.stderr, out.stderr
    out = subprocess.run([release_authctl, "tokn"], capture_output=True, text=True, env=env)
    assert "Did you mean 'token'?" in out.stderr, out.stderr
    # The token fast path reads argv itself: a resource with a space and a non-ASCII letter
    # reaches the request whole. A stub daemon (one canned answer) reads the request.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "socket")
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.listen(1)
        seen = []

        def answer():
            conn, _ = server.accept()
            with conn, conn.makefile("rb") as lines:
                request = json.loads(lines.readline())
                seen.append(request["params"])
                result = {"access_token": "stub-token", "token_type": "Bearer", "expires_at": 4102444800,
                          "provider": "p", "account": "a"}
                conn.sendall(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n")

        stub = threading.Thread(target=answer, daemon=True)
        stub.start()
        out = subprocess.run([release_authctl, "token", "--resource", "https://ä.example/a b", "--provider", "p"],
                             capture_output=True, text=True, env=dict(env, AUTHBROKER_SOCKET=path), timeout=30)
        stub.join(10)
        server.close()
    assert out.returncode == 0 and out.stdout == "stub-token\n", out.stderr
    assert seen == [{"resource": "https://ä.example/a b", "provider": "p"}]


def elf_layout(binary):
    """The binary's sections {name: (address, size)} and its loadable segments
    [(flags, vaddr, filesz, memsz)]."""
    return elf_image.sections(binary), elf_image.segments(binary)


def test_scripts_authbrokerd_ld_gathers_every_module_of_the_package():
    """A source file added or renamed since `scripts/bench --daemon-layout` ran is in none of
    the script's profiled lines; the rule after them (every object of each folder of Sources/)
    still puts its caches in .bss.hot, among its module's (scripts/lib/bench_bss.py). Without
    that rule each such file made the test below fail until the script was remade by hand,
    6 minutes each time; a module added to Sources/ without its line would again."""
    with open(os.path.join(ROOT, "scripts", "authbrokerd.ld")) as f:
        lines = {line.strip() for line in f}
    rules = bench_bss.own_patterns()
    missing = [rule for rule in rules if rule not in lines]
    assert "*/authbrokerd.build/*.o(.bss .bss.*)" in rules and not missing, (
        f"scripts/authbrokerd.ld has no line {missing}: remake it with `scripts/bench "
        "--daemon-layout scripts/authbrokerd.ld` (or add the lines after the others)")


def test_the_release_daemon_writes_its_bss_only_where_scripts_authbrokerd_ld_gathered_it():
    """scripts/authbrokerd.ld: a page of .bss is private memory from the first write to it,
    and the daemon's .bss is mostly the Swift runtime's lazy caches (one per type,
    conformance or global: thousands, of which a daemon writes a few hundred). Laid out by
    object file they were spread over 79 pages after the quick benchmark's loads; gathered
    in .bss.hot, 68 (docs/performance.md, "The daemon's memory"). A release daemon that
    started, answered a status and a token.get writes nothing in the rest of its .bss; a
    library section the layout's run never saw written (a new toolchain or dependency, a
    library type newly used) would land there without a word from lld."""
    daemon = os.path.join(release_bin_dir(), "authbrokerd")
    sections, _ = elf_layout(daemon)
    assert ".bss.hot" in sections, "the release authbrokerd was linked without scripts/authbrokerd.ld"
    with tempfile.TemporaryDirectory() as tmp:
        path, config = os.path.join(tmp, "socket"), os.path.join(tmp, "config.toml")
        with open(config, "w") as f:
            # Nothing listens on port 9: neither request below reaches the provider.
            f.write('[daemon]\nstore = "memory"\n\n[providers.p]\nissuer = "http://127.0.0.1:9/"\n'
                    'client_id = "c"\nresources = ["https://api.example.test"]\n')
        proc = subprocess.Popen([daemon, "--config", config], env=dict(os.environ, AUTHBROKER_SOCKET=path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            answers = []
            for _ in range(200):
                if os.path.exists(path):
                    break
                time.sleep(0.05)
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
                reader = s.makefile("rb")
                for line in (b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\n',
                             b'{"jsonrpc":"2.0","id":2,"method":"token.get","params":'
                             b'{"provider":"p","resource":"https://api.example.test"}}\n'):
                    s.sendall(line)
                    answers.append(json.loads(reader.readline()))
            blocks = elf_image.read_sections(proc.pid, daemon, (".bss.hot", ".bss"))
        finally:
            proc.terminate()
            proc.wait()
    assert "result" in answers[0] and answers[1]["error"]["code"] == -32001, answers
    (hot_start, hot), (bss_start, bss) = blocks[".bss.hot"], blocks[".bss"]
    hot_pages = range(hot_start // 4096, (hot_start + len(hot) - 1) // 4096 + 1)
    written_hot = {(hot_start + i) // 4096 for i, b in enumerate(hot) if b}
    written_cold = {(bss_start + i) // 4096 for i, b in enumerate(bss) if b} - set(hot_pages)
    assert len(written_hot) > 20, "the daemon wrote next to nothing in .bss.hot: was it read at all?"
    assert len(written_cold) == 0, (
        f"the release daemon wrote {len(written_cold)} pages of .bss outside .bss.hot (a library's "
        "or the Swift runtime's caches the layout's run did not see written): remake "
        "scripts/authbrokerd.ld with `scripts/bench --daemon-layout scripts/authbrokerd.ld` "
        "(docs/performance.md), then delete the release authbrokerd so that it relinks")
