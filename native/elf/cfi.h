/*
 * cfi.h - the call frame information of an ELF file (.eh_frame, looked up
 * through .eh_frame_hdr's sorted table, or through an index made by one
 * scan of .eh_frame where there is no usable table): for a code address,
 * the rules that give its caller's registers, that is the canonical frame
 * address (CFA) and where each saved register is. x86-64 DWARF register
 * numbers (0-15: rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8-r15; 16: the
 * return address). C11 without Python.h, in the ELF room.
 *
 * The bytes are untrusted (whatever file a target process has mapped):
 * every length, offset and pointer encoding is checked against the
 * section before it is used, the rule interpreter runs the DW_CFA_*
 * instructions that gcc and clang emit for x86-64 code (remember/restore
 * state with a bounded stack), and DW_OP expressions (CFA and register
 * rules: PLT entries, realigned frames) are evaluated by a small bounded
 * stack machine, not interpreted beyond what they need. Anything else is
 * refused (SW_EFORMAT), never guessed.
 */
#ifndef SW_CFI_H
#define SW_CFI_H

#include "base/base.h"

#define SW_CFI_NREGS 17   /* the registers tracked */
#define SW_CFI_RBP 6
#define SW_CFI_RSP 7
#define SW_CFI_RA 16      /* the return address column */

enum {
    SW_CFI_SAME = 0,      /* the caller's value is this frame's (the default) */
    SW_CFI_UNDEF,         /* not recoverable (the return address: the outermost frame) */
    SW_CFI_OFFSET,        /* saved at CFA + off */
    SW_CFI_VAL_OFFSET,    /* is CFA + off */
    SW_CFI_REGISTER,      /* is in register reg */
    SW_CFI_EXPR,          /* saved at the address expr gives (the CFA pushed first) */
    SW_CFI_VAL_EXPR,      /* is what expr gives (the CFA pushed first) */
};

typedef struct sw_cfi_rule {
    uint8_t kind;         /* SW_CFI_* */
    uint8_t reg;          /* SW_CFI_REGISTER */
    int64_t off;          /* SW_CFI_OFFSET, SW_CFI_VAL_OFFSET */
    const unsigned char *expr;   /* SW_CFI_EXPR, SW_CFI_VAL_EXPR: into the section */
    uint32_t expr_len;
} sw_cfi_rule;

/* The rules in force at one code address. */
typedef struct sw_cfi_row {
    uint8_t cfa_is_expr;  /* 0: CFA = register cfa_reg + cfa_off; 1: cfa_expr's value */
    uint8_t cfa_reg;
    int64_t cfa_off;
    const unsigned char *cfa_expr;
    uint32_t cfa_expr_len;
    sw_cfi_rule regs[SW_CFI_NREGS];
    uint8_t signal_frame; /* the CIE's "S": the return address is not after a call */
    uint64_t start, end;  /* the code range of the FDE (file addresses) */
} sw_cfi_row;

typedef struct sw_cfi sw_cfi;

/* The CFI of .eh_frame's len bytes at eh (file address eh_addr) and, if
 * hdr is not NULL, .eh_frame_hdr's hdr_len bytes at hdr_addr. The bytes
 * are not copied: they must outlive the result. 0, SW_ENOMEM, or
 * SW_EFORMAT with the reason in err. */
int sw_cfi_new(const unsigned char *eh, size_t len, uint64_t eh_addr, const unsigned char *hdr, size_t hdr_len,
               uint64_t hdr_addr, sw_cfi **out, char *err, size_t errlen);

/* The same over the sections of an ELF file (it must outlive the
 * result). SW_EARG if it has no .eh_frame. */
struct sw_elf;
int sw_cfi_of_elf(const struct sw_elf *e, sw_cfi **out, char *err, size_t errlen);

void sw_cfi_free(sw_cfi *c);

/* 1 if the table of .eh_frame_hdr is used, 0 if the index of the scan. */
int sw_cfi_uses_hdr(const sw_cfi *c);

/* The rules at file address pc into *row. 0; SW_EARG if no FDE covers pc;
 * SW_EFORMAT if its CIE, FDE or instructions are malformed or use what the
 * interpreter does not run. */
int sw_cfi_find(const sw_cfi *c, uint64_t pc, sw_cfi_row *row);

/* Reads the 8 bytes at addr (DW_OP_deref) into *v: 0, or non-zero. */
typedef int (*sw_cfi_read_fn)(void *ud, uint64_t addr, uint64_t *v);

/* Evaluates a DW_OP expression of len bytes: regs[i] is register i's value
 * where bit i of valid is set; push (if has_push) is pushed first (the CFA
 * for register rules). Operations: DW_OP_lit*, const*, breg*, reg*,
 * dup, drop, swap, over, deref (through read; NULL refuses it), plus,
 * plus_uconst, minus, and, or, xor, shl, shr, mul, neg, not, ge, gt, le,
 * lt, eq, ne; at most 64 operations and a stack of 16. 0 with *out, or
 * SW_EFORMAT. */
int sw_cfi_eval(const unsigned char *expr, size_t len, const uint64_t *regs, uint32_t valid, int has_push,
                uint64_t push, sw_cfi_read_fn read, void *ud, uint64_t *out);

#endif
