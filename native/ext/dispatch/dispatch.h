/*
 * dispatch.h - the one layer that owns the interpreter hooks and hands each
 * event to every consumer that asked for it: the file tracer (session.c),
 * Python handlers (handlers.c) and the USDT probes (probes.c).
 *
 * Each consumer has an event mask (bits SW_EVB(kind)). The union of the
 * masks decides which CPython mechanisms are turned on (src/stackwatch/
 * events/switch.py does the turning, with the GIL held): an event no consumer
 * wants is not requested from CPython at all, and with no consumer no hook
 * is installed. Backends call sw_emit_*() only when sw_D.mask says someone
 * wants the event; the emitters then test each consumer's own mask.
 *
 * Everything here runs with the GIL held.
 */
#ifndef SW_DISPATCH_H
#define SW_DISPATCH_H

#include "ext/shared/compat.h"

#include <stdint.h>

/* Event kinds. The numbering is part of the Python API (stackwatch.events)
 * and of nothing on disk. */
enum sw_ev_kind {
    SW_K_CALL = 0,        /* a Python frame starts */
    SW_K_RETURN,          /* it returns a value */
    SW_K_YIELD,           /* it suspends (yield / await) */
    SW_K_RESUME,          /* a generator / coroutine frame resumes */
    SW_K_UNWIND,          /* it exits with an exception */
    SW_K_C_CALL,          /* a builtin / extension function is called */
    SW_K_C_RETURN,        /* it returns */
    SW_K_C_RAISE,         /* it raises */
    SW_K_LINE,            /* a new line starts running */
    SW_K_INSTRUCTION,     /* a bytecode instruction runs */
    SW_K_RAISE,           /* an exception is raised */
    SW_K_HANDLED,         /* an exception is caught (3.12+) */
    SW_K_GC_START,
    SW_K_GC_DONE,
    SW_K_NEW_START,       /* an instance of a Python class is being created */
    SW_K_NEW_DONE,
    SW_K_DEL_START,       /* an instance of a Python class is being destroyed */
    SW_K_DEL_DONE,
    SW_K_THREAD_START,
    SW_K_THREAD_EXIT,
    SW_K_COUNT
};

#define SW_EVB(k) (1u << (k))
#define SW_MASK_PY (SW_EVB(SW_K_CALL) | SW_EVB(SW_K_RETURN) | SW_EVB(SW_K_YIELD) | \
                    SW_EVB(SW_K_RESUME) | SW_EVB(SW_K_UNWIND))
#define SW_MASK_C (SW_EVB(SW_K_C_CALL) | SW_EVB(SW_K_C_RETURN) | SW_EVB(SW_K_C_RAISE))
#define SW_MASK_ALL ((1u << SW_K_COUNT) - 1)

extern const char *const sw_kind_names[SW_K_COUNT];

typedef struct sw_dispatch {
    uint32_t mask;        /* union of every consumer's mask (file tracer included) */
    uint32_t slow;        /* union of the masks of consumers other than the
                           * file tracer (handlers, probes): Python events
                           * then go through the hook's slow path */
    uint32_t handlers;    /* union of the handlers' masks */
    uint32_t probes;      /* events the attached probes want */
    uint32_t file;        /* events the file tracer records */
    uint64_t hgen;        /* changes whenever the handler set changes */
    uint64_t hooks_gen;   /* changes whenever the masks change (3.9-3.11:
                           * threads re-check their per-thread hooks) */
    Py_ssize_t extra_index;  /* co_extra slot caching which handlers a code
                              * object matches: (hgen << 32) | bits */
} sw_dispatch;

extern sw_dispatch sw_D;

/* What an event carries besides its kind and time. Fields not used by a
 * kind are zero / NULL. */
typedef struct sw_evdata {
    PyCodeObject *code;     /* where (borrowed), or NULL */
    int line;               /* line number, or -1 */
    /* C calls: the function's qualified name. Exceptions: the type's
     * name. Objects: the class's qualified name. Threads: the name. */
    const char *name;
    const char *file;       /* objects: the file that defines the class */
    long long a, b, c;      /* instruction: offset, opcode; gc: generation,
                             * collected, uncollectable */
} sw_evdata;

/* Hands one event to every consumer that wants it (handlers, probes; the
 * file tracer's recording of Python/C call events is done by the hooks
 * themselves, the rest through sw_file_record_ext), with the thread marked
 * busy (a consumer's own calls are no events). Never raises: the pending
 * exception, if any, is kept. */
void sw_emit(int kind, const sw_evdata *d);
/* The same for a Python frame event of code co (located at its first line). */
void sw_emit_frame(int kind, PyCodeObject *co);

/* Recomputes sw_D.mask / slow after a consumer changed and tells the
 * Python layer to switch mechanisms (called with the GIL). */
void sw_dispatch_changed(void);

/* Handlers (handlers.c). */
int sw_handlers_add_to_module(PyObject *m);
void sw_handlers_emit(int kind, const sw_evdata *d);
int sw_handlers_want(int kind, PyCodeObject *co);   /* a handler wants `kind` in co */

int sw_file_lines_in(PyCodeObject *co);             /* the file tracer's line filter matches co */
void sw_handlers_cache_reset(void);                 /* the per-code filter cache is stale */
int sw_dispatch_extra_index(void);                  /* 0, or -1 with an exception */

/* The file tracer's records of events other than calls (file_events.c). */
int sw_file_wants_code(PyCodeObject *co);          /* recorded by the file tracer */
int sw_file_wants_lines(PyCodeObject *co);         /* ... and in its line filter */
void sw_file_record_ext(int kind, const sw_evdata *d);
int sw_file_line_match(const char *filename);
/* Sets what the file tracer records besides calls (mask) and where line /
 * instruction events are recorded (globs, None for everywhere). Returns 0
 * or -1 with an exception. */
int sw_file_events_set(uint32_t mask, PyObject *line_globs);

/* Event hooks that are not the frame evaluator (events.c): line,
 * instruction, exception, GC; and the file tracer's records of them. */
int sw_events_add_to_module(PyObject *m);
void sw_events_thread_sync(void);     /* 3.9-3.11: trace function on every thread */
int sw_events_wanted_in(int kind, PyCodeObject *co);   /* some consumer wants `kind` in co */
/* 3.12+: line / instruction events as local events of matching code
 * objects (lines_local.c). */
int sw_lines_local_add_to_module(PyObject *m);
long sw_lines_local_bits(PyCodeObject *co);   /* the local line bits co gets (0: none) */
int sw_handlers_everywhere(uint32_t kinds);   /* a handler of one of `kinds` has no `where` */
int sw_handlers_where_match(uint32_t kinds, const char *file);  /* ... or its `where` matches file */
int sw_file_lines_everywhere(void);           /* the file tracer has no line filter */
#if PY_VERSION_HEX < 0x030C0000
void sw_events_thread_attach(void);   /* ... and on a thread seen for the first time */
#endif

/* Object-lifetime events (objects.c): _objects_on / _objects_off. */
int sw_objects_add_to_module(PyObject *m);

/* USDT probes (probes.c). */
int sw_probes_add_to_module(PyObject *m);
void sw_probes_emit(int kind, const sw_evdata *d);
uint32_t sw_probes_poll(void);    /* events whose probes are attached now */

#endif
