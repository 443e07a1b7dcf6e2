#ifndef AUTHBROKER_FILE_IDENTITY_H
#define AUTHBROKER_FILE_IDENTITY_H
#include <stdint.h>

/// statx of `path`, following symbolic links (so `/proc/PID/exe` gives the running
/// program's file): its device (as `st_dev`), inode number, and a stamp that changes when
/// the file system gives the inode number to a new file: the birth time in nanoseconds
/// since the epoch where the file system records one, else the last status change
/// (ctime). 0 on success, -1 with errno set.
int clinux_file_identity(const char *path, uint64_t *device, uint64_t *inode, int64_t *stamp);
#endif
