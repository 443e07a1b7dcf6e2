"""Offline and back (issue 37 item 7): the real daemon in a network namespace of its own,
whose network the test takes away and gives back with `ip`, as a laptop loses and finds
its network. A request that cannot leave the computer is answered at once (-32004 with the
reason) instead of after refresh_timeout (60 s here, so a wait shows), and once a route,
an address or a link comes back the next request goes to the provider at once, although
the back-off had said "try again in N s" (the daemon's netlink watch).

The provider is the STUB provider (support/stub_provider.py) on 127.77.0.1 inside the
namespace: Glewlwyd binds 127.0.0.1 of the test's own namespace, which the daemon's cannot
reach. The session bus and gnome-keyring are reached through their socket paths (path
sockets are shared across network namespaces; abstract ones are not).
"""
import ctypes
import os
import shutil
import subprocess
import time

import pytest

from conftest import API, RPC, Daemon
from stub_provider import StubProvider

HOST = "127.77.0.1"
CLONE_NEWNET = 0x40000000

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"),
                                reason="needs root, unshare and nsenter for a network namespace")


class Namespace:
    """A network namespace held by a sleeping process, with `lo` up."""

    def __init__(self):
        self.holder = subprocess.Popen(["unshare", "-n", "sleep", "infinity"])
        self.path = f"/proc/{self.holder.pid}/ns/net"
        deadline = time.monotonic() + 5
        while os.readlink(self.path) == os.readlink("/proc/self/ns/net"):
            assert time.monotonic() < deadline, "unshare -n made no namespace"
            time.sleep(0.01)
        self.ip("link", "set", "lo", "up")

    def ip(self, *args):
        subprocess.run(["nsenter", f"--net={self.path}", "ip", *args], check=True)

    def inside(self, make):
        """`make()` run with this thread in the namespace: the sockets it opens live there."""
        libc = ctypes.CDLL(None, use_errno=True)
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        there = os.open(self.path, os.O_RDONLY)
        try:
            assert libc.setns(there, CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())
            try:
                return make()
            finally:
                assert libc.setns(home, CLONE_NEWNET) == 0, os.strerror(ctypes.get_errno())
        finally:
            os.close(home)
            os.close(there)

    def close(self):
        self.holder.kill()
        self.holder.wait()


@pytest.fixture
def offline_world():
    """(namespace, STUB provider on HOST, daemon signed in there): tokens live 10 s and
    every request refreshes (refresh_margin 120 s); `min_ttl` 6 keeps the cache's token
    from standing in for a refresh that failed."""
    bus = os.environ.get("DBUS_SESSION_BUS_ADDRESS", "")
    if not bus.startswith("unix:path="):
        pytest.skip("the session bus is not at a socket path, which the daemon's namespace could not reach")
    ns = Namespace()
    stub = ns.inside(lambda: StubProvider(access_token_life=10, host=HOST).start())
    d = Daemon(None)
    d.write_config(text=(
        '[daemon]\nstore = "secret-service"\nrefresh_margin = 120\nhttp_timeout = 60\nrefresh_timeout = 60\n\n'
        f'[providers.{d.name}]\nissuer = "{stub.issuer}"\nclient_id = "{stub.client_id}"\n'
        f'scopes = ["openid", "offline_access"]\nresources = ["{API}"]\n'))
    try:
        d.start(wrapper=("nsenter", f"--net={ns.path}"))
        r = d.ctl("login", "--device", "--provider", d.name, timeout=30)
        assert r.returncode == 0, f"sign-in at the STUB failed ({r.returncode}): {r.stderr}\n{d.log_text()}"
        assert "watch this computer's network" not in d.log_text()
        yield ns, stub, d
    finally:
        d.cleanup()
        stub.stop()
        ns.close()


def call(d):
    """token.get as a program calls it: (answer, seconds it took)."""
    started = time.monotonic()
    c = RPC(d.socket, timeout=120)
    try:
        answer = c.call("token.get", {"provider": d.name, "resource": API, "min_ttl": 6})
    finally:
        c.close()
    return answer, time.monotonic() - started


def wait_for_cache_to_tire():
    """Until the cached token (10 s) has less than min_ttl (6 s) left."""
    time.sleep(4.5)


def backed_off_to(d, seconds):
    """Fails refreshes, waiting out each back-off, until the back-off says `seconds`."""
    while True:
        answer, took = call(d)
        assert "error" in answer, answer
        assert answer["error"]["code"] == -32004, answer
        assert took < 20, f"{took:.1f} s for {answer}: the request waited for refresh_timeout"
        wait = answer["error"]["data"]["retry_after"]
        if wait >= seconds:
            return answer
        time.sleep(wait + 0.1)


def served_soon_after(d, change, back_off):
    """After `change()`, the first token.get that is served: within a fraction of the
    `back_off` seconds the daemon had said to wait."""
    change()
    started = time.monotonic()
    while True:
        answer, _ = call(d)
        if "result" in answer:
            return time.monotonic() - started
        assert time.monotonic() - started < back_off / 2, \
            f"not served {back_off / 2} s after the network came back: {answer}\n{d.log_text()[-2000:]}"
        time.sleep(0.05)


def test_no_route_is_answered_at_once_and_a_new_address_ends_the_back_off(offline_world):
    ns, stub, d = offline_world
    wait_for_cache_to_tire()
    # No route to 127.77.0.1 any more (the kernel's local route for 127.0.0.0/8 goes; the
    # stub keeps listening on it).
    ns.ip("route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local")
    answer, took = call(d)
    assert answer.get("error", {}).get("code") == -32004, answer
    message = answer["error"]["message"]
    assert f"no route to {HOST}:{stub.port}" in message and "connect to a network" in message, message
    assert took < 20, f"{took:.1f} s: the request waited for refresh_timeout (60 s)"
    refused = backed_off_to(d, 4)
    assert "try again in" in refused["error"]["message"]

    refreshes = stub.counts()[1]
    took = served_soon_after(d, lambda: ns.ip("addr", "add", f"{HOST}/32", "dev", "lo"), back_off=4)
    assert stub.counts()[1] > refreshes, "no refresh reached the provider"
    assert "network changed" in d.log_text()
    print(f"served {took:.2f} s after the address came back (back-off said 4 s)")


def test_a_link_that_is_down_is_answered_at_once_and_its_return_ends_the_back_off(offline_world):
    ns, stub, d = offline_world
    wait_for_cache_to_tire()
    # lo down keeps its routes: connect would wait, its packets going nowhere.
    ns.ip("link", "set", "lo", "down")
    answer, took = call(d)
    assert answer.get("error", {}).get("code") == -32004, answer
    assert "loopback interface (lo) is down" in answer["error"]["message"], answer
    assert took < 20, f"{took:.1f} s: the request waited for refresh_timeout (60 s)"
    backed_off_to(d, 4)
    took = served_soon_after(d, lambda: ns.ip("link", "set", "lo", "up"), back_off=4)
    print(f"served {took:.2f} s after lo came up again (back-off said 4 s)")
