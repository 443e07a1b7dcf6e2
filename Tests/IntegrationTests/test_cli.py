"""authctl for scripts (docs/cli-json.md): `--json` output and JSON errors with the usual exit
statuses, suggestions for mistyped commands, `status` without a daemon, completions from
config.toml, `setup-git` through a real git, and `kube-credential --print-kubeconfig`
through a real kubectl — against the real daemon, Glewlwyd and keyring."""
import json
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import API, AUTHCTL, GIT, Daemon, fingerprint, token_for
from stub_http import StubHTTPServer, bearer

SCOPES = ["openid", "profile", "email", "offline_access"]


def run(env, *args, input=None, timeout=60):
    return subprocess.run(list(args), env=env, input=input, capture_output=True, text=True, timeout=timeout)


def ctl(env, *args, input=None):
    return run(env, AUTHCTL, *args, input=input)


def json_error(r):
    """The one JSON error object a failed `--json` command writes on stderr."""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return json.loads(lines[0])["error"]


def login_json(d, user="alice"):
    """`authctl login --device --json`, approved in Glewlwyd as the user would: the JSON
    lines it printed."""
    p = subprocess.Popen([AUTHCTL, "login", "--device", "--json", "--provider", d.name], env=d.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    first = p.stdout.readline()
    assert first, p.stderr.read() + d.log_text()
    started = json.loads(first)
    session = d.gl.login_session(user)
    d.gl.approve_device(session, started["user_code"], d.gl.client_id(d.client), SCOPES)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err + d.log_text()
    return [started] + [json.loads(line) for line in out.splitlines()]


# Mistyped commands and options.

def test_a_mistyped_command_gets_a_suggestion_and_the_usage_status(tmp_path):
    env = dict(os.environ, AUTHBROKER_SOCKET=str(tmp_path / "sock"))
    r = ctl(env, "tokne", "--resource", API)
    assert r.returncode == 64 and r.stdout == ""
    assert r.stderr.strip() == "authctl: unknown command 'tokne'. Did you mean 'token'?"
    r = ctl(env, "log")
    assert r.returncode == 64 and "Did you mean 'login' or 'logout'?" in r.stderr
    r = ctl(env, "frobnicate")
    assert r.returncode == 64 and "unknown command 'frobnicate'" in r.stderr and "authctl --help" in r.stderr

    # With --json the same as one JSON object; options get ArgumentParser's suggestion.
    r = ctl(env, "tokne", "--json")
    assert r.returncode == 64 and r.stdout == ""
    assert json_error(r) == {"kind": "usage", "exit_status": 64,
                             "message": "unknown command 'tokne'. Did you mean 'token'?"}
    r = ctl(env, "token", "--resourse", API)
    assert r.returncode == 64 and "Did you mean '--resource'?" in r.stderr
    r = ctl(env, "token", "--resourse", API, "--json")
    assert r.returncode == 64
    assert json_error(r)["message"] == "Unknown option '--resourse'. Did you mean '--resource'?"
    r = ctl(env, "token", "--json", "--header")
    assert r.returncode == 64 and json_error(r)["kind"] == "usage"

    # Help and real commands are untouched.
    r = ctl(env, "--help")
    assert r.returncode == 0 and "setup-git" in r.stdout
    r = ctl(env, "help", "token")
    assert r.returncode == 0 and "--resource" in r.stdout


# `authctl status` without a daemon.

def test_status_says_clearly_when_the_daemon_is_not_running(tmp_path):
    path = str(tmp_path / "sock")
    env = dict(os.environ, AUTHBROKER_SOCKET=path)

    r = ctl(env, "status")
    assert r.returncode == 3 and r.stdout == ""
    assert "authbrokerd is not running" in r.stderr and "systemctl --user start authbroker.socket" in r.stderr
    r = ctl(env, "status", "--json")
    assert r.returncode == 3
    down = json.loads(r.stdout)
    assert down["running"] is False and down["reason"] == "no_socket" and down["socket"] == path
    assert "authbrokerd is not running" in down["message"]

    # A socket file that nothing listens on any more (a daemon that was killed).
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    r = ctl(env, "status", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["reason"] == "refused"

    # STUB of systemd's socket activation when the service fails to start: the socket
    # takes the connection, then it is closed without an answer.
    os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)

    def drop():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=drop, daemon=True).start()
    try:
        r = ctl(env, "status")
        assert r.returncode == 3 and "authbrokerd is not running" in r.stderr and "fails to start" in r.stderr
        r = ctl(env, "status", "--json")
        assert r.returncode == 3
        down = json.loads(r.stdout)
        assert (down["running"], down["reason"]) == (False, "closed")
    finally:
        listener.close()

    # Other commands keep their errors, now also as JSON.
    r = ctl(env, "accounts", "--json")
    assert r.returncode == 3 and r.stdout == ""
    assert json_error(r)["kind"] == "daemon_unavailable" and json_error(r)["exit_status"] == 3


# --json with the real daemon.

def test_json_errors_carry_the_daemons_code_and_the_exit_status(daemon_factory):
    d = daemon_factory(provider="static")
    d.start()
    for args in (["token", "--resource", API], ["token", "--resource", API, "--fresh"],
                 ["whoami"], ["userinfo"], ["logout", "--local"]):
        r = ctl(d.env, *args, "--provider", d.name, "--json")
        assert r.returncode in (4, 9), (args, r.stderr)
        error = json_error(r)
        assert r.stdout == "", args
        assert error["exit_status"] == r.returncode and error["code"] in (-32001, -32602), (args, error)
        assert error["kind"] == {4: "login_required", 9: "bad_request"}[r.returncode]
        assert error["data"]["provider"] == d.name if "data" in error else True
        assert error["message"] and not error["message"].startswith("authctl:")
    r = ctl(d.env, "token", "--resource", API, "--provider", d.name, "--json")
    assert json_error(r)["kind"] == "login_required" and json_error(r)["code"] == -32001

    r = ctl(d.env, "token", "--resource", API, "--provider", "nope", "--json")
    assert r.returncode == 9 and json_error(r)["code"] == -32006

    # Without --json: one sentence, as before.
    r = ctl(d.env, "token", "--resource", API, "--provider", d.name)
    assert r.returncode == 4 and r.stderr.startswith("authctl: ") and "{" not in r.stderr


def test_login_logout_and_the_rest_print_json_without_tokens(daemon_factory):
    d = daemon_factory(provider="static")
    d.start()
    lines = login_json(d)
    assert [line["event"] for line in lines] == ["login_started", "signed_in"]
    started, done = lines
    assert started["provider"] == d.name and started["flow"] == "device"
    assert started["verification_uri"].startswith("http") and started["expires_at"] > time.time()
    assert done["account"]["provider"] == d.name and done["account"]["state"] == "ready"
    assert done["account"]["username"].startswith("alice")

    token = token_for(d, API)
    outputs = [json.dumps(lines)]

    r = ctl(d.env, "token", "--resource", API, "--provider", d.name, "--json")
    assert r.returncode == 0 and fingerprint(json.loads(r.stdout)["access_token"]) == fingerprint(token)

    r = ctl(d.env, "status", "--json")
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert status["running"] is True and status["providers"][0]["name"] == d.name
    outputs.append(r.stdout)

    r = ctl(d.env, "accounts", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["accounts"][0]["subject"] == done["account"]["subject"]
    outputs.append(r.stdout)

    r = ctl(d.env, "whoami", "--provider", d.name, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["claims"]["sub"] == done["account"]["subject"]
    outputs.append(r.stdout)

    r = ctl(d.env, "logout", "--provider", d.name, "--json", "--no-browser")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["provider"] == d.name and out["account"] == done["account"]["display_name"] and isinstance(out["revoked"], bool)
    outputs.append(r.stdout)

    # No access token (nor any part of one) in what the commands printed.
    for text in outputs:
        assert token not in text and token.split(".")[-1] not in text

    r = ctl(d.env, "set-secret", "--provider", d.name, "--json", input="not-a-real-secret\n")
    if r.returncode == 0:
        assert json.loads(r.stdout) == {"provider": d.name, "stored": True, "store": "secret-service"}
    else:  # the client has a secret in config.toml: refused, as a JSON error
        assert json_error(r)["kind"] == "configuration"
    assert "not-a-real-secret" not in r.stdout + r.stderr
    r = ctl(d.env, "set-secret", "--provider", d.name, "--json", input="")
    assert r.returncode == 64 and json_error(r)["kind"] == "usage"


def test_set_secret_over_a_secret_in_config_toml_is_a_configuration_error(tmp_path):
    """config.toml already holds client_secret: set-secret is refused as the file's doing
    (exit 12, kind "configuration", the provider in data), not as a bad request (9), and
    the sentence says what to change."""
    d = Daemon(None, name="corp")
    d.write_config(text='[daemon]\nstore = "memory"\n[providers.corp]\nissuer = "http://127.0.0.1:9/oidc"\n'
                        'client_id = "c"\nclient_secret = "in-the-file"\n')
    try:
        d.start()
        r = ctl(d.env, "set-secret", "--provider", "corp", input="not-a-real-secret\n")
        assert r.returncode == 12, r.stderr
        assert "remove it from [providers.corp]" in r.stderr and "reload" in r.stderr
        r = ctl(d.env, "set-secret", "--provider", "corp", "--json", input="not-a-real-secret\n")
        error = json_error(r)
        assert (r.returncode, error["kind"], error["code"], error["data"]) == (12, "configuration", -32010, {"provider": "corp"})
        assert "not-a-real-secret" not in r.stdout + r.stderr and "in-the-file" not in r.stdout + r.stderr
    finally:
        d.cleanup()


def test_set_secret_says_where_the_secret_was_kept(tmp_path):
    """With store = "memory" the secret is in the daemon's memory only: set-secret says so
    and that it must be set again after a restart, not "in the Secret Service"; --json
    names the store."""
    d = Daemon(None, name="corp")
    d.write_config(text='[daemon]\nstore = "memory"\n[providers.corp]\nissuer = "http://127.0.0.1:9/oidc"\nclient_id = "c"\n')
    try:
        d.start()
        r = ctl(d.env, "set-secret", "--provider", "corp", input="not-a-real-secret\n")
        assert r.returncode == 0, r.stderr
        assert "Secret Service" not in r.stdout and "memory only" in r.stdout and "again after" in r.stdout, r.stdout
        r = ctl(d.env, "set-secret", "--provider", "corp", "--json", input="not-a-real-secret\n")
        assert r.returncode == 0 and json.loads(r.stdout) == {"provider": "corp", "stored": True, "store": "memory"}
        assert "not-a-real-secret" not in r.stdout + r.stderr
    finally:
        d.cleanup()


# Completions.

CONFIG = """
[providers.corp]
issuer = "https://login.example.com"
client_id = "c"
resources = ["https://api.example.com", "https://git.example.com"]

[providers.home]
issuer = "https://home.example.com"
client_id = "h"
resources = ["https://nas.example.com"]
"""


def test_completions_offer_the_configured_providers_and_resources(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(CONFIG)
    # No daemon: the socket leads nowhere; completion reads config.toml itself.
    env = dict(os.environ, AUTHBROKER_CONFIG=str(config), AUTHBROKER_SOCKET=str(tmp_path / "none"),
               PATH=os.path.dirname(AUTHCTL) + ":" + os.environ["PATH"])
    script = tmp_path / "authctl.bash"
    r = ctl(env, "--generate-completion-script", "bash")
    assert r.returncode == 0
    script.write_text(r.stdout)

    def complete(line):
        words = line.split(" ")
        program = (f'source {script}; COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; '
                   f'COMP_WORDS=({" ".join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; '
                   f'_authctl authctl {words[-1]!r} {words[-2]!r}; printf "%s\\n" "${{COMPREPLY[@]}}"')
        r = run(env, "bash", "-c", program)
        assert r.returncode == 0, r.stderr
        return sorted(w for w in r.stdout.splitlines() if w)

    assert complete("authctl token --provider ") == ["corp", "home"]
    assert complete("authctl login --provider h") == ["home"]
    assert complete("authctl token --resource ") == ["https://api.example.com", "https://git.example.com",
                                                     "https://nas.example.com"]
    assert complete("authctl exec --provider home --resource ") == ["https://nas.example.com"]
    assert complete("authctl setup-git --resource https://g") == ["https://git.example.com"]

    # zsh and fish scripts call back the same way.
    for shell in ("zsh", "fish"):
        r = ctl(env, "--generate-completion-script", shell)
        assert r.returncode == 0 and "---completion" in r.stdout

    # A missing or broken config completes nothing, silently.
    config.write_text("[providers.corp\n")
    assert complete("authctl token --provider ") == []


# git.

def fill(env, host="git.example.test"):
    r = run(env, "git", "credential", "fill", input=f"protocol=https\nhost={host}\n\n")
    return r, dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def helpers(env, url=GIT):
    r = run(env, "git", "config", "--global", "--get-all", f"credential.{url}.helper")
    return r.stdout.splitlines()


def test_setup_git_makes_git_credential_fill_get_the_token(broker, git_env):
    # A stored password for the host, from an earlier helper, must not win.
    home = git_env["HOME"]
    with open(os.path.join(home, ".git-credentials"), "w") as f:
        f.write("https://someone:stale-password@git.example.test\n")
    run(git_env, "git", "config", "--global", "credential.helper", "store")

    r = ctl(git_env, "setup-git", "--resource", GIT, "--provider", broker.name, "--dry-run")
    assert r.returncode == 0 and "git config --global" in r.stdout and helpers(git_env) == []

    for _ in range(2):  # idempotent
        r = ctl(git_env, "setup-git", "--resource", GIT, "--provider", broker.name)
        assert r.returncode == 0, r.stderr
    values = helpers(git_env)
    assert len(values) == 2 and values[0] == "" and "git-credential" in values[1] and broker.name in values[1]

    r, answer = fill(git_env)
    assert r.returncode == 0, r.stderr
    assert answer["username"] == "oauth2"
    assert fingerprint(answer["password"]) == fingerprint(token_for(broker, GIT))

    r = ctl(git_env, "setup-git", "--host", "git.example.test", "--unset", "--json")
    assert r.returncode == 0
    report = json.loads(r.stdout)
    assert report["action"] == "unset" and report["config_key"] == f"credential.{GIT}.helper"
    assert helpers(git_env) == []
    r, answer = fill(git_env)
    assert answer.get("password") == "stale-password"  # back to what was there before


# kubectl.

@pytest.fixture
def kube_api(tmp_path):
    """STUB Kubernetes API server (kubectl sends exec-plugin credentials only over TLS):
    answers /version and /api, and records the fingerprint of each bearer token it got.
    Yields its URL, its certificate's file and that record."""
    seen = []

    def answer(request):
        token = bearer(request)
        seen.append(fingerprint(token) if token else None)
        return "application/json", json.dumps({"kind": "APIVersions", "versions": ["v1"]}).encode()

    with StubHTTPServer(answer, tls_dir=tmp_path) as server:
        yield server.url, server.ca, seen


# Debian's own kubectl (kubernetes-client, 1.20 in Debian 12: client.authentication.k8s.io
# v1beta1, not v1). scripts/setup installs it, or unpacks it here where another package
# (Google Cloud SDK's kubectl) owns /usr/bin/kubectl.
UNPACKED_KUBECTL = "/usr/local/lib/authbroker-test/kubernetes-client/usr/bin/kubectl"


def debian_kubectl():
    owner = subprocess.run(["dpkg-query", "-S", "/usr/bin/kubectl"], capture_output=True, text=True)
    if owner.stdout.startswith("kubernetes-client:"):
        return "/usr/bin/kubectl"
    if os.access(UNPACKED_KUBECTL, os.X_OK):
        return UNPACKED_KUBECTL
    pytest.fail("Debian's kubectl (package kubernetes-client) is missing: run scripts/setup")


def kubeconfig_as_kubectl_reads_it(env, path, kubectl):
    r = run(env, kubectl, "config", "view", "--kubeconfig", str(path), "--raw", "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_print_kubeconfig_gives_debians_kubectl_the_token_over_v1beta1(broker, kube_api, tmp_path):
    kubectl = debian_kubectl()
    version = run(broker.env, kubectl, "version", "--client", "-o", "json")
    assert version.returncode == 0, version.stderr
    assert json.loads(version.stdout)["clientVersion"]["minor"] == "20", "not Debian 12's kubectl 1.20"
    url, ca, seen = kube_api
    args = ["kube-credential", "--print-kubeconfig", "--resource", API, "--provider", broker.name,
            "--server", url, "--certificate-authority", ca, "--cluster-name", "test-cluster",
            "--exec-api-version", "v1beta1"]
    r = ctl(broker.env, *args)
    assert r.returncode == 0, r.stderr
    yaml_file = tmp_path / "kubeconfig.yaml"
    yaml_file.write_text(r.stdout)
    r = ctl(broker.env, *args, "--json")
    assert r.returncode == 0, r.stderr
    json_file = tmp_path / "kubeconfig.json"
    json_file.write_text(r.stdout)
    config = kubeconfig_as_kubectl_reads_it(broker.env, yaml_file, kubectl)
    assert kubeconfig_as_kubectl_reads_it(broker.env, json_file, kubectl) == config
    (user,) = config["users"]
    exec_ = user["user"]["exec"]
    assert exec_["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert exec_["args"] == ["kube-credential", "--resource", API, "--provider", broker.name]
    assert os.path.samefile(exec_["command"], AUTHCTL)
    assert config["current-context"] == "test-cluster"
    assert config["clusters"][0]["cluster"]["server"] == url

    # kubectl runs `authctl kube-credential` (asking for v1beta1) and sends its token.
    r = run(broker.env, kubectl, "--kubeconfig", str(yaml_file), "get", "--raw", "/api", timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kind"] == "APIVersions"
    want = fingerprint(token_for(broker, API))
    assert seen and set(seen) == {want}

    # The default is v1 (kubectl 1.22 and later), with interactiveMode, which v1 requires.
    r = ctl(broker.env, *args[:-2])
    assert r.returncode == 0, r.stderr
    v1_file = tmp_path / "v1.yaml"
    v1_file.write_text(r.stdout)
    (user,) = kubeconfig_as_kubectl_reads_it(broker.env, v1_file, kubectl)["users"]
    assert user["user"]["exec"]["apiVersion"] == "client.authentication.k8s.io/v1"
    assert "interactiveMode: IfAvailable" in r.stdout

    # Without --server: the user entry alone, to merge into an existing kubeconfig.
    r = ctl(broker.env, "kube-credential", "--print-kubeconfig", "--resource", API)
    assert r.returncode == 0 and "clusters" not in r.stdout
    user_file = tmp_path / "user.yaml"
    user_file.write_text(r.stdout)
    config = kubeconfig_as_kubectl_reads_it(broker.env, user_file, kubectl)
    assert [u["name"] for u in config["users"]] == ["authbroker"] and not config.get("clusters")
    r = ctl(broker.env, "kube-credential", "--exec-api-version", "v2")
    assert r.returncode == 64 and "v1beta1" in r.stderr
    r = ctl(broker.env, "kube-credential", "--server", url)
    assert r.returncode == 64 and "--print-kubeconfig" in r.stderr


def test_setup_aws_and_setup_gcloud_say_what_they_wrote_as_json(tmp_path):
    """`--json` on the cloud set-ups (issue 39): what a script or a provisioning tool needs
    to check the set-up, the settings taken out of the profile, and the warning about a
    shared credentials file whose keys would be used first. Writes files only: no daemon."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "config").write_text("[profile dev]\nrole_arn = arn:aws:iam::1:role/old\noutput = json\n")
    (home / ".aws" / "credentials").write_text("[dev]\naws_access_key_id = AKIAEXAMPLE\n")
    env = dict(os.environ, HOME=str(home))
    env.pop("AWS_CONFIG_FILE", None)
    env.pop("AWS_SHARED_CREDENTIALS_FILE", None)
    role = "arn:aws:iam::123456789012:role/dev"
    r = subprocess.run([AUTHCTL, "setup-aws", "--role-arn", role, "--profile", "dev", "--region", "eu-west-1", "--json"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    report = json.loads(r.stdout)
    assert report["profile"] == "dev" and report["file"] == str(home / ".aws" / "config")
    assert report["credential_process"] == f"{AUTHCTL} aws-credentials --role-arn {role} --region eu-west-1"
    assert report["region"] == "eu-west-1" and report["dry_run"] is False
    assert report["removed"] == ["role_arn"], report
    assert any("credentials" in w and "[dev]" in w for w in report["warnings"]), report
    written = (home / ".aws" / "config").read_text()
    assert f"credential_process = {report['credential_process']}" in written and "output = json" in written
    assert "role_arn" not in written

    dry = subprocess.run([AUTHCTL, "setup-aws", "--role-arn", role, "--profile", "other", "--dry-run", "--json"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert dry.returncode == 0 and json.loads(dry.stdout)["dry_run"] is True
    assert "[profile other]" not in (home / ".aws" / "config").read_text(), "a dry run wrote the profile"

    out = tmp_path / "gcloud.json"
    audience = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/corp/providers/idp"
    g = subprocess.run([AUTHCTL, "setup-gcloud", "--audience", audience, "--output", str(out), "--json"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert g.returncode == 0, g.stderr
    said = json.loads(g.stdout)
    config = json.loads(out.read_text())
    assert said == {"file": str(out), "audience": audience, "subject_token_type": config["subject_token_type"],
                    "command": config["credential_source"]["executable"]["command"]}

    # A file that cannot be written (its folder is a file): the failure as the JSON error object.
    broken = subprocess.run([AUTHCTL, "setup-aws", "--role-arn", role, "--profile", "dev", "--json",
                             "--config-file", str(out / "config")], env=env, capture_output=True, text=True, timeout=30)
    assert broken.returncode != 0 and broken.stdout == ""
    assert str(out) in json.loads(broken.stderr)["error"]["message"], broken.stderr
