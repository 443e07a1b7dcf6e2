"""The [[allow]] policy identifies the program by what it runs, not by a path: a bind mount
in a namespace of the caller's own, a program run after connecting, or a sibling left
holding the socket does not get another program's tokens (docs/security.md)."""
import os
import shutil
import subprocess

from conftest import API, GIT, Daemon
from policy_callers import ASK, ASK_ONCE, PYTHON, ask_once, copy_of_python, run


def test_a_program_bind_mounted_over_an_allowed_path_is_refused(policy_daemon):
    d = policy_daemon(f"""
[[allow]]
exe = "/usr/bin/sleep"
namespaces = "any"
resources = ["{API}"]

[[allow]]
exe = "{PYTHON}"
resources = ["{GIT}"]
""")
    # The system's interpreter: bind-mounted under /usr/bin, it finds its library in /usr.
    evil = copy_of_python(d, os.path.realpath("/usr/bin/python3"))
    # In a user and mount namespace of its own, any process of the user may mount any
    # file over /usr/bin/sleep; /proc/PID/exe then reads "/usr/bin/sleep".
    probe = run(["unshare", "-U", "-r", "-m", "sh", "-c",
                 'mount --bind "$0" /usr/bin/sleep && exec /usr/bin/sleep -c "$1" "$2" "$3"',
                 evil, ASK_ONCE, d.socket, API])
    assert probe[0].startswith("-32002 ") and "/usr/bin/sleep" in probe[0], probe
    # The allowed interpreter itself, from a namespace of its own: its rule does not
    # say namespaces = "any".
    probe = run(["unshare", "-U", "-r", "-m", PYTHON, "-c", ASK_ONCE, d.socket, GIT])
    assert probe[0].startswith("-32002 "), probe
    # ...and from the user's own namespaces it is served.
    assert ask_once(PYTHON, d, GIT) == ["served"]
    assert ask_once(evil, d, GIT)[0].startswith("-32002 "), "a copy is another file"


def test_a_program_run_after_connecting_does_not_inherit_the_connection(policy_daemon):
    d = policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
resources = ["*"]
""")
    other = copy_of_python(d)
    then = ASK + "s = socket.socket(fileno=int(sys.argv[1])); print(ask(s, sys.argv[2])); print(ask(s, sys.argv[2]))\n"
    first = ASK + (
        "import os\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(ask(s, sys.argv[2]), flush=True)\n"
        "s.set_inheritable(True)\n"
        "os.execv(sys.argv[3], [sys.argv[3], '-c', sys.argv[4], str(s.fileno()), sys.argv[2]])\n")
    lines = run([PYTHON, "-c", first, d.socket, API, other, then])
    assert lines[0] == "served", lines
    assert lines[1].startswith("-32002 ") and "another program" in lines[1], lines
    assert lines[2] == "closed", lines


def test_a_sibling_left_holding_the_socket_is_not_served(policy_daemon):
    d = policy_daemon(f"""
[[allow]]
exe = "{PYTHON}"
resources = ["*"]
""")
    script = ASK + (
        "import os, time\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(ask(s, sys.argv[2]), flush=True)\n"
        "parent = os.getpid()\n"
        "if os.fork() > 0:\n"
        "    os._exit(0)\n"  # the connecting process ends; its child keeps the socket
        "while os.getppid() == parent: time.sleep(0.01)\n"
        "print(ask(s, sys.argv[2]), flush=True)\n")
    p = subprocess.Popen([PYTHON, "-c", script, d.socket, API], stdout=subprocess.PIPE, text=True)
    # The child writes to the same pipe after its parent exited.
    out = p.stdout.read()
    p.wait(timeout=30)
    lines = out.strip().splitlines()
    assert lines[0] == "served", lines
    # What the child writes is not the connecting process's (test_policy_sender.py).
    assert lines[1].startswith("-32002 ") and "another process" in lines[1], lines


def test_no_rules_means_no_identity_work(daemon_factory):
    """Without rules, a process that runs another program keeps its connection: nothing
    about the caller is read beyond its uid (the cost paragraph of docs/security.md)."""
    d = daemon_factory(store="memory").start()
    script = ASK + (
        "import os\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(ask(s, 'x'), flush=True)\n"
        "s.set_inheritable(True)\n"
        "os.execv('/bin/sh', ['sh', '-c', 'exec \"$0\" -c \"$1\" \"$2\"', sys.argv[2], sys.argv[3], str(s.fileno())])\n")
    then = ASK + "s = socket.socket(fileno=int(sys.argv[1])); print(ask(s, 'x'))\n"
    lines = run([PYTHON, "-c", script, d.socket, PYTHON, then])
    assert not lines[0].startswith("-32002") and not lines[1].startswith("-32002"), lines
    assert lines[1] != "closed", lines


def test_a_rule_that_names_a_file_inside_a_container_is_warned_about(glewlwyd_static):
    """Rules match the host's file: a path that exists only inside a container's image, or
    a file in a container engine's storage (run through the container's overlay, another
    file), can never match; the daemon says so at start (docs/integrations.md)."""
    d = Daemon(glewlwyd_static)
    home = os.path.join(d.dir, "home")
    layer = os.path.join(home, ".local/share/containers/storage/overlay/0123abcd/diff/usr/bin/git")
    os.makedirs(os.path.dirname(layer))
    shutil.copy2("/bin/true", layer)
    d.env["HOME"] = home
    with open(d.config, "a") as f:
        f.write(f'\n[[allow]]\nexe = "/usr/bin/only-in-the-image"\nnamespaces = "any"\nresources = ["{API}"]\n'
                f'\n[[allow]]\nexe = "{layer}"\nnamespaces = "any"\nresources = ["{API}"]\n'
                f'\n[[allow]]\nexe = "{PYTHON}"\nresources = ["{GIT}"]\n')
    try:
        d.start()
        warnings = [line for line in d.log_text().splitlines() if "can never match" in line]
        assert len(warnings) == 2, d.log_text()
        assert "/usr/bin/only-in-the-image" in warnings[0] and "no such file on this host" in warnings[0], warnings
        assert layer in warnings[1] and "overlay" in warnings[1], warnings
    finally:
        d.cleanup()
