/*
 * A release authctl's entry point: before glibc's _start, tells the kernel that its
 * read-only segment is read at random (MADV_RANDOM), so that a page of it read back from
 * disk comes alone instead of with a read-ahead window of the file around it.
 *
 * That segment holds the ELF headers, the Swift metadata sections and .eh_frame. A start
 * reads a few scattered words of it: glibc its program headers, crtbegin's
 * __register_frame_info the first word of .eh_frame, the Swift runtime the metadata of the
 * types it looks up. When such a page had been paged out during a quiet spell, the fault
 * read every paged-out page of the file within read_ahead_kb around it (8 MB on the
 * benchmark's VM: 5.6 MB read for one word, ~6 ms; docs/performance.md, "authctl after
 * quiet"). The code (scripts/authctl.ld puts what the token path runs at the end of its
 * segment, where the read-ahead for code stops) and the writable data (its hot pages are
 * many and spread: one read each would cost more than the window) keep the kernel's
 * default.
 *
 * This runs before glibc has set up anything (no TLS, no errno, no stack protector): it
 * reads its own program headers through the linker's __ehdr_start and makes one system
 * call by hand. It keeps %rdx, which the kernel sets for _start.
 */
#include <elf.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
extern const Elf64_Ehdr __ehdr_start;

__attribute__((used, no_stack_protector)) void authbroker_advise_read_only_segment(void) {
    const Elf64_Phdr *headers = (const Elf64_Phdr *)((const char *)&__ehdr_start + __ehdr_start.e_phoff);
    for (unsigned i = 0; i < __ehdr_start.e_phnum; i++) {
        const Elf64_Phdr *h = &headers[i];
        if (h->p_type != PT_LOAD || h->p_flags != PF_R) continue;
        unsigned long start = h->p_vaddr & ~4095UL;
        unsigned long length = h->p_vaddr + h->p_memsz - start;
        long result;
        __asm__ volatile("syscall"
                         : "=a"(result)
                         : "0"((long)SYS_madvise), "D"(start), "S"(length), "d"((long)MADV_RANDOM)
                         : "rcx", "r11", "memory");
        (void)result; /* advice only: a failure leaves the kernel's default */
    }
}

/* The kernel enters here with the stack 16-byte aligned and %rdx set; a call leaves the
   callee the alignment the ABI promises, and %r12 is kept across it. */
__attribute__((naked, noreturn)) void authbroker_entry(void) {
    __asm__ volatile("mov %rdx, %r12\n\t"
                     "call authbroker_advise_read_only_segment\n\t"
                     "mov %r12, %rdx\n\t"
                     "jmp _start\n\t");
}
#elif defined(__aarch64__)
/* Not measured on arm64: straight on to glibc's _start, the kernel's default read-ahead. */
__attribute__((naked, noreturn)) void authbroker_entry(void) {
    __asm__ volatile("b _start\n\t");
}
#else
#error "authbroker_entry: no entry point for this architecture (Package.swift links authctl with -e authbroker_entry)"
#endif
