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
import os
import subprocess

import pytest

from conftest import ROOT, release_bin_dir

ORDER = os.path.join(ROOT, "scripts", "authctl.order")


@pytest.fixture(scope="module")
def release_authctl():
    return os.path.join(release_bin_dir(), "authctl")


def symbols(binary):
    """Every name in the binary's symbol table (`nm`: address, type, then the name, which
    may hold spaces: Swift's `symbolic …` names do)."""
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split(None, 2) if line.startswith(" ") else line.split(" ", 2)
        if len(parts) == 3:
            names.add(parts[2])
    return names


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
