"""`authctl exec --retry-on-exit` with a challenge: the command writes the refusal's
`WWW-Authenticate` value (or curl's headers) to $AUTHBROKER_CHALLENGE_FILE, and authctl's one
retry does what it asks (Sources/authctl/Challenge.swift; the decisions themselves are in
Tests/AuthctlTests/ChallengeTests.swift). The real daemon and authctl, signed in at a STUB
provider (support/stub_provider.py); the command is a STUB of a program whose API refused
it, writing made-up challenges. No test prints a token: runs record fingerprints."""
import json
import os
import stat
import sys
import textwrap

import pytest

from conftest import API, fingerprint, signed_in_at_stub, token
from stub_provider import StubProvider

PYTHON = os.path.realpath(sys.executable)


@pytest.fixture(scope="module")
def daemon():
    stub = StubProvider(access_token_life=3600).start()
    d = signed_in_at_stub(lambda name: (
        f'[daemon]\nstore = "memory"\n\n[providers.{name}]\nissuer = "{stub.issuer}"\n'
        f'client_id = "{stub.client_id}"\nscopes = ["openid", "offline_access", "profile"]\nresources = ["{API}"]\n'))
    yield d
    d.cleanup()
    stub.stop()


def command(tmp_path, challenges, status=77):
    """A STUB command: its n-th run records what it was given, then writes challenges[n]
    (None: nothing, and exit 0) and exits `status`."""
    script = tmp_path / "refused.py"
    script.write_text(textwrap.dedent(f"""
        import hashlib, json, os, stat, sys
        runs = {str(tmp_path / "runs.json")!r}
        seen = json.load(open(runs)) if os.path.exists(runs) else []
        path = os.environ.get("AUTHBROKER_CHALLENGE_FILE")
        info = os.stat(path) if path else None
        seen.append({{"token": hashlib.sha256(os.environ["AUTHBROKER_TOKEN"].encode()).hexdigest(), "file": path,
                      "mode": stat.S_IMODE(info.st_mode) if info else None, "size": info.st_size if info else None}})
        json.dump(seen, open(runs, "w"))
        challenge = {challenges!r}[len(seen) - 1]
        if challenge is None:
            sys.exit(0)
        with open(path, "w") as f:
            f.write(challenge)
        sys.exit({status})
        """))
    return [PYTHON, str(script)]


def runs(tmp_path):
    return json.loads((tmp_path / "runs.json").read_text())


def exec_(daemon, tmp_path, challenges, *options):
    return daemon.ctl("exec", "--provider", daemon.name, "--resource", API, "--retry-on-exit", "77", *options,
                      "--", *command(tmp_path, challenges))


def test_invalid_token_gets_a_fresh_token_in_a_private_file_removed_after(daemon, tmp_path):
    r = exec_(daemon, tmp_path, ['Bearer error="invalid_token"', None])
    assert (r.returncode, r.stderr) == (0, ""), r.stderr + daemon.log_text()
    first, second = runs(tmp_path)
    assert first["token"] != second["token"], "the refused token was handed out again"
    assert first["file"] == second["file"] and (first["mode"], first["size"]) == (second["mode"], second["size"]) == (0o600, 0)
    folder = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    assert os.path.dirname(first["file"]) == folder
    assert not os.path.exists(first["file"])


def test_a_retry_refused_too_says_what_the_server_said(daemon, tmp_path):
    refusal = 'Bearer error="invalid_token", error_description="revoked"'
    r = exec_(daemon, tmp_path, [refusal, refusal])
    assert r.returncode == 77 and len(runs(tmp_path)) == 2
    assert r.stderr == ('authctl: the API refused the command\'s request again with 401 invalid_token: "revoked", '
                        'after a fresh token\n')


def test_insufficient_user_authentication_names_the_sign_in_and_runs_nothing_more(daemon, tmp_path):
    r = exec_(daemon, tmp_path, ['Bearer error="insufficient_user_authentication", acr_values="mfa", max_age="0"'])
    assert r.returncode == 4 and len(runs(tmp_path)) == 1
    assert f"run `authctl login --resource {API} --param acr_values=mfa --param max_age=0`, then try again" in r.stderr


def test_curls_headers_in_a_named_file(daemon, tmp_path):
    path = tmp_path / "challenge"
    path.write_text("stale, from an earlier run")
    os.chmod(path, 0o644)
    dump = ('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n'
            'WWW-Authenticate: Bearer error="insufficient_scope", scope="openid"\r\n\r\n')
    r = exec_(daemon, tmp_path, [dump], "--challenge-file", str(path))
    assert r.returncode == 77 and len(runs(tmp_path)) == 1
    assert runs(tmp_path)[0]["file"] == str(path) and runs(tmp_path)[0]["size"] == 0 and runs(tmp_path)[0]["mode"] == 0o600
    assert r.stderr == ('authctl: the API refused the command\'s request with 403 insufficient_scope (scope "openid"), '
                        'and the token has those scopes already\n')
    assert not path.exists()


def test_insufficient_scope_steps_up_to_the_union_once(daemon, tmp_path):
    r = exec_(daemon, tmp_path, ['Bearer error="insufficient_scope", scope="profile"', None])
    assert (r.returncode, r.stderr) == (0, ""), r.stderr + daemon.log_text()
    first, second = runs(tmp_path)
    assert first["token"] != second["token"]
    # The token of the second run is the one for the token's scopes and the server's.
    wider = token(daemon, resource=API, scopes=["openid", "offline_access", "profile"])
    assert "result" in wider, wider
    assert fingerprint(wider["result"]["access_token"]) == second["token"][:12]


def test_a_step_up_the_daemon_refuses_prints_the_refusal_then_the_daemons_sentence(daemon, tmp_path):
    # Not in the provider's scopes: the daemon refuses the wider set (-32602) without asking it.
    r = exec_(daemon, tmp_path, ['Bearer error="insufficient_scope", scope="admin"', None])
    lines = r.stderr.splitlines()
    assert r.returncode == 9 and len(lines) == 2 and len(runs(tmp_path)) == 1, r.stderr + daemon.log_text()
    assert lines[0] == 'authctl: the API refused the command\'s request with 401 insufficient_scope (scope "admin")'
    assert "admin" in lines[1]


def test_the_options_are_checked(daemon, tmp_path):
    r = daemon.ctl("exec", "--resource", API, "--challenge-file", str(tmp_path / "c"), "--", "true")
    assert r.returncode == 64 and "--challenge-file needs --retry-on-exit" in r.stderr
