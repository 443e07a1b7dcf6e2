/*
 * argc and argv for Swift's CommandLine, taken from glibc's call of the executable's
 * initialisers instead of the Swift runtime's search for them.
 *
 * On Linux the static Swift runtime (libswiftCore.a, CommandLine.cpp) finds argv with a
 * static initialiser that reads /proc/self/maps line by line with fgets and sscanf to find
 * the stack, then walks back from `environ`: four system calls and a fifth of an
 * `authctl token` process's instructions (56 000 of 289 000; docs/performance.md), paid
 * before main by every start, whether or not anything asks for the arguments. glibc calls
 * every function in .init_array with (argc, argv, envp), so the executable can simply
 * keep them.
 *
 * These two functions are the runtime's own entry points for the arguments (Swift calling
 * convention, as the runtime declares them). The linker takes a symbol from a static
 * archive only when no object file defines it, so with this object linked CommandLine.cpp's
 * object, and its initialiser, never are. With the runtime as a shared library (a debug
 * build) the runtime's getter is its own (it does not export it) and gives the same
 * answer; only the override would be this file's, and authctl never overrides its
 * arguments. Should a toolchain add another symbol to that object, the link fails with a
 * duplicate-symbol error rather than silently running both.
 */
#include "ccommandline.h"

static int captured_argc;
static char **captured_argv;
static int override_argc;
static char **override_argv;

static void capture(int argc, char **argv, char **envp) {
    (void)envp;
    captured_argc = argc;
    captured_argv = argv;
}

/* Before main, as glibc runs .init_array for static and dynamic executables alike; no
   Swift code runs before main, so nothing asks for the arguments earlier. */
__attribute__((section(".init_array"), used))
static void (*const capture_at_start)(int, char **, char **) = capture;

__attribute__((swiftcall)) char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    if (override_argv) {
        *outArgLen = override_argc;
        return override_argv;
    }
    *outArgLen = captured_argc;
    return captured_argv;
}

__attribute__((swiftcall)) void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
    override_argv = argv;
    override_argc = argc;
}
