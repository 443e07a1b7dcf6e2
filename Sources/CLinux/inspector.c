/* The caller-identification helper (docs/security.md, "Confinement"). The daemon confines
   itself with Landlock, and a Landlock domain cannot ptrace-access a process outside it:
   the kernel then refuses it /proc/PID/exe and /proc/PID/ns/* of every caller. So before
   confining itself the daemon forks this helper, which stays outside the domain and only
   opens those three files of the pid it is asked about and hands the descriptors back.
   The child runs system calls only (it may be forked from a process with threads), never
   allocates, and exits when the daemon's end of the socketpair closes. */
#define _GNU_SOURCE
#include "clinux.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

struct question { uint32_t serial; int32_t pid; int32_t namespaces; };
struct answer { uint32_t serial; int32_t errors[3]; };

/* "/proc/<pid>/<leaf>" without stdio (not async-signal-safe). */
static void proc_path(char *out, int32_t pid, const char *leaf) {
    char digits[16];
    int n = 0;
    uint32_t v = (uint32_t)pid;
    do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v && n < 15);
    memcpy(out, "/proc/", 6);
    int at = 6;
    while (n) out[at++] = digits[--n];
    out[at++] = '/';
    size_t len = strlen(leaf);
    memcpy(out + at, leaf, len + 1);
}

static void send_answer(int sock, const struct answer *a, const int *fds, int count) {
    struct iovec iov = { .iov_base = (void *)a, .iov_len = sizeof *a };
    union { char buf[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr align; } control;
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (count > 0) {
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE((size_t)count * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)count * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)count * sizeof(int));
    }
    while (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {}
}

static void serve(int sock) {
    static const char *const leaves[3] = { "exe", "ns/mnt", "ns/user" };
    for (;;) {
        struct question q;
        ssize_t n = recv(sock, &q, sizeof q, 0);
        if (n == 0) _exit(0);  /* the daemon is gone */
        if (n < 0) {
            if (errno == EINTR) continue;
            _exit(1);
        }
        struct answer a = { .serial = q.serial, .errors = { EINVAL, EINVAL, EINVAL } };
        int fds[3];
        int count = 0;
        if (n == (ssize_t)sizeof q && q.pid > 0) {
            for (int i = 0; i < 3; i++) {
                if (i > 0 && !q.namespaces) { a.errors[i] = ENODATA; continue; }
                char path[64];
                proc_path(path, q.pid, leaves[i]);
                int fd = open(path, O_PATH | O_CLOEXEC);
                a.errors[i] = fd < 0 ? errno : 0;
                if (fd >= 0) fds[count++] = fd;
            }
        }
        send_answer(sock, &a, fds, count);
        for (int i = 0; i < count; i++) close(fds[i]);
    }
}

int clinux_inspector_start(pid_t *helper) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return -1;
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        int saved = errno;
        close(sv[0]);
        close(sv[1]);
        errno = saved;
        return -1;
    }
    if (child == 0) {
        int sock = sv[1];
        /* Dies with the daemon, and holds nothing of it: not its listening socket (fd 3
           under socket activation), not its signal mask or handlers. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int s = 1; s < NSIG; s++) sigaction(s, &dfl, NULL);
        if (sock > 3) syscall(SYS_close_range, 3, sock - 1, 0);
        syscall(SYS_close_range, sock + 1, ~0U, 0);
        prctl(PR_SET_NAME, "authbroker-id");
        prctl(PR_SET_DUMPABLE, 0);
        struct rlimit few = { 16, 16 };
        setrlimit(RLIMIT_NOFILE, &few);
        serve(sock);
        _exit(0);
    }
    close(sv[1]);
    *helper = child;
    return sv[0];
}

int clinux_inspector_ask(int fd, unsigned int serial, pid_t pid, int namespaces, int timeout_ms, int fds[3], int errors[3]) {
    for (int i = 0; i < 3; i++) { fds[i] = -1; errors[i] = EIO; }
    struct question q = { .serial = serial, .pid = pid, .namespaces = namespaces };
    ssize_t sent;
    while ((sent = send(fd, &q, sizeof q, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
    if (sent != (ssize_t)sizeof q) return -1;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int ready = poll(&p, 1, timeout_ms);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            errno = ready == 0 ? ETIMEDOUT : errno;
            return -1;
        }
        struct answer a;
        union { char buf[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr align; } control;
        struct iovec iov = { .iov_base = &a, .iov_len = sizeof a };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf };
        ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
            if (n == 0) errno = EPIPE;
            return -1;
        }
        int got[3];
        int count = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k; i++) {
                int d;
                memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof d);
                if (count < 3) got[count++] = d; else close(d);
            }
        }
        /* An answer to an earlier question that timed out: drop it and keep waiting. */
        if (n != (ssize_t)sizeof a || a.serial != serial) {
            for (int i = 0; i < count; i++) close(got[i]);
            continue;
        }
        int next = 0;
        for (int i = 0; i < 3; i++) {
            errors[i] = a.errors[i];
            if (a.errors[i] == 0) {
                if (next < count) fds[i] = got[next++]; else errors[i] = EIO;
            }
        }
        for (; next < count; next++) close(got[next]);
        return 0;
    }
}
