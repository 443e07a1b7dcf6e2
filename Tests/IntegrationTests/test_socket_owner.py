"""Secrets go only to the user's own daemon: the daemon will not listen in a folder another
user controls, and authctl sends nothing to a socket served by another uid."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import AUTHBROKERD, AUTHCTL, Daemon

PYTHON = os.path.realpath(sys.executable)
OTHER = "nobody"


def other_uid():
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user (setpriv --reuid=nobody)")
    import pwd
    return pwd.getpwnam(OTHER).pw_uid


def start_daemon_on(socket_path):
    d = Daemon(None, name="corp", store="memory")
    d.write_config(text='[daemon]\nstore = "memory"\n[providers.corp]\nissuer = "https://a.example"\nclient_id = "x"\n')
    r = subprocess.run([AUTHBROKERD, "--config", d.config], capture_output=True, text=True, timeout=20,
                       env=dict(d.env, AUTHBROKER_SOCKET=socket_path), stdin=subprocess.DEVNULL)
    d.cleanup()
    return r


def test_the_daemon_refuses_a_socket_folder_another_user_controls():
    uid = other_uid()
    base = tempfile.mkdtemp(prefix="ab-", dir="/tmp")
    try:
        theirs = os.path.join(base, "theirs")
        os.mkdir(theirs, 0o700)
        os.chown(theirs, uid, -1)
        r = start_daemon_on(os.path.join(theirs, "sock"))
        assert r.returncode != 0
        assert theirs in r.stderr and f"uid {uid}" in r.stderr and "AUTHBROKER_SOCKET" in r.stderr, r.stderr
        assert not os.path.exists(os.path.join(theirs, "sock"))

        shared = os.path.join(base, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        r = start_daemon_on(os.path.join(shared, "sock"))
        assert r.returncode != 0
        assert shared in r.stderr and "chmod 700" in r.stderr, r.stderr
        assert not os.path.exists(os.path.join(shared, "sock"))
    finally:
        shutil.rmtree(base, ignore_errors=True)


LISTENER = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(1)
print("ready", flush=True)
c, _ = s.accept(); c.settimeout(5)
got = b""
try:
    while True:
        chunk = c.recv(65536)
        if not chunk: break
        got += chunk
except OSError:
    pass
print(len(got), flush=True)
"""


def test_authctl_sends_nothing_to_a_socket_another_user_serves():
    uid = other_uid()
    base = tempfile.mkdtemp(prefix="ab-", dir="/tmp")
    theirs = os.path.join(base, "theirs")
    os.mkdir(theirs, 0o755)
    os.chown(theirs, uid, -1)
    os.chmod(base, 0o755)
    path = os.path.join(theirs, "sock")
    listener = subprocess.Popen(["setpriv", f"--reuid={OTHER}", "--regid=nogroup", "--clear-groups", PYTHON, "-c", LISTENER, path],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline().strip() == "ready"
        r = subprocess.run([AUTHCTL, "set-secret", "--provider", "corp"], input="not-a-real-secret\n",
                           capture_output=True, text=True, timeout=20, env=dict(os.environ, AUTHBROKER_SOCKET=path))
        assert r.returncode == 3, r.stderr
        assert f"served by uid {uid}" in r.stderr and "nothing was sent" in r.stderr, r.stderr
        out, _ = listener.communicate(timeout=20)
        assert out.strip() == "0", "the other user's listener received bytes"
    finally:
        listener.kill()
        shutil.rmtree(base, ignore_errors=True)
