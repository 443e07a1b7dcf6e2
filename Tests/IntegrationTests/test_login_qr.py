"""`authctl login --device` on a terminal shows a QR code of the verification URL right
below the URL and code, drawn dark on light with half blocks; a QR reader (zbarimg, from
zbar-tools) decodes the drawing back to the URL. No code with --no-qr, AUTHBROKER_NO_QR,
a terminal narrower than the code, or stderr that is not a terminal. Real daemon, real
Glewlwyd."""
import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import termios
import time

import pytest

from conftest import AUTHCTL

SGR_START = "\x1b[40;97m"
LIGHT = {"\u2588": (True, True), "\u2580": (True, False), "\u2584": (False, True), " ": (False, False)}


def login_on_pty(d, *args, columns=120, env=None):
    """Runs `authctl login --device` with a pty of `columns` as stdin, stdout and stderr,
    approves the code through Glewlwyd and returns everything the terminal showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    p = subprocess.Popen([AUTHCTL, "login", "--device", "--provider", d.name, *args],
                         env=dict(d.env, TERM="xterm-256color", **(env or {})),
                         stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    seen = ""
    try:
        seen = read_until(master, "This sign-in expires", seen)
        code = re.search(r"enter the code ([A-Za-z0-9-]+)", seen).group(1)
        session = d.gl.login_session("alice")
        d.gl.approve_device(session, code, d.gl.client_id(d.client), ["openid", "profile", "email", "offline_access"])
        seen = read_until(master, "Signed in to", seen)
        assert p.wait(timeout=30) == 0, seen
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    return seen.replace("\r\n", "\n")


def read_until(fd, marker, seen, timeout=30):
    deadline = time.time() + timeout
    while marker not in seen:
        assert time.time() < deadline, f"no {marker!r} in {seen!r}"
        if select.select([fd], [], [], 1)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    return seen


def qr_lines(text):
    return [line for line in text.split("\n") if SGR_START in line]


def modules(lines):
    """The drawing as rows of booleans, True for dark: two rows per line of half blocks."""
    rows = []
    for line in lines:
        assert line.startswith(SGR_START) and line.endswith("\x1b[0m"), repr(line)
        cells = line[len(SGR_START):-len("\x1b[0m")]
        upper = [not LIGHT[c][0] for c in cells]
        lower = [not LIGHT[c][1] for c in cells]
        rows += [upper, lower]
    return rows


def decode(rows, tmp_path, scale=4):
    """What zbarimg reads in the drawing, as a scanner would see it on screen."""
    width = len(rows[0]) * scale
    pixels = [[("1" if dark else "0") for dark in row for _ in range(scale)] for row in rows for _ in range(scale)]
    image = tmp_path / "qr.pbm"
    image.write_text(f"P1\n{width} {len(pixels)}\n" + "\n".join(" ".join(r) for r in pixels) + "\n")
    r = subprocess.run(["zbarimg", "--quiet", "--raw", str(image)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"zbarimg read no code: {r.stderr}"
    return r.stdout.strip()


def test_qr_code_below_the_url_decodes_to_the_verification_url(daemon_factory, tmp_path):
    if shutil.which("zbarimg") is None:
        pytest.fail("zbarimg is missing: run scripts/setup (zbar-tools)")
    d = daemon_factory().start()
    text = login_on_pty(d)
    complete = re.search(r"\(or open (\S+), which fills in the code\)", text).group(1)
    lines = qr_lines(text)
    assert lines, "no QR code on the terminal:\n" + text
    # Right below the URL and code, before the line saying how long the sign-in lasts.
    order = text.split("\n")
    first = order.index(lines[0])
    assert "which fills in the code" in order[first - 1]
    assert order[first + len(lines)].startswith("This sign-in expires")
    rows = modules(lines)
    # A quiet zone of four light modules on every side (the last half line is light too).
    assert all(not dark for row in rows[:4] + rows[-5:] for dark in row)
    assert all(not any(row[:4]) and not any(row[-4:]) for row in rows)
    assert decode(rows, tmp_path) == complete
    assert "Signed in to" in text


@pytest.mark.parametrize("how", ["--no-qr", "AUTHBROKER_NO_QR", "narrow"])
def test_no_qr_code_when_turned_off_or_too_narrow(daemon_factory, how):
    d = daemon_factory().start()
    if how == "--no-qr":
        text = login_on_pty(d, "--no-qr")
    elif how == "AUTHBROKER_NO_QR":
        text = login_on_pty(d, env={"AUTHBROKER_NO_QR": "1"})
    else:
        text = login_on_pty(d, columns=30)
    assert "enter the code" in text and "Signed in to" in text
    assert not qr_lines(text) and "\u2588" not in text and "\x1b[" not in text, text


def test_no_qr_code_when_stderr_is_not_a_terminal(daemon_factory):
    d = daemon_factory().start()
    p = subprocess.Popen([AUTHCTL, "login", "--device", "--provider", d.name], env=d.env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = ""
    while "This sign-in expires" not in first:  # the instructions, read before communicate() takes over
        line = p.stderr.readline()
        assert line, first
        first += line
    code = re.search(r"enter the code ([A-Za-z0-9-]+)", first).group(1)
    d.gl.approve_device(d.gl.login_session("alice"), code, d.gl.client_id(d.client),
                        ["openid", "profile", "email", "offline_access"])
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, first + err
    assert "which fills in the code" in first and "Signed in to" in out
    assert "\u2588" not in first + err and "\x1b[" not in first + err, first + err
