/* Heap memory is wiped when it is given back, in the daemon only (authbrokerd links this
   target, authctl does not).

   A refresh token passes through many buffers the daemon does not own: the Swift Strings
   of the account and of the token answer's JSON, the form body and the HTTP client's
   bytes, Foundation's JSON encoder, libsecret's and GLib's D-Bus messages. Each is freed
   in time, and glibc leaves a freed chunk's bytes where they were until the chunk is used
   again: 8 to 12 copies of a signed-out account's refresh token stayed readable in
   /proc/PID/mem (docs/security.md, test_memory_after_logout.py). glibc's own perturb
   option (M_PERTURB) does not reach chunks it keeps in its per-thread cache (tcache_put
   comes before free_perturb in glibc 2.36's _int_free), which is where most of them went.

   This executable's free() and realloc() take the place of glibc's for every library of
   the process (ELF symbol interposition: the executable's definitions come first; the
   linker exports them because the shared libraries reference them): the bytes are
   overwritten (explicit_bzero, which the compiler cannot leave out), then glibc's
   __libc_free takes the chunk. Frees inside glibc itself (stdio, getaddrinfo) keep their
   internal path; no secret goes through them. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stddef.h>
#include <string.h>
#include <dlfcn.h>

#include "wipe_on_free.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);

void free(void *pointer) {
    if (pointer == NULL) return;
    explicit_bzero(pointer, malloc_usable_size(pointer));
    __libc_free(pointer);
}

/* glibc's realloc gives back the old chunk (when it moves) or a shrunk tail inside
   _int_realloc, past free(): a tail is wiped before it is given back, and a growth
   is a new chunk, a copy and a wiped free. */
void *realloc(void *pointer, size_t size) {
    if (pointer == NULL) return __libc_malloc(size);
    if (size == 0) {
        free(pointer);
        return NULL;
    }
    size_t held = malloc_usable_size(pointer);
    if (size <= held) {
        explicit_bzero((char *)pointer + size, held - size);
        return __libc_realloc(pointer, size);
    }
    void *grown = __libc_malloc(size);
    if (grown == NULL) return NULL;
    memcpy(grown, pointer, held);
    free(pointer);
    return grown;
}

int wipe_on_free_in_effect(void) {
    return dlsym(RTLD_DEFAULT, "free") == (void *)free && dlsym(RTLD_DEFAULT, "realloc") == (void *)realloc;
}
