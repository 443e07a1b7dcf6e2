"""The man pages in docs/man: conventional headers and sections, no groff or man warning,
and in step with the programs: every configuration key the real daemon accepts is in
authbroker.toml(5) and every key there is accepted; every authctl command, option and
exit status is in authctl(1); authbrokerd's options and exit statuses in authbrokerd(8)."""
import os
import re
import subprocess

import pytest

from conftest import AUTHBROKERD, AUTHCTL, ROOT

MAN = os.path.join(ROOT, "docs", "man")
PAGES = {"authctl.1": "User Commands", "authbroker.toml.5": "File Formats Manual",
         "authbrokerd.8": "System Manager's Manual"}
SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"]


def page(name):
    with open(os.path.join(MAN, name)) as f:
        return f.read()


def plain(text):
    """The page's words without groff's escapes for hyphens and quotes."""
    return text.replace("\\-", "-").replace("\\(dq", '"')


def version():
    return subprocess.run([AUTHCTL, "--version"], capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_header_and_sections_are_conventional(name):
    text = page(name)
    stem, section = name.rsplit(".", 1)
    header = text.split("\n", 1)[0]
    assert re.fullmatch(rf'\.TH {re.escape(stem.upper())} {section} \d{{4}}-\d\d-\d\d '
                        rf'"authbroker {re.escape(version())}" "{PAGES[name]}"', header), header
    found = re.findall(r'^\.SH "?([^"\n]+)"?$', text, re.M)
    wanted = SECTIONS if name != "authbroker.toml.5" else [s for s in SECTIONS if s != "EXIT STATUS"]
    if name != "authbroker.toml.5":
        wanted = wanted[:3] + ["OPTIONS"] + wanted[3:]
    assert [s for s in found if s in wanted] == wanted, found


@pytest.mark.parametrize("name", sorted(PAGES))
def test_no_warning_from_groff_or_man(name):
    path = os.path.join(MAN, name)
    r = subprocess.run(["groff", "-ww", "-man", "-z", path], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = subprocess.run(["man", "--warnings", "-l", path], capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat"))
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_the_lint_fails_on_a_broken_page(tmp_path):
    broken = tmp_path / "broken.1"
    broken.write_text(page("authctl.1").replace(".SH NAME", ".SH NAME\n.XX unknown macro\n\\fZ", 1))
    r = subprocess.run(["groff", "-ww", "-man", "-z", str(broken)], capture_output=True, text=True)
    assert r.stderr != ""


def accepted_keys(table, tmp_path):
    """The keys the real daemon accepts in `table`, from its own error for an unknown one."""
    provider = '[providers.p]\nissuer = "https://login.example.com"\nclient_id = "c"\n'
    config = {"": "not_a_key = 1\n", "daemon": "[daemon]\nnot_a_key = 1\n",
              "providers": provider + "not_a_key = 1\n", "discovery": "[discovery]\nnot_a_key = 1\n",
              "aws": provider + "[aws]\nnot_a_key = 1\n",
              "allow": provider + '[[allow]]\nexe = "/usr/bin/git"\nnot_a_key = 1\n'}[table]
    path = tmp_path / f"{table or 'root'}.toml"
    path.write_text(config)
    r = subprocess.run([AUTHBROKERD, "--config", str(path)], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, AUTHBROKER_SOCKET=str(tmp_path / "sock")))
    assert r.returncode == 78, r.stderr
    return set(re.search(r"unknown key \(known here: ([^)]*)\)", r.stderr).group(1).split(", "))


def documented_keys(text, heading):
    """The keys a section of authbroker.toml(5) describes: `.BR key " (type…`."""
    body = re.search(rf"^\.SH {re.escape(heading)}\n(.*?)(?=^\.SH )", text, re.M | re.S).group(1)
    return set(re.findall(r'^\.BR ([a-z_]+) " \(', body, re.M))


def test_every_configuration_key_is_in_authbroker_toml_5_and_only_those(tmp_path):
    text = page("authbroker.toml.5")
    assert accepted_keys("", tmp_path) == {"daemon", "providers", "allow", "discovery", "aws"}
    for table, heading in [("daemon", "[daemon]"), ("providers", "[providers.NAME]"), ("discovery", "[discovery]"),
                           ("allow", "[[allow]]"), ("aws", "[aws]")]:
        accepted, documented = accepted_keys(table, tmp_path), documented_keys(text, heading)
        assert accepted == documented, (f"{heading}: accepted, not in the page: {sorted(accepted - documented)}; "
                                        f"in the page, not accepted: {sorted(documented - accepted)}")


def authctl_help(*command):
    r = subprocess.run([AUTHCTL, "help", *command], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_every_authctl_command_option_and_exit_status_is_in_authctl_1():
    text = plain(page("authctl.1"))
    top = authctl_help()
    commands = re.findall(r"^  ([a-z][a-z-]+)  ", top.split("SUBCOMMANDS:")[1], re.M)
    assert "login" in commands and "token" in commands
    missing = []
    for command in commands:
        if not re.search(rf'^\.BI? "?{re.escape(command)}\b', text, re.M):
            missing.append(command)
        for option in set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z-]*)", authctl_help(command), re.M)):
            if option not in text:
                missing.append(f"{command} {option}")
    assert not missing, f"authctl(1) does not describe: {missing}"
    statuses = re.findall(r"^  (\d+) ", top.split("EXIT STATUS")[1], re.M)
    section = text.split(".SH EXIT STATUS")[1].split(".SH ")[0]
    assert set(statuses) == set(re.findall(r"^\.B (\d+)$", section, re.M))


def test_authbrokerd_8_has_the_daemons_options_and_exit_statuses():
    text = plain(page("authbrokerd.8"))
    help_text = subprocess.run([AUTHBROKERD, "--help"], capture_output=True, text=True).stdout
    for option in set(re.findall(r"(--[a-z][a-z-]*)", help_text)):
        assert option in text, option
    statuses = re.findall(r"(\d+) [a-z]", help_text.split("Exit status:")[1].split("\n")[0])
    section = text.split(".SH EXIT STATUS")[1].split(".SH ")[0]
    assert set(statuses) == set(re.findall(r"^\.B (\d+)$", section, re.M))
