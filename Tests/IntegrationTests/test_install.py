"""scripts/install --prefix into a temporary folder: working binaries, units that verify
with their man pages, completions for bash, zsh and fish, an example config that is never
overwritten; scripts/uninstall takes it all away again.

A release build takes minutes, so by default the test installs the binaries under test
(`--bin-dir`, the same copy step a build ends with). Set AUTHBROKER_INSTALL_BIN to a folder
of prebuilt release binaries to install those instead, or AUTHBROKER_INSTALL_BUILD=1 to let
scripts/install do its own release build with --static-swift-stdlib."""
import os
import re
import subprocess
import time

import pytest

from conftest import BIN, ROOT, RPC

INSTALL = os.path.join(ROOT, "scripts", "install")
UNINSTALL = os.path.join(ROOT, "scripts", "uninstall")


def scratch_of(bin_dir):
    """The SwiftPM scratch folder a bin folder belongs to (holds workspace-state.json)."""
    d = os.path.realpath(bin_dir)
    while d != "/":
        if os.path.exists(os.path.join(d, "workspace-state.json")):
            return d
        d = os.path.dirname(d)
    return os.path.join(ROOT, ".build")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    prefix = base / "prefix"
    env = dict(os.environ, HOME=str(base / "home"), XDG_CONFIG_HOME=str(base / "config"))
    args = [INSTALL, "--prefix", str(prefix), "--no-enable", "--scratch-path", scratch_of(BIN)]
    if os.environ.get("AUTHBROKER_INSTALL_BUILD") == "1":
        args[-2:] = []
    else:
        args += ["--bin-dir", os.environ.get("AUTHBROKER_INSTALL_BIN", BIN)]
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    return {"prefix": prefix, "env": env, "out": r.stdout, "base": base,
            "config": base / "config" / "authbroker" / "config.toml"}


def test_binaries_units_completions_and_man_pages_are_in_place(installed):
    p = installed["prefix"]
    for b in ("authbrokerd", "authctl"):
        assert os.access(p / "bin" / b, os.X_OK)
    service = (p / "lib/systemd/user/authbroker.service").read_text()
    assert re.search(rf"^ExecStart={re.escape(str(p / 'bin/authbrokerd'))}$", service, re.M)
    assert (p / "lib/systemd/user/authbroker.socket").exists()
    assert "systemctl --user enable --now authbroker.socket" in installed["out"]

    # Man pages, generated from the binaries' own definitions, found by man(1).
    env = dict(installed["env"], MANPATH=str(p / "share/man"), MANWIDTH="80")
    for page in ("authctl", "authctl.token", "authctl.exec", "authctl.kube-credential",
                 "authctl.git-credential", "authbrokerd"):
        r = subprocess.run(["man", "-w", page], env=env, capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.startswith(str(p)), (page, r.stdout, r.stderr)
    # The hand-written pages (docs/man): `man authctl` is authctl(1) with its exit statuses
    # and environment, not the generated one; the configuration in section 5.
    r = subprocess.run(["man", "-P", "cat", "authctl"], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "EXIT STATUS" in r.stdout and "AUTHBROKER_NO_QR" in r.stdout, r.stdout + r.stderr
    # Without MANPATH, man-db finds PREFIX/share/man through PREFIX/bin on PATH.
    by_path = {k: v for k, v in env.items() if k != "MANPATH"}
    by_path["PATH"] = f"{p / 'bin'}:{os.environ['PATH']}"
    r = subprocess.run(["man", "-w", "authctl"], env=by_path, capture_output=True, text=True)
    assert r.stdout.strip() == str(p / "share/man/man1/authctl.1"), r.stdout + r.stderr
    r = subprocess.run(["man", "-w", "5", "authbroker.toml"], env=env, capture_output=True, text=True)
    assert r.stdout.strip() == str(p / "share/man/man5/authbroker.toml.5"), r.stdout + r.stderr
    r = subprocess.run(["man", "-P", "cat", "authbroker.toml"], env=env, capture_output=True, text=True)
    assert "refresh_ahead_window" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(["man", "-P", "cat", "authctl.git-credential"], env=env, capture_output=True, text=True)
    text = re.sub(r"[\u2010-]\n\s*", "", r.stdout)  # undo man's hyphenation at line ends
    assert "SYNOPSIS" in text and "password_expiry_utc" in text, r.stdout

    # The installed units verify, Documentation= man pages included.
    r = subprocess.run(["systemd-analyze", "verify", "--user",
                        str(p / "lib/systemd/user/authbroker.socket"), str(p / "lib/systemd/user/authbroker.service")],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr


def test_bash_completion_completes_subcommands(installed):
    p = installed["prefix"]
    script = p / "share/bash-completion/completions/authctl"
    # Load the completion as bash-completion would and ask it for `authctl ex<TAB>`.
    r = subprocess.run(["bash", "-c", f'source "{script}"; COMP_WORDS=(authctl ex); COMP_CWORD=1; '
                        'COMP_LINE="authctl ex"; COMP_POINT=${#COMP_LINE}; _authctl; printf "%s\\n" "${COMPREPLY[@]}"'],
                       env=dict(installed["env"], PATH=f"{p / 'bin'}:{os.environ['PATH']}"),
                       capture_output=True, text=True, timeout=30)
    assert "exec" in r.stdout.split(), r.stdout + r.stderr
    # `authctl token --provider <TAB>`: the providers of the installed example config.toml,
    # read by the installed authctl without a daemon.
    r = subprocess.run(["bash", "-c", f'source "{script}"; COMP_WORDS=(authctl token --provider ""); COMP_CWORD=3; '
                        'COMP_LINE="authctl token --provider "; COMP_POINT=${#COMP_LINE}; _authctl authctl "" --provider; '
                        'printf "%s\\n" "${COMPREPLY[@]}"'],
                       env=dict(installed["env"], PATH=f"{p / 'bin'}:{os.environ['PATH']}"),
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["corp"], r.stdout + r.stderr
    zsh = (p / "share/zsh/site-functions/_authctl").read_text()
    assert zsh.startswith("#compdef authctl") and "git-credential" in zsh
    fish = (p / "share/fish/vendor_completions.d/authctl.fish").read_text()
    assert "complete -c 'authctl'" in fish and "kube-credential" in fish


def test_installed_binaries_run_with_the_example_config(installed, tmp_path):
    p = installed["prefix"]
    config = installed["config"]
    assert config.exists() and oct(config.stat().st_mode & 0o777) == "0o600"
    text = config.read_text()
    assert "[providers.corp]" in text
    sock = str(tmp_path / "sock")
    env = dict(os.environ, AUTHBROKER_SOCKET=sock, XDG_CONFIG_HOME=installed["env"]["XDG_CONFIG_HOME"])
    log = open(tmp_path / "daemon.log", "wb")
    d = subprocess.Popen([str(p / "bin/authbrokerd")], env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while True:
            assert d.poll() is None, (tmp_path / "daemon.log").read_text()
            try:
                RPC(sock, timeout=5).close()
                break
            except OSError:
                assert time.time() < deadline
                time.sleep(0.05)
        r = subprocess.run([str(p / "bin/authctl"), "status"], env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and "corp" in r.stdout, r.stdout + r.stderr
        r = subprocess.run([str(p / "bin/authctl"), "--version"], capture_output=True, text=True)
        v = subprocess.run([str(p / "bin/authbrokerd"), "--version"], capture_output=True, text=True)
        assert r.stdout.strip() == v.stdout.strip() != ""
    finally:
        d.terminate()
        d.wait(timeout=10)
        log.close()


def test_reinstall_keeps_the_users_config_and_uninstall_removes_the_rest(installed):
    p = installed["prefix"]
    config = installed["config"]
    config.write_text(config.read_text() + "\n# mine\n")
    args = [INSTALL, "--prefix", str(p), "--no-enable", "--scratch-path", scratch_of(BIN),
            "--bin-dir", os.environ.get("AUTHBROKER_INSTALL_BIN", BIN)]
    r = subprocess.run(args, env=installed["env"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kept your configuration" in r.stdout and config.read_text().endswith("# mine\n")

    listed = (p / "share/authbroker/installed-files").read_text().split()
    for page in ("man1/authctl.1", "man5/authbroker.toml.5", "man8/authbrokerd.8"):
        assert listed.count(str(p / "share/man" / page)) == 1, page
    r = subprocess.run([UNINSTALL, "--prefix", str(p)], env=installed["env"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [f for f in listed if os.path.exists(f)] == []
    assert config.exists(), "uninstall keeps the configuration unless --purge-config"
    assert "the Secret Service was left alone" in r.stdout
