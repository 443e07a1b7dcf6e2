"""No token, refresh token, ID token, client secret or device code ever leaves the Secret
Service: the whole flow runs at the most verbose log level, then every log, every output
and every file the test can see is searched for every secret the test has seen.

Two providers: the real Glewlwyd (a confidential client, so there is a client secret; no
rotation, so one sign-in serves two resources) and a STUB provider, because Glewlwyd keeps
device codes only as hashes and the stub can tell which device code it issued."""
import json
import os
import subprocess

from conftest import API, AUTHCTL, GIT, Daemon, files_outside_the_keyring, stored_item
from stub_provider import StubProvider


def scan(secrets, texts, roots):
    """(where, which secret) for every secret found; never the secret itself."""
    found = []
    blobs = list(texts)
    blobs += [(path, data.decode("latin-1")) for path, data in files_outside_the_keyring(*roots)]
    for where, text in blobs:
        for kind, value in secrets:
            if value in text:
                found.append((where, kind))
    return found


def test_no_secret_in_any_log_output_or_file(glewlwyd_static):
    gl = glewlwyd_static
    stub = StubProvider(access_token_life=600).start()
    d = Daemon(gl, client="authbroker-confidential")
    other = "stub" + d.name
    d.write_config(text=f"""
[daemon]
store = "secret-service"

[providers.{d.name}]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('authbroker-confidential')}"
scopes = ["openid", "profile", "email", "offline_access"]
resources = ["{API}", "{GIT}"]

[providers.{other}]
issuer = "{stub.issuer}"
client_id = "{stub.client_id}"
scopes = ["openid", "offline_access"]
""")
    client_secret = gl.client_secret("authbroker-confidential")
    outputs = []  # (label, text) of everything authctl printed, but a token command's stdout
    secrets = [("client secret", client_secret)]
    trace = ("--log-level", "trace")

    def ctl(*args, token=False, **kw):
        r = subprocess.run([AUTHCTL, *args], env=d.env, capture_output=True, text=True, timeout=60, **kw)
        assert r.returncode == 0, f"authctl {args[0]} failed ({r.returncode}): {r.stderr}"
        outputs.append((f"authctl {' '.join(args)} stderr", r.stderr))
        if token:
            secrets.append((f"access token ({' '.join(args)})", r.stdout.strip()))
        else:
            outputs.append((f"authctl {' '.join(args)} stdout", r.stdout))
        return r

    try:
        d.start(args=trace)
        ctl("set-secret", "--provider", d.name, input=client_secret + "\n")
        outputs.append(("authctl login --device (glewlwyd)", d.login_device("alice")))
        ctl("login", "--device", "--provider", other)
        ctl("token", "--provider", d.name, "--resource", API, token=True)
        ctl("token", "--provider", d.name, "--resource", GIT, token=True)
        j = ctl("token", "--provider", d.name, "--resource", API, "--json", token=True)
        secrets[-1] = ("access token (--json)", json.loads(j.stdout)["access_token"])
        ctl("token", "--provider", other, token=True)
        ctl("whoami", "--provider", d.name)
        ctl("status")
        ctl("status", "--json")
        outputs.append(("daemon.status", json.dumps(d.status())))
        outputs.append(("account.list", json.dumps(d.rpc("account.list"))))

        d.stop()
        d.start(args=trace)
        ctl("token", "--provider", d.name, "--resource", GIT, token=True)
        ctl("status")
        ctl("status", "--json")

        for provider in (d.name, other):
            item = stored_item(provider)
            assert item is not None, f"no Secret Service item for {provider}"
            for key, value in item[1].items():
                if isinstance(value, str) and len(value) >= 16 and key in ("refresh_token", "id_token"):
                    secrets.append((f"{key} of {provider} (from the keyring)", value))
        ctl("logout", "--provider", d.name)
        ctl("logout", "--provider", other)
    finally:
        d.stop()
        stub.stop()
    secrets += [("a token or device code the stub issued", s) for s in stub.issued]
    assert len({v for _, v in secrets}) >= 12, "the flow should have seen a dozen secrets"
    assert all(len(v) >= 16 for _, v in secrets)

    outputs.append(("daemon log", d.log_text()))
    roots = [d.dir, os.environ.get("AUTHBROKER_TEST_HOME", os.environ["HOME"])]
    found = scan(secrets, outputs, roots)
    d.cleanup()
    assert found == [], "secrets found outside the Secret Service: " + "; ".join(f"{k} in {w}" for w, k in found)
