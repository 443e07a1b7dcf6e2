#ifndef AUTHBROKER_CLINUX_H
#define AUTHBROKER_CLINUX_H
#include <sys/types.h>

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
#endif
