"""Which account a request that names none gets (issue 39 item 4): the provider's account
rules choose it from the caller's working directory, which the daemon reads from the process
that connected, per call and without any global switch."""

import json
import os
import subprocess

from conftest import API, AUTHCTL, decode_jwt
from test_sign_in import browser_login


def rules_config(d, work, personal):
    with open(d.config) as f:
        text = f.read()
    text += (
        f"\n[[providers.{d.name}.accounts]]\n"
        f'account = "alice@example.test"\n'
        f'directory = "{work}/**"\n'
        f"\n[[providers.{d.name}.accounts]]\n"
        f'account = "bob@example.test"\n'
        f'directory = "{personal}/**"\n'
        f"\n[[providers.{d.name}.accounts]]\n"
        f"environment = true\n"
    )
    with open(d.config, "w") as f:
        f.write(text)


def token_in(d, cwd, *args, env=None):
    return subprocess.Popen([AUTHCTL, "token", "--json", "--provider", d.name, "--resource", API, *args],
                            cwd=cwd, env=env or d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)


def test_two_directories_get_two_accounts_tokens_at_the_same_time(daemon_factory, glewlwyd):
    d = daemon_factory()
    work = os.path.join(d.dir, "work")
    personal = os.path.join(d.dir, "personal")
    elsewhere = os.path.join(d.dir, "elsewhere")
    for folder in (work, os.path.join(work, "acme", "app"), personal, elsewhere):
        os.makedirs(folder, exist_ok=True)
    rules_config(d, work, personal)
    d.start()
    browser_login(d, glewlwyd, user="alice")
    browser_login(d, glewlwyd, user="bob")

    # Two terminals, two folders, at once: each gets its own account's token.
    for _ in range(3):
        procs = [token_in(d, os.path.join(work, "acme", "app")), token_in(d, personal)]
        outs = [p.communicate(timeout=60) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        a, b = (json.loads(out) for out, _ in outs)
        assert a["account"] == "alice@example.test" and a["chosen_by"] == f"directory {work}/**"
        assert b["account"] == "bob@example.test" and b["chosen_by"] == f"directory {personal}/**"
        assert decode_jwt(a["access_token"])[1]["sub"] != decode_jwt(b["access_token"])[1]["sub"]

    # --account always wins over the folder.
    named = token_in(d, work, "--account", "bob@example.test")
    out, err = named.communicate(timeout=60)
    assert named.returncode == 0, err
    assert json.loads(out)["account"] == "bob@example.test" and json.loads(out)["chosen_by"] == "account param"

    # Where no folder rule matches, the environment rule takes AUTHBROKER_ACCOUNT…
    hinted = token_in(d, elsewhere, env=dict(d.env, AUTHBROKER_ACCOUNT="bob@example.test"))
    out, err = hinted.communicate(timeout=60)
    assert hinted.returncode == 0, err
    assert json.loads(out)["chosen_by"] == "environment AUTHBROKER_ACCOUNT"
    # … and nothing at all is one sentence with what the rules saw and the ways to choose.
    env = {k: v for k, v in d.env.items() if k != "AUTHBROKER_ACCOUNT"}
    unnamed = token_in(d, elsewhere, env=env)
    out, err = unnamed.communicate(timeout=60)
    assert unnamed.returncode == 9, (out, err)
    assert f"no rule of [[providers.{d.name}.accounts]] matched this caller (working directory {elsewhere})" in err
    assert "--account" in err and "default_account" in err

    # whoami says which rule chose the account.
    who = subprocess.run([AUTHCTL, "whoami", "--provider", d.name], cwd=personal, env=env,
                         capture_output=True, text=True, timeout=60)
    assert who.returncode == 0, who.stderr
    assert "bob@example.test" in who.stdout and f"(account chosen by directory {personal}/**)" in who.stdout


def test_default_account_serves_callers_that_name_none(daemon_factory, glewlwyd):
    d = daemon_factory()
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text + 'default_account = "alice@example.test"\n')
    d.start()
    browser_login(d, glewlwyd, user="alice")
    browser_login(d, glewlwyd, user="bob")
    p = token_in(d, d.dir)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    answer = json.loads(out)
    assert answer["account"] == "alice@example.test" and answer["chosen_by"] == "default_account"
