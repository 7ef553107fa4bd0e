/*
 * pending.h - a call queued into another Python process at a safe point of
 * its interpreter: the interpreter's own pending-calls queue (what
 * Py_AddPendingCall fills), written from outside with process_vm_writev
 * while every thread of the target is frozen (freeze.h), then its count and
 * eval-breaker set so that the next thread that checks the eval breaker
 * (between two bytecodes) runs it. Nothing is called in the middle of what
 * the target was doing. `stackwatch attach` (docs/architecture.md) uses it.
 *
 * The queue's layout differs per version: sw_pending_layout, generated
 * from each version's headers (scripts/gen-layouts.py), never typed.
 */
#ifndef SW_PENDING_H
#define SW_PENDING_H

#include "base/base.h"
#include "target.h"

enum {
    SW_PENDING_LOCK_SEM = 1,     /* PyThread_type_lock: a pointer to a glibc sem_t (3.9-3.12) */
    SW_PENDING_LOCK_MUTEX = 2,   /* PyMutex: a byte whose bit 0 is "locked" (3.13) */
    SW_PENDING_COUNT_FLAG = 1,   /* calls_to_do: an int flag set to 1; ring full when last+1 == first */
    SW_PENDING_COUNT_N = 2,      /* npending: the number queued, at most max (3.13) */
};

/* Where the main interpreter keeps its pending calls (struct
 * _pending_calls inside PyInterpreterState.ceval) and how its eval breaker
 * is raised. Offsets in bytes; SW_NO_OFFSET where the version has none. */
typedef struct sw_pending_layout {
    uint32_t version_hex;
    uint32_t interp_pending;       /* offset of the queue in PyInterpreterState */
    uint32_t pending_size;         /* sizeof(struct _pending_calls) */
    uint32_t lock_kind;            /* SW_PENDING_LOCK_* */
    uint32_t pending_lock;
    uint32_t count_kind;           /* SW_PENDING_COUNT_* */
    uint32_t pending_count;        /* calls_to_do or npending (32-bit) */
    uint32_t pending_max;          /* int32 max (3.13), else SW_NO_OFFSET */
    uint32_t pending_calls;        /* the array of calls */
    uint32_t ncalls;               /* its length */
    uint32_t call_size;
    uint32_t call_func;
    uint32_t call_arg;
    uint32_t call_flags;           /* int flags (3.13), else SW_NO_OFFSET */
    uint32_t pending_first;        /* int: the next call to run */
    uint32_t pending_last;         /* int: the slot the next call goes to (last / next) */
    uint32_t interp_eval_breaker;  /* 3.9-3.12: int in PyInterpreterState, else SW_NO_OFFSET */
    uint32_t tstate_eval_breaker;  /* 3.13: uintptr_t in each PyThreadState, else SW_NO_OFFSET */
    uint32_t eval_breaker_bits;    /* OR-ed into the eval breaker (3.9-3.12: any nonzero
                                      value; 3.13: _PY_CALLS_TO_DO_BIT) */
    uint32_t main_thread_only;     /* 1: only the main thread runs the queue (before 3.12) */
} sw_pending_layout;

#define SW_PENDING_LAYOUT_FIELDS(X) \
    X(version_hex) X(interp_pending) X(pending_size) X(lock_kind) X(pending_lock) X(count_kind) \
    X(pending_count) X(pending_max) X(pending_calls) X(ncalls) X(call_size) X(call_func) X(call_arg) \
    X(call_flags) X(pending_first) X(pending_last) X(interp_eval_breaker) X(tstate_eval_breaker) \
    X(eval_breaker_bits) X(main_thread_only)

/* The generated layout of release version_hex (major.minor.micro must
 * match). 0, or SW_EARG. */
int sw_pending_layout_known(uint32_t version_hex, sw_pending_layout *out);

/* A call queued by sw_pending_push: where, and what. */
typedef struct sw_pending_call {
    uint64_t func;
    uint64_t arg;
    int slot;
} sw_pending_call;

/* Queues func(arg) in the target's main interpreter; when text is not
 * NULL, it is first written (with its NUL) into free slots at the far end
 * of the queue's array (the slots Py_AddPendingCall fills last) and arg
 * becomes its address. Every thread of the target must be frozen
 * (freeze.h). interp: the main interpreter's address; threads_head: the
 * offset of its first thread state, tstate_next that of the next one (the
 * thread states whose eval breaker 3.13 reads). Returns 0; SW_EBUSY-like
 * SW_EAGAIN when the queue is locked or full (thaw, retry); or another
 * negative SW_E* code with err. */
int sw_pending_push(sw_mem *m, const sw_pending_layout *pl, uint64_t interp, uint32_t threads_head,
                    uint32_t tstate_next, uint64_t func, const char *text, uint64_t arg, sw_pending_call *out,
                    char *err, size_t errlen);

/* Takes call c back out of the queue if it is still there (every thread
 * frozen): *removed 1 if it was, 0 if the target already took it. */
int sw_pending_take_back(sw_mem *m, const sw_pending_layout *pl, uint64_t interp, const sw_pending_call *c,
                         int *removed, char *err, size_t errlen);

#endif
