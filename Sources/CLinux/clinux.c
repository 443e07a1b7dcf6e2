#define _GNU_SOURCE
#include "clinux.h"
#include <unistd.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <pthread.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>

int clinux_set_nondumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
int clinux_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
int clinux_malloc_trim(void) { return malloc_trim(0); }
int clinux_malloc_configure(int heaps) {
    return mallopt(M_ARENA_MAX, heaps) == 1 && mallopt(M_TRIM_THRESHOLD, 128 * 1024) == 1
        && mallopt(M_TOP_PAD, 0) == 1;
}
size_t clinux_malloc_free_bytes(void) { return mallinfo2().fordblks; }

int clinux_epoll_ctl(int epoll, int op, int fd, unsigned int events) {
    struct epoll_event ev = { .events = events, .data.fd = fd };
    return epoll_ctl(epoll, op, fd, &ev);
}

int clinux_epoll_wait(int epoll, int *fds, unsigned int *events, int max, int timeout) {
    struct epoll_event ready[64];
    if (max > 64) max = 64;
    int n = epoll_wait(epoll, ready, max, timeout);
    for (int i = 0; i < n; i++) {
        fds[i] = ready[i].data.fd;
        events[i] = ready[i].events;
    }
    return n;
}

int clinux_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

void clinux_name_thread(const char *name) { pthread_setname_np(pthread_self(), name); }

int clinux_request_slice(unsigned long long nanoseconds) {
    /* struct sched_attr (linux/sched/types.h), spelled out: glibc's own sched.h declares it
       in some versions and not in others. */
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } attr = {0};
    int policy = sched_getscheduler(0);
    if (policy < 0) return -errno;
    if (policy != SCHED_OTHER && policy != SCHED_BATCH && policy != SCHED_IDLE) return 0;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0); /* the calling thread's, on Linux */
    if (nice == -1 && errno != 0) return -errno;
    attr.size = sizeof attr;
    attr.policy = (uint32_t)policy;
    attr.nice = nice;
    attr.runtime = nanoseconds;
    return syscall(SYS_sched_setattr, 0, &attr, 0) == 0 ? 0 : -errno;
}
