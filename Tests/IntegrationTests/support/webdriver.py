"""A real, headless Chromium driven through Debian's chromedriver over the W3C WebDriver
protocol (plain HTTP + JSON, so the standard library is enough: no selenium).

    with Browser(profile_dir) as b:
        b.open(url)
        b.find("#username").type("alice")
        b.find("#password").type("secret")
        b.find("button[type=submit]").click()
        b.wait_for(lambda: "Signed in" in b.title())
        b.screenshot("page.png")

Every wait is explicit and bounded: `wait_for` polls a condition, `find` waits for the
element to be there and visible.
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

CHROMIUM = os.environ.get("AUTHBROKER_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("AUTHBROKER_CHROMEDRIVER", "/usr/bin/chromedriver")
# The W3C name of the key that makes an element reference in a JSON answer.
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def missing():
    """Why no browser test can run here, or None when Chromium and chromedriver are installed."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{path} is missing: install the Debian package {package} (scripts/setup does)"
    return None


class WebDriverError(Exception):
    pass


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Element:
    def __init__(self, browser, ref, selector):
        self.browser, self.ref, self.selector = browser, ref, selector

    def _path(self, tail):
        return f"/element/{self.ref}/{tail}"

    def type(self, text):
        self.browser._call("POST", self._path("clear"), {})
        self.browser._call("POST", self._path("value"), {"text": text})
        return self

    def click(self):
        self.browser._call("POST", self._path("click"), {})
        return self

    def text(self):
        return self.browser._call("GET", self._path("text"))

    def value(self):
        return self.browser._call("GET", self._path("property/value"))


class Browser:
    """One chromedriver process with one headless Chromium session."""

    def __init__(self, profile_dir, timeout=20.0, width=1000, height=900):
        self.timeout = timeout
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.profile = profile_dir
        self.log_path = os.path.join(profile_dir, "chromedriver.log")
        os.makedirs(profile_dir, exist_ok=True)
        self.size = (width, height)
        self.driver = None
        self.session = None

    def __enter__(self):
        log = open(self.log_path, "ab")
        self.driver = subprocess.Popen([CHROMEDRIVER, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
                                       stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        try:
            self._until(self._driver_ready, "chromedriver did not start")
            caps = {"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "pageLoadStrategy": "normal",
                "goog:loggingPrefs": {"browser": "ALL"},
                "goog:chromeOptions": {"binary": CHROMIUM, "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                    "--disable-background-networking", "--disable-sync", "--disable-features=Translate",
                    f"--user-data-dir={os.path.join(self.profile, 'chromium')}",
                    f"--window-size={self.size[0]},{self.size[1]}",
                ]},
            }}}
            answer = self._post_raw("/session", caps, timeout=60)
            self.session = answer["sessionId"]
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.session:
            try:
                self._call("DELETE", "", timeout=15)
            except (OSError, WebDriverError):
                pass
            self.session = None
        if self.driver and self.driver.poll() is None:
            self.driver.terminate()
            try:
                self.driver.wait(10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()
        shutil.rmtree(os.path.join(self.profile, "chromium"), ignore_errors=True)

    # -- the protocol ------------------------------------------------------------------

    def _driver_ready(self):
        try:
            with urllib.request.urlopen(self.base + "/status", timeout=2) as r:
                return json.loads(r.read())["value"].get("ready")
        except (OSError, ValueError, KeyError):
            return False

    def _post_raw(self, path, body, timeout=30, method="POST"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                answer = json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                value = json.loads(e.read())["value"]
            except (ValueError, KeyError):
                value = {"error": f"HTTP {e.code}", "message": ""}
            raise WebDriverError(f"{method} {path}: {value.get('error')}: {value.get('message', '')[:300]}") from None
        return answer["value"]

    def _call(self, method, path, body=None, timeout=30):
        return self._post_raw(f"/session/{self.session}{path}", body, timeout=timeout, method=method)

    def _until(self, predicate, what, bound=None):
        deadline = time.monotonic() + (bound or self.timeout)
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise WebDriverError(what)
            time.sleep(0.05)

    # -- what a test does ----------------------------------------------------------------

    def open(self, url):
        self._call("POST", "/url", {"url": url}, timeout=60)

    def url(self):
        return self._call("GET", "/url")

    def title(self):
        return self._call("GET", "/title")

    def source(self):
        return self._call("GET", "/source")

    def text(self):
        """The text a user reads on the page."""
        return self.script("return document.body ? document.body.innerText : ''")

    def script(self, js, *args):
        return self._call("POST", "/execute/sync", {"script": js, "args": list(args)})

    def query(self, selector):
        """The visible elements matching a CSS selector right now (no waiting)."""
        found = self._call("POST", "/elements", {"using": "css selector", "value": selector})
        shown = []
        for item in found:
            ref = item[ELEMENT]
            try:
                if self._call("GET", f"/element/{ref}/displayed"):
                    shown.append(Element(self, ref, selector))
            except WebDriverError:
                pass  # gone since it was found: the page is changing
        return shown

    def find(self, selector, bound=None):
        """The first visible element matching a CSS selector, waiting for it to appear."""
        return self._until(lambda: (self.query(selector) or [None])[0],
                           f"no visible {selector!r} on {self._where()}", bound)

    def fill(self, selector, text, tries=3):
        """Types into a form field and checks it holds the text: a page that renders its
        form again after loading may have swapped the field underneath (then: again)."""
        for _ in range(tries):
            try:
                if self.find(selector).type(text).value() == text:
                    return
            except WebDriverError:
                pass  # the element went stale while being typed into
        raise WebDriverError(f"{selector!r} does not keep what was typed on {self._where()}")

    def find_button(self, label, bound=None):
        """A visible button whose text contains `label` (case-insensitive)."""
        def look():
            for b in self.query("button"):
                try:
                    if label.lower() in b.text().lower():
                        return b
                except WebDriverError:
                    pass
            return None
        return self._until(look, f"no visible button {label!r} on {self._where()}", bound)

    def wait_for(self, predicate, what="the page", bound=None):
        return self._until(lambda: self._safe(predicate), f"waited in vain for {what} on {self._where()}", bound)

    def _safe(self, predicate):
        try:
            return predicate()
        except WebDriverError:
            return False  # the page was navigating

    def _where(self):
        try:
            return f"{self.title()!r} <{self.url().split('?')[0]}>: {self.text()[:300]!r}"
        except (OSError, WebDriverError):
            return "a page that cannot be read"

    def color_scheme(self, scheme):
        """Shows pages as a desktop set to `light` or `dark` would (prefers-color-scheme),
        through the DevTools protocol that chromedriver passes on."""
        self._call("POST", "/goog/cdp/execute", {"cmd": "Emulation.setEmulatedMedia", "params": {
            "features": [{"name": "prefers-color-scheme", "value": scheme}]}})

    def screenshot(self, path):
        """Saves what the browser shows as a PNG file."""
        png = base64.b64decode(self._call("GET", "/screenshot", timeout=60))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(png)
        return path
