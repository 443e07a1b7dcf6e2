"""Time slices of the daemon's threads as the kernel records them (/proc/PID/task/TID/sched):
the front door asks for a short one (docs/performance.md, "The first request after 60 s")."""
import ctypes
import os
import threading


def sched_field(path, name):
    with open(path) as f:
        for line in f:
            if line.startswith(name):
                return int(line.split(":")[1])
    return None


def kernel_honours_custom_slices():
    """sched_setattr's sched_runtime is a fair task's own slice from Linux 6.12 (EEVDF);
    older kernels accept it and keep the default. Tried on a thread of this test's own."""
    class SchedAttr(ctypes.Structure):  # struct sched_attr, linux/sched/types.h
        _fields_ = [("size", ctypes.c_uint32), ("sched_policy", ctypes.c_uint32), ("sched_flags", ctypes.c_uint64),
                    ("sched_nice", ctypes.c_int32), ("sched_priority", ctypes.c_uint32),
                    ("sched_runtime", ctypes.c_uint64), ("sched_deadline", ctypes.c_uint64),
                    ("sched_period", ctypes.c_uint64)]

    libc = ctypes.CDLL(None, use_errno=True)
    seen = []

    def probe():
        attr = SchedAttr(size=ctypes.sizeof(SchedAttr), sched_runtime=300_000)
        if libc.syscall(314, 0, ctypes.byref(attr), 0) == 0:  # SYS_sched_setattr on x86-64
            seen.append(sched_field(f"/proc/self/task/{threading.get_native_id()}/sched", "se.slice"))

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return seen == [300_000]


def door_slice(pid):
    """se.slice (ns) of the daemon's front door thread, authbroker-door."""
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/comm") as f:
            if f.read().strip() == "authbroker-door":
                return sched_field(f"/proc/{pid}/task/{t}/sched", "se.slice")
    raise AssertionError(f"no authbroker-door thread in {pid}")
