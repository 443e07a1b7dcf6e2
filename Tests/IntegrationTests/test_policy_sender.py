"""Under [[allow]] rules a request is served only when the process that wrote it is the one
that connected: the kernel names the writer of every message (SCM_CREDENTIALS), so a
sibling that kept the socket after the connecting process ran an allowed program is
refused (docs/security.md, "Callers posing as an allowed program")."""
import json
import os
import signal
import socket
import subprocess
import time

from conftest import API, GIT, stop_process
from policy_callers import ASK, PYTHON, ask_once, copy_of_python, run

SLEEP = os.path.realpath("/usr/bin/sleep")

RULES = f"""
[[allow]]
exe = "{SLEEP}"
resources = ["{API}"]

[[allow]]
exe = "{PYTHON}"
resources = ["{GIT}"]
"""

# A connects, forks B, which keeps the socket, and runs the allowed program; B waits for a
# line on stdin, asks for API on the socket and prints the outcome. Python's sockets are
# close-on-exec, so after the exec only B holds the connection.
SIBLING = ASK + r"""
import os
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
if os.fork() == 0:
    sys.stdin.readline()
    print(ask(s, sys.argv[2]), flush=True)
    if len(sys.argv) > 3:
        print(ask(s, sys.argv[2]), flush=True)
    os._exit(0)
os.execv("/usr/bin/sleep", ["sleep", "60"])
"""


def sibling_attack(d, python, *extra):
    """Stops the daemon, lets the attacker connect and run /usr/bin/sleep, starts the daemon
    again (it then reads the connecting process's identity: sleep), and lets the sibling ask.
    Returns the sibling's lines."""
    stop_process(d.proc.pid)
    p = subprocess.Popen([python, "-c", SIBLING, d.socket, API, *extra],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(500):
            try:
                if os.readlink(f"/proc/{p.pid}/exe") == SLEEP:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        else:
            raise AssertionError("the attacker did not run sleep")
        os.kill(d.proc.pid, signal.SIGCONT)
        time.sleep(0.3)  # the daemon accepts and reads who connected: sleep, by then
        p.stdin.write("go\n")
        p.stdin.flush()
        return [p.stdout.readline().strip() for _ in range(1 + len(extra))]
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
        p.kill()
        p.wait(timeout=10)


def test_a_sibling_writing_after_the_connecting_process_ran_an_allowed_program_is_refused(policy_daemon):
    d = policy_daemon(RULES)
    lines = sibling_attack(d, copy_of_python(d), "twice")
    assert lines[0].startswith("-32002 ") and "another process" in lines[0], lines
    assert lines[1] == "closed", lines
    # Nothing of the refusal sticks: the daemon serves an allowed program at once.
    assert ask_once(PYTHON, d, GIT) == ["served"]
    assert d.proc.poll() is None


def test_an_allowed_program_is_served_from_each_of_its_threads(policy_daemon):
    """Threads share the process id the kernel records for each message, so a program that
    connects on one thread and asks on others is served; so is one writing a request in
    pieces from two threads."""
    d = policy_daemon(RULES)
    script = ASK + r"""
import json, threading
import time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
time.sleep(0.3)  # written after the daemon accepted: the kernel names the writer all the same
print(ask(s, sys.argv[2]), flush=True)
out = []
t = threading.Thread(target=lambda: out.append(ask(s, sys.argv[2]))); t.start(); t.join()
print(out[0], flush=True)
line = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "token.get", "params": {"resource": sys.argv[2]}}).encode() + b"\n"
s.sendall(line[:20])
t = threading.Thread(target=lambda: s.sendall(line[20:])); t.start(); t.join()
answer = json.loads(s.makefile("rb").readline())
print("served" if "result" in answer else answer["error"]["message"], flush=True)
"""
    assert run([PYTHON, "-c", script, d.socket, GIT]) == ["served"] * 3


def test_a_refused_sibling_leaves_the_other_connections_served(policy_daemon):
    """An allowed program's connection opened before the attack is served before and after
    it, and so is a new one."""
    d = policy_daemon(RULES)
    keeper = ASK + (
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(ask(s, sys.argv[2]), flush=True)\n"
        "sys.stdin.readline(); print(ask(s, sys.argv[2]), flush=True)\n")
    k = subprocess.Popen([PYTHON, "-c", keeper, d.socket, GIT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert k.stdout.readline().strip() == "served"
        # The attack from the allowed interpreter itself (which may have GIT, not API).
        lines = sibling_attack(d, PYTHON)
        assert lines[0].startswith("-32002 ") and "another process" in lines[0], lines
        k.stdin.write("again\n")
        k.stdin.flush()
        assert k.stdout.readline().strip() == "served"
    finally:
        k.kill()
        k.wait(timeout=10)
    assert ask_once(PYTHON, d, GIT) == ["served"]


def test_a_process_that_wrote_and_ended_before_the_daemon_read_is_not_served(policy_daemon):
    """The writer check passes (the connecting process wrote the request); the identity check
    refuses: that process is gone, and a child holding the socket would read the answer."""
    d = policy_daemon(RULES)
    script = ASK + r"""
import json, os
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
if os.fork() == 0:
    sys.stdin.readline()
    data = s.makefile("rb").readline()
    print(json.loads(data)["error"]["message"] if data else "closed", flush=True)
    os._exit(0)
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get", "params": {"resource": sys.argv[2]}}).encode() + b"\n")
"""
    stop_process(d.proc.pid)
    try:
        p = subprocess.Popen([PYTHON, "-c", script, d.socket, GIT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        p.wait(timeout=30)  # the connecting process has written and ended
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    p.stdin.write("go\n")
    p.stdin.flush()
    line = p.stdout.readline().strip()
    assert line.startswith("forbidden by policy"), line


def ask(s, resource):
    """ASK's helper, for a connection the test holds itself."""
    scope = {}
    exec(ASK, scope)
    return scope["ask"](s, resource)


def call(path, resource):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get", "params": {"resource": resource}}).encode() + b"\n")
        return json.loads(s.makefile("rb").readline())


def test_rules_brought_in_by_a_reload_check_the_writers_of_new_connections_only(policy_daemon):
    """A reload that brings rules in: a connection opened before has no record of who wrote
    on it and is refused at its next request; new ones are checked (the listening socket
    records writers from the reload on) and served when their own process writes."""
    d = policy_daemon("")
    before = socket.socket(socket.AF_UNIX)
    before.connect(d.socket)
    assert ask(before, GIT) == "served"
    with open(d.config, "a") as f:
        f.write(RULES)
    d.proc.send_signal(signal.SIGHUP)
    for _ in range(200):
        if "error" in call(d.socket, API):  # this interpreter may not have API any more
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the reload did not bring the rules in")
    answer = ask(before, GIT)
    assert answer.startswith("-32002 ") and "before the [[allow]] rules" in answer, answer
    assert ask(before, GIT) == "closed"
    assert sibling_attack(d, copy_of_python(d))[0].startswith("-32002 ")
    late = ASK + ("import time\n"
                  "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(0.3); print(ask(s, sys.argv[2]))\n")
    assert run([PYTHON, "-c", late, d.socket, GIT]) == ["served"]
