"""The libFuzzer targets (built and run by scripts/fuzz), each for a bounded time over its
corpus: the request decoding (Fuzz/RPCFuzz over Fuzz/corpus), the HTTP client's response
parser (Fuzz/HTTPFuzz over Fuzz/http-corpus: what a provider answers) and the TOML reader
(Fuzz/TOMLFuzz over Fuzz/toml-corpus: config.toml). A crash or a broken property (the fast
scanner and JSONDecoder disagreeing, a response that does not round-trip, a response parsed
differently when its bytes arrive differently, a TOML error naming no place) fails the test
and leaves the input in .build-fuzz/crash-*: add it to the target's corpus and fix the cause.

On demand only, outside the suite and CI: `swift test` replays the three corpora through the
same properties on every run (FuzzCorpusTests), and fuzzing for new inputs takes minutes.
AUTHBROKER_FUZZ_SECONDS=N runs these tests: the request-decoding target for N seconds, the
other two for 15 s each, or N if it is lower. Unset or 0 skips all three."""
import os
import shutil
import subprocess

import pytest

from conftest import ROOT


def run_target(target, seconds):
    if seconds == 0:
        pytest.skip("fuzzing runs on demand: AUTHBROKER_FUZZ_SECONDS=N (swift test replays the corpora)")
    if shutil.which("swiftc") is None:
        pytest.skip("no swiftc")
    r = subprocess.run([os.path.join(ROOT, "scripts", "fuzz"), target, str(seconds)], cwd=ROOT,
                       capture_output=True, text=True, timeout=seconds + 600)
    tail = "\n".join(r.stderr.splitlines()[-30:])
    assert r.returncode == 0, f"the {target} fuzzer found a failing input (exit {r.returncode}):\n{tail}"
    assert "Done" in r.stderr, tail


def seconds():
    return int(os.environ.get("AUTHBROKER_FUZZ_SECONDS") or "0")


def test_request_decoding_survives_fuzzing():
    run_target("rpc", seconds())


def test_http_response_parser_survives_fuzzing():
    run_target("http", min(seconds(), 15))


def test_toml_reader_survives_fuzzing():
    run_target("toml", min(seconds(), 15))
