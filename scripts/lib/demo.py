"""The inside of scripts/demo: runs in the private keyring session scripts/with-keyring made."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "IntegrationTests", "support"))
from glewlwyd_api import Glewlwyd, decode_jwt  # noqa: E402

BIN = os.environ["AUTHBROKER_BIN"]
AUTHCTL = os.path.join(BIN, "authctl")
RESOURCE = "https://api.example.test"


def step(text):
    print(f"\n== {text}", flush=True)


def show(cmd, env):
    print("$ " + " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd)), flush=True)
    r = subprocess.run(cmd, env=env, text=True, capture_output=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"demo: {cmd[1]} failed with exit status {r.returncode}")
    return r.stdout


def main():
    work = tempfile.mkdtemp(prefix="authbroker-demo-")
    provider_dir = os.path.join(work, "glewlwyd")
    os.mkdir(provider_dir)
    daemon = None
    try:
        step("starting a local Glewlwyd OpenID provider on 127.0.0.1")
        subprocess.run([os.path.join(ROOT, "scripts", "glewlwyd"), "start", provider_dir], check=True)
        gl = Glewlwyd(provider_dir)
        print(f"issuer: {gl.issuer}")

        config = os.path.join(os.environ["XDG_CONFIG_HOME"], "authbroker", "config.toml")
        os.makedirs(os.path.dirname(config), exist_ok=True)
        with open(config, "w") as f:
            f.write(f"""[daemon]
store = "secret-service"
refresh_margin = 60

[providers.demo]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('authbroker')}"
scopes = ["openid", "profile", "email", "offline_access"]
resources = ["{RESOURCE}"]
""")
        step(f"config {config}")
        print(open(config).read(), end="")

        env = dict(os.environ)
        step("starting authbrokerd (refresh tokens go to the private gnome-keyring)")
        log = open(os.path.join(work, "authbrokerd.log"), "w")
        daemon = subprocess.Popen([os.path.join(BIN, "authbrokerd")], env=env, stdout=log, stderr=log)
        socket_path = os.path.join(os.environ["XDG_RUNTIME_DIR"], "authbroker", "socket")
        for _ in range(200):
            if os.path.exists(socket_path):
                break
            time.sleep(0.02)
        print(f"listening on {socket_path}")

        step("signing alice in with the device grant")
        print("$ authctl login --device", flush=True)
        login = subprocess.Popen([AUTHCTL, "login", "--device"], env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        code = None
        while code is None:
            line = login.stderr.readline()
            if not line:
                break
            sys.stdout.write(line)
            m = re.search(r"enter the code ([A-Za-z0-9-]+)", line)
            if m:
                code = m.group(1)
        if code is None:
            raise SystemExit("demo: authctl login printed no code")
        print(f"(alice opens the page, signs in and approves {code} — done here through Glewlwyd's API)")
        session = gl.login_session("alice")
        gl.approve_device(session, code, gl.client_id("authbroker"), ["openid", "profile", "email", "offline_access"])
        out, err = login.communicate(timeout=60)
        sys.stdout.write(out)
        sys.stderr.write(err)
        if login.returncode != 0:
            raise SystemExit(f"demo: login failed with exit status {login.returncode}")

        step(f"a token for {RESOURCE}")
        token = show([AUTHCTL, "token", "--resource", RESOURCE], env).strip()
        _, claims = decode_jwt(token)
        print(f"its claims: aud={claims.get('aud')} sub={claims.get('sub')} exp in {int(claims['exp'] - time.time())} s")
        step("the same again, from the daemon's memory")
        started = time.perf_counter()
        show([AUTHCTL, "token", "--resource", RESOURCE, "--header"], env)
        print(f"(whole authctl process: {1000 * (time.perf_counter() - started):.1f} ms)")

        step("accounts")
        show([AUTHCTL, "accounts"], env)
        step("status")
        show([AUTHCTL, "status"], env)
        step("the refresh token lives in the Secret Service (attributes only)")
        r = subprocess.run(["secret-tool", "search", "--all", "provider", "demo"], env=env, text=True, capture_output=True)
        for line in (r.stdout + r.stderr).splitlines():
            if not line.startswith("secret ="):
                print(line)
    finally:
        if daemon:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=10)
        subprocess.run([os.path.join(ROOT, "scripts", "glewlwyd"), "stop", provider_dir])
        shutil.rmtree(work, ignore_errors=True)
    print("\ndemo: done")


if __name__ == "__main__":
    main()
