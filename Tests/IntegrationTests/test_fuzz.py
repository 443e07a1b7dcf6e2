"""The libFuzzer targets (built and run by scripts/fuzz), each for a bounded time over its
corpus: the request decoding (Fuzz/RPCFuzz over Fuzz/corpus), the HTTP client's response
parser (Fuzz/HTTPFuzz over Fuzz/http-corpus: what a provider answers), the TOML reader
(Fuzz/TOMLFuzz over Fuzz/toml-corpus: config.toml) and the sign-in port's request-head
reader (Fuzz/RedirectFuzz over Fuzz/redirect-corpus: what any local process sends it). A
crash or a broken property (the fast scanner and JSONDecoder disagreeing, a response that
does not round-trip, a response or request head read differently when its bytes arrive
differently, a TOML error naming no place) fails the test and leaves the input in
.build-fuzz/crash-*: add it to the target's corpus and fix the cause.

The fuzzing runs on demand only, outside the suite and CI: `swift test` replays the four
corpora through the same properties on every run (FuzzCorpusTests), and fuzzing for new
inputs takes minutes. AUTHBROKER_FUZZ_SECONDS=N runs these tests: the request-decoding
target for N seconds, the others for 15 s each, or N if it is lower. Unset or 0 skips them;
that every target still builds is checked on every run (test_every_fuzz_target_builds)."""
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


def test_every_fuzz_target_builds():
    """Every libFuzzer target still builds (on every run, unlike the fuzzing below): each
    takes daemon sources by path, which change under it; `scripts/fuzz rpc` stopped
    building once BrokerProtocol used `package` access, and nothing said so. Built into
    .build-fuzz, so a run with nothing changed since the last one builds nothing (40 s on
    this machine from nothing)."""
    if shutil.which("swiftc") is None:
        pytest.skip("no swiftc")
    r = subprocess.run([os.path.join(ROOT, "scripts", "fuzz"), "--build-only"], cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    tail = "\n".join(r.stderr.splitlines()[-30:])
    assert r.returncode == 0, f"a fuzz target does not build (exit {r.returncode}):\n{tail}"
    for target in ("rpc", "http", "toml", "redirect"):
        assert f"{target}-fuzz built" in r.stderr, tail


def test_sign_in_port_request_head_survives_fuzzing():
    run_target("redirect", min(seconds(), 15))


def seconds():
    return int(os.environ.get("AUTHBROKER_FUZZ_SECONDS") or "0")


def test_request_decoding_survives_fuzzing():
    run_target("rpc", seconds())


def test_http_response_parser_survives_fuzzing():
    run_target("http", min(seconds(), 15))


def test_toml_reader_survives_fuzzing():
    run_target("toml", min(seconds(), 15))
