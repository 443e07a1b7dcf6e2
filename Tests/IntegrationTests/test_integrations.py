"""The integrations, each checked against what the other tool reads: `authctl exec` (the
environment and exit status), `authctl kube-credential` (ExecCredential JSON against its
schema), `authctl git-credential` (through `git credential fill`), the curl recipe, and the
client examples in Python and shell — all against the real daemon, Glewlwyd and keyring."""
import calendar
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import API, AUTHCTL, GIT, ROOT, decode_jwt, fingerprint, token_for
from stub_http import StubHTTPServer, bearer

EXAMPLES = os.path.join(ROOT, "examples")

# The ExecCredential that kubectl reads, from the Kubernetes API reference for
# client.authentication.k8s.io/v1: apiVersion and kind identify it; status.token is the
# bearer token; status.expirationTimestamp is an RFC 3339 date-time (kubectl caches the token
# until then). Client certificate fields are the alternative to a token and are not used.
EXEC_CREDENTIAL_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["apiVersion", "kind", "status"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"enum": ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]},
        "kind": {"const": "ExecCredential"},
        "spec": {"type": "object"},
        "status": {
            "type": "object",
            "required": ["token", "expirationTimestamp"],
            "additionalProperties": False,
            "properties": {
                "token": {"type": "string", "minLength": 1},
                "expirationTimestamp": {
                    "type": "string",
                    "format": "date-time",
                    # RFC 3339 in UTC, the form Kubernetes' metav1.Time writes.
                    "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$",
                },
                "clientCertificateData": {"type": "string"},
                "clientKeyData": {"type": "string"},
            },
        },
    },
}


def validate_schema(instance, schema):
    """jsonschema when it is installed; otherwise the same checks for the keywords used above."""
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
    if jsonschema is not None:
        jsonschema.validate(instance, schema, format_checker=jsonschema.FormatChecker())
        return

    def check(value, s, path):
        if "const" in s:
            assert value == s["const"], f"{path}: {value!r} is not {s['const']!r}"
        if "enum" in s:
            assert value in s["enum"], f"{path}: {value!r} not in {s['enum']}"
        if s.get("type") == "object":
            assert isinstance(value, dict), f"{path}: not an object"
            for key in s.get("required", []):
                assert key in value, f"{path}: {key} is missing"
            if s.get("additionalProperties") is False:
                extra = set(value) - set(s.get("properties", {}))
                assert not extra, f"{path}: unexpected {sorted(extra)}"
            for key, sub in s.get("properties", {}).items():
                if key in value:
                    check(value[key], sub, f"{path}.{key}")
        if s.get("type") == "string":
            assert isinstance(value, str), f"{path}: not a string"
            assert len(value) >= s.get("minLength", 0), f"{path}: too short"
            if "pattern" in s:
                assert re.search(s["pattern"], value), f"{path}: {value!r} does not match"

    check(instance, schema, "$")


def run(d, *args, input=None, env=None, timeout=60):
    return subprocess.run(list(args), env=env or d.env, input=input, capture_output=True, text=True, timeout=timeout)


def expiry_for(d, resource):
    r = run(d, AUTHCTL, "token", "--resource", resource, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["expires_at"]


# A child that reports the token's fingerprint (never the token) and exits with status 7.
REPORT = "import hashlib, os, sys; print(hashlib.sha256(os.environ[sys.argv[1]].encode()).hexdigest()[:12]); sys.exit(7)"


def test_exec_puts_the_token_in_the_environment_and_passes_the_exit_status(broker):
    r = run(broker, AUTHCTL, "exec", "--resource", API, "--", sys.executable, "-c", REPORT, "AUTHBROKER_TOKEN")
    assert r.returncode == 7, r.stderr
    assert r.stdout.strip() == fingerprint(token_for(broker, API))

    r = run(broker, AUTHCTL, "exec", "--resource", GIT, "--env", "GIT_TOKEN", "--", sys.executable, "-c", REPORT, "GIT_TOKEN")
    assert r.returncode == 7 and r.stdout.strip() == fingerprint(token_for(broker, GIT))


def test_exec_failures_say_so_and_never_run_the_command(broker, tmp_path):
    r = run(broker, AUTHCTL, "exec", "--resource", API, "--", "no-such-command-here")
    assert r.returncode == 127 and "cannot run no-such-command-here" in r.stderr
    marker = tmp_path / "ran"
    env = dict(broker.env, AUTHBROKER_SOCKET=str(tmp_path / "nothing-here"))
    r = run(broker, AUTHCTL, "exec", "--resource", API, "--", "touch", str(marker), env=env)
    assert r.returncode == 3 and "authbrokerd is not running" in r.stderr
    assert not marker.exists()
    r = run(broker, AUTHCTL, "exec", "--resource", API, "--env", "1BAD", "--", "true")
    assert r.returncode == 64


def test_kube_credential_prints_an_exec_credential_kubectl_accepts(broker):
    r = run(broker, AUTHCTL, "kube-credential", "--resource", API)
    assert r.returncode == 0, r.stderr
    credential = json.loads(r.stdout)
    validate_schema(credential, EXEC_CREDENTIAL_SCHEMA)
    assert credential["apiVersion"] == "client.authentication.k8s.io/v1"
    status = credential["status"]
    assert fingerprint(status["token"]) == fingerprint(token_for(broker, API))
    assert decode_jwt(status["token"])[1]["aud"] in (API, [API])
    expires = calendar.timegm(time.strptime(status["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
    assert expires == expiry_for(broker, API)

    # kubectl tells the plugin which version it wants; v1beta1 is answered in kind.
    info = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
            "spec": {"interactive": False}}
    r = run(broker, AUTHCTL, "kube-credential", "--resource", API,
            env=dict(broker.env, KUBERNETES_EXEC_INFO=json.dumps(info)))
    assert r.returncode == 0, r.stderr
    beta = json.loads(r.stdout)
    validate_schema(beta, EXEC_CREDENTIAL_SCHEMA)
    assert beta["apiVersion"] == "client.authentication.k8s.io/v1beta1"

    info["apiVersion"] = "client.authentication.k8s.io/v9"
    r = run(broker, AUTHCTL, "kube-credential", "--resource", API,
            env=dict(broker.env, KUBERNETES_EXEC_INFO=json.dumps(info)))
    assert r.returncode == 64 and "apiVersion" in r.stderr and r.stdout == ""


@pytest.fixture
def git_home(git_env):
    """A HOME whose global git config has the helper for the git resource's host only."""
    helper = f"!{AUTHCTL} git-credential --resource {GIT} --username alice-bot"
    subprocess.run(["git", "config", "--global", f"credential.{GIT}.helper", helper], env=git_env, check=True)
    return git_env


def test_git_credential_fill_gets_the_token_as_password(broker, git_home):
    r = run(broker, "git", "credential", "fill", input="protocol=https\nhost=git.example.test\n\n", env=git_home)
    assert r.returncode == 0, r.stderr
    answer = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert answer["username"] == "alice-bot"
    assert fingerprint(answer["password"]) == fingerprint(token_for(broker, GIT))
    assert decode_jwt(answer["password"])[1]["aud"] in (GIT, [GIT])
    if "password_expiry_utc" in answer:  # git 2.41 and later pass it through
        assert int(answer["password_expiry_utc"]) == expiry_for(broker, GIT)


def test_git_credential_helper_protocol_as_git_speaks_it(broker):
    r = run(broker, AUTHCTL, "git-credential", "--resource", GIT, "get",
            input="protocol=https\nhost=git.example.test\npath=team/repo.git\n\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split("=", 1)[0] for line in lines] == ["username", "password", "password_expiry_utc"]
    answer = dict(line.split("=", 1) for line in lines)
    assert answer["username"] == "oauth2"
    assert int(answer["password_expiry_utc"]) == expiry_for(broker, GIT)

    # store and erase read their input and print nothing (erase of a token no longer cached too).
    for op in ("store", "erase"):
        r = run(broker, AUTHCTL, "git-credential", op,
                input="protocol=https\nhost=git.example.test\nusername=oauth2\npassword=x\n\n")
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_a_token_git_rejects_is_not_given_to_git_again(broker, git_home):
    """The server answered 401 to the token (revoked early): git erases the credential, and
    its next fetch must get another token, not the refused one from the daemon's cache."""
    ask = "protocol=https\nhost=git.example.test\n\n"

    def password():
        r = run(broker, "git", "credential", "fill", input=ask, env=git_home)
        assert r.returncode == 0, r.stderr
        return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)["password"]

    refused = password()
    seen, cached = fingerprint(refused), fingerprint(password())
    assert cached == seen  # served from the cache until then
    # What git does on a 401 (credential_reject): erase with the credential it sent.
    r = run(broker, "git", "credential", "reject", env=git_home,
            input=f"protocol=https\nhost=git.example.test\nusername=alice-bot\npassword={refused}\n\n")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    again = password()
    audience, new = decode_jwt(again)[1]["aud"], fingerprint(again)
    assert new != seen, "git got the token it had rejected again"
    assert audience in (GIT, [GIT])


def test_git_credential_answers_a_remote_that_names_the_default_port(broker, git_home):
    """A remote written https://git.example.test:443/...: git picks the helper configured for
    https://git.example.test (it drops the default port when matching config) and sends
    host=git.example.test:443; the helper must answer it with the token for the resource,
    not leave git to prompt for a password."""
    r = run(broker, "git", "credential", "fill", input="url=https://git.example.test:443/team/repo.git\n\n", env=git_home)
    assert r.returncode == 0, r.stderr
    answer = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert fingerprint(answer["password"]) == fingerprint(token_for(broker, GIT))
    # Without --resource, the default resource is the origin without the default port too.
    r = run(broker, AUTHCTL, "git-credential", "get", input="protocol=https\nhost=git.example.test:443\n\n")
    assert r.returncode == 0, r.stderr
    answer = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert fingerprint(answer["password"]) == fingerprint(token_for(broker, GIT))


def test_git_credential_never_answers_another_host_or_plain_http(broker, git_home):
    # Even configured for every host, a helper with --resource answers only its own.
    subprocess.run(["git", "config", "--global", "credential.helper",
                    f"!{AUTHCTL} git-credential --resource {GIT}"], env=git_home, check=True)
    r = run(broker, "git", "credential", "fill", input="protocol=https\nhost=evil.example\n\n", env=git_home)
    assert r.returncode != 0 and "password=" not in r.stdout
    r = run(broker, AUTHCTL, "git-credential", "get", input="protocol=http\nhost=git.example.test\n\n")
    assert (r.returncode, r.stdout) == (0, "")


@pytest.fixture
def api_server():
    """STUB resource server: answers with the fingerprint of the bearer token it got."""
    def answer(request):
        token = bearer(request)
        return None, (fingerprint(token) if token else "none").encode()

    with StubHTTPServer(answer) as server:
        yield server.url + "/"


def test_curl_recipes_send_the_bearer_token(broker, api_server):
    want = fingerprint(token_for(broker, API))
    env = dict(broker.env, PATH=os.path.dirname(AUTHCTL) + ":" + os.environ["PATH"])
    for recipe in (f'curl -sf -H @<(authctl token --resource {API} --header) {api_server}',
                   f'curl -sf --oauth2-bearer "$(authctl token --resource {API})" {api_server}'):
        r = run(broker, "bash", "-c", recipe, env=env)
        assert r.returncode == 0 and r.stdout == want, (recipe, r.stdout, r.stderr)


def test_python_example_client(broker):
    """examples/python/get_token.py, the client library (clients/python) as a command."""
    env = dict(broker.env, PYTHONPATH=os.path.join(ROOT, "clients", "python", "src"))
    r = run(broker, sys.executable, os.path.join(EXAMPLES, "python", "get_token.py"), "--resource", API, env=env)
    assert r.returncode == 0, r.stderr
    assert fingerprint(r.stdout.strip()) == fingerprint(token_for(broker, API))
    # An error is the daemon's sentence; the library's calls are test_client_python.py's.
    r = run(broker, sys.executable, os.path.join(EXAMPLES, "python", "get_token.py"), "--provider", "nope", env=env)
    assert r.returncode == 1 and r.stdout == "" and r.stderr.startswith("get_token: ") and "nope" in r.stderr, r.stderr


def test_shell_example_client(broker):
    script = os.path.join(EXAMPLES, "shell", "authbroker-token")
    r = run(broker, script, API)
    assert r.returncode == 0, r.stderr
    assert fingerprint(r.stdout.strip()) == fingerprint(token_for(broker, API))
    r = run(broker, script, "https://unknown.example.test")
    assert r.returncode == 1 and r.stderr.startswith("authbroker-token: ") and r.stdout == ""


def test_shell_example_says_so_when_the_daemon_closes_without_answering(tmp_path):
    """STUB: a socket of ours that reads the request and closes (a daemon that crashed on
    it, or one shutting down): the shell client must say what happened, not exit silently."""
    path = str(tmp_path / "sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)

    def close_unanswered():
        conn, _ = server.accept()
        conn.recv(65536)
        conn.close()

    threading.Thread(target=close_unanswered, daemon=True).start()
    try:
        r = subprocess.run([os.path.join(EXAMPLES, "shell", "authbroker-token"), API], capture_output=True, text=True,
                           env={**os.environ, "AUTHBROKER_SOCKET": path}, timeout=30)
    finally:
        server.close()
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("authbroker-token: authbrokerd closed the connection without answering"), r.stderr


@pytest.fixture
def server_of_another_user():
    """A fake authbrokerd run by the user nobody, on a socket anyone may open, that answers
    every request with a made-up token: what a squatter would serve."""
    import tempfile
    base = tempfile.mkdtemp(prefix="squat-")
    os.chmod(base, 0o755)
    folder = os.path.join(base, "authbroker")
    os.mkdir(folder, 0o755)
    os.chown(folder, 65534, 65534)
    path = os.path.join(folder, "socket")
    serve = ("import os,socket,sys\n"
             "s=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1]);os.chmod(sys.argv[1],0o666);s.listen(8)\n"
             "print('ready',flush=True)\n"
             "while True:\n"
             "    c,_=s.accept();c.recv(65536)\n"
             "    c.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"access_token\":\"SQUATTED\"}}\\n');c.close()\n")
    p = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", serve, path],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    yield path
    p.kill()
    p.wait()
    subprocess.run(["rm", "-rf", base])


def test_the_shell_example_refuses_a_socket_another_user_serves(server_of_another_user):
    # The Python example is the client library, whose refusal is test_client_python.py's.
    env = {**os.environ, "AUTHBROKER_SOCKET": server_of_another_user}
    cmd = [os.path.join(EXAMPLES, "shell", "authbroker-token"), API]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "SQUATTED" not in r.stdout, r.stdout
    assert "uid 65534" in r.stderr, r.stderr
