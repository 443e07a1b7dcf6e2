#ifndef AUTHBROKER_CLINUX_H
#define AUTHBROKER_CLINUX_H
#include <sys/types.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

/// prctl(PR_SET_DUMPABLE, 0): no core dumps, no ptrace attach by other processes of the user.
int clinux_set_nondumpable(void);
/// 1 when the process is dumpable, 0 when not, -1 on error.
int clinux_is_dumpable(void);
/// malloc_trim(0): returns the heap's free pages to the system (glibc).
int clinux_malloc_trim(void);
/// Unmaps the pages of the read-only segments (code, read-only data) of the executable and
/// its loaded libraries, found through the loader (dl_iterate_phdr): they stay in the page
/// cache and come back on the next access as minor faults. Relocated (RELRO) and writable
/// segments are kept. Returns the bytes of address space advised.
long clinux_release_file_pages(void);
/// epoll_ctl with the descriptor itself as the event's data (`struct epoll_event` is packed
/// on x86-64, which Swift does not import faithfully).
int clinux_epoll_ctl(int epoll, int op, int fd, unsigned int events);
/// epoll_wait that writes each ready descriptor and its events into two arrays of `max`.
int clinux_epoll_wait(int epoll, int *fds, unsigned int *events, int max, int timeout);
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC (accept4 is a GNU extension Swift does not see).
int clinux_accept(int fd);
/// Names the calling thread (pthread_setname_np, at most 15 bytes): ps and top show it.
void clinux_name_thread(const char *name);
#endif
