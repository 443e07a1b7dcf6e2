"""A desktop session of the test's own: a private D-Bus session bus that activates nothing
(no service folders, so no gnome-keyring appears unless the test starts one), a home and a
runtime folder of its own, and the environment that points there; then a Secret Service the
test starts on that bus, gnome-keyring (`start_gnome_keyring`) or KeePassXC
(`start_keepassxc`), which the test may stop, kill, lock or start again.

Used by test_faults.py, test_fault_soak.py and test_keepassxc.py."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile

from waiting import wait_until

SECRETS = "org.freedesktop.secrets"
GNOME_KEYRING_PASSWORD = "bare-password"  # the login keyring's throwaway password

BARE_BUS = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={folder}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def bare_bus(folder, path=None):
    """A D-Bus session bus with no Secret Service on it, and none to activate: unlike the
    stock session config it has no service folders (which would start gnome-keyring).
    With `path`, it listens there, so a bus started again is at the same address.
    Returns (address, the dbus-daemon's pid)."""
    config = os.path.join(folder, "bus.conf")
    with open(config, "w") as f:
        text = BARE_BUS.format(folder=folder)
        f.write(text.replace(f"unix:dir={folder}", f"unix:path={path}") if path else text)
    out = subprocess.check_output(["dbus-daemon", "--config-file=" + config, "--fork", "--print-address=1", "--print-pid=1"], text=True)
    address, pid = out.split()[:2]
    # Without the bus's guid, a client may connect to the bus started again there.
    return (address.split(",guid=")[0] if path else address), int(pid)


class PrivateSession:
    """The bus (`address`, `bus_pid`), the folders (`dir`, its `home` and `run`) and `env`,
    which every process of this session is started with (the daemon takes at least its
    DBUS_SESSION_BUS_ADDRESS). With `fixed_address` the bus listens at `run/bus`, so
    `restart_bus` brings it back at the same address, as a restarted user bus is."""

    def __init__(self, fixed_address=False, prefix="ab-bus-"):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.home = os.path.join(self.dir, "home")
        self.run = os.path.join(self.dir, "run")
        for folder in (self.home, self.run):
            os.makedirs(folder, mode=0o700)
        self.path = os.path.join(self.run, "bus") if fixed_address else None
        self.address, self.bus_pid = bare_bus(self.dir, self.path)
        self.env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.address, HOME=self.home,
                        XDG_CONFIG_HOME=os.path.join(self.home, ".config"),
                        XDG_DATA_HOME=os.path.join(self.home, ".local", "share"),
                        XDG_CACHE_HOME=os.path.join(self.home, ".cache"), XDG_RUNTIME_DIR=self.run)
        # Nothing of the desktop the suite runs in: its keyring, its screen.
        for name in ("GNOME_KEYRING_CONTROL", "DISPLAY", "WAYLAND_DISPLAY"):
            self.env.pop(name, None)
        self.keepassxc = None

    def call(self, dest, path, method, *args):
        """A D-Bus method call on this bus with dbus-send (its output, to parse)."""
        return subprocess.run(["timeout", "5", "dbus-send", "--session", "--print-reply", f"--dest={dest}", path, method, *args],
                              env=self.env, capture_output=True, text=True)

    def owner_pid(self, name=SECRETS):
        """The pid of the process that owns `name` on the bus (the Secret Service's), or None."""
        r = self.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID",
                      f"string:{name}")
        return int(r.stdout.split()[-1]) if r.returncode == 0 else None

    def start_gnome_keyring(self):
        """gnome-keyring-daemon (secrets only) on this bus, in this home, its login keyring
        unlocked with GNOME_KEYRING_PASSWORD; returns once it owns the Secret Service name."""
        subprocess.run(["timeout", "10", "gnome-keyring-daemon", "--unlock", "--daemonize", "--components=secrets"],
                       input=GNOME_KEYRING_PASSWORD, env=self.env, capture_output=True, text=True, check=True)
        wait_until(lambda: self.owner_pid() is not None, 10, "the keyring never appeared on the bus")

    def stop_gnome_keyring(self):
        """SIGTERM to the Secret Service's owner; returns once it has left the bus."""
        pid = self.owner_pid()
        if pid:
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: self.owner_pid() is None, 10, "the keyring never left the bus")

    def start_keepassxc(self, confirm_access):
        """KeePassXC on this bus as the Secret Service, its database open (see KeePassXC)."""
        self.keepassxc = KeePassXC(self, confirm_access)
        return self.keepassxc

    def restart_bus(self):
        """The bus and its Secret Service killed, then the bus started again at the same
        address (`fixed_address`), as when a user's session bus is restarted; no Secret
        Service on it yet."""
        pid = self.owner_pid()
        if pid:
            os.kill(pid, signal.SIGKILL)
        os.kill(self.bus_pid, signal.SIGKILL)
        os.unlink(self.path)
        address, self.bus_pid = bare_bus(self.dir, self.path)
        assert address == self.address

    def close(self):
        if self.keepassxc:
            self.keepassxc.close()
        else:
            self.stop_gnome_keyring()
        os.kill(self.bus_pid, signal.SIGTERM)
        shutil.rmtree(self.dir, ignore_errors=True)


KEEPASSXC_PASSWORD = "keepassxc-test-password"
EXPOSED = "6f1e2b3c-4d5e-4f60-8a71-92b3c4d5e6f7"
# The root group's UUID (the one above, base64) and the database setting that exposes it
# over the Secret Service: what KeePassXC's "Expose entries under this group" writes.
DATABASE_XML = f"""<?xml version="1.0" encoding="UTF-8"?>
<KeePassFile><Meta><Generator>authbroker-test</Generator><DatabaseName>authbroker test</DatabaseName>
<CustomData><Item><Key>FDO_SECRETS_EXPOSED_GROUP</Key><Value>{{{EXPOSED}}}</Value></Item></CustomData></Meta>
<Root><Group><UUID>bx4rPE1eT2CKcZKzxNXm9w==</UUID><Name>Root</Name></Group></Root></KeePassFile>
"""


def keepassxc_ini(confirm_access):
    return ("[General]\nConfigVersion=2\nSingleInstance=false\nRememberLastDatabases=false\n"
            "OpenPreviousDatabasesOnStartup=false\n\n[GUI]\nShowTrayIcon=false\nCheckForUpdates=false\n\n"
            "[Security]\nLockDatabaseIdle=false\n\n"
            f"[FdoSecrets]\nEnabled=true\nShowNotification=false\nConfirmDeleteItem=false\n"
            f"ConfirmAccessItem={'true' if confirm_access else 'false'}\n")


class KeePassXC:
    """The real KeePassXC, headless (Qt's offscreen platform), as the session's Secret
    Service: a database made for the test with its root group exposed, opened at start with
    --pw-stdin; with `confirm_access`, its Access Request dialog asks before it gives an
    item (nobody answers it here). Returns once the database is served unlocked."""

    def __init__(self, session, confirm_access):
        self.session = session
        session.env["QT_QPA_PLATFORM"] = "offscreen"
        config = os.path.join(session.env["XDG_CONFIG_HOME"], "keepassxc")
        os.makedirs(config, mode=0o700)
        with open(os.path.join(config, "keepassxc.ini"), "w") as f:
            f.write(keepassxc_ini(confirm_access))
        xml = os.path.join(session.dir, "database.xml")
        with open(xml, "w") as f:
            f.write(DATABASE_XML)
        self.database = os.path.join(session.dir, "authbroker.kdbx")
        subprocess.run(["keepassxc-cli", "import", "-q", "-p", "-t", "100", xml, self.database], env=session.env,
                       input=f"{KEEPASSXC_PASSWORD}\n{KEEPASSXC_PASSWORD}\n", capture_output=True, text=True, check=True,
                       timeout=30)
        self.log = open(os.path.join(session.dir, "keepassxc.log"), "w")
        self.proc = subprocess.Popen(["keepassxc", "--pw-stdin", self.database], env=session.env, stdin=subprocess.PIPE,
                                     stdout=self.log, stderr=self.log, text=True)
        self.proc.stdin.write(KEEPASSXC_PASSWORD + "\n")
        self.proc.stdin.close()
        wait_until(lambda: self.collection_locked() is False, 20, "KeePassXC never served its database on the bus")

    def collection_locked(self):
        """Whether KeePassXC's default collection is locked (None: not there)."""
        alias = self.session.call(SECRETS, "/org/freedesktop/secrets", "org.freedesktop.Secret.Service.ReadAlias",
                                  "string:default")
        found = re.search(r'object path "([^"]+)"', alias.stdout)
        if alias.returncode != 0 or not found or found.group(1) == "/":
            return None
        r = self.session.call(SECRETS, found.group(1), "org.freedesktop.DBus.Properties.Get",
                              "string:org.freedesktop.Secret.Collection", "string:Locked")
        return None if r.returncode != 0 else "true" in r.stdout

    def lock(self):
        """Locks the database as KeePassXC's "Lock databases" does."""
        r = self.session.call("org.keepassxc.KeePassXC.MainWindow", "/keepassxc",
                              "org.keepassxc.KeePassXC.MainWindow.lockAllDatabases")
        assert r.returncode == 0, r.stderr
        wait_until(lambda: self.collection_locked() is True, 10, "KeePassXC's database did not lock")

    def stored_refresh_token(self, provider):
        """The refresh token KeePassXC holds for the provider, read with secret-tool as
        another client would (None when there is none or it cannot be read)."""
        r = subprocess.run(["timeout", "10", "secret-tool", "search", "--all", "provider", provider],
                           env=self.session.env, capture_output=True, text=True)
        found = re.search(r"^secret = (.*)$", r.stdout, re.M)
        try:
            return json.loads(found.group(1)).get("refresh_token") if found else None
        except ValueError:
            return None

    def close(self):
        # KeePassXC may not end on SIGTERM while one of its dialogs is open.
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
