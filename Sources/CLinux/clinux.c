#include "clinux.h"
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

int clinux_set_nondumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
int clinux_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
int clinux_malloc_trim(void) { return malloc_trim(0); }

/* Whether a VmFlags line of smaps names a flag that rules MADV_DONTNEED out or makes it
   pointless: locked (lo), PFN or I/O mappings (pf, io). */
static int has_blocking_flag(const char *flags) {
    static const char *const blocking[] = {" lo", " pf", " io"};
    for (size_t i = 0; i < sizeof blocking / sizeof blocking[0]; i++) {
        const char *p = flags;
        while ((p = strstr(p, blocking[i])) != NULL) {
            char after = p[3];
            if (after == ' ' || after == '\n' || after == '\0') return 1;
            p += 3;
        }
    }
    return 0;
}

long clinux_release_file_pages(void) {
    FILE *smaps = fopen("/proc/self/smaps", "re");
    if (smaps == NULL) return -1;
    char line[4096];
    unsigned long start = 0, end = 0;
    long anonymous = -1, released = 0;
    int candidate = 0, whole_line = 1;
    while (fgets(line, sizeof line, smaps) != NULL) {
        int continuation = !whole_line;
        whole_line = strchr(line, '\n') != NULL;
        if (continuation) continue; /* the rest of an overlong path */
        unsigned long a, b;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &a, &b, perms, &path_at) == 3) {
            start = a;
            end = b;
            anonymous = -1;
            /* A file's pages, never written: private pages that were (relocations) are
               Anonymous and would be lost, so any mapping with one is left alone. */
            candidate = strlen(perms) == 4 && perms[1] == '-' && path_at > 0 && line[path_at] == '/';
            continue;
        }
        if (!candidate) continue;
        if (strncmp(line, "Anonymous:", 10) == 0) {
            anonymous = strtol(line + 10, NULL, 10);
        } else if (strncmp(line, "VmFlags:", 8) == 0) {
            if (anonymous == 0 && !has_blocking_flag(line + 8) && end > start &&
                madvise((void *)start, end - start, MADV_DONTNEED) == 0) {
                released += (long)(end - start);
            }
            candidate = 0;
        }
    }
    fclose(smaps);
    return released;
}
