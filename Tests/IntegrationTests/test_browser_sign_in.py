"""A real browser in the suite: `authctl login` hands the URL to $BROWSER, and headless
Chromium (Debian's chromium and chromium-driver, driven over WebDriver by
support/webdriver.py) signs in through Glewlwyd's own login and consent pages as a person
would, then lands on the daemon's page.

Each test signs in a person of its own, created for it at Glewlwyd, so the consent page
shows no matter what other tests granted before. Screenshots of every page go to
$AUTHBROKER_TEST_OUTPUT/browser/<test>/ when that is set, else to the test's tmp_path
(docs/testing.md); the path is printed with the test's output."""
import json
import os
import stat
import subprocess
import time
import urllib.parse
import uuid

import pytest

from conftest import AUTHCTL, API, decode_jwt
from webdriver import Browser, missing

pytestmark = pytest.mark.skipif(missing() is not None, reason=f"no real browser: {missing()}")

SCOPES = ("profile", "email", "offline_access")
CLIENT_NAME = "authbroker (public)"  # the client's name at Glewlwyd (scripts/glewlwyd)


@pytest.fixture
def shots(request, tmp_path):
    """The folder this test's screenshots go to."""
    root = os.environ.get("AUTHBROKER_TEST_OUTPUT")
    folder = os.path.join(root, "browser", request.node.name) if root else str(tmp_path / "screenshots")
    os.makedirs(folder, exist_ok=True)
    print(f"screenshots: {folder}")
    return folder


@pytest.fixture
def person(glewlwyd):
    """A person with an account at Glewlwyd who has not yet consented to anything."""
    name = "p" + uuid.uuid4().hex[:8]
    user = {"username": name, "password": name + "-password", "name": f"Person {name}",
            "email": f"{name}@example.test", "enabled": True,
            "scope": ["g_profile", "openid", *SCOPES]}
    r = glewlwyd.admin_request("POST", "/api/user/", user)
    assert r.status == 200, f"creating {name} at Glewlwyd: HTTP {r.status}"
    return user


@pytest.fixture
def browser(tmp_path):
    with Browser(str(tmp_path / "chromium")) as b:
        yield b


def start_login(d, glewlwyd, *args):
    """`authctl login` with $BROWSER set to a script that hands the URL to the test, as a
    desktop hands it to the user's browser. Returns (process, the URL it opened)."""
    opened = os.path.join(d.dir, "opened")
    script = os.path.join(d.dir, "browser.sh")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nprintf "%s\\n" "$1" > {opened}.tmp && mv {opened}.tmp {opened}\n')
    os.chmod(script, stat.S_IRWXU)
    env = {k: v for k, v in d.env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["BROWSER"] = script
    p = subprocess.Popen([AUTHCTL, "login", "--provider", d.name, *args], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(opened):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f"authctl login opened no browser ({p.returncode}):\n{err}\n{d.log_text()}")
        time.sleep(0.02)
    with open(opened) as f:
        url = f.read().strip()
    # Glewlwyd matches redirect URIs exactly, port included: register the listener's.
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    glewlwyd.add_redirect_uri(d.client, q["redirect_uri"][0])
    return p, url


def sign_in_at_glewlwyd(b, person, shots):
    """Types the person's user name and password into Glewlwyd's login form."""
    b.fill("#username", person["username"])
    b.fill("#password", person["password"])
    b.screenshot(os.path.join(shots, "1-glewlwyd-login.png"))
    b.find("#loginbut").click()
    b.find_button("Grant access")  # the consent page
    b.wait_for(lambda: person["name"] in b.text(), "the consent page greeting the person")


def finish(p, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out, err


CONTRAST = """
function lum(c) {
  const v = c.match(/[\\d.]+/g).slice(0, 3).map(Number).map(x => x / 255)
    .map(x => x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4));
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
}
function background(e) {
  for (; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (!/rgba\\(.*, 0\\)$/.test(c) && c !== 'transparent') return c;
  }
  return 'rgb(255, 255, 255)';
}
return Array.from(document.querySelectorAll(arguments[0])).map(e => {
  const a = lum(getComputedStyle(e).color), b = lum(background(e));
  return [e.tagName + '.' + e.className, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
});
"""


def readable(b):
    """Every piece of text on the daemon's page against its background: WCAG AA asks
    for a contrast ratio of 4.5 at least. Returns the pieces that fall short."""
    return [(what, round(ratio, 2)) for what, ratio in b.script(CONTRAST, "h1, p, b, code, .why") if ratio < 4.5]


def test_a_person_signs_in_through_glewlwyds_own_pages_in_a_real_browser(daemon_factory, glewlwyd, person, browser, shots):
    d = daemon_factory().start()
    p, url = start_login(d, glewlwyd)
    b = browser
    b.open(url)
    sign_in_at_glewlwyd(b, person, shots)
    for scope in SCOPES:
        b.find(f"#grant-{scope}").click()
    b.screenshot(os.path.join(shots, "2-glewlwyd-consent.png"))
    b.find_button("Grant access").click()
    # The grant is saved when the form gives way to the choice to go on; "Continue" is on
    # both, and pressed before that it would go on with the scopes granted so far.
    b.wait_for(lambda: not b.query("#grant-email") and f"Connection to {CLIENT_NAME}" in b.text(), "the grant to be saved")
    b.find_button("Continue").click()

    b.wait_for(lambda: b.title().startswith("Signed in"), "the daemon's page")
    b.screenshot(os.path.join(shots, "3-authbroker-signed-in.png"))
    text = b.text()
    assert "You are signed in" in text
    assert f"authbroker signed you in to {d.name} as {person['email']}." in text
    assert "close this tab" in text
    assert urllib.parse.urlsplit(b.url()).hostname == "127.0.0.1"
    assert readable(b) == []
    b.color_scheme("dark")
    b.screenshot(os.path.join(shots, "4-authbroker-signed-in-dark.png"))
    assert b.script("return matchMedia('(prefers-color-scheme: dark)').matches")
    assert readable(b) == []

    status, out, err = finish(p)
    assert status == 0, f"{err}\n{d.log_text()}"
    assert f"Signed in to {d.name} as {person['email']}." in out
    r = d.ctl("status")
    assert r.returncode == 0 and d.name in r.stdout and person["email"] in r.stdout, r.stdout + r.stderr
    r = d.ctl("token", "--resource", API, "--provider", d.name)
    assert r.returncode == 0, r.stderr
    claims = decode_jwt(r.stdout.strip())[1]
    assert claims["aud"] == API and claims["sub"] == the_account(d)["subject"]


def the_account(d):
    accounts = d.rpc("account.list")["result"]["accounts"]
    assert len(accounts) == 1, json.dumps(accounts)
    return accounts[0]


def test_a_person_who_shares_no_name_is_shown_by_subject_and_provider(daemon_factory, glewlwyd, person, browser, shots):
    """The person signs in at Glewlwyd but ticks nothing on the consent page (no profile,
    no e-mail) and goes on: Glewlwyd still signs them in, with the `openid` scope alone,
    so the daemon knows them only by their subject at the issuer."""
    d = daemon_factory().start()
    p, url = start_login(d, glewlwyd)
    b = browser
    b.open(url)
    sign_in_at_glewlwyd(b, person, shots)
    b.screenshot(os.path.join(shots, "2-glewlwyd-consent-unticked.png"))
    b.find_button("Continue").click()

    b.wait_for(lambda: b.title().startswith("Signed in"), "the daemon's page")
    b.screenshot(os.path.join(shots, "3-authbroker-signed-in.png"))
    status, out, err = finish(p)
    assert status == 0, f"{err}\n{d.log_text()}"
    subject = the_account(d)["subject"]
    assert person["email"] not in b.text()
    assert f"authbroker signed you in to {d.name} as {subject}@127.0.0.1." in b.text()
    assert f"Signed in to {d.name} as {subject}@127.0.0.1." in out


def test_a_provider_that_refuses_the_sign_in_gets_a_page_that_says_what_to_do_next(daemon_factory, glewlwyd, browser, shots):
    """`authctl login --prompt none` in a browser nobody is signed in to at Glewlwyd: the
    provider may not show its login page, so it sends the browser straight back to the
    daemon with error=interaction_required (OpenID Connect Core 3.1.2.6)."""
    d = daemon_factory().start()
    p, url = start_login(d, glewlwyd, "--prompt", "none")
    b = browser
    b.open(url)
    b.wait_for(lambda: b.title().startswith("Sign-in failed"), "the daemon's page")
    b.screenshot(os.path.join(shots, "1-authbroker-sign-in-failed.png"))
    text = b.text()
    assert "Sign-in failed" in text and f"authbroker could not sign you in to {d.name}" in text
    assert "interaction_required" in text
    assert f"authctl login --provider {d.name}" in text and "--prompt none" in text
    assert readable(b) == []
    b.color_scheme("dark")
    b.screenshot(os.path.join(shots, "2-authbroker-sign-in-failed-dark.png"))
    assert readable(b) == []

    status, out, err = finish(p)
    assert status == 10, f"{status}: {err}\n{d.log_text()}"  # ExitStatus.loginFailed
    assert "interaction_required" in err and "--prompt none" in err
    assert d.rpc("account.list")["result"]["accounts"] == []
