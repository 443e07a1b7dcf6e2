/* Landlock system calls (no wrappers in glibc, and syscall(2) is variadic, which Swift
   cannot call). Used by authbrokerd's Sandbox (docs/security.md, "Confinement"). */
#define _GNU_SOURCE
#include "clinux.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int clinux_landlock_abi(void) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? -errno : (int)abi;
}

int clinux_landlock_ruleset(unsigned long long fs, unsigned long long scoped) {
    /* handled_access_fs, handled_access_net (ABI 4), scoped (ABI 6): pass only as much of
       the structure as the kernel knows, so older kernels accept it. */
    struct { __u64 fs, net, scoped; } attr = { fs, 0, scoped };
    size_t size = scoped ? sizeof attr : sizeof(__u64);
    return (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
}

int clinux_landlock_allow(int ruleset, const char *path, unsigned long long access) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return -1;
    struct landlock_path_beneath_attr rule = { .allowed_access = access, .parent_fd = fd };
    long r = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    int saved = errno;
    close(fd);
    errno = saved;
    return r == 0 ? 0 : -1;
}

int clinux_landlock_enforce(int ruleset) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return (int)syscall(SYS_landlock_restrict_self, ruleset, 0);
}

int clinux_thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}
