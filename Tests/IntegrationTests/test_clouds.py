"""One sign-in for the clouds' own tools (issue 39): the real SDKs, configured only by
`authctl setup-aws` and `authctl setup-gcloud`, get working credentials from the broker,
with a real Glewlwyd-signed-in account and the real keyring.

- AWS: boto3 reads the profile `setup-aws` wrote and runs `authctl aws-credentials` as its
  credential_process; authbrokerd asks moto's real STS server (started here, on
  127.0.0.1, behind a counting proxy) AssumeRoleWithWebIdentity with the account's ID
  token; boto3 then signs GetCallerIdentity with what came back. A second process is
  answered from the daemon's cache: STS sees no second request.
- Google Cloud: google-auth loads the credential configuration `setup-gcloud` wrote, runs
  `authctl gcloud-credential` as its executable and exchanges the ID token at a STUB of
  Google's STS (sts.googleapis.com cannot be reached here), which checks what it was sent.

In neither case is a credential in any file under the test's HOME, or in the daemon's log.
"""
import json
import os
import stat
import subprocess
import sys

import pytest

from conftest import AUTHCTL, Daemon, decode_jwt, fingerprint, files_outside_the_keyring
from sts_servers import CountingProxy, MotoSTS, StubGoogleSTS

ROLE = "arn:aws:iam::123456789012:role/developer"


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


def cloud_env(d, home, **extra):
    """The daemon's environment for the clouds' tools: HOME of the test's own, and none of
    the AWS or Google settings of the machine running the tests."""
    env = {k: v for k, v in d.env.items() if not k.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_"))}
    env.update(HOME=str(home), AWS_EC2_METADATA_DISABLED="true", **extra)
    env.pop("XDG_CONFIG_HOME", None)
    return env


@pytest.fixture
def aws_world(glewlwyd_static, tmp_path, home):
    """moto's STS behind the counting proxy, and a daemon whose [aws] sts_endpoint is the
    proxy, with alice signed in."""
    with MotoSTS(str(tmp_path / "moto.log")) as moto, CountingProxy(moto.url) as proxy:
        d = Daemon(glewlwyd_static, extra_env={"HOME": str(home)})
        d.write_config()
        with open(d.config, "a") as f:
            f.write(f'\n[aws]\nsts_endpoint = "{proxy.url}"\nduration = 3600\n')
        try:
            d.start()
            d.login_device("alice")
            yield d, moto, proxy
        finally:
            d.cleanup()


BOTO3 = """
import hashlib, json, sys
import boto3
session = boto3.Session(profile_name=sys.argv[1])
frozen = session.get_credentials().get_frozen_credentials()
identity = session.client("sts").get_caller_identity()
fp = lambda s: hashlib.sha256(s.encode()).hexdigest()[:12]
print(json.dumps({"arn": identity["Arn"], "key": fp(frozen.access_key), "secret": fp(frozen.secret_key),
                  "session": fp(frozen.token)}))
"""


def boto3_identity(env, profile):
    r = subprocess.run([sys.executable, "-c", BOTO3, profile], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def id_token_of(d):
    answer = d.rpc("account.id_token", {"provider": d.name})
    assert "result" in answer, answer
    return answer["result"]["id_token"]


def test_boto3_reads_the_profile_setup_aws_writes_and_a_second_process_is_served_from_the_cache(aws_world, home):
    d, moto, proxy = aws_world
    env = cloud_env(d, home, AWS_ENDPOINT_URL_STS=moto.url)

    r = subprocess.run([AUTHCTL, "setup-aws", "--role-arn", ROLE, "--profile", "dev", "--region", "us-east-1",
                        "--provider", d.name], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    profile = (home / ".aws" / "config").read_text()
    assert "[profile dev]" in profile and f"credential_process = {AUTHCTL} aws-credentials --role-arn {ROLE}" in profile, profile
    assert "region = us-east-1" in profile

    first = boto3_identity(env, "dev")
    # moto names the session it minted the credentials for: the account's name.
    name = d.rpc("account.list")["result"]["accounts"][0]["display_name"]
    assert first["arn"] == f"arn:aws:sts::123456789012:assumed-role/developer/{name}", first
    assert proxy.count == 1, proxy.assumed
    sent = proxy.assumed[0]
    id_token = id_token_of(d)
    assert sent["token_fingerprint"] == fingerprint(id_token), "STS was not sent the account's ID token"
    assert (sent["RoleArn"], sent["RoleSessionName"], sent["DurationSeconds"]) == (ROLE, name, "3600"), sent
    _, claims = decode_jwt(id_token)
    assert claims["aud"] == d.gl.client_id("authbroker") or d.gl.client_id("authbroker") in claims["aud"]

    second = boto3_identity(env, "dev")
    assert second == first, "the second process got other credentials"
    assert proxy.count == 1, "the second process's credentials were asked of STS again"

    # What credential_process prints, and the daemon's own word that its cache answered.
    out = subprocess.run([AUTHCTL, "aws-credentials", "--role-arn", ROLE, "--provider", d.name, "--region", "us-east-1"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert set(printed) == {"Version", "AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration"}
    assert printed["Version"] == 1 and fingerprint(printed["AccessKeyId"]) == first["key"]
    assert printed["Expiration"].endswith("Z") and len(printed["Expiration"]) == 20, printed["Expiration"]
    answer = d.rpc("aws.credentials", {"provider": d.name, "role_arn": ROLE, "region": "us-east-1"})
    assert answer["result"]["cached"] is True and proxy.count == 1

    # Another session policy is another set of credentials: one more request.
    policy = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:ListBucket","Resource":"*"}]}'
    narrowed = d.rpc("aws.credentials", {"provider": d.name, "role_arn": ROLE, "region": "us-east-1", "session_policy": policy})
    assert narrowed["result"]["cached"] is False and proxy.count == 2
    assert proxy.assumed[1]["Policy"] == policy

    secrets = [printed["SecretAccessKey"], printed["SessionToken"], narrowed["result"]["secret_access_key"], id_token]
    for path, data in files_outside_the_keyring(str(home), d.dir):
        for secret in secrets:
            assert secret.encode() not in data, f"a credential is in {path}"


def test_sts_that_cannot_be_reached_or_an_endpoint_over_plain_http_is_one_sentence(aws_world, home):
    d, _, _ = aws_world
    env = cloud_env(d, home)
    down = subprocess.run([AUTHCTL, "aws-credentials", "--role-arn", ROLE, "--provider", d.name,
                           "--sts-endpoint", "http://127.0.0.1:9"], env=env, capture_output=True, text=True, timeout=30)
    assert down.returncode == 7, down.stderr
    assert down.stdout == "" and down.stderr.count("\n") == 1
    assert "AWS STS at http://127.0.0.1:9 cannot be reached" in down.stderr and "then try again" in down.stderr

    plain = subprocess.run([AUTHCTL, "aws-credentials", "--role-arn", ROLE, "--provider", d.name,
                            "--sts-endpoint", "http://sts.example.com"], env=env, capture_output=True, text=True, timeout=30)
    assert plain.returncode == 9, plain.stderr
    assert "must use https (http is allowed only on a loopback host)" in plain.stderr, plain.stderr


@pytest.fixture
def gcloud_world(glewlwyd_static, home):
    d = Daemon(glewlwyd_static, extra_env={"HOME": str(home)})
    with StubGoogleSTS() as sts:
        try:
            d.start()
            d.login_device("alice")
            yield d, sts
        finally:
            d.cleanup()


GOOGLE_AUTH = """
import hashlib, json, sys
import google.auth
import google.auth.transport.requests
import requests


class StubResourceManager(requests.adapters.BaseAdapter):
    # STUB of Google's Cloud Resource Manager, which google-auth asks for the project of
    # the pool's project number once it has a token (googleapis.com cannot be reached here).
    def send(self, request, **kwargs):
        r = requests.Response()
        r.status_code, r.url, r.request = 200, request.url, request
        r.headers["Content-Type"] = "application/json"
        r._content = json.dumps({"projectId": "corp-dev", "authorized": request.headers.get("Authorization", "")[:7]}).encode()
        return r

    def close(self):
        pass


session = requests.Session()
session.mount("https://cloudresourcemanager.googleapis.com/", StubResourceManager())
request = google.auth.transport.requests.Request(session)
try:
    creds, project = google.auth.load_credentials_from_file(
        sys.argv[1], scopes=["https://www.googleapis.com/auth/cloud-platform"], request=request)
    creds.refresh(request)
except google.auth.exceptions.RefreshError as e:
    print("refused:", e)
    sys.exit(2)
print(project, hashlib.sha256(creds.token.encode()).hexdigest()[:12])
"""

AUDIENCE = "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/corp/providers/glewlwyd"


def google_auth(env, path):
    return subprocess.run([sys.executable, "-c", GOOGLE_AUTH, path], env=env, capture_output=True, text=True, timeout=60)


def test_google_auth_loads_the_configuration_setup_gcloud_writes_and_exchanges_the_id_token(gcloud_world, home):
    d, sts = gcloud_world
    env = cloud_env(d, home, GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES="1")
    path = str(home / ".config" / "gcloud" / "authbroker-credentials.json")

    r = subprocess.run([AUTHCTL, "setup-gcloud", "--audience", AUDIENCE, "--token-url", sts.url + "/v1/token",
                        "--provider", d.name], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    config = json.load(open(path))
    assert config["type"] == "external_account" and config["audience"] == AUDIENCE
    assert config["subject_token_type"] == "urn:ietf:params:oauth:token-type:id_token"
    assert config["credential_source"]["executable"]["command"].startswith(f"{AUTHCTL} gcloud-credential --provider {d.name}")

    got = google_auth(env, path)
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.split() == ["corp-dev", fingerprint(StubGoogleSTS.access_token)], got.stdout
    # google-auth runs the executable for each token: loading (for the project) and the refresh.
    assert len(sts.exchanges) == 2, sts.exchanges
    id_token = id_token_of(d)
    for sent in sts.exchanges:
        assert sent["subject_token_fingerprint"] == fingerprint(id_token), "Google's STS was not sent the account's ID token"
        assert sent["subject_token_type"] == "urn:ietf:params:oauth:token-type:id_token"
        assert sent["audience"] == AUDIENCE and sent["requested_token_type"] == "urn:ietf:params:oauth:token-type:access_token"

    for file, data in files_outside_the_keyring(str(home), d.dir):
        assert id_token.encode() not in data, f"the ID token is in {file}"

    # The format's failure answer, through the real library: on stdout, nothing on stderr.
    assert d.ctl("logout", "--provider", d.name, "--local").returncode == 0
    refused = google_auth(env, path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    # google-auth shows the executable's error response as it printed it.
    assert "Executable exited with non-zero return code 4" in refused.stdout, refused.stdout
    assert '"code":"login_required"' in refused.stdout and f"no subject token for {AUDIENCE}: not signed in" in refused.stdout
    assert f"authctl login --provider {d.name}" in refused.stdout


def test_gcloud_credential_answers_in_the_executable_format_and_writes_the_output_file(gcloud_world, home, tmp_path):
    d, _ = gcloud_world
    out = tmp_path / "cache" / "response.json"
    env = cloud_env(d, home, GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE=str(out),
                    GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE="urn:ietf:params:oauth:token-type:jwt")
    r = subprocess.run([AUTHCTL, "gcloud-credential", "--provider", d.name], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    answer = json.loads(r.stdout)
    assert answer["version"] == 1 and answer["success"] is True
    assert answer["token_type"] == "urn:ietf:params:oauth:token-type:jwt", "the configuration's token type is answered"
    assert fingerprint(answer["id_token"]) == fingerprint(id_token_of(d))
    assert answer["expiration_time"] == decode_jwt(answer["id_token"])[1]["exp"]
    assert json.loads(out.read_text()) == answer and stat.S_IMODE(os.stat(out).st_mode) == 0o600

    saml = dict(env, GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE="urn:ietf:params:oauth:token-type:saml2")
    saml.pop("GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE")
    r = subprocess.run([AUTHCTL, "gcloud-credential", "--provider", d.name], env=saml, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and r.stderr == ""
    failure = json.loads(r.stdout)
    assert failure["success"] is False and failure["code"] == "unsupported_token_type" and "setup-gcloud" in failure["message"]
