#define _GNU_SOURCE
#include "ckeyring.h"

#include <errno.h>
#include <linux/keyctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static long failed(long result) { return result < 0 ? -errno : result; }

int ckeyring_possess_user_keyring(void) {
    return (int)failed(syscall(SYS_keyctl, KEYCTL_LINK, KEY_SPEC_USER_KEYRING, KEY_SPEC_PROCESS_KEYRING));
}

int32_t ckeyring_named_keyring(const char *name) {
    long found = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "keyring", name, 0);
    if (found >= 0) return (int32_t)found;
    if (errno != ENOKEY) return -errno;
    // add_key(2) of a keyring whose name is taken would replace the old one (keyrings have
    // no update): only when the search found none. Two processes racing here each make
    // one; the later link wins and the loser's (empty) keyring is dropped.
    return (int32_t)failed(syscall(SYS_add_key, "keyring", name, NULL, 0, KEY_SPEC_USER_KEYRING));
}

int32_t ckeyring_add_user_key(int32_t keyring, const char *description, const void *payload, size_t length) {
    return (int32_t)failed(syscall(SYS_add_key, "user", description, payload, length, keyring));
}

int32_t ckeyring_search_user_key(int32_t keyring, const char *description) {
    return (int32_t)failed(syscall(SYS_keyctl, KEYCTL_SEARCH, keyring, "user", description, 0));
}

long ckeyring_read(int32_t key, void *buffer, size_t capacity) {
    return failed(syscall(SYS_keyctl, KEYCTL_READ, key, buffer, capacity));
}

long ckeyring_describe(int32_t key, char *buffer, size_t capacity) {
    return failed(syscall(SYS_keyctl, KEYCTL_DESCRIBE, key, buffer, capacity));
}

int ckeyring_invalidate(int32_t key) {
    return (int)failed(syscall(SYS_keyctl, KEYCTL_INVALIDATE, key));
}

int ckeyring_set_timeout(int32_t key, unsigned int seconds) {
    return (int)failed(syscall(SYS_keyctl, KEYCTL_SET_TIMEOUT, key, seconds));
}
