"""Traces of the Debian package (or another system-wide install) on this machine.

test_package.py installs the package and purges it, so it needs a machine without it;
scripts/test asks this file first (`python3 installed_package.py`: exit 1 and a sentence
when something is there), so that a whole run stops at once instead of failing the
package's tests at its end.
"""
import glob
import os
import subprocess
import sys

# What deb-systemd-helper makes to enable the socket for every user, and remembers.
ENABLED_LINK = "/etc/systemd/user/sockets.target.wants/authbroker.socket"
HELPER_STATE = "/var/lib/systemd/deb-systemd-user-helper-enabled"


def leftovers():
    """Every trace of the package on the machine: its files, the enabling link, dpkg's and
    deb-systemd-helper's records."""
    found = [p for p in (ENABLED_LINK, "/usr/bin/authctl", "/usr/bin/authbrokerd",
                         "/usr/lib/systemd/user/authbroker.service", "/usr/lib/systemd/user/authbroker.socket",
                         "/usr/share/doc/authbroker") if os.path.lexists(p)]
    found += glob.glob("/var/lib/dpkg/info/authbroker.*")
    found += [os.path.join(d, f) for d, _, files in os.walk(HELPER_STATE) for f in files if "authbroker" in f]
    return found


def dpkg_status():
    """dpkg's two-letter status of the package ("ii" installed, "rc" removed with its
    configuration left), or None when dpkg has no trace of it."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", "authbroker"], capture_output=True, text=True)
    status = r.stdout.strip()
    return status if r.returncode == 0 and len(status) >= 2 and status[1] != "n" else None


def already_installed():
    """A sentence saying what is installed and how to remove it, or None when nothing is."""
    status, found = dpkg_status(), leftovers()
    if status:
        return (f"authbroker is installed system-wide (dpkg status {status}"
                f"{': ' + ', '.join(found) if found else ''}), and test_package.py installs and purges "
                "the package itself: remove it with `sudo apt-get purge authbroker`, then run the tests again.")
    if found:
        return (f"files of another system-wide authbroker install are on this machine ({', '.join(found)}), "
                "and test_package.py installs and purges the package itself: remove them "
                "(`sudo scripts/uninstall --prefix /usr` if scripts/install put them there, otherwise delete them), then run the tests again.")
    return None


if __name__ == "__main__":
    sentence = already_installed()
    if sentence:
        print(sentence, file=sys.stderr)
        sys.exit(1)
