#define _GNU_SOURCE
#include "clinux.h"
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <unistd.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <pthread.h>

int clinux_set_nondumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
int clinux_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
int clinux_malloc_trim(void) { return malloc_trim(0); }

/* The read-only segments of every loaded object, from the loader's own program headers:
   a segment without PF_W, outside PT_GNU_RELRO (which relocation wrote), in an object
   without text relocations, holds the file's bytes as they are, so MADV_DONTNEED only
   makes them fault in again from the page cache. Only whole pages inside such a segment
   are dropped, so a page it shares with a writable neighbour is kept. The objects come
   from the loader, not from /proc/self/smaps: a mapping seen there could be a library
   another thread is loading, whose writable segment is about to be mapped over part of it
   and relocated; dl_iterate_phdr names an object only once its segments are in place. */
static int release_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    long *released = data;
    /* the kernel's vDSO is no file */
    if (info->dlpi_name != NULL && strncmp(info->dlpi_name, "linux-vdso", 10) == 0) return 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t relro_start = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_RELRO) {
            relro_start = info->dlpi_addr + ph->p_vaddr;
            relro_end = relro_start + ph->p_memsz;
        } else if (ph->p_type == PT_DYNAMIC) {
            for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr); d->d_tag != DT_NULL; d++) {
                if (d->d_tag == DT_TEXTREL || (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL))) return 0;
            }
        }
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || ph->p_filesz == 0) continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        uintptr_t end = start + ph->p_filesz;  /* past p_filesz: zero fill, not the file */
        start = (start + page - 1) & ~(page - 1);
        end &= ~(page - 1);
        if (relro_end > relro_start && start < relro_end && relro_start < end) {
            /* keep the RELRO pages: release what lies before them only */
            end = relro_start & ~(page - 1);
        }
        if (end > start && madvise((void *)start, end - start, MADV_DONTNEED) == 0) {
            *released += (long)(end - start);
        }
    }
    return 0;
}

long clinux_release_file_pages(void) {
    long released = 0;
    dl_iterate_phdr(release_object, &released);
    return released;
}

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
