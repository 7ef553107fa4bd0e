/*
 * sampler.c - the type stackwatch._native.Sampler (see sampler.h): it owns
 * a sampling thread (native/procmem/sampler_loop.c) reading this process's
 * stacks through the fault-safe memory reader, and either the per-thread
 * call trees it feeds (native/profile/aggregate.c) or, in trace mode, the
 * stream of samples into the running trace file (native/trace/
 * sample_stream.c). The history of its trees and its profile file are
 * given to Python by the profile types' room (native/ext/profile/:
 * history_view.c and profile_file_type.c).
 *
 * A Sampler runs once: start(), stop(), then its results can be read and
 * written any number of times (also while it runs: under the profile's
 * lock). In a child forked while a Sampler ran, that Sampler is unusable.
 */
#include "sampler.h"

#include "dump_process.h"
#include "pending_call.h"
#include "target_open.h"
#include "sampler_layout.h"
#include "test_entry_points.h"
#include "ext/shared/pyargs.h"
#include "ext/shared/pyerr.h"
#include "ext/profile/calltree_type.h"
#include "ext/profile/history_view.h"
#include "ext/profile/profile_file_type.h"
#include "ext/tracer/attachments.h"

#include "profile/profile.h"
#include "trace/trace.h"
#include "procmem/procmem.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_DEPTH 1024
#define DEFAULT_MAX_THREADS 256
#define MAX_CODES 65536
/* A cached code object is confirmed (its header re-read) at most every 16
 * rounds: reading the headers of a 50-deep stack every round would be most
 * of a round's cost. */
#define CODE_TTL 15
/* Another process by wall time: each thread's CPU time is read about this
 * often, not every round (reader_for). */
#define CPU_READ_NS 1000000ull

#if PY_VERSION_HEX >= 0x030E0000 || defined(Py_GIL_DISABLED)
#  define SW_SAMPLER_SUPPORTED 0
#else
#  define SW_SAMPLER_SUPPORTED 1
#endif

typedef struct {
    PyObject_HEAD
    sw_sampler *s;
    sw_profile *prof;
    unsigned long long interval_ns;
    int max_depth, max_threads;
    int mode;                 /* SW_PROFILE_WALL or SW_PROFILE_CPU */
    int lines;                /* nodes are (function, line being run) */
    int native;               /* native frames merged in (nativestack.h) */
    int blocking;             /* another process: stopped for each round (pystack.h) */
    int native_installed;     /* the signal handler is installed for this sampler's captures */
    int park_installed;       /* ... for its parks (this process, not native: pystack.c) */
    sw_nstack_stats nstack0;  /* the process's signal counts when it started (earlier samplers' parks) */
    int started;
    sw_profile_filters filters;   /* sw_profile_set_filters, applied at start */
    int trace;                /* samples go into the running trace file, not a profile */
    char *skip_prefix;        /* trace mode: frames of files under it are left out */
    sw_sample_stream *stream; /* trace mode */
    sw_history_opts hist;         /* set_history, applied at start */
    int attached;             /* trace mode: attached to the session's writer (ext/tracer/attachments.h) */
    int pid;                      /* the process sampled: 0 for this one */
    char target_version[32];      /* another process's Python release, "" for this one */
    const char *target_layout;    /* where its layout came from (target_open.h), NULL for this one */
} SamplerObject;

static void signal_stop(SamplerObject *self);

/* Stops a trace-mode sampler's thread, writes its last samples and
 * detaches it from the session. */
static int stop_trace_sampler(SamplerObject *self)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_sampler_stop(self->s);
    if (rc == SW_OK)
        rc = sw_sample_stream_flush(self->stream);
    Py_END_ALLOW_THREADS
    signal_stop(self);
    self->attached = 0;
    sw_session_detach(self);
    return rc;
}

/* Its detach (attachments.h): the session stops, so the trace sampler
 * stops writing into its file. */
static void sw_sampler_trace_detach(void *ud)
{
    SamplerObject *self = ud;
    if (self->s && !sw_sampler_in_forked_child(self->s))
        stop_trace_sampler(self);
    self->attached = 0;
}

static void Sampler_dealloc(SamplerObject *self)
{
    if (self->attached)
        sw_session_detach(self);
    if (self->s && sw_sampler_in_forked_child(self->s)) {
        /* Its thread and locks belong to the parent: leak, never touch. */
    } else {
        if (self->s) {
            Py_BEGIN_ALLOW_THREADS
            sw_sampler_free(self->s);
            Py_END_ALLOW_THREADS
        }
        signal_stop(self);
        sw_profile_free(self->prof);
        sw_sample_stream_free(self->stream);
    }
    PyMem_Free(self->skip_prefix);
    sw_history_opts_clear(&self->hist);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Sampler_init(SamplerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"interval_ns", "max_depth", "max_threads", "mode", "trace", "skip_prefix",
                             "lines", "native", "blocking", NULL};
    unsigned long long iv;
    int depth = DEFAULT_MAX_DEPTH, threads = DEFAULT_MAX_THREADS, trace = 0, lines = 0, native = 0, blocking = 0;
    const char *mode = "wall", *skip = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "K|iispzppp", kwlist, &iv, &depth, &threads, &mode, &trace, &skip,
                                     &lines, &native, &blocking))
        return -1;
    if (self->started) {
        PyErr_SetString(PyExc_RuntimeError, "Sampler.__init__ called on a sampler that ran");
        return -1;
    }
    if (iv < SW_SAMPLER_MIN_INTERVAL_NS || iv > SW_SAMPLER_MAX_INTERVAL_NS) {
        PyErr_Format(PyExc_ValueError, "sampling interval must be between %llu ns and %llu s, not %llu ns",
                     SW_SAMPLER_MIN_INTERVAL_NS, SW_SAMPLER_MAX_INTERVAL_NS / 1000000000ull, iv);
        return -1;
    }
    if (depth < 1 || (unsigned)depth > SW_PYSTACK_MAX_DEPTH_LIMIT || threads < 1 ||
        (unsigned)threads > SW_PYSTACK_MAX_THREADS_LIMIT) {
        PyErr_Format(PyExc_ValueError, "max_depth must be 1..%u and max_threads 1..%u", SW_PYSTACK_MAX_DEPTH_LIMIT,
                     SW_PYSTACK_MAX_THREADS_LIMIT);
        return -1;
    }
    if (strcmp(mode, "wall") != 0 && strcmp(mode, "cpu") != 0) {
        PyErr_Format(PyExc_ValueError, "mode must be 'wall' or 'cpu', not '%s'", mode);
        return -1;
    }
    self->mode = strcmp(mode, "cpu") == 0 ? SW_PROFILE_CPU : SW_PROFILE_WALL;
    if (trace && self->mode == SW_PROFILE_CPU) {
        PyErr_SetString(PyExc_ValueError, "samples written into a trace are wall-clock samples (mode 'wall')");
        return -1;
    }
    self->trace = trace;
    PyMem_Free(self->skip_prefix);
    self->skip_prefix = NULL;
    if (skip) {
        size_t n = strlen(skip) + 1;
        self->skip_prefix = PyMem_Malloc(n);
        if (!self->skip_prefix) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(self->skip_prefix, skip, n);
    }
    self->interval_ns = iv;
    self->lines = lines;
    self->native = native;
    self->blocking = blocking;
    self->max_depth = depth;
    self->max_threads = threads;
    return 0;
}

/* 0 if the sampler's results may be used here, else -1 with an exception. */
static int usable(SamplerObject *self)
{
    if (self->s && sw_sampler_in_forked_child(self->s)) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler was running when the process forked; "
                                            "it cannot be used in the child");
        return -1;
    }
    return 0;
}

/* Sampling this process, the signal handler of nativestack.h is
 * installed from start() until the sampling thread has stopped: in native
 * mode to capture native stacks (-1 with an exception if it cannot be),
 * else to park a thread whose walk was torn (where it cannot be, torn
 * walks are retried, then failed, as from outside). */
static int signal_start(SamplerObject *self)
{
    char err[200] = "";
    sw_nstack_get_stats(&self->nstack0);
    if (!self->native) {
        self->park_installed = sw_nstack_park_install(err, sizeof err) == SW_OK;
        return 0;
    }
    if (!sw_nstack_supported(err, sizeof err)) {
        PyErr_Format(PyExc_RuntimeError, "cannot capture native frames here: %s", err);
        return -1;
    }
    if (sw_nstack_install(err, sizeof err) != SW_OK) {
        PyErr_Format(PyExc_RuntimeError, "cannot capture native frames: %s", err);
        return -1;
    }
    self->native_installed = 1;
    return 0;
}

static void signal_stop(SamplerObject *self)
{
    if (self->native_installed) {
        sw_nstack_uninstall();
        self->native_installed = 0;
    }
    if (self->park_installed) {
        sw_nstack_park_uninstall();
        self->park_installed = 0;
    }
}

/* The reader of the process sampled: this one (pid 0), or process pid (its
 * idle threads not walked when skip_idle: their samples are left out)
 * through procmem's target, with the layout of the target's release
 * (target_open.h). NULL with an exception. */
static sw_pystack *reader_for(SamplerObject *self, int pid, int skip_idle)
{
    /* STACKWATCH_TEST_PARK_AHEAD=1 (the tests, the benches): the thread
     * holding the GIL parked ahead of every walk, whether walks tear on
     * this machine or not; =unanswered (the tests): each such park counted
     * as not answered, so that every sample of it takes the unparked walk
     * that follows a failed park; =never (the benches): never parked ahead,
     * only after a torn walk, however often its walks tear
     * (limits.park_always 1, 2, 3). */
    const char *always = getenv("STACKWATCH_TEST_PARK_AHEAD");
    uint32_t park_always = !self->park_installed || !always ? 0
                           : strcmp(always, "1") == 0            ? 1
                           : strcmp(always, "unanswered") == 0   ? 2
                           : strcmp(always, "never") == 0        ? 3
                                                                 : 0;
    /* STACKWATCH_TEST_FAIL_EVERY=N (the tests): every N-th stack read is
     * failed, as a torn one (limits.fail_every). */
    const char *fail = getenv("STACKWATCH_TEST_FAIL_EVERY");
    sw_pystack_limits lim = {(uint32_t)self->max_threads, (uint32_t)self->max_depth, MAX_CODES, CODE_TTL, 1,
                             (uint32_t)self->lines, (uint32_t)self->native, 0, (uint32_t)self->park_installed,
                             park_always, 0, 0, 0, fail ? (uint32_t)strtoul(fail, NULL, 10) : 0, 0};
    /* A profile's native frames get their pc's line as from outside (a
     * trace's samples keep their native frames' library and line 0). */
    lim.native_lines = (uint32_t)(self->lines && self->native && !self->trace);
    char err[256] = "";
    sw_pystack *r;
    if (pid == 0 && self->blocking) {
        PyErr_SetString(PyExc_ValueError, "blocking sampling is of another process (pid=...)");
        return NULL;
    }
    if (pid == 0) {
        if (!SW_SAMPLER_SUPPORTED) {
            PyErr_SetString(PyExc_RuntimeError, "the sampling profiler supports CPython 3.9 to 3.13 (with the GIL)");
            return NULL;
        }
        if (self->interval_ns < SW_SAMPLER_MIN_INTERVAL_SELF_NS) {
            PyErr_Format(PyExc_ValueError, "sampling this process, the interval must be at least %llu ns",
                         SW_SAMPLER_MIN_INTERVAL_SELF_NS);
            return NULL;
        }
        sw_py_layout l;
        sw_sampler_layout_fill(&l);
        PyInterpreterState *interp = PyInterpreterState_Get();
        /* The interpreter state itself is the probe: it is surely readable. */
        r = sw_pystack_new(&l, (int)getpid(), (uint64_t)(uintptr_t)interp, &lim, (uint64_t)(uintptr_t)interp, 64,
                           err, sizeof err);
        if (!r) {
            PyErr_Format(PyExc_RuntimeError, "cannot sample this process: %s", err);
            return NULL;
        }
        /* 3.12+: code objects' headers read again only once this process
         * made one, as from outside (pystack.c "Code objects by counter").
         * (3.12's counter is a global of libpython not exported: from
         * outside it is found in the ELF's .symtab, here among libpython's
         * data by the code objects made: sw_sampler_code_counter.) */
        uint64_t counter, interps;
        if (sw_sampler_code_counter(interp, &counter, &interps) == SW_OK)
            sw_pystack_set_code_counter(r, counter, interps);
        if (lim.native_lines) {
            /* Native frames' own lines: the interpreter's and libc's line
             * tables, read now rather than by the first samples (every
             * stack runs through both). */
            Py_BEGIN_ALLOW_THREADS
            sw_pystack_native_lines_ahead(r, (uint64_t)(uintptr_t)PyEval_EvalCode);
            sw_pystack_native_lines_ahead(r, (uint64_t)(uintptr_t)getpid);
            Py_END_ALLOW_THREADS
        }
        return r;
    }
    if (self->trace) {
        PyErr_SetString(PyExc_ValueError, "samples into a trace are of this process only");
        return NULL;
    }
    /* Another process, by wall time: a sample's CPU time only adds up to
     * its thread's, so each thread's is read once per CPU_READ_NS (a
     * system call of each round saved at 100 kHz), not every round. */
    if (self->mode == SW_PROFILE_WALL && self->interval_ns < CPU_READ_NS)
        lim.cpu_every = (uint32_t)(CPU_READ_NS / self->interval_ns);
    /* ... and idle threads, left out, are not walked (pystack.h). */
    lim.skip_idle = (uint32_t)(skip_idle && !self->native);
    lim.blocking = (uint32_t)self->blocking;
    sw_target t;
    sw_py_layout l;
    uint64_t interp;
    if (sw_target_open_bound(pid, "auto", &t, &l, &interp, &self->target_layout) < 0)
        return NULL;
    sw_target_version_str(t.version_hex, self->target_version, sizeof self->target_version);
    r = sw_pystack_new(&l, pid, interp, &lim, interp, 8, err, sizeof err);
    /* Code objects' headers read again only once the target made one
     * (pystack.c "Code objects by counter"). */
    uint64_t counter, interps;
    if (r && sw_target_code_counter(&t, &l, interp, &counter, &interps) == SW_OK)
        sw_pystack_set_code_counter(r, counter, interps);
    sw_target_close(&t);
    if (!r) {
        PyErr_Format(PyExc_RuntimeError, "cannot sample process %d: %s", pid, err);
        return NULL;
    }
    /* Blocking: whether its threads can be stopped at all is found out
     * now, not as failed rounds (its main thread stopped and let go). */
    if (self->blocking && sw_pystack_block_check(pid, err, sizeof err) != SW_OK) {
        sw_pystack_free(r);
        PyErr_Format(PyExc_RuntimeError, "cannot sample process %d blocking: %s", pid, err);
        return NULL;
    }
    return r;
}

static PyObject *Sampler_start(SamplerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"pid", "skip_idle", "gil_only", NULL};
    int pid = 0, skip_idle = 0, gil_only = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|ipp", kwlist, &pid, &skip_idle, &gil_only))
        return NULL;
    if (self->started) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler has already been started (a profiler runs once)");
        return NULL;
    }
    if (pid < 0) {
        PyErr_Format(PyExc_ValueError, "no process has the id %d", pid);
        return NULL;
    }
    if ((skip_idle || gil_only) && self->trace) {
        PyErr_SetString(PyExc_ValueError, "samples into a trace keep every thread's samples");
        return NULL;
    }
    if (pid == 0 && signal_start(self) < 0)
        return NULL;
    sw_pystack *r = reader_for(self, pid, skip_idle);
    if (!r) {
        signal_stop(self);
        return NULL;
    }
    self->pid = pid;
    if (self->trace) {
        /* Samples into the running trace file, on its clock. */
        uint64_t mono0 = 0;
        sw_writer *w = NULL;
        sw_attachment att = {"sampler", SW_CHUNK_SAMPLES, sw_sampler_trace_detach, self};
        int why = sw_session_attach(&att, &w, &mono0);
        if (why != SW_ATTACH_OK) {
            sw_pystack_free(r);
            signal_stop(self);
            PyErr_SetString(PyExc_RuntimeError,
                            why == SW_ATTACH_NO_SESSION ? "samples into a trace need a running trace session"
                            : why == SW_ATTACH_TAKEN    ? "a sampler already writes into this trace"
                                                        : "too many producers write into this trace");
            return NULL;
        }
        self->attached = 1;
        self->stream = sw_sample_stream_new(w, mono0, self->skip_prefix);
        if (self->stream)   /* (set_filters checked the count) */
            (void)sw_sample_stream_set_ignore(self->stream, self->filters.ignore, self->filters.nignore);
        self->s = self->stream ? sw_sampler_new(r, self->interval_ns, sw_sample_stream_sink, self->stream) : NULL;
        if (!self->stream)
            sw_pystack_free(r);
        int rc = self->s ? sw_sampler_start(self->s) : SW_ENOMEM;
        if (rc != SW_OK) {
            sw_sampler_free(self->s);
            sw_sample_stream_free(self->stream);
            self->s = NULL;
            self->stream = NULL;
            self->attached = 0;
            sw_session_detach(self);
            signal_stop(self);
            sw_pyerr(rc, PyExc_RuntimeError, "cannot start the sampling thread: %s", sw_strerror(rc));
            return NULL;
        }
        self->started = 1;
        Py_RETURN_NONE;
    }
    self->prof = sw_profile_new();
    if (!self->prof) {
        sw_pystack_free(r);
        signal_stop(self);
        return PyErr_NoMemory();
    }
    const sw_profile_filters *fl = &self->filters;
    sw_profile_set_filters(self->prof, fl->anchor, fl->follow, fl->nfollow, fl->ignore, fl->nignore, fl->elide,
                           fl->nelide);
    sw_profile_set_mode(self->prof, self->mode);
    sw_profile_set_keep(self->prof, skip_idle, gil_only);
    int hrc = sw_history_opts_apply(&self->hist, self->prof);
    if (hrc != SW_OK)
        sw_pystack_free(r);   /* sw_sampler_new would own it */
    self->s = hrc == SW_OK ? sw_sampler_new(r, self->interval_ns, sw_profile_sink, self->prof) : NULL;
    if (self->s)
        /* Another process's threads: never preempted, unless the round
         * stops them (--blocking): then the sooner it ends, the better. */
        sw_sampler_set_yielding(self->s, pid != 0 && !self->blocking);
    int rc = self->s ? sw_sampler_start(self->s) : hrc != SW_OK ? hrc : SW_ENOMEM;
    if (rc != SW_OK) {
        sw_sampler_free(self->s);
        sw_profile_free(self->prof);
        self->s = NULL;
        self->prof = NULL;
        signal_stop(self);
        sw_pyerr(rc, PyExc_RuntimeError, "cannot start the sampling thread: %s", sw_strerror(rc));
        return NULL;
    }
    self->started = 1;
    Py_RETURN_NONE;
}

/* Reads a sequence of at most SW_PROFILE_MAX_FILTER code objects into
 * addrs. Returns the count, or -1 with an exception set. */
static Py_ssize_t code_addrs(PyObject *obj, uint64_t *addrs, const char *what)
{
    PyObject *seq = PySequence_Fast(obj, what);
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > SW_PROFILE_MAX_FILTER) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "at most %d code objects in %s", SW_PROFILE_MAX_FILTER, what);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyCode_Check(c)) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "%s must hold code objects", what);
            return -1;
        }
        addrs[i] = (uint64_t)(uintptr_t)c;
    }
    Py_DECREF(seq);
    return n;
}

/* set_filters(anchor=None, follow=(), ignore=(), elide=()): before start(), the
 * filters of sw_profile_set_filters, given as code objects; in trace mode
 * ignore only (sw_sample_stream_set_ignore: a sample taken inside one of
 * them is cut whole). The caller
 * keeps the code objects alive (they are functions' code) so that their
 * addresses stay theirs while the profile is recorded. */
static PyObject *Sampler_set_filters(SamplerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"anchor", "follow", "ignore", "elide", NULL};
    PyObject *anchor = Py_None, *follow = NULL, *ignore = NULL, *elide = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOO", kwlist, &anchor, &follow, &ignore, &elide))
        return NULL;
    if (self->started) {
        PyErr_SetString(PyExc_RuntimeError, "set_filters() must be called before start()");
        return NULL;
    }
    if (anchor != Py_None && !PyCode_Check(anchor)) {
        PyErr_SetString(PyExc_TypeError, "anchor must be a code object or None");
        return NULL;
    }
    sw_profile_filters fl = {.anchor = anchor == Py_None ? 0 : (uint64_t)(uintptr_t)anchor};
    Py_ssize_t nf = follow ? code_addrs(follow, fl.follow, "follow") : 0;
    Py_ssize_t ni = nf >= 0 && ignore ? code_addrs(ignore, fl.ignore, "ignore") : 0;
    Py_ssize_t ne = nf >= 0 && ni >= 0 && elide ? code_addrs(elide, fl.elide, "elide") : 0;
    if (nf < 0 || ni < 0 || ne < 0)
        return NULL;
    if (self->trace && (fl.anchor || nf || ne || ni > SW_SAMPLE_STREAM_MAX_IGNORE)) {
        PyErr_Format(PyExc_ValueError, "samples into a trace take ignore only (at most %d code objects)",
                     SW_SAMPLE_STREAM_MAX_IGNORE);
        return NULL;
    }
    fl.nfollow = (size_t)nf;
    fl.nignore = (size_t)ni;
    fl.nelide = (size_t)ne;
    self->filters = fl;
    Py_RETURN_NONE;
}

/* sw_pystack_native_sources: the profile's function of a native symbol
 * named by its source. */
static void source_found(void *ud, sw_sample_code *symbol, const char *file, uint32_t line)
{
    if (symbol->sink_id != SW_NO_ID)
        (void)sw_functab_set_source(ud, symbol->sink_id, file, strlen(file), (int32_t)line);
}

static PyObject *Sampler_stop(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (usable(self) < 0)
        return NULL;
    if (!self->s) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler has not been started");
        return NULL;
    }
    int rc;
    if (self->stream) {
        /* The thread stops, then the rest of the samples go to the file,
         * before the session closes it. */
        if (!self->attached) {
            PyErr_SetString(PyExc_RuntimeError, "this sampler is not running (the trace session stopped it)");
            return NULL;
        }
        rc = stop_trace_sampler(self);
        if (rc != SW_OK) {
            sw_pyerr(rc, PyExc_OSError, "writing samples into the trace failed (%s)", sw_strerror(rc));
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = sw_sampler_stop(self->s);
    Py_END_ALLOW_THREADS
    signal_stop(self);
    if (rc != SW_OK) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler is not running");
        return NULL;
    }
    sw_history_stopped(self->prof);
    if (self->native && !self->pid) {
        /* The native functions' source lines, read now that sampling
         * stopped (an object's line tables can take a second to read:
         * not on the sampling thread). */
        sw_pystack *r = sw_sampler_reader(self->s);
        Py_BEGIN_ALLOW_THREADS
        sw_profile_lock(self->prof);
        sw_pystack_native_sources(r, source_found, sw_profile_functab(self->prof));
        sw_profile_unlock(self->prof);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

/* {"running": n, "gil_wait": n, "idle": n, "unknown": n}: base/sample.h's
 * SW_THREAD_STATES in order (NULL with an
 * exception if out of memory; Py_BuildValue's "N" then fails too). */
static PyObject *states_dict(const unsigned long long *n)
{
    PyObject *d = PyDict_New();
#define SW_X_STATE_ITEM_(K, num, name)                                                           \
    if (d) {                                                                                     \
        PyObject *v = PyLong_FromUnsignedLongLong(n[num]);                                       \
        if (!v || PyDict_SetItemString(d, #name, v) < 0)                                         \
            Py_CLEAR(d);                                                                         \
        Py_XDECREF(v);                                                                           \
    }
    SW_THREAD_STATES(SW_X_STATE_ITEM_)
#undef SW_X_STATE_ITEM_
    return d;
}

static PyObject *Sampler_stats(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (usable(self) < 0)
        return NULL;
    sw_sampler_stats st;
    memset(&st, 0, sizeof st);
    st.interval_ns = self->interval_ns;
    if (self->s)
        sw_sampler_get_stats(self->s, &st);
    unsigned long long stored = 0, dropped = 0, cut = 0, off_cpu = 0, gil_held = 0, left_out = 0;
    unsigned long long states[SW_STATE_COUNT] = {0};
    if (self->prof) {
        sw_profile_lock(self->prof);
        stored = sw_profile_samples(self->prof);
        dropped = sw_profile_dropped(self->prof);
        cut = sw_profile_cut(self->prof);
        off_cpu = sw_profile_off_cpu(self->prof);
        left_out = sw_profile_left_out(self->prof);
        for (size_t i = 0; i < sw_profile_thread_count(self->prof); i++) {
            const sw_profile_thread *t = sw_profile_thread_get(self->prof, i);
            for (unsigned k = 0; k < SW_STATE_COUNT; k++)
                states[k] += t->states[k];
            gil_held += t->gil_held;
        }
        sw_profile_unlock(self->prof);
    }
    if (self->stream) {
        sw_sample_stream_stats ss;
        sw_sample_stream_stats_get(self->stream, &ss);
        stored = ss.samples;
        dropped = ss.lost;
        cut = ss.cut;
    }
    const sw_pystack_stats *r = &st.reader;
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:L,s:L,s:O}", "interval_ns",
        (unsigned long long)st.interval_ns, "ticks", (unsigned long long)st.ticks, "missed",
        (unsigned long long)st.missed, "stalls", (unsigned long long)st.stalls, "stall_max_ns",
        (unsigned long long)st.stall_max_ns, "missed_off_cpu", (unsigned long long)st.missed_off_cpu, "busy_ns", (unsigned long long)st.busy_ns, "samples",
        (unsigned long long)r->samples, "failed", (unsigned long long)r->failed, "empty", (unsigned long long)r->empty,
        "truncated", (unsigned long long)r->truncated, "retried", (unsigned long long)r->retried, "threads_skipped", (unsigned long long)r->threads_skipped,
        "stored", stored, "dropped", dropped, "cut", cut, "code_hits", (unsigned long long)r->code_hits, "code_misses",
        (unsigned long long)r->code_misses, "reads", (unsigned long long)r->reads, "failed_reads",
        (unsigned long long)r->failed_reads, "start_ns", (long long)st.start_ns, "stop_ns", (long long)st.stop_ns,
        "running", st.running ? Py_True : Py_False);
    /* What the threads were doing (see threads()), and the counts of the
     * thread-state probes. */
    sw_nstack_stats ns = {0, 0, 0};
    sw_nstack_get_stats(&ns);
    PyObject *native = Py_BuildValue("{s:O,s:O,s:K,s:K,s:K,s:K,s:K,s:K}", "lines", self->lines ? Py_True : Py_False,
                                     "native", self->native ? Py_True : Py_False, "native_samples",
                                     (unsigned long long)r->native, "native_failed",
                                     (unsigned long long)r->native_failed, "native_timeouts",
                                     (unsigned long long)(self->native && !self->pid ? ns.timeouts - self->nstack0.timeouts : 0),
                                     "native_late",
                                     (unsigned long long)(self->native && !self->pid ? ns.late - self->nstack0.late : 0),
                                     "native_stopped_ns", (unsigned long long)r->native_stopped_ns,
                                     "native_by_fp", (unsigned long long)r->native_by_fp);
    PyObject *blocking = !native ? NULL
                                 : Py_BuildValue("{s:O,s:K,s:K,s:K,s:s}", "blocking", self->blocking ? Py_True : Py_False,
                                                 "blocked_rounds", (unsigned long long)r->blocked_rounds,
                                                 "block_failed", (unsigned long long)r->block_failed, "blocked_ns",
                                                 (unsigned long long)r->blocked_ns, "block_error", r->block_error);
    if (!blocking || PyDict_Update(native, blocking) < 0)
        Py_CLEAR(native);
    Py_XDECREF(blocking);
    if (!native || PyDict_Update(d, native) < 0)
        Py_CLEAR(d);
    Py_XDECREF(native);
    PyObject *target = !d ? NULL : Py_BuildValue("{s:i,s:s,s:s,s:K}", "pid", self->pid ? self->pid : (int)getpid(),
                                                 "target_version", self->target_version, "layout",
                                                 self->target_layout ? self->target_layout : "own", "left_out",
                                                 left_out);
    if (!target || PyDict_Update(d, target) < 0)
        Py_CLEAR(d);
    Py_XDECREF(target);
    PyObject *more = !d ? NULL : Py_BuildValue("{s:s,s:N,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "mode",
                                   self->mode == SW_PROFILE_CPU ? "cpu" : "wall", "states", states_dict(states),
                                   "gil_held", gil_held, "off_cpu", off_cpu, "state_probe_failed",
                                   (unsigned long long)r->state_unknown, "cpu_probe_failed",
                                   (unsigned long long)r->cpu_unknown, "gil_read_failed",
                                   (unsigned long long)r->gil_unknown, "torn", (unsigned long long)r->torn,
                                   "unfit", (unsigned long long)r->unfit, "half_made",
                                   (unsigned long long)r->half_made, "relisted", (unsigned long long)r->relisted, "returned", (unsigned long long)r->returned,
                                   "muted_failed", (unsigned long long)r->muted_failed);
    PyObject *park = !more ? NULL : Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "codes_by_counter",
                                                  (unsigned long long)r->codes_by_counter, "checked_ahead",
                                                  (unsigned long long)r->checked_ahead, "parked",
                                                  (unsigned long long)r->parked,
                                                  "park_failed", (unsigned long long)r->park_failed, "parked_ns",
                                                  (unsigned long long)r->parked_ns, "after_park",
                                                  (unsigned long long)r->after_park, "parked_ahead",
                                                  (unsigned long long)r->parked_ahead, "read_by_thread",
                                                  (unsigned long long)r->read_by_thread, "read_short",
                                                  (unsigned long long)r->read_short);
    if (!park || PyDict_Update(more, park) < 0)
        Py_CLEAR(more);
    Py_XDECREF(park);
    if (!d || !more || PyDict_Update(d, more) < 0) {
        Py_XDECREF(d);
        d = NULL;
    }
    Py_XDECREF(more);
    return d;
}

static PyObject *Sampler_threads(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (usable(self) < 0)
        return NULL;
    PyObject *l = PyList_New(0);
    if (!l || !self->prof)
        return l;
    sw_profile_lock(self->prof);
    for (size_t i = 0; i < sw_profile_thread_count(self->prof); i++) {
        const sw_profile_thread *t = sw_profile_thread_get(self->prof, i);
        unsigned long long ts[SW_STATE_COUNT];
        for (unsigned k = 0; k < SW_STATE_COUNT; k++)
            ts[k] = t->states[k];
        PyObject *d = Py_BuildValue("{s:K,s:K,s:K,s:L,s:L,s:N,s:K,s:K,s:K}", "thread_id",
                                    (unsigned long long)t->thread_id, "native_id", (unsigned long long)t->native_tid,
                                    "samples", (unsigned long long)t->samples, "first_ns", (long long)t->first_ns,
                                    "last_ns", (long long)t->last_ns, "states", states_dict(ts), "gil_held",
                                    (unsigned long long)t->gil_held, "off_cpu", (unsigned long long)t->off_cpu,
                                    "cpu_ns", (unsigned long long)t->cpu_ns);
        if (!d || PyList_Append(l, d) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(l);
            break;
        }
        Py_DECREF(d);
    }
    sw_profile_unlock(self->prof);
    return l;
}

/* The thread's tree, or all threads merged when thread_id is None. */
static PyObject *Sampler_tree(SamplerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"thread_id", NULL};
    sw_optional_u64 tid = {0, 0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O&", kwlist, sw_pyargs_optional_u64, &tid) || usable(self) < 0)
        return NULL;
    sw_profile *p = self->prof;
    if (!p) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler has not been started");
        return NULL;
    }
    PyObject *res = NULL;
    sw_profile_lock(p);
    if (!tid.given) {
        sw_calltree *t = sw_profile_merged(p);
        res = t ? sw_py_tree_to_dicts(t) : PyErr_NoMemory();
        sw_calltree_free(t);
    } else {
        for (size_t i = 0; i < sw_profile_thread_count(p); i++) {
            const sw_profile_thread *th = sw_profile_thread_get(p, i);
            if (th->thread_id == tid.value)
                res = sw_py_tree_to_dicts(th->tree);
        }
        if (!res && !PyErr_Occurred())
            PyErr_Format(PyExc_KeyError, "no samples of thread %llu", tid.value);
    }
    sw_profile_unlock(p);
    return res;
}

/* thread_trees() -> [(thread_id, CallTree)]: every thread's whole-run tree,
 * in the profile's thread order, copied under the lock at one moment (a
 * snapshot: sampling goes on meanwhile). The trees share one function
 * table, a copy of the profile's in which every function keeps its id
 * (ext/profile/calltree_type.h), so that rendered together they are the profile. */
static PyObject *Sampler_thread_trees(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (usable(self) < 0)
        return NULL;
    sw_profile *p = self->prof;
    if (!p) {
        PyErr_SetString(PyExc_RuntimeError, "this profiler has not been started");
        return NULL;
    }
    sw_functab *ft;
    sw_calltree **trees;
    uint64_t *tids;
    size_t n;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    sw_profile_lock(p);
    n = sw_profile_thread_count(p);
    ft = sw_py_functab_copy(sw_profile_functab(p));
    trees = calloc(n ? n : 1, sizeof *trees);
    tids = calloc(n ? n : 1, sizeof *tids);
    rc = ft && trees && tids ? SW_OK : SW_ENOMEM;
    for (size_t i = 0; rc == SW_OK && i < n; i++) {
        const sw_profile_thread *th = sw_profile_thread_get(p, i);
        tids[i] = th->thread_id;
        trees[i] = sw_calltree_new(ft);
        rc = trees[i] ? sw_calltree_merge(trees[i], th->tree) : SW_ENOMEM;
    }
    sw_profile_unlock(p);
    Py_END_ALLOW_THREADS
    PyObject *res = NULL, *list = NULL;
    if (rc != SW_OK) {
        for (size_t i = 0; trees && i < n; i++)
            sw_calltree_free(trees[i]);
        sw_functab_free(ft);
        sw_py_tree_error(rc, "copying the profile's trees");
    } else {
        list = sw_py_calltree_list_shared(ft, trees, n);   /* owns ft and the trees now */
        res = list ? PyList_New((Py_ssize_t)n) : NULL;
    }
    for (size_t i = 0; res && i < n; i++) {
        PyObject *pair = Py_BuildValue("(KO)", (unsigned long long)tids[i], PyList_GET_ITEM(list, (Py_ssize_t)i));
        if (!pair) {
            Py_CLEAR(res);
            break;
        }
        PyList_SET_ITEM(res, (Py_ssize_t)i, pair);
    }
    Py_XDECREF(list);
    free(trees);
    free(tids);
    return res;
}

/* History of trees over time (history_view.c does the work). */
static PyObject *Sampler_set_history(SamplerObject *self, PyObject *args, PyObject *kw)
{
    if (self->started) {
        PyErr_SetString(PyExc_RuntimeError, "set_history() must be called before start()");
        return NULL;
    }
    if (sw_history_opts_parse(&self->hist, args, kw) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Sampler_history(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (usable(self) < 0)
        return NULL;
    sw_profile *p = self->prof;
    if (!p)
        return sw_py_history_entries(NULL, 0);
    sw_profile_lock(p);
    PyObject *res = sw_py_history_entries(sw_profile_history(p), sw_profile_history_dropped(p));
    sw_profile_unlock(p);
    return res;
}

static PyObject *Sampler_window(SamplerObject *self, PyObject *args, PyObject *kw)
{
    if (usable(self) < 0)
        return NULL;
    sw_profile *p = self->prof;
    return sw_py_history_window(p ? sw_profile_history(p) : NULL, p, args, kw);
}

static PyObject *Sampler_save_bytes(SamplerObject *self, PyObject *args, PyObject *kw)
{
    return usable(self) < 0 ? NULL : sw_py_profile_file_bytes(self->prof, args, kw);
}

static PyMethodDef Sampler_methods[] = {
    {"start", (PyCFunction)(void (*)(void))Sampler_start, METH_VARARGS | METH_KEYWORDS,
     "start(pid=0, skip_idle=False, gil_only=False): start the sampling thread (once), reading this process "
     "or process pid from outside; skip_idle/gil_only leave out the samples of idle threads / of threads not "
     "holding the GIL (stats()['left_out'])"},
    {"set_filters", (PyCFunction)(void (*)(void))Sampler_set_filters, METH_VARARGS | METH_KEYWORDS,
     "set_filters(anchor=None, follow=(), ignore=(), elide=()): keep a wrapper's and the profiler's own frames out "
     "(trace mode: ignore only, a sample inside one of those code objects is cut whole)"},
    {"stop", (PyCFunction)Sampler_stop, METH_NOARGS, "stop(): stop sampling and wait for the thread"},
    {"stats", (PyCFunction)Sampler_stats, METH_NOARGS, "stats() -> dict of counters"},
    {"threads", (PyCFunction)Sampler_threads, METH_NOARGS, "threads() -> [dict] of the threads sampled"},
    {"tree", (PyCFunction)(void (*)(void))Sampler_tree, METH_VARARGS | METH_KEYWORDS,
     "tree(thread_id=None) -> nested dicts {name, filename, line, count, self, children}"},
    {"thread_trees", (PyCFunction)Sampler_thread_trees, METH_NOARGS,
     "thread_trees() -> [(thread_id, CallTree)]: a snapshot of every thread's tree, on one shared table"},
    {"set_history", (PyCFunction)(void (*)(void))Sampler_set_history, METH_VARARGS | METH_KEYWORDS,
     "set_history(cycle_ns, maxlen, omit=()): before start(), keep a tree per cycle, omit files"},
    {"history", (PyCFunction)Sampler_history, METH_NOARGS, "history() -> {entries: [{start_ns, end_ns, samples, threads}], evicted, evicted_samples, dropped}"},
    {"window", (PyCFunction)(void (*)(void))Sampler_window, METH_VARARGS | METH_KEYWORDS,
     "window(start_ns, stop_ns, thread_id=None) -> CallTree"},
    {"save_bytes", (PyCFunction)(void (*)(void))Sampler_save_bytes, METH_VARARGS | METH_KEYWORDS,
     "save_bytes(info, threads) -> bytes of a profile file"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SamplerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.Sampler",
    .tp_basicsize = sizeof(SamplerObject),
    .tp_dealloc = (destructor)Sampler_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Sampler(interval_ns, max_depth=1024, max_threads=256, mode='wall', trace=False, skip_prefix=None, "
              "lines=False, native=False, blocking=False): samples every thread's Python stack from a native thread, without the "
              "GIL; mode 'cpu' keeps only threads on a CPU, weighted by CPU time; trace=True writes the samples "
              "into the running trace file instead of a profile (frames of files under skip_prefix left out); "
              "lines: nodes are (function, line being run); native: native frames merged in; blocking (start(pid) "
              "only): the process stopped with ptrace for each round.",
    .tp_methods = Sampler_methods,
    .tp_init = (initproc)Sampler_init,
    .tp_new = PyType_GenericNew,
};

int sw_sampler_add_to_module(PyObject *m)
{
    if (PyType_Ready(&SamplerType) < 0)
        return -1;
    Py_INCREF(&SamplerType);
    if (PyModule_AddObject(m, "Sampler", (PyObject *)&SamplerType) < 0) {
        Py_DECREF(&SamplerType);
        return -1;
    }
    if (sw_test_entry_points_add_to_module(m) < 0 || sw_dump_process_add_to_module(m) < 0 ||
        sw_pending_call_add_to_module(m) < 0)
        return -1;
    if (PyModule_AddIntConstant(m, "SAMPLER_MIN_INTERVAL_NS", (long)SW_SAMPLER_MIN_INTERVAL_SELF_NS) < 0 ||
        PyModule_AddIntConstant(m, "SAMPLER_MIN_INTERVAL_OTHER_NS", (long)SW_SAMPLER_MIN_INTERVAL_NS) < 0 ||
        PyModule_AddIntConstant(m, "SAMPLER_SUPPORTED", SW_SAMPLER_SUPPORTED) < 0)
        return -1;
    return 0;
}
