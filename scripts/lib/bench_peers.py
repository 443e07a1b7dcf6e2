"""The peer rows of scripts/bench: oidc-agent, measured beside authbrokerd in the same run.

Only when oidc-agent-cli is installed (it is not in scripts/setup: CI does not run the
benchmark). oidc-agent runs in the benchmark's private session: its own socket and config
folder under the benchmark's work folder, its account made with `oidc-gen --no-save`
(nothing written to disk), signed in to the same Glewlwyd with the password grant and a
confidential client. Its IPC is one JSON object per connection, answered with one JSON
object and a close (gitbook/api/api-ipc.md in indigo-dc/oidc-agent), so the same load
generator drives it with `--framing close`.
"""
import os
import shutil
import signal
import subprocess
import time

from bench_proc import private_kb, rss_kb

ACCOUNT = "bench"
REQUEST = '{"request":"access_token","account":"bench","application_hint":"authbench"}'
# The client scripts/glewlwyd registers for password sign-in (confidential, password grant).
CLIENT = "authbroker-password"
INSTALL = "sudo apt-get install oidc-agent-cli"


def available():
    return all(shutil.which(b) for b in ("oidc-agent", "oidc-gen", "oidc-token"))


class OidcAgent:
    """oidc-agent in the foreground (`--console`): the process started here is its socket
    side (oidcp), which starts the token side (oidcd) as its child."""

    def __init__(self, work):
        self.folder = os.path.join(work, "oidc-agent")
        os.mkdir(self.folder, 0o700)
        self.socket = os.path.join(self.folder, "agent.sock")
        self.env = dict(os.environ, OIDC_SOCK=self.socket, OIDC_CONFIG_DIR=os.path.join(self.folder, "config"))
        os.mkdir(self.env["OIDC_CONFIG_DIR"], 0o700)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(["oidc-agent", "--console", f"--socket-path={self.socket}"], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            if os.path.exists(self.socket):
                return
            time.sleep(0.01)
        raise SystemExit("bench: oidc-agent did not create its socket")

    def pids(self):
        """The agent's processes: oidcp and its children (oidcd)."""
        found = [self.proc.pid]
        try:
            for task in os.listdir(f"/proc/{self.proc.pid}/task"):
                with open(f"/proc/{self.proc.pid}/task/{task}/children") as f:
                    found += [int(p) for p in f.read().split()]
        except FileNotFoundError:
            pass
        return found

    def rss_kb(self):
        return sum(rss_kb(p) for p in self.pids())

    def private_kb(self):
        return sum(private_kb(p) for p in self.pids())

    def sign_in(self, gl, user="alice", password="alice-password"):
        """Makes the account with the password grant; `--no-save` keeps it in the agent only."""
        r = subprocess.run(
            ["oidc-gen", ACCOUNT, f"--issuer={gl.issuer}", f"--client-id={gl.client_id(CLIENT)}",
             f"--client-secret={gl.client_secret(CLIENT)}", "--flow=password", f"--op-username={user}",
             f"--op-password={password}", "--scope=openid profile email offline_access",
             "--redirect-uri=http://localhost:8080", "--no-save", "--prompt=none", "--confirm-default", "--no-url-call"],
            env=self.env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise SystemExit(f"bench: oidc-gen could not sign in to oidc-agent (status {r.returncode})")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            children = self.pids()[1:]
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for pid in children:  # oidcd ends when its pipe to oidcp closes; make sure
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def loads(agent, bench, seconds):
    """The same loads as authbrokerd's "new connection per request" rows (oidc-agent
    answers one request per connection). `bench` runs authbench and returns its JSON."""
    out = {}
    for n in (1, 16):
        x = bench("load", "--socket", agent.socket, "--mode", "connect", "--connections", n, "--seconds", seconds,
                  "--framing", "close", "--line", REQUEST)
        if x["errors"]:
            raise SystemExit(f"bench: oidc-agent failed {x['errors']} token requests")
        out[f"connect.{n}"] = x
    return out


def token_process(agent, bench, runs):
    """`oidc-token bench`, exec to exit, as authctl token is timed."""
    os.environ["OIDC_SOCK"] = agent.socket  # oidc-token finds the agent through it
    return bench("spawn", "--runs", runs, "--", shutil.which("oidc-token"), ACCOUNT)


def rows(r, row, us, ms, rate, slowest):
    """The peer rows of the table, or one line saying how to get them."""
    peer = r.get("peer")
    if not peer:
        return [f"oidc-agent rows: oidc-agent-cli is not installed ({INSTALL})"]
    L, P = r["load"], peer["load"]
    b, o = L["broker.connect.1"], P["connect.1"]
    ratio = b["p50_us"] / o["p50_us"]
    row("new connection per request p50 vs oidc-agent", us(b["p50_us"]), f"oidc-agent {us(o['p50_us'])}",
        f"{ratio:.2f}×", "≤ 0.5×", ratio <= 0.5)
    b, o = L["broker.connect.16"], P["connect.16"]
    row("new connection per request, 16 at once vs oidc-agent", rate(b["rps"]), f"oidc-agent {rate(o['rps'])}",
        f"{b['rps'] / o['rps']:.2f}")
    b = L["broker.persistent.16"]
    row("16 own connections vs oidc-agent's 16 clients", rate(b["rps"]), f"oidc-agent {rate(o['rps'])}",
        f"{b['rps'] / o['rps']:.2f}", "≥ 4", b["rps"] >= 4 * o["rps"])
    a, t = r["authctl"], peer["oidc_token"]
    ratio = a["p50_ms"] / t["p50_ms"]
    row("authctl token vs oidc-token, whole process", ms(a["p50_ms"]), f"oidc-token {ms(t['p50_ms'])}",
        f"{ratio:.2f}×", "≤ 1×", ratio <= 1)
    for quiet in ("7", "60"):
        q = r["quiet"].get(quiet)
        if not q:
            continue
        b, o = q["broker"], q["oidc_agent"]
        ratio = b["p50_us"] / o["p50_us"]
        row(f"first request after {quiet} s quiet vs oidc-agent", us(b["p50_us"]), f"oidc-agent {us(o['p50_us'])}",
            f"{ratio:.2f}×", "≤ 1×", ratio <= 1)
        if "slowest" in o:
            row("… oidc-agent's slowest: client waited; server ran, waited", "", slowest(o["slowest"]))
    q = r["quiet"]["7_process"]
    ratio = q["authctl"]["p50_us"] / q["oidc_token"]["p50_us"]
    row("authctl token after 7 s quiet vs oidc-token", ms(q["authctl"]["p50_us"] / 1000),
        f"oidc-token {ms(q['oidc_token']['p50_us'] / 1000)}", f"{ratio:.2f}×", "≤ 1×", ratio <= 1)
    ratio = r["private_quiet_kb"] / peer["private_quiet_kb"]
    row("private memory after load, quiet 8 s, vs oidc-agent", f"{r['private_quiet_kb'] / 1024:.1f} MB",
        f"oidc-agent {peer['private_quiet_kb'] / 1024:.1f} MB ({peer['processes']} processes)", f"{ratio:.2f}×",
        "≤ 1×", ratio <= 1)
    row("RSS after load, quiet 8 s, vs oidc-agent", f"{r['rss_quiet_kb'] / 1024:.1f} MB",
        f"oidc-agent {peer['rss_quiet_kb'] / 1024:.1f} MB", f"{r['rss_quiet_kb'] / peer['rss_quiet_kb']:.2f}×")
    return []
