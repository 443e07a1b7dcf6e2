"""The request-decoding fuzz target (Fuzz/RPCFuzz, built and run by scripts/fuzz) for a
bounded time over the corpus in Fuzz/corpus. A crash or a broken property (the fast
scanner and JSONDecoder disagreeing, a response that does not round-trip) fails the test
and leaves the input in .build-fuzz/crash-*: add it to Fuzz/corpus and fix the cause.

AUTHBROKER_FUZZ_SECONDS sets the time (default 20; 0 skips)."""
import os
import shutil
import subprocess

import pytest

from conftest import ROOT


def test_request_decoding_survives_fuzzing():
    seconds = int(os.environ.get("AUTHBROKER_FUZZ_SECONDS", "20"))
    if seconds == 0:
        pytest.skip("AUTHBROKER_FUZZ_SECONDS=0")
    if shutil.which("swiftc") is None:
        pytest.skip("no swiftc")
    r = subprocess.run([os.path.join(ROOT, "scripts", "fuzz"), str(seconds)], cwd=ROOT,
                       capture_output=True, text=True, timeout=seconds + 600)
    tail = "\n".join(r.stderr.splitlines()[-30:])
    assert r.returncode == 0, f"the fuzzer found a failing input (exit {r.returncode}):\n{tail}"
    assert "Done" in r.stderr, tail
