"""A real OpenSSH server (Debian's openssh-server) on 127.0.0.1, for the tests only.

It runs from a temporary folder: its own host key, sshd_config, client key and
authorized_keys, a free port, the test's own user. The system's sshd, its config and its
host keys are never used or touched (only /run/sshd, the privilege-separation folder
Debian's sshd needs when it runs as root, is made if missing, as ssh.service would).

    server = Sshd.start(tmp_dir)
    server.ssh(["-R", f"{remote}:{local}"], "remote command", env={...})
"""
import os
import shlex
import socket
import subprocess
import time

SSHD = "/usr/sbin/sshd"
SSH = "/usr/bin/ssh"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    def __init__(self, root):
        self.root = root
        self.port = _free_port()
        self.host_key = os.path.join(root, "host_ed25519")
        self.client_key = os.path.join(root, "client_ed25519")
        self.config = os.path.join(root, "sshd_config")
        self.known_hosts = os.path.join(root, "known_hosts")
        self.log = os.path.join(root, "sshd.log")
        self.proc = None

    @classmethod
    def start(cls, root):
        os.makedirs(root, mode=0o700, exist_ok=True)
        server = cls(root)
        server._write()
        server._run()
        return server

    def _write(self):
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "authbroker-test", "-f", key], check=True)
        authorized = os.path.join(self.root, "authorized_keys")
        with open(self.client_key + ".pub") as f, open(authorized, "w") as out:
            out.write(f.read())
        os.chmod(authorized, 0o600)
        with open(self.host_key + ".pub") as f:
            kind, blob = f.read().split()[:2]
        with open(self.known_hosts, "w") as f:
            f.write(f"[127.0.0.1]:{self.port} {kind} {blob}\n")
        with open(self.config, "w") as f:
            f.write(f"""ListenAddress 127.0.0.1
Port {self.port}
HostKey {self.host_key}
PidFile {os.path.join(self.root, 'sshd.pid')}
AuthorizedKeysFile {authorized}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
# The test's folders live under /tmp, which is world-writable.
StrictModes no
AllowStreamLocalForwarding yes
StreamLocalBindUnlink yes
# AllowTcpForwarding no would refuse Unix-socket forwards as well.
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
""")

    def _run(self):
        if os.geteuid() == 0:
            # Debian's sshd refuses to start as root without its privilege-separation folder.
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        logf = open(self.log, "ab")
        # -D: stay in the foreground (the test owns the process); -e: log to stderr.
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", self.config], stdout=logf, stderr=logf,
                                     stdin=subprocess.DEVNULL)
        logf.close()
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"sshd exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("sshd did not listen:\n" + self.log_text())

    def client_args(self, *options):
        """The ssh command line up to the destination: this server's key and port only,
        no user or system ssh_config."""
        return [SSH, "-F", "/dev/null", "-i", self.client_key, "-p", str(self.port),
                "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "ExitOnForwardFailure=yes",
                "-o", "StreamLocalBindUnlink=yes", *options, "127.0.0.1"]

    def ssh(self, options, command, env=None, local_env=None, timeout=60, **kw):
        """Runs `command` (a list) on the "remote" side with `env` set there, over ssh with
        `options` (e.g. ["-R", "remote:local"]). Returns the CompletedProcess."""
        words = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
        remote = "env " + " ".join(words + [shlex.quote(w) for w in command])
        return subprocess.run(self.client_args(*options) + [remote], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, env=local_env, **kw)

    def popen(self, options, command, env=None, local_env=None):
        words = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
        remote = "env " + " ".join(words + [shlex.quote(w) for w in command])
        return subprocess.Popen(self.client_args(*options) + [remote], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=local_env)

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
