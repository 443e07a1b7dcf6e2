"""Issue 21 items 1–3 against the real daemon and a STUB provider (support/stub_provider.py,
support/stub_exchange.py: no provider run here does token exchange, and the stub counts
every request it gets): an inode number reused after a package upgrade, `token.exchange`
naming its target twice, and the per-connection limit on requests the cache cannot answer.
The callers are real processes (support/policy_callers.py); no test prints a token."""
import os
import shutil
import time

import pytest

from conftest import API, GIT, RPC, signed_in_at_stub
from policy_callers import PYTHON, ask_once
from stub_exchange import GRANT, enable


def config(name, stub, daemon="", provider="", rules=""):
    return (f'[daemon]\nstore = "memory"\n{daemon}\n'
            f"[providers.{name}]\nissuer = \"{stub.issuer}\"\nclient_id = \"{stub.client_id}\"\n"
            f'scopes = ["openid", "offline_access"]\nresources = ["{API}", "{GIT}"]\n{provider}\n{rules}')


def signed_in(stub, **kw):
    return signed_in_at_stub(lambda name: config(name, stub, **kw))


def exchange_forms(stub):
    return [f for f in stub.token_forms if f.get("grant_type") == [GRANT]]


def reused_inode(folder, freed):
    """A new file in `folder` with the inode number `freed` had, made the way any program of
    the user can: files are made (and kept, so each takes the next free number) until the
    file system hands that number out again. The last process running the old file may
    take a moment to let go of it."""
    made = 0
    for attempt in range(10):
        for _ in range(5000):
            path = str(folder / f"f{made}")
            made += 1
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o700)
            st = os.fstat(fd)
            os.close(fd)
            if (st.st_dev, st.st_ino) == (freed.st_dev, freed.st_ino):
                print(f"\nthe freed inode number came back at the {made}th file")
                return path
        time.sleep(0.1)
    return None


def test_a_program_run_from_a_reused_inode_number_is_refused(stub, tmp_path):
    # The allowed program is a copy of the interpreter in a folder of the test's own, so
    # that an "upgrade" can rename a new copy over it, on the same file system as the files
    # made afterwards (ext4 gives a freed inode number again at once; tmpfs never does).
    folder = tmp_path / "bin"
    folder.mkdir()
    tool = str(folder / "tool")
    shutil.copy2(PYTHON, tool)
    d = signed_in(stub, rules=f'[[allow]]\nexe = "{tool}"\nresources = ["{API}"]\n')
    try:
        assert ask_once(tool, d, API) == ["served"]
        freed = os.stat(tool)
        shutil.copy2(PYTHON, str(folder / "tool.new"))
        os.rename(str(folder / "tool.new"), tool)  # the package upgrade
        reused = reused_inode(folder, freed)
        assert reused, "the file system never gave the freed inode number again"
        with open(PYTHON, "rb") as src, open(reused, "wb") as dst:
            shutil.copyfileobj(src, dst)  # the attacker's own program, in that inode
        [answer] = ask_once(reused, d, API)
        assert answer.startswith("-32002 forbidden by policy"), answer
        assert ask_once(tool, d, API) == ["served"], "the upgraded program at the rule's path is served"
    finally:
        d.cleanup()


def test_an_exchange_naming_an_audience_the_rule_does_not_grant_is_refused(stub):
    enable(stub)
    d = signed_in(stub, rules=f'[[allow]]\nexe = "{PYTHON}"\nresources = ["{API}"]\n')
    try:
        c = RPC(d.socket)
        both = c.call("token.exchange", {"provider": d.name, "resource": API, "audience": "payroll"})
        assert both["error"]["code"] == -32002 and "payroll" in both["error"]["message"], both
        alone = c.call("token.exchange", {"provider": d.name, "audience": "payroll"})
        assert alone["error"]["code"] == -32002, alone
        assert not [f for f in exchange_forms(stub) if f.get("audience") == ["payroll"]], "the provider was asked"
        ok = c.call("token.exchange", {"provider": d.name, "resource": API})
        assert "result" in ok, ok
        c.close()
    finally:
        d.cleanup()


def test_an_exchange_for_a_resource_outside_the_providers_resources_is_refused(stub):
    enable(stub)
    d = signed_in(stub)
    try:
        c = RPC(d.socket)
        r = c.call("token.exchange", {"provider": d.name, "audience": "orders", "resource": "https://made-up.example"})
        assert r["error"]["code"] == -32602 and "resources" in r["error"]["message"], r
        assert exchange_forms(stub) == [], "the provider was asked"
        ok = c.call("token.exchange", {"provider": d.name, "audience": "orders", "resource": GIT})
        assert "result" in ok, ok
        c.close()
    finally:
        d.cleanup()


def test_requests_the_cache_cannot_answer_are_limited_per_connection(stub):
    d = signed_in(stub, daemon="cache_misses_per_minute = 5\n")
    try:
        c = RPC(d.socket)
        before = len(stub.token_forms)
        # min_ttl longer than the stub's tokens live: each request asks the provider again.
        answers = [c.call("token.get", {"provider": d.name, "resource": API, "min_ttl": 86400}) for _ in range(7)]
        assert [a["error"]["code"] for a in answers[:5]] == [-32602] * 5, answers[:5]
        for refused in answers[5:]:
            e = refused["error"]
            assert e["code"] == -32009 and e["data"]["limit"] == 5 and e["data"]["retry_after"] >= 1, e
            assert "cache_misses_per_minute" in e["message"], e
        assert len(stub.token_forms) - before == 5, "a refused request reached the provider"
        # Cached tokens are still served on that connection, and other connections are not limited.
        assert "result" in c.call("token.get", {"provider": d.name, "resource": API})
        other = RPC(d.socket)
        assert "result" in other.call("token.get", {"provider": d.name, "resource": GIT})
        other.close()
        c.close()
    finally:
        d.cleanup()


def test_a_program_allowed_one_resource_cannot_make_the_broker_drop_anothers_token(stub, tmp_path):
    # The default access_tokens = "one-per-refresh-token": every refresh drops the account's
    # other tokens. This test process may have the API resource; a copy of the interpreter
    # stands for git, with the git resource.
    git = str(tmp_path / "git-program")
    shutil.copy2(PYTHON, git)
    rules = (f'[[allow]]\nexe = "{PYTHON}"\nresources = ["{API}"]\n\n'
             f'[[allow]]\nexe = "{git}"\nresources = ["{GIT}"]\n')
    d = signed_in(stub, provider='caller_params = ["organization_id"]\n', rules=rules)
    try:
        c = RPC(d.socket)
        assert "result" in c.call("token.get", {"provider": d.name, "resource": API})
        assert ask_once(git, d, GIT) == ["served"]  # a refresh, which drops the API token: the mode's cost
        refreshes = stub.counts()[1]
        for i in range(5):
            scoped = c.call("token.get", {"provider": d.name, "resource": API, "scopes": ["openid"] if i % 2 else ["offline_access"]})
            assert scoped["error"]["code"] == -32002 and "scopes" in scoped["error"]["message"], scoped
            with_params = c.call("token.get", {"provider": d.name, "resource": API, "params": {"organization_id": f"o{i}"}})
            assert with_params["error"]["code"] == -32002 and "params" in with_params["error"]["message"], with_params
        assert stub.counts()[1] == refreshes, "a refused request refreshed the account"
        assert ask_once(git, d, GIT) == ["served"]
        assert stub.counts()[1] == refreshes, "git's token was dropped and had to be refreshed"
        c.close()
    finally:
        d.cleanup()
