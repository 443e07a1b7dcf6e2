#ifndef CKEYRING_H
#define CKEYRING_H

#include <stddef.h>
#include <stdint.h>

/// The kernel's key retention service (keyrings(7)) by its system calls, without
/// libkeyutils: glibc has no wrappers for add_key(2) and keyctl(2), and Swift cannot call
/// the variadic syscall(2). Every function returns a negative errno on failure.

/// Makes the user keyring (@u) and everything linked in it "possessed" by this process,
/// by linking @u into the process keyring (created on demand, private to this process,
/// gone when it exits). Needed where the session keyring does not lead to @u: a systemd
/// service with KeyringMode=private, `keyctl session`, a cron job.
int ckeyring_possess_user_keyring(void);

/// The serial of the keyring `name` linked in @u, created (and linked there) if absent.
int32_t ckeyring_named_keyring(const char *name);

/// Adds a key of type "user" to `keyring`, or replaces the payload of the one with the same
/// description there (atomically). Returns its serial.
int32_t ckeyring_add_user_key(int32_t keyring, const char *description, const void *payload, size_t length);

/// The serial of the "user" key with this exact description in `keyring` (or a keyring
/// linked in it); -ENOKEY when there is none.
int32_t ckeyring_search_user_key(int32_t keyring, const char *description);

/// Copies up to `capacity` bytes of the key's payload (for a keyring: its keys' serials)
/// into `buffer`; returns the payload's whole length, which may exceed `capacity`.
long ckeyring_read(int32_t key, void *buffer, size_t capacity);

/// Like ckeyring_read, for "type;uid;gid;perm;description" (NUL-terminated).
long ckeyring_describe(int32_t key, char *buffer, size_t capacity);

/// Destroys the key at once, wherever it is linked (KEYCTL_INVALIDATE).
int ckeyring_invalidate(int32_t key);

/// Makes the key expire `seconds` from now (KEYCTL_SET_TIMEOUT); 0 takes any expiry away.
/// The kernel then garbage-collects it: gone for every process, as if invalidated.
int ckeyring_set_timeout(int32_t key, unsigned int seconds);

#endif
