"""The socket mounted into a rootless podman container (docs/integrations.md, "Containers"):
Debian's podman run by an unprivileged user (abpodman, made if missing), whose daemon
serves a program inside the container, where root is that user mapped into a user
namespace. The container has no network (`--network none`): the token comes through the
socket only. The rootfs is a folder with the host's /usr mounted read-only (no image to pull).

Runs as root (to act as the test user); skipped otherwise. Containers here have a hybrid
cgroup hierarchy, which Debian 12's crun refuses: podman runs with runc and cgroupfs."""
import os
import pwd
import shutil
import subprocess
import tempfile
import time

import pytest

from as_another_user import readable_copy
from conftest import API, BIN

USER = "abpodman"
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]


@pytest.fixture(scope="module")
def podman_user(system_wide_turn):
    if os.geteuid() != 0:
        pytest.skip("runs as root: it starts the daemon and podman as the test user abpodman")
    assert shutil.which("podman") and shutil.which("runc"), "podman or runc is missing: run scripts/setup"
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", USER], check=True)
    return pwd.getpwnam(USER)


@pytest.fixture
def binaries(podman_user):
    """The binaries under test, in a folder abpodman can read (the clone may be in one it cannot enter)."""
    with readable_copy(USER, {b: os.path.join(BIN, b) for b in ("authbrokerd", "authctl")}) as folder:
        yield folder


def as_user(pw, *cmd, env=None, **kw):
    base = {"HOME": pw.pw_dir, "USER": USER, "LOGNAME": USER, "PATH": "/usr/local/bin:/usr/bin:/bin"}
    base.update(env or {})
    return ["runuser", "-u", USER, "--", "env", "-i", *[f"{k}={v}" for k, v in base.items()], *cmd]


def test_a_program_in_a_rootless_container_gets_a_token_through_the_mounted_socket(glewlwyd_static, podman_user, binaries):
    gl, pw = glewlwyd_static, podman_user
    work = tempfile.mkdtemp(prefix="ab-podman-", dir="/tmp")
    run_dir, rootfs = os.path.join(work, "run"), os.path.join(work, "rootfs")
    for d in (run_dir, *(os.path.join(rootfs, p) for p in ("usr", "etc", "tmp", "proc", "dev", "sys", "opt/swift", "authbroker"))):
        os.makedirs(d, exist_ok=True)
    for link in ("bin", "lib", "lib64", "sbin"):
        os.symlink("usr/" + link, os.path.join(rootfs, link))
    socket_path = os.path.join(run_dir, "socket")
    config = os.path.join(work, "config.toml")
    with open(config, "w") as f:
        f.write(f"""[daemon]
store = "memory"

[providers.machine]
issuer = "{gl.issuer}"
client_id = "{gl.client_id('machine')}"
client_secret = "{gl.client_secret('machine')}"
grant = "client_credentials"
scopes = ["api"]
resources = ["{API}"]
""")
    os.chmod(config, 0o600)
    for dirpath, dirs, files in os.walk(work):
        for p in [dirpath, *(os.path.join(dirpath, n) for n in dirs + files)]:
            os.lchown(p, pw.pw_uid, pw.pw_gid)
    os.chmod(work, 0o700)
    os.chmod(run_dir, 0o700)

    log = open(os.path.join(work, "daemon.log"), "wb")
    daemon = subprocess.Popen(as_user(pw, os.path.join(binaries, "authbrokerd"), "--config", config,
                                      env={"AUTHBROKER_SOCKET": socket_path}),
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while not os.path.exists(socket_path) and daemon.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert os.path.exists(socket_path), open(log.name).read()

        # The host's swift runtime and the binaries' copy, read-only, for the debug authctl.
        container = as_user(pw, *PODMAN, "run", "--rm", "--network", "none",
                            "-v", "/usr:/usr:ro", "-v", "/opt/swift:/opt/swift:ro", "-v", f"{binaries}:/authbroker:ro",
                            "-v", f"{run_dir}:/run/authbroker",
                            "-e", "AUTHBROKER_SOCKET=/run/authbroker/socket",
                            "--rootfs", rootfs, "sh", "-c",
                            'id -u; /authbroker/authctl token --provider machine --resource "$0" | wc -c; /authbroker/authctl status', API)
        r = subprocess.run(container, capture_output=True, text=True, timeout=120, cwd=pw.pw_dir)
        assert r.returncode == 0, f"podman failed ({r.returncode}):\n{r.stdout}{r.stderr}\n{open(log.name).read()}"
        uid, length, *status = r.stdout.splitlines()
        assert uid == "0", "the container's root, mapped to the user outside"
        assert int(length) > 20, "no token printed in the container"
        assert any("machine" in line for line in status), r.stdout
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)
        log.close()
        shutil.rmtree(work, ignore_errors=True)
