/*
 * dispatch.h - the layer that hands each event to every consumer that
 * asked for it: the file tracer (ext/tracer: session.c, file_events.c),
 * Python handlers (handlers.c), the USDT probes (probes.c) and the LTTng-UST
 * tracepoints (lttng_events.c).
 *
 * Each consumer has an event mask over the kinds of kinds.h. Their union
 * decides which CPython mechanisms are on: whenever a consumer changes,
 * sw_dispatch_changed() recomputes the masks and calls the one switching
 * function registered with sw_dispatch_set_switch() (the tracer's, at
 * module init: ext/tracer/switch.c), which turns on exactly the mechanisms
 * the union needs and turns the others off. The dispatch layer never calls
 * into the tracer otherwise. Backends call sw_emit*() only when sw_D.mask
 * says someone wants the event; the emitters then test each consumer's own
 * mask.
 *
 * Everything here runs with the GIL held.
 */
#ifndef SW_DISPATCH_H
#define SW_DISPATCH_H

#include "ext/dispatch/kinds.h"
#include "ext/shared/compat.h"

#include <stdint.h>

typedef struct sw_dispatch {
    uint32_t mask;        /* union of every consumer's mask (file tracer included) */
    uint32_t slow;        /* union of the masks of consumers other than the
                           * file tracer (handlers, probes, lttng): Python events
                           * then go through the hook's slow path */
    uint32_t handlers;    /* union of the handlers' masks (handlers.c) */
    uint32_t probes;      /* events the attached probes want (probes.c) */
    uint32_t lttng;       /* events emitted to LTTng-UST (lttng_events.c, run --lttng) */
    uint32_t file;        /* events the file tracer records besides calls
                           * (sw_dispatch_file_set) */
    uint64_t hgen;        /* changes whenever the handler set or a filter changes */
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
    int unrecorded;         /* frame events: 1 when the file tracer runs and
                             * leaves this frame out (its filters, stackwatch's
                             * own code): consumers that mirror the trace
                             * (lttng_events.c) skip it */
} sw_evdata;

/* Hands one event to every consumer that wants it (handlers, probes; the
 * file tracer's records are made by the hooks themselves), with the thread
 * marked busy (a consumer's own calls are no events). Never raises: the
 * pending exception, if any, is kept. */
void sw_emit(int kind, const sw_evdata *d);
/* The same for a Python frame event of code co, located at its first line
 * (a call or resume) or at line (a return, yield or unwind: the line being
 * run then, ext/tracer/exit_line.h). */
void sw_emit_frame(int kind, PyCodeObject *co);
void sw_emit_frame_at(int kind, PyCodeObject *co, int line);
/* The same, saying whether the file tracer leaves the frame out. */
void sw_emit_frame_rec(int kind, PyCodeObject *co, int line, int unrecorded);

/* A consumer changed: recomputes sw_D.mask / slow and calls the switching
 * function. Never raises (a problem is reported as a warning). */
void sw_dispatch_changed(void);

/* Registers the function sw_dispatch_changed calls (once, at module init). */
void sw_dispatch_set_switch(void (*apply)(void));

/* The file tracer as a consumer: the events it records besides calls
 * (mask) and the files whose line / instruction events it records (lines:
 * a sequence of str globs, or None / NULL for every file). Does not switch
 * anything (the session calls sw_dispatch_changed). Returns 0, or -1 with
 * an exception set (then nothing changed). */
int sw_dispatch_file_set(uint32_t mask, PyObject *lines);
/* 1 if the file tracer's line filter matches filename. */
int sw_dispatch_file_lines_match(const char *filename);
/* 1 if it has no line filter. */
int sw_dispatch_file_lines_everywhere(void);

/* Requests the co_extra slot of the per-code filter cache (sw_D.extra_index)
 * once. Returns 0, or -1 with an exception set. */
int sw_dispatch_extra_index(void);

/* Adds dispatch_masks() to the module. Returns 0, or -1 with an exception. */
int sw_dispatch_add_to_module(PyObject *m);

#endif
