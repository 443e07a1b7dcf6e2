"""Headless hosts (docs/integrations.md, "Headless hosts"): a daemon with
`store = "kernel-keyring"`, no session bus at all and confined by Landlock, started in a
private session keyring as systemd's KeyringMode=private starts it. It signs in with the
real Glewlwyd, is killed (SIGKILL: no orderly shutdown) and started again, and serves a
token without a new sign-in, twice (a rotating provider: each refresh stores a new refresh
token). The refresh token is in the kernel's keyring, readable there with `keyctl` like
any other key of the user, and in no file; `authctl logout` destroys the key."""
import json
import os
import signal
import subprocess

from conftest import API, Daemon, files_outside_the_keyring

# The daemon's session keyring leads nowhere, as under authbroker.service.
PRIVATE_SESSION = ("keyctl", "session", "-")


def keyctl(*args):
    return subprocess.run(["keyctl", *args], capture_output=True, text=True, timeout=10)


def stored_key(provider):
    """(serial, permissions, payload bytes) of the daemon's key for `provider`, read as
    another process of the user would, or None."""
    ring = keyctl("search", "@u", "keyring", "authbroker")
    if ring.returncode != 0:
        return None
    for serial in keyctl("rlist", ring.stdout.strip()).stdout.split():
        described = keyctl("rdescribe", serial)  # type;uid;gid;perm;description
        if described.returncode != 0 or described.stdout.count(";") < 4:
            # Revoked or unlinked since the listing (logout): the kernel's garbage collector
            # takes such a key out of the keyring's list on its own time, and it is unreadable.
            continue
        kind, _, _, perm, description = described.stdout.strip().split(";", 4)
        if kind == "user" and description.startswith(f"authbroker:{provider} "):
            payload = subprocess.run(["keyctl", "pipe", serial], capture_output=True, timeout=10).stdout
            return serial, perm, payload
    return None


def headless_daemon(gl):
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    d = Daemon(gl, store="kernel-keyring", extra_env={"AUTHBROKER_SANDBOX": "on"})
    d.env = dict(env, AUTHBROKER_SOCKET=d.socket, AUTHBROKER_SANDBOX="on")
    return d


def test_a_kernel_keyring_daemon_keeps_its_sign_in_across_a_kill_and_restart(glewlwyd):
    d = headless_daemon(glewlwyd)
    secrets = []
    try:
        d.start(wrapper=PRIVATE_SESSION)
        assert d.status()["store"] == "kernel-keyring"
        d.login_device("alice")
        first = d.ctl("token", "--resource", API)
        assert first.returncode == 0, first.stderr
        secrets.append(first.stdout.strip())

        for resource in (API, API):  # Glewlwyd narrows a rotated refresh token to its resource
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            d.start(wrapper=PRIVATE_SESSION)
            accounts = d.rpc("account.list")["result"]["accounts"]
            assert [a["state"] for a in accounts] == ["ready"], accounts
            r = d.ctl("token", "--resource", resource)
            assert r.returncode == 0, f"no token after a restart: {r.stderr}\n{d.log_text()}"
            secrets.append(r.stdout.strip())

        item = stored_key(d.name)
        assert item is not None, "no key for the provider in the keyring authbroker of @u"
        serial, perm, payload = item
        # The kernel's default for a new key: everything for its possessor, "view" for the user.
        assert perm == "3f010000", perm
        label, _, secret = payload.partition(b"\0")
        assert d.name.encode() in label and b"refresh_token" in secret
        stored = json.loads(secret)
        secrets += [stored["refresh_token"]] + ([stored["id_token"]] if stored.get("id_token") else [])

        out = d.ctl("logout")
        assert out.returncode == 0, out.stderr
        assert stored_key(d.name) is None, "logout left the key in the keyring"
    finally:
        d.stop()
        leftover = stored_key(d.name)
        if leftover:
            keyctl("invalidate", leftover[0])

    assert all(len(s) >= 16 for s in secrets) and len(secrets) >= 4
    texts = [("daemon log", d.log_text())]
    home = os.environ.get("AUTHBROKER_TEST_HOME", os.environ["HOME"])
    found = [(where, i) for where, data in [*texts, *((p, b.decode("latin-1")) for p, b in files_outside_the_keyring(d.dir, home))]
             for i, s in enumerate(secrets) if s in data]
    d.cleanup()
    assert found == [], "secrets found outside the kernel keyring: " + "; ".join(f"secret #{i} in {w}" for w, i in found)
