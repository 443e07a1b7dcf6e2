"""Programs that call the daemon under [[allow]] rules (test_policy*.py): small Python
scripts run as processes of their own, since the rules look at the calling process."""
import os
import shutil
import subprocess
import sys

PYTHON = os.path.realpath(sys.executable)

# Asks for a token on the socket (argv[1]) or the inherited fd (argv[2]) and prints only
# "served" or the error's code and message: never a token.
ASK = r"""
import json, socket, sys
def ask(s, resource):
    try:
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "token.get", "params": {"resource": resource}}).encode() + b"\n")
    except OSError:
        return "closed"
    data = b""
    while b"\n" not in data:
        try:
            chunk = s.recv(65536)
        except OSError:
            return "closed"
        if not chunk:
            return "closed"
        data += chunk
    answer = json.loads(data.split(b"\n")[0])
    return "served" if "result" in answer else "%d %s" % (answer["error"]["code"], answer["error"]["message"])
"""

# Connects to the socket (argv[1]), asks once for the resource (argv[2]) and prints the outcome.
ASK_ONCE = ASK + "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(ask(s, sys.argv[2]))\n"


def run(argv, **kw):
    """The lines a program printed; it must succeed."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()


def ask_once(python, d, resource):
    """The lines of ASK_ONCE run by the interpreter `python` against the daemon `d`."""
    return run([python, "-c", ASK_ONCE, d.socket, resource])


def copy_of_python(d, python=PYTHON):
    """The same interpreter as another file: another inode, which no rule names."""
    path = os.path.join(d.dir, "python-copy")
    shutil.copy2(python, path)
    return path
