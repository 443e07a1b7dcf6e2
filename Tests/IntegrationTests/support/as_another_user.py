"""What a test runs as another user (test_systemd_live's abtest, test_podman's abpodman),
copied to a folder that user can read.

The clone may sit where other users cannot enter (a `mktemp -d` folder, a home directory,
which Debian 12 makes 0700), and then the user could not run the built binaries, nor read
the files scripts/install copies, from where they are. `readable_copy` copies them to a
fresh 0755 folder under /tmp, removed afterwards, and checks as that user that every file
there can be read and that every library a copied program loads (ldd) can be found and
read: otherwise the test fails at once with a sentence naming the file, instead of a
"Permission denied" deep in a daemon's log.
"""
import contextlib
import os
import shutil
import subprocess
import tempfile

import pytest


def _as(user, *cmd):
    return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, cwd="/")


def _is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def _refusals(user, folder):
    """Sentences for what `user` cannot read in `folder`, or load for its programs."""
    files = [os.path.join(d, n) for d, _, names in os.walk(folder) for n in names]
    r = _as(user, "sh", "-c", 'for f; do [ -r "$f" ] || echo "$f"; done', "sh", *files)
    found = [f"{user} cannot read {f}" for f in r.stdout.split()]
    for program in (f for f in files if os.access(f, os.X_OK) and _is_elf(f)):
        r = _as(user, "ldd", program)
        missing = [line.split("=>")[0].strip() for line in r.stdout.splitlines() if "not found" in line]
        found += [f"{user} cannot load {lib}, which {os.path.basename(program)} needs "
                  f"(a library in a folder other users cannot enter, or beside the build)" for lib in missing]
    return found


@contextlib.contextmanager
def readable_copy(user, files):
    """A fresh folder that `user` can read, holding {name: source} (files or folders), for as
    long as the `with` lasts; the test fails at once if the user still cannot use it."""
    folder = tempfile.mkdtemp(prefix=f"authbroker-for-{user}-", dir="/tmp")
    try:
        for name, source in files.items():
            target = os.path.join(folder, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            (shutil.copytree if os.path.isdir(source) else shutil.copy2)(source, target)
        for d, dirs, names in os.walk(folder):
            os.chmod(d, 0o755)
            for n in names:
                p = os.path.join(d, n)
                os.chmod(p, os.stat(p).st_mode | 0o444)
        refused = _refusals(user, folder)
        if refused:
            pytest.fail(f"{'; '.join(refused)}: make it readable by every user (chmod o+rX on the file and its "
                        f"folders) and run the test again.", pytrace=False)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
