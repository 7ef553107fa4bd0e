/*
 * trace_type.h - stackwatch._native.Trace, a trace file read back
 * (trace_type.c). The room ext/tracefile needs only ext/shared and the
 * trace rooms below it: reading a file does not need the tracer.
 */
#ifndef SW_TRACE_TYPE_H
#define SW_TRACE_TYPE_H

#include "ext/shared/compat.h"
#include "trace/trace.h"

/* Adds Trace, export_merged() (several traces as one timeline), FORMAT_MAJOR, the record constants OP_* and EV_DROPPED,
 * the table of EXT record kinds (RECORD_KINDS), the exporters' (TRACE_EXPORTERS) and the thread states' names
 * (THREAD_STATES) to the module. Returns 0, or -1 with an exception set. */
int sw_trace_type_add_to_module(PyObject *m);

/* The reader of a Trace object (borrowed: it lives as long as obj), or
 * NULL with a TypeError if obj is not a Trace. */
sw_trace *sw_py_trace_get(PyObject *obj);

/* A filter (trace/filter.h) from its Python form: None (everything), or
 * the tuple (threads, start_ns, stop_ns, include, exclude, max_depth) of
 * stackwatch.tracer.tracefile.Filter: thread positions or None, times or
 * None, sequences of globs or None, a depth (0: none). */
typedef struct sw_py_filter {
    sw_filter f;
    char **include, **exclude;
    uint8_t *threads;
} sw_py_filter;
/* Returns 0, or -1 with an exception (out is then empty, and freeing it
 * is harmless). */
int sw_py_filter_parse(PyObject *spec, sw_trace *t, sw_py_filter *out);
void sw_py_filter_free(sw_py_filter *pf);

/* Work on a trace with the GIL released and its progress told to a
 * Python callable (or to nothing): between sw_py_progress_begin() and
 * _end(), every replay of the trace counts the bytes it read, and at most
 * every 0.1 s the GIL is taken back to call progress(bytes so far) and to
 * check for signals (Ctrl-C); an exception from either stops the replay
 * (SW_ECANCELED) and is raised after _end(). */
typedef struct sw_py_progress {
    sw_trace *t;
    PyObject *fn;            /* borrowed, or NULL */
    PyThreadState *save;
    uint64_t done;
    double last;
    int raised;              /* the callable or a signal raised */
} sw_py_progress;
void sw_py_progress_begin(sw_py_progress *p, sw_trace *t, PyObject *fn);
/* Takes the GIL back. Returns -1 (with the exception) when the work was
 * stopped by one, else 0. */
int sw_py_progress_end(sw_py_progress *p);

#endif
