"""A wall clock that a test steps while the process runs: libfaketime (Debian's `faketime`
package) preloaded, its offset read from a file on every clock read (FAKETIME_NO_CACHE), so
writing the file steps the process's CLOCK_REALTIME (and time(), gettimeofday()) by that
many seconds from the true time at once, either way.

CLOCK_MONOTONIC and CLOCK_BOOTTIME are not faked (FAKETIME_DONT_FAKE_MONOTONIC=1; libfaketime
0.9.10, Debian 12's, leaves CLOCK_BOOTTIME with the monotonic clocks then), as an NTP step
or `date -s` leaves them: what the broker counts its deadlines on must not move.

The file goes in a folder the process may read: for authbrokerd its configuration's folder,
which its confinement (Landlock, docs/security.md) lets it read.

FAKETIME_SHARED is set (to objects that do not exist): without it libfaketime's constructor
adds it to the environment with setenv(), which moves `environ` off the initial stack
before Swift's runtime looks there for argv, and a Swift program then sees no arguments
(swiftlang/swift#76080). Set, it is only overwritten in place: each process makes its own
semaphore and shared memory (/dev/shm/*faketime*_PID), removed at its exit; `forget`
removes those of a process that was SIGKILLed."""
import os

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


class FakeClock:
    def __init__(self, folder, name="faketime"):
        self.path = os.path.join(folder, name)
        self.offset = 0
        self.step(0)

    @staticmethod
    def available():
        return os.path.exists(LIBFAKETIME)

    def env(self):
        """What the process is started with."""
        return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME_TIMESTAMP_FILE": self.path, "FAKETIME_NO_CACHE": "1",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_SHARED": "/faketime_sem_none /faketime_shm_none"}

    @staticmethod
    def forget(pid):
        """Removes what libfaketime made for a process that could not remove it (SIGKILLed)."""
        for name in (f"/dev/shm/sem.faketime_sem_{pid}", f"/dev/shm/faketime_shm_{pid}"):
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass

    def step(self, offset):
        """The process's wall clock `offset` seconds from the true time from now on, written
        by a rename, so no clock read meets a half-written file."""
        self.offset = offset
        partial = self.path + ".new"
        with open(partial, "w") as f:
            f.write(f"{int(offset):+d}\n")
        os.rename(partial, self.path)
