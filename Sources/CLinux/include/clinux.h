#ifndef AUTHBROKER_CLINUX_H
#define AUTHBROKER_CLINUX_H
#include <sys/types.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include "file_identity.h"
#include "route_watch.h"

/// prctl(PR_SET_DUMPABLE, 0): no core dumps, no ptrace attach by other processes of the user.
int clinux_set_nondumpable(void);
/// 1 when the process is dumpable, 0 when not, -1 on error.
int clinux_is_dumpable(void);
/// malloc_trim(0): returns the heap's free pages to the system (glibc).
int clinux_malloc_trim(void);
/// Shapes glibc's malloc for a long-running daemon; call before other threads start. At
/// most `heaps` heaps (M_ARENA_MAX, counting the main one: glibc's default is 8 per CPU, one
/// per thread here), so that fewer partly used heaps hold the daemon's few long-lived
/// allocations. A heap that shrinks hands back all of its free top (M_TOP_PAD 0, glibc keeps
/// 128 KiB of it resident by default), past a trim threshold fixed at its default of 128 KiB
/// (either setting also fixes the mmap threshold at 128 KiB: no dynamic threshold, which a
/// freed large buffer would raise, and the trim threshold with it, to twice its size).
/// 1 on success.
int clinux_malloc_configure(int heaps);
/// Bytes the heap holds free (mallinfo2's fordblks, every arena): what a trim could hand
/// back, resident or not.
size_t clinux_malloc_free_bytes(void);
/// epoll_ctl with the descriptor itself as the event's data (`struct epoll_event` is packed
/// on x86-64, which Swift does not import faithfully).
int clinux_epoll_ctl(int epoll, int op, int fd, unsigned int events);
/// epoll_wait that writes each ready descriptor and its events into two arrays of `max`.
int clinux_epoll_wait(int epoll, int *fds, unsigned int *events, int max, int timeout);
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC (accept4 is a GNU extension Swift does not see).
int clinux_accept(int fd);
/// Names the calling thread (pthread_setname_np, at most 15 bytes): ps and top show it.
void clinux_name_thread(const char *name);
/// Asks the scheduler for a time slice of `nanoseconds` for the calling thread
/// (sched_setattr's sched_runtime for a fair-class thread: Linux 6.12's EEVDF clamps it to
/// 0.1–100 ms), keeping its policy and nice value. 0, or -errno (-EPERM when a system-call
/// filter refuses it); a thread under a real-time policy is left alone (0).
int clinux_request_slice(unsigned long long nanoseconds);
/// Starts the caller-identification helper (docs/security.md, "Confinement"): a child
/// process, forked before the daemon confines itself and so outside its Landlock domain,
/// that only answers what a process runs. Returns the daemon's end of a SOCK_SEQPACKET
/// socketpair (close-on-exec) and the helper's pid in *helper, or -1 with errno set.
/// Call while the daemon has one thread: the child runs only system calls.
int clinux_inspector_start(pid_t *helper);
/// Asks the helper for descriptors of /proc/PID/exe (O_PATH) and, when `namespaces` is
/// set, of /proc/PID/ns/mnt and /proc/PID/ns/user. fds[i] is -1 where the helper could
/// not open it and errors[i] says why (an errno). Waits at most `timeout_ms` for the
/// answer. Returns 0, or -1 with errno set when the helper did not answer (gone, stopped).
/// Not thread-safe: one question at a time per descriptor.
int clinux_inspector_ask(int fd, unsigned int serial, pid_t pid, int namespaces, int timeout_ms, int fds[3], int errors[3]);

/// The Landlock ABI version of the running kernel, or -errno: -ENOSYS without Landlock,
/// -EOPNOTSUPP when it is built but off, -EPERM when a system-call filter refuses it.
int clinux_landlock_abi(void);
/// A Landlock ruleset handling `fs` (LANDLOCK_ACCESS_FS_* bits) and `scoped`
/// (LANDLOCK_SCOPE_* bits, ABI 6); a descriptor, or -1 with errno set.
int clinux_landlock_ruleset(unsigned long long fs, unsigned long long scoped);
/// Allows `access` beneath `path` (a folder) or on it (a file). 0, or -1 with errno set.
int clinux_landlock_allow(int ruleset, const char *path, unsigned long long access);
/// Sets no_new_privs and enforces the ruleset on the calling thread and its future
/// threads and children. 0, or -1 with errno set.
int clinux_landlock_enforce(int ruleset);
/// The number of threads of the process (/proc/self/task), or -1.
int clinux_thread_count(void);
#endif
