/*
 * unwind.h - the native (C) stack of a thread of another process, read
 * from outside (Linux x86-64): the thread is stopped where it is
 * (freeze.h: PTRACE_SEIZE + PTRACE_INTERRUPT, no signal, so neither its
 * signal handlers nor its wait status see it), its registers taken
 * (PTRACE_GETREGS), and its frames unwound with the call frame information
 * of the ELF file mapped where each address is (elf/cfi.h: .eh_frame,
 * through .eh_frame_hdr; per file, read once through /proc/PID/root and
 * kept), the stack read with process_vm_readv (mem.h) a few KiB at a time.
 * Where no CFI covers an address (code without .eh_frame, JIT code), the
 * caller is found by the frame-pointer chain instead, and the frame says
 * so (SW_UNWIND_BY_FP).
 *
 * Bounded and checked: at most max frames; each step's new stack pointer
 * must lie above the last (a loop or a corrupt stack ends the walk); a
 * register the rules need but that is not known ends it too; every read of
 * the target can fail without harm. The thread stays stopped from
 * sw_unwind_capture until sw_unwind_release (the caller reads its Python
 * stack meanwhile: one instant), always released, also on errors.
 *
 * An sw_unwinder is used by one thread at a time, the one that stops and
 * releases (ptrace's rule).
 */
#ifndef SW_UNWIND_H
#define SW_UNWIND_H

#include "base/base.h"
#include "mem.h"

#define SW_UNWIND_BY_FP 1u        /* this frame's caller was found by the frame-pointer chain */
#define SW_UNWIND_FP_MARK " (no CFI: caller by frame pointer)"   /* ... added to its name */

typedef struct sw_unwinder sw_unwinder;

/* An unwinder of process pid, reading its memory through mem (the
 * caller's; it must outlive the unwinder). NULL if out of memory. */
sw_unwinder *sw_unwinder_new(int pid, sw_mem *mem);

/* An unwinder of the process of a core file (coremem.h; it and mem, its
 * memory, must outlive the unwinder): the threads' registers are the
 * core's (NT_PRSTATUS), its files those of its NT_FILE note as
 * sw_coremem_local finds them here (build ids checked), nothing is
 * stopped. */
struct sw_coremem;
sw_unwinder *sw_unwinder_new_core(struct sw_coremem *core, sw_mem *mem);
void sw_unwinder_free(sw_unwinder *u);

/* 1 if this platform can unwind another process (Linux x86-64), else 0
 * with the reason in err. */
int sw_unwind_supported(char *err, size_t errlen);

/* The registers of the kernel's struct user_regs_struct (PTRACE_GETREGS,
 * a core's NT_PRSTATUS; x86-64) in DWARF's order, as sw_unwind_regs takes
 * them. */
void sw_unwind_regs_of_user(const uint64_t *user_regs, uint64_t *regs);

/* Stops thread tid and unwinds its stack (a core's thread: unwinds it
 * from its registers in the core, SW_EARG if the core has no such
 * thread): returns the number of frames
 * written to pcs (pcs[0]: the instruction where it stopped; then return
 * addresses) and their SW_UNWIND_* flags (flags may be NULL), at most max;
 * *truncated is 1 if the stack goes on beyond them. The thread stays
 * stopped until sw_unwind_release. A negative SW_E* code if it could not be
 * stopped (SW_EARG: it is gone; SW_EIO: ptrace refused, with the reason in
 * sw_unwind_error): then nothing is to be released. */
int sw_unwind_capture(sw_unwinder *u, int tid, uint64_t *pcs, uint8_t *flags, int max, int *truncated);
void sw_unwind_release(sw_unwinder *u);

/* held 1: the caller has stopped every thread of the process already
 * (freeze.h, on the thread that captures): sw_unwind_capture only reads a
 * thread's registers (a thread not so stopped: SW_EIO) and release lets
 * nothing go. 0 (the default): each capture stops its thread. */
void sw_unwind_set_held(sw_unwinder *u, int held);
const char *sw_unwind_error(const sw_unwinder *u);

/* Unwinds from the registers regs (DWARF numbering: 0-15, 16 the
 * instruction pointer) of a thread already stopped, or of a process image
 * that does not change. Same returns as sw_unwind_capture, nothing to
 * release. */
int sw_unwind_regs(sw_unwinder *u, const uint64_t *regs, uint64_t *pcs, uint8_t *flags, int max, int *truncated);

/* The file mapped at code address pc (sw_unwind_object). */
typedef struct sw_unwind_object_info {
    const char *path;                /* as the target sees it ("[vdso]" for the vDSO) */
    const char *open_path;           /* to open it by from here (through /proc/PID/root) */
    uint64_t bias;                   /* its load bias: address = file address + bias */
    const unsigned char *image;      /* the vDSO, which is no file: its ELF image as read from
                                        the target's memory (image_len bytes), else NULL */
    size_t image_len;
} sw_unwind_object_info;

/* The file mapped at code address pc into *out (its strings and image
 * live as long as u). 0, or SW_EARG if pc is in no file or the file
 * cannot be read. */
int sw_unwind_object(sw_unwinder *u, uint64_t pc, sw_unwind_object_info *out);

typedef struct sw_unwind_stats {
    uint64_t captures;       /* threads stopped and unwound */
    uint64_t stop_failed;    /* threads that could not be stopped */
    uint64_t frames;         /* frames found */
    uint64_t by_fp;          /* ... of which by the frame-pointer chain */
    uint64_t files;          /* ELF files whose CFI was read */
    uint64_t stop_ns;        /* time the threads were stopped, in all */
} sw_unwind_stats;
void sw_unwind_get_stats(const sw_unwinder *u, sw_unwind_stats *out);

#endif
