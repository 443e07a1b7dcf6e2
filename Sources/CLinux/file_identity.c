#define _GNU_SOURCE
#include "file_identity.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

int clinux_file_identity(const char *path, uint64_t *device, uint64_t *inode, int64_t *stamp) {
    struct statx st;
    // statx is not in Swift's view of glibc (a GNU extension), hence this helper.
    if (statx(AT_FDCWD, path, 0, STATX_INO | STATX_CTIME | STATX_BTIME, &st) != 0) return -1;
    *device = (uint64_t)makedev(st.stx_dev_major, st.stx_dev_minor);
    *inode = st.stx_ino;
    struct statx_timestamp t = (st.stx_mask & STATX_BTIME) ? st.stx_btime : st.stx_ctime;
    *stamp = (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_nsec;
    return 0;
}
