"""Issue 38: leases ("Allow for N minutes"), a confirm no other program can answer, and the
audit trail, against the real daemon, a real Glewlwyd and real processes.

The notification server is a STUB (support/stub_notifications.py) on the tests' private
session bus; `--as mako` makes it play mako's published D-Bus interface (fr.emersion.Mako,
whose InvokeAction lets any client answer a shown notification). Each token request of
the lease test is a NEW PROCESS, as an agent runs each shell command: the rules see a new
pid and a new connection every time, and only the lease spares the user the question."""
import json
import os
import re
import subprocess
import tempfile

import pytest

from conftest import API, AUTHCTL, GIT
from policy_callers import ASK_ONCE, PYTHON, ask_once, copy_of_python
from test_sign_in_on_demand import STUB, SYSTEM_PYTHON, Notifications, lines_until, notifications, wait_until  # noqa: F401 (fixture)

AUTHCTL_FILE = os.path.realpath(AUTHCTL)


@pytest.fixture
def leasing(policy_daemon, short_tmp):
    """Makes started daemons with `rules` (conftest's policy_daemon: memory store, the static
    provider with API and GIT, alice signed in), each with an audit file of its own
    ($XDG_STATE_HOME)."""
    def make(rules, daemon=""):
        state = tempfile.mkdtemp(prefix="state-", dir=short_tmp)
        d = policy_daemon(rules, daemon, extra_env={"XDG_STATE_HOME": state})
        d.state = state
        d.audit_log = os.path.join(state, "authbroker", "audit.log")
        return d

    return make


@pytest.fixture
def mako(tmp_path):
    """The STUB notification server playing mako (GetServerInformation "mako", and the
    fr.emersion.Mako interface with InvokeAction on the same bus name)."""
    record = tmp_path / "mako.jsonl"
    proc = subprocess.Popen([SYSTEM_PYTHON, STUB, str(record), "--as", "mako"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready", "the STUB mako did not start"
    yield Notifications(proc, str(record))
    proc.stdin.close()
    proc.wait(10)


def asking(d):
    """A new process that asks for API's token (and waits for the answer)."""
    return subprocess.Popen([PYTHON, "-c", ASK_ONCE, d.socket, API], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def outcome(p):
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return out.strip()


def asked(notifications, d, count):
    assert wait_until(lambda: len(notifications.calls("Notify")) == count), d.log_text()
    return notifications.calls("Notify")[-1]


LEASED_RULE = f"""
[[allow]]
exe = "{PYTHON}"
confirm = true
confirm_for = "15m"
resources = ["{API}"]
"""


def test_a_lease_serves_a_new_process_per_request_until_it_is_revoked(leasing, notifications):
    d = leasing(LEASED_RULE)

    # The first process is asked about; the question names what a lease would cover.
    first = asking(d)
    note = asked(notifications, d, 1)
    assert note["actions"][0::2] == ["allow", "allow-lease", "deny"], note
    assert note["actions"][1::2] == ["Allow once", "Allow for 15 minutes", "Deny"], note
    assert f"Allow for 15 minutes: {PYTHON}, tokens for {API} of {d.name}" in note["body"], note["body"]
    notifications.click(note["id"], "allow-lease")
    assert outcome(first) == "served", d.log_text()

    # The next processes, each on a new connection with a new pid, are served unasked.
    for _ in range(3):
        assert ask_once(PYTHON, d, API) == ["served"]
    assert len(notifications.calls("Notify")) == 1, "a process within the lease was asked again"
    # The lease is for API only: another resource is not the rule's, and not leased.
    assert ask_once(PYTHON, d, GIT)[0].startswith("-32002 "), "a lease widened what the rule grants"

    # `authctl grants` lists it, with --json the members of docs/cli-json.md.
    table = d.ctl("grants")
    assert table.returncode == 0, table.stderr
    assert PYTHON in table.stdout and API in table.stdout, table.stdout
    listed = d.ctl("grants", "--json")
    assert listed.returncode == 0, listed.stderr
    grants = json.loads(listed.stdout)["grants"]
    assert len(grants) == 1, grants
    lease = grants[0]
    assert (lease["program"], lease["resource"], lease["provider"], lease["forwarded"]) == (PYTHON, API, d.name, False), lease
    assert 899 <= lease["expires_at"] - lease["granted_at"] <= 901, lease

    # `authctl grants revoke ID` ends it: the next process is asked again.
    revoked = d.ctl("grants", "revoke", lease["id"])
    assert revoked.returncode == 0 and "Ended 1 lease." in revoked.stdout, revoked.stdout + revoked.stderr
    assert json.loads(d.ctl("grants", "--json").stdout)["grants"] == []
    again = d.ctl("grants", "revoke", lease["id"])
    assert again.returncode == 9 and "no lease has the ID" in again.stderr, again.stderr
    later = asking(d)
    note = asked(notifications, d, 2)
    notifications.click(note["id"], "deny")
    refused = outcome(later)
    assert refused.startswith("-32002 ") and "you refused" in refused, refused

    # The trail has the lease, the leased requests and the refusals.
    entries = json.loads(d.ctl("audit", "--json").stdout)["entries"]
    mine = [e for e in entries if e.get("program") == PYTHON]
    decisions = [(e["decision"], e.get("grant")) for e in mine]
    assert ("leased", "lease") in decisions, decisions
    assert decisions.count(("served", "lease")) + decisions.count(("refreshed", "lease")) >= 3, decisions
    assert ("denied", None) in decisions and ("refused", None) in decisions, decisions
    assert all(e["pid"] > 0 for e in mine), mine


def test_revoke_all_and_a_reload_that_changes_the_rule_end_leases(leasing, notifications):
    d = leasing(LEASED_RULE)
    first = asking(d)
    notifications.click(asked(notifications, d, 1)["id"], "allow-lease")
    assert outcome(first) == "served"
    r = d.ctl("grants", "revoke", "--all", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == {"revoked": 1}, r.stdout + r.stderr

    second = asking(d)
    notifications.click(asked(notifications, d, 2)["id"], "allow-lease")
    assert outcome(second) == "served"
    assert ask_once(PYTHON, d, API) == ["served"]
    # A reload that changes the rule (here: one more resource) ends the lease.
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text.replace(f'resources = ["{API}"]\n', f'resources = ["{API}", "{GIT}"]\n'))
    d.proc.send_signal(1)
    assert wait_until(lambda: json.loads(d.ctl("grants", "--json").stdout)["grants"] == []), d.log_text()
    third = asking(d)
    notifications.click(asked(notifications, d, 3)["id"], "allow")  # Allow once: no lease
    assert outcome(third) == "served"
    assert json.loads(d.ctl("grants", "--json").stdout)["grants"] == []


def test_a_confirm_question_is_not_asked_where_mako_lets_any_program_answer_it(leasing, mako):
    """mako serves InvokeAction on the bus (`makoctl invoke -n ID allow`), and the "allow"
    then comes from the server's own bus name: the asking program could answer its own
    question. The daemon sees that the server is mako and refuses, naming it and the fix,
    without showing a question anyone could answer."""
    d = leasing(LEASED_RULE)
    answer = ask_once(PYTHON, d, API)[0]
    assert answer.startswith("-32002 "), answer
    assert "mako" in answer and "lets any program of yours answer" in answer, answer
    assert "GNOME Shell" in answer and "without confirm" in answer, answer
    assert mako.calls("Notify") == [], "a question was shown on a server any program can answer"
    assert mako.calls("GetServerInformation"), "the server was not asked what it is"
    # The trail says so too.
    denied = [e for e in json.loads(d.ctl("audit", "--json").stdout)["entries"] if e["decision"] == "denied"]
    assert denied and "mako" in denied[0]["reason"], denied


def test_the_stub_mako_is_driven_as_mako_is(mako):
    """The stub is faithful where it matters: a shown notification's action is invoked by
    another client through fr.emersion.Mako, as makoctl does, and the server emits it."""
    shown = subprocess.run(["gdbus", "call", "--session", "--dest", "org.freedesktop.Notifications",
                            "--object-path", "/org/freedesktop/Notifications", "--method", "org.freedesktop.Notifications.Notify",
                            "'t'", "uint32 0", "''", "'s'", "'b'", "['allow', 'Allow', 'deny', 'Deny']", "@a{sv} {}", "int32 0"],
                           capture_output=True, text=True, timeout=10)
    assert shown.returncode == 0, shown.stderr
    nid = int(re.search(r"uint32 (\d+)", shown.stdout).group(1))
    monitor = subprocess.Popen(["gdbus", "monitor", "--session", "--dest", "org.freedesktop.Notifications"],
                               stdout=subprocess.PIPE, text=True)
    try:
        # gdbus prints "Monitoring signals ..." once its AddMatch is queued, not sent; "The
        # name ... is owned by" answers a GetNameOwner sent after it on the same connection,
        # so the bus has the match by then and the signal below is seen.
        assert lines_until(monitor.stdout, "is owned by"), "gdbus monitor did not watch the server"
        invoked = subprocess.run(["gdbus", "call", "--session", "--dest", "org.freedesktop.Notifications",
                                  "--object-path", "/fr/emersion/Mako", "--method", "fr.emersion.Mako.InvokeAction",
                                  str(nid), "allow"], capture_output=True, text=True, timeout=10)
        assert invoked.returncode == 0, invoked.stderr
        assert wait_until(lambda: any(c["call"] == "mako.InvokeAction" for c in mako.calls()))
        # The signal reached the bus before the call's answer did, but gdbus prints it in its
        # own time: wait for the line rather than stop gdbus first.
        assert lines_until(monitor.stdout, re.escape(f"ActionInvoked (uint32 {nid}, 'allow')")), \
            "gdbus printed no ActionInvoked for the shown notification's allow"
    finally:
        monitor.terminate()
        monitor.wait(10)


def test_the_audit_trail_names_each_program_and_decision_and_no_token(leasing):
    d = leasing(f"""
[[allow]]
exe = "{PYTHON}"
resources = ["{API}"]

[[allow]]
exe = "{AUTHCTL_FILE}"
resources = ["*"]
""")
    assert ask_once(PYTHON, d, API) == ["served"]
    assert ask_once(PYTHON, d, API) == ["served"]
    token = d.ctl("token", "--resource", GIT)
    assert token.returncode == 0, token.stderr
    copy = copy_of_python(d)
    assert ask_once(copy, d, API)[0].startswith("-32002 ")

    r = d.ctl("audit", "--json")
    assert r.returncode == 0, r.stderr
    entries = json.loads(r.stdout)["entries"]
    by = {}
    for e in entries:
        by.setdefault(e.get("program"), []).append(e)
    python = by.get(PYTHON, [])
    assert [e["decision"] for e in python] == ["refreshed", "served"], entries
    assert all(e["resource"] == API and e["provider"] == d.name and e["account"] and e["grant"] == "rule"
               and e["forwarded"] is False and e["method"] == "token.get" for e in python), python
    ctl = by.get(AUTHCTL_FILE, [])
    assert [(e["decision"], e["resource"]) for e in ctl if e["method"] == "token.get"] == [("refreshed", GIT)], entries
    refused = by.get(copy, [])
    assert [e["decision"] for e in refused] == ["refused"] and copy in refused[0]["reason"], entries
    assert len({e["pid"] for e in python + ctl + refused}) == 4, "each process by its own pid"

    # Filters: --program by path or file name, --since.
    only = json.loads(d.ctl("audit", "--json", "--program", AUTHCTL_FILE).stdout)["entries"]
    assert only and {e["program"] for e in only} == {AUTHCTL_FILE}
    named = json.loads(d.ctl("audit", "--json", "--program", os.path.basename(copy)).stdout)["entries"]
    assert [e["decision"] for e in named] == ["refused"], named
    assert json.loads(d.ctl("audit", "--json", "--since", "1h").stdout)["entries"] == entries
    table = d.ctl("audit", "--program", PYTHON)
    assert table.returncode == 0 and "refreshed" in table.stdout and "served" in table.stdout, table.stdout
    assert d.ctl("audit", "--since", "soon").returncode == 64

    # The file is the user's only, and holds no token.
    mode = os.stat(d.audit_log).st_mode & 0o777
    assert mode == 0o600, oct(mode)
    with open(d.audit_log, "rb") as f:
        text = f.read()
    assert token.stdout.strip().encode() not in text
    assert b"eyJ" not in text, "something like a JWT is in the audit file"


def test_without_rules_the_front_doors_answers_are_in_the_trail_too(leasing):
    """No [[allow]] rules: the front door answers cache hits itself, a request asked again
    from the memo of its answer's bytes. Each is still one entry (grant "open"), for
    the process that asked."""
    d = leasing("")
    pids = []
    for _ in range(3):
        r = d.ctl("token", "--resource", API)
        assert r.returncode == 0, r.stderr
    entries = [e for e in json.loads(d.ctl("audit", "--json").stdout)["entries"] if e.get("method") == "token.get"]
    assert [(e["decision"], e["grant"]) for e in entries] == [("refreshed", "open"), ("served", "open"), ("served", "open")], entries
    assert {e["program"] for e in entries} == {AUTHCTL_FILE}, entries
    pids = [e["pid"] for e in entries]
    assert len(set(pids)) == 3, pids
