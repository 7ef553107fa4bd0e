/*
 * session.c - starting and stopping a tracing session, attaching threads,
 * registering code objects, and the thread-exit and fork paths.
 */
#include "session.h"

#include "ext/dispatch/dispatch.h"
#include "ext/shared/globs.h"
#include "ext/shared/hookerr.h"
#include "ext/shared/pyerr.h"
#include "ext/tracer/ccalls.h"
#include "ext/tracer/events.h"
#include "ext/tracer/flusher.h"
#include "ext/tracer/init_gap.h"
#include "ext/tracer/recursion.h"
#include "ext/tracer/attachments.h"
#include "ext/tracer/kernel_trace.h"
#include "ext/tracer/native_frames.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

sw_session sw_S = {.fast_gen = ~(uint64_t)0, .fast_tag = (uint64_t)0xffffffffu << 3, .extra_index = -1, .recursion_gen = 1, .lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t gen_counter;

/* The session's generation changes (0: none), and with it the key threads
 * take for the fast path (none while a maximum depth is set: every frame
 * then takes eval_slow, which counts the depth). */
static void set_gen(uint64_t gen)
{
    sw_S.gen = gen;
    sw_S.quiet_wake = 0;
    sw_tstate_session_gen = (gen && !sw_S.max_depth && !sw_S.no_calls) ? gen : 0;
    sw_session_fast_refresh();
}

/* Around fork() (pthread_atfork handlers, registered at the first start):
 * the forking thread takes the session's lock and the writer's, so that no
 * thread holds either when the process is copied (a thread flushing at its
 * exit holds both without the GIL; a child forked then would wait for them
 * for ever). In the child the session is left at once, before any Python
 * code runs there (the at-fork hooks registered before stackwatch's, such
 * as threading's, run traced otherwise, and a buffer they fill would be
 * written into the parent's file): the file is closed, nothing more is
 * recorded, and sw_session_after_fork_child() forgets the rest. */
static sw_writer *fork_locked;   /* the writer whose lock the forking thread holds */
static int fork_child_pending;   /* a child that left its parent's session */

static void fork_prepare(void)
{
    if (!sw_S.gen || !sw_S.w)
        return;
    pthread_mutex_lock(&sw_S.lock);
    sw_writer_fork_prepare(sw_S.w);
    fork_locked = sw_S.w;
}

static void fork_release(void)
{
    sw_writer_fork_release(fork_locked);
    fork_locked = NULL;
    pthread_mutex_unlock(&sw_S.lock);
}

static void fork_parent(void)
{
    if (fork_locked)
        fork_release();
}

static void fork_child(void)
{
    if (!fork_locked)
        return;
    fork_release();
    sw_writer_abandon(sw_S.w);
    fork_child_pending = 1;
    set_gen(0);
}

__thread sw_tracer_thread sw_TT __attribute__((tls_model("initial-exec")));

/* Thread exit: flush what the thread recorded. Runs without the GIL. */
static void thread_exit(void *arg)
{
    (void)arg;
    sw_tracer_thread *t = &sw_TT;
    pthread_mutex_lock(&sw_S.lock);
    sw_recursion_bonus_forget_self();
    if (sw_S.gen && t->session == sw_S.gen && t->tb)
        sw_tbuf_finish(t->tb);
    t->tb = NULL;
    t->session = 0;
    sw_tracer_thread_ready(t);
    pthread_mutex_unlock(&sw_S.lock);
    sw_native_frames_detach(t);
}

int sw_thread_exit_key(void)
{
    if (!sw_S.key_made && pthread_key_create(&sw_S.key, thread_exit) == 0)
        sw_S.key_made = 1;
    return sw_S.key_made;
}

/* UTF-8 of a str, or a replacement for what cannot be encoded. Returns a
 * new bytes object or NULL (never with an exception left set). */
static PyObject *utf8_of(PyObject *s)
{
    if (!s || !PyUnicode_Check(s))
        return PyBytes_FromString("?");
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace");
    if (!b)
        PyErr_Clear();
    return b;
}

static void lookup_name(sw_tracer_thread *t, unsigned long ident);

void sw_session_fast_refresh(void)
{
    sw_S.fast_gen = (sw_session_calls() && sw_S.fast_variant_ok && !(sw_D.slow & SW_MASK_CALLS) && !sw_S.quiet_wake)
                        ? sw_S.gen : ~(uint64_t)0;
    sw_S.fast_tag = (sw_S.fast_gen & 0xffffffffu) << 3;
}

void sw_thread_name_lookup(sw_tracer_thread *t)
{
    sw_exc_state es;
    sw_exc_save(&es);
    sw_busy_enter(&sw_T);
    lookup_name(t, PyThread_get_thread_ident());
    sw_busy_exit(&sw_T);
    sw_exc_restore(&es);
}

static void lookup_name(sw_tracer_thread *t, unsigned long ident)
{
    PyObject *name = PyUnicode_FromString("threading");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    PyObject *active = mod ? PyObject_GetAttrString(mod, "_active") : NULL;
    PyObject *key = active ? PyLong_FromUnsignedLong(ident) : NULL;
    PyObject *thread = (active && key && PyDict_Check(active)) ? PyDict_GetItemWithError(active, key) : NULL;
    Py_XINCREF(thread);
    Py_XDECREF(active);
    /* Not registered yet (its first records, in threading's own code, come
     * before): in threading's _limbo, by its _ident once it has one. */
    PyObject *limbo = !thread && key && mod && !PyErr_Occurred() ? PyObject_GetAttrString(mod, "_limbo") : NULL;
    if (limbo && PyDict_Check(limbo)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (!thread && PyDict_Next(limbo, &pos, &k, &v)) {
            PyObject *id = PyObject_GetAttrString(v, "_ident");
            if (id && PyLong_Check(id) && PyObject_RichCompareBool(id, key, Py_EQ) == 1)
                thread = Py_NewRef(v);
            Py_XDECREF(id);
            PyErr_Clear();
        }
    }
    Py_XDECREF(limbo);
    Py_XDECREF(key);
    Py_XDECREF(mod);
    PyObject *tname = thread ? PyObject_GetAttrString(thread, "_name") : NULL;
    Py_XDECREF(thread);
    PyErr_Clear();
    if (tname && PyUnicode_Check(tname)) {
        PyObject *b = utf8_of(tname);
        if (b) {
            sw_writer_thread_name(sw_S.w, t->tb->index, PyBytes_AS_STRING(b));
            t->name_pending = 0;
            sw_tracer_thread_ready(t);
            Py_DECREF(b);
        }
    }
    Py_XDECREF(tname);
}

int sw_thread_attach(sw_tracer_thread *t)
{
    if (sw_S.gen && t->session == sw_S.gen)
        return 1;
    if (!sw_S.gen || t->failed_gen == sw_S.gen)
        return 0;
    sw_exc_state es;
    sw_exc_save(&es);
    sw_busy_enter(&sw_T);
    t->tb = sw_writer_add_thread(sw_S.w, (uint64_t)PyThread_get_thread_native_id(),
                                 (uint64_t)PyThread_get_thread_ident(), "",
                                 sw_clock_now(&sw_S.clock));
    if (!t->tb) {
        t->failed_gen = sw_S.gen;
        sw_hook_error("out of memory creating a thread buffer");
        sw_busy_exit(&sw_T);
        sw_exc_restore(&es);
        return 0;
    }
    t->session = sw_S.gen;
    t->name_pending = 1;
    sw_tracer_thread_ready(t);
    t->name_tries = 0;
    if (!sw_S.no_calls) {   /* (no frames recorded: none of their state) */
        sw_recursion_attach(t);
        if (sw_S.c_calls || sw_S.cython)
            sw_ccalls_thread_attach(t);
        sw_native_frames_attach(t);
    }
    lookup_name(t, PyThread_get_thread_ident());
    if (sw_S.key_made)
        pthread_setspecific(sw_S.key, t);
    sw_busy_exit(&sw_T);
    sw_exc_restore(&es);
    return 1;
}

static int matches(char **globs, const char *file, const char *module)
{
    for (char **g = globs; g && *g; g++) {
        if (sw_glob_match(*g, file))
            return 1;
        if (module && sw_glob_match(*g, module))
            return 1;
        /* "pkg" also matches its submodules "pkg.x.y". */
        size_t n = strlen(*g);
        if (module && strncmp(*g, module, n) == 0 && module[n] == '.')
            return 1;
    }
    return 0;
}

uint32_t sw_code_register(PyCodeObject *co, PyObject *globals)
{
    if (sw_S.extra_index < 0 || !sw_S.gen)
        return SW_ID_SKIP;
    sw_exc_state es;
    sw_exc_save(&es);
    sw_busy_enter(&sw_T);
    uint32_t id = sw_S.next_code;
    PyObject *name = utf8_of(co->co_name);
    PyObject *qual = utf8_of(sw_code_qualname(co));
    PyObject *file = utf8_of(co->co_filename);
    const char *module = NULL;
    PyObject *modb = NULL;
    if (sw_S.nfilters && globals && PyDict_Check(globals)) {
        PyObject *m = PyDict_GetItemString(globals, "__name__");
        if (m && (modb = utf8_of(m)))
            module = PyBytes_AS_STRING(modb);
    }
    uint32_t result = SW_ID_SKIP;
    if (name && qual && file && id <= SW_ID_MASK) {
        const char *f = PyBytes_AS_STRING(file);
        int skip = (sw_S.include && !matches(sw_S.include, f, module)) ||
                   (sw_S.exclude && matches(sw_S.exclude, f, module));
        if (skip) {
            result = SW_ID_SKIP;
        } else if (sw_writer_define_code(sw_S.w, id, SW_CODE_PYTHON, PyBytes_AS_STRING(name),
                                         PyBytes_AS_STRING(qual), f,
                                         (uint32_t)co->co_firstlineno) == 0) {
            sw_S.next_code++;
            result = id;
            if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))
                result |= SW_ID_GEN;
#if PY_VERSION_HEX >= 0x030D0000
            if ((PyUnicode_Check(co->co_name) && PyUnicode_CompareWithASCIIString(co->co_name, "__init__") == 0) ||
                sw_init_gap_is_init(co) || !(co->co_flags & CO_OPTIMIZED))
                result |= SW_ID_INIT;   /* an __init__, or a class body to look into */
#endif
        }
        uintptr_t v = ((uintptr_t)(sw_S.gen & 0xffffffffu) << 32) | result;
        if (sw_code_set_extra((PyObject *)co, sw_S.extra_index, (void *)v) < 0)
            PyErr_Clear();  /* looked up again next time: correct, only slower */
    } else {
        sw_hook_error("could not read a code object's names");
    }
    Py_XDECREF(name);
    Py_XDECREF(qual);
    Py_XDECREF(file);
    Py_XDECREF(modb);
    sw_busy_exit(&sw_T);
    sw_exc_restore(&es);
    return result;
}

#if PY_VERSION_HEX >= 0x030D0000
void sw_code_mark_init(PyCodeObject *co)
{
    sw_code_extra *ce = (sw_code_extra *)co->co_extra;
    if (!sw_S.gen || sw_S.extra_index < 0 || !ce || sw_S.extra_index >= ce->ce_size)
        return;  /* not registered: sw_code_register will see it */
    uintptr_t v = (uintptr_t)ce->ce_extras[sw_S.extra_index];
    if ((v >> 32) != (sw_S.gen & 0xffffffffu) || (v & SW_ID_SKIP) || (v & SW_ID_INIT))
        return;
    ce->ce_extras[sw_S.extra_index] = (void *)(v | SW_ID_INIT);
}
#endif

static int write_meta(const sw_start_opts *o)
{
    sw_bytes kv = {0};
    const sw_clock *c = &sw_S.clock;
    sw_kv_str(&kv, "producer", "stackwatch");
    sw_kv_str(&kv, "clock", c->kind == SW_CLOCK_TSC ? "tsc" : "monotonic");
    sw_kv_f64(&kv, "clock_hz", c->hz);
    sw_kv_uint(&kv, "tick0", c->tick0);
    sw_kv_uint(&kv, "mono0_ns", c->mono0_ns);
    sw_kv_uint(&kv, "real0_ns", c->real0_ns);
    sw_kv_uint(&kv, "boot0_ns", c->boot0_ns);
    sw_kv_uint(&kv, "pid", (uint64_t)getpid());
    sw_kv_uint(&kv, "ring_bytes", o->ring_bytes);
    sw_kv_uint(&kv, "max_depth", o->max_depth);
    if (o->meta && PyDict_Check(o->meta)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(o->meta, &pos, &k, &v)) {
            const char *ks = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
            if (!ks) {
                sw_bytes_free(&kv);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "meta keys must be str");
                return -1;
            }
            if (PyLong_Check(v)) {
                long long x = PyLong_AsLongLong(v);
                if (x == -1 && PyErr_Occurred()) {
                    sw_bytes_free(&kv);
                    return -1;
                }
                sw_kv_sint(&kv, ks, x);
            } else if (PyFloat_Check(v)) {
                sw_kv_f64(&kv, ks, PyFloat_AS_DOUBLE(v));
            } else if (PyUnicode_Check(v)) {
                PyObject *b = utf8_of(v);
                if (!b) {
                    sw_bytes_free(&kv);
                    return PyErr_NoMemory(), -1;
                }
                sw_kv_str(&kv, ks, PyBytes_AS_STRING(b));
                Py_DECREF(b);
            } else {
                sw_bytes_free(&kv);
                PyErr_Format(PyExc_TypeError, "meta value for %s must be str, int or float", ks);
                return -1;
            }
        }
    }
    int rc = sw_writer_meta(sw_S.w, &kv);
    sw_bytes_free(&kv);
    if (rc) {
        sw_pyerr(rc, PyExc_OSError, "cannot write the trace header to %s", o->path);
        return -1;
    }
    return 0;
}

/* Units of 2^shift ticks: the largest power of two no longer than 8 ns,
 * finer than the cost of recording one event, and small deltas encode in
 * one byte. */
/* The TSC rate's cache (clock.h) and this boot's id, set by start for its
 * calibration and used again by stop's refinement. */
static char clock_cache_buf[4096], boot_id_buf[64];
static const char *clock_cache;

/* Where the TSC's rate is cached: $STACKWATCH_CLOCK_CACHE (empty: nowhere),
 * else stackwatch-clock in $XDG_RUNTIME_DIR when that is this user's
 * directory, else /tmp/stackwatch-clock-UID. Reads this boot's id. */
static void clock_cache_find(void)
{
    clock_cache = NULL;
    if (sw_read_text("/proc/sys/kernel/random/boot_id", boot_id_buf, sizeof boot_id_buf) != 0)
        return;
    boot_id_buf[strcspn(boot_id_buf, "\n")] = 0;
    const char *env = getenv("STACKWATCH_CLOCK_CACHE");
    const char *dir = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    int n;
    if (env)
        n = *env ? snprintf(clock_cache_buf, sizeof clock_cache_buf, "%s", env) : -1;
    else if (dir && *dir == '/' && stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
        n = snprintf(clock_cache_buf, sizeof clock_cache_buf, "%s/stackwatch-clock", dir);
    else
        n = snprintf(clock_cache_buf, sizeof clock_cache_buf, "/tmp/stackwatch-clock-%u", (unsigned)geteuid());
    if (n > 0 && (size_t)n < sizeof clock_cache_buf)
        clock_cache = clock_cache_buf;
}

static unsigned choose_shift(double hz)
{
    unsigned s = 0;
    while (s < 20 && (double)(1u << (s + 1)) / hz <= 8e-9)
        s++;
    return s;
}

int sw_session_start(const sw_start_opts *o)
{
    if (sw_S.gen) {
        PyErr_SetString(PyExc_RuntimeError, "stackwatch is already tracing in this process");
        return -1;
    }
    if (sw_S.extra_index < 0) {
        sw_S.extra_index = sw_request_extra_index(NULL);
        if (sw_S.extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no free code-object extra slot for stackwatch");
            return -1;
        }
    }
    sw_thread_exit_key();
    static int atfork_registered;
    if (!atfork_registered && pthread_atfork(fork_prepare, fork_parent, fork_child) == 0)
        atfork_registered = 1;
    char **inc = NULL, **exc = NULL;
    if (sw_globs_copy(o->include, "include", &inc) < 0)
        return -1;
    if (sw_globs_copy(o->exclude, "exclude", &exc) < 0) {
        sw_globs_free(inc);
        return -1;
    }
    /* The file tracer as a consumer: its events and line filter (nothing
     * is switched until the session is up). */
    if (sw_dispatch_file_set(o->events, o->lines) < 0) {
        sw_globs_free(inc);
        sw_globs_free(exc);
        return -1;
    }
    clock_cache_find();
    sw_clock_calibrate(&sw_S.clock, o->allow_tsc, clock_cache, boot_id_buf);
    sw_writer_opts wo = {o->chunk_bytes, o->ring_bytes, choose_shift(sw_S.clock.hz)};
    sw_S.time_shift = wo.time_shift;
    sw_writer *w = NULL;
    int rc = sw_writer_open(&w, o->path, &wo);
    if (rc) {
        sw_pyerr_file(rc, o->path, PyExc_ValueError, "cannot start tracing: %s", sw_strerror(rc));
        sw_dispatch_file_set(0, NULL);
        sw_globs_free(inc);
        sw_globs_free(exc);
        return -1;
    }
    sw_S.w = w;
    sw_S.include = inc;
    sw_S.exclude = exc;
    sw_S.nfilters = (inc != NULL) + (exc != NULL);
    sw_S.max_depth = o->max_depth;
    sw_S.c_calls = o->c_calls;
    sw_S.cython = o->cython;
    sw_S.cpu_ids = o->cpu_ids;
    sw_S.no_calls = o->no_calls;
    sw_S.next_code = 0;
    sw_hook_error_reset();
    /* META carries the time shift the writer uses. */
    {
        sw_bytes kv = {0};
        sw_kv_uint(&kv, "time_shift", wo.time_shift);
        sw_writer_meta(w, &kv);
        sw_bytes_free(&kv);
    }
    if (write_meta(o) < 0) {
        sw_writer_close(w, NULL);
        sw_writer_free(w);
        sw_S.w = NULL;
        sw_globs_free(inc);
        sw_globs_free(exc);
        sw_S.include = sw_S.exclude = NULL;
        sw_dispatch_file_set(0, NULL);
        return -1;
    }
    size_t plen = strlen(o->path);
    sw_S.path = PyMem_RawMalloc(plen + 1);
    if (sw_S.path)
        memcpy(sw_S.path, o->path, plen + 1);
    do {
        gen_counter++;
    } while ((gen_counter & 0xffffffffu) == 0);
    set_gen(gen_counter);
    sw_flusher_start(o->flush_interval);
    sw_dispatch_changed();   /* a consumer came: the hooks it needs go on */
    return 0;
}

PyObject *sw_session_stop(const sw_bytes *more_end)
{
    if (!sw_S.gen) {
        PyErr_SetString(PyExc_RuntimeError, "stackwatch is not tracing");
        return NULL;
    }
    sw_session_detach_all();   /* the producers' last records (a sampler's samples), before END */
    sw_bytes kernel_kv = {0};
    uint64_t kernel_calls, kernel_lost;   /* the kernel reader's counts (it was detached above) */
    int kernel = sw_kernel_trace_end_keys(&kernel_kv, &kernel_calls, &kernel_lost);
    /* Reported in END: another tool's trace function or profile function
     * displaced stackwatch's on a thread (3.9-3.11). */
    sw_events_check();
    sw_ccalls_check();
    sw_flusher_stop();
    pthread_mutex_lock(&sw_S.lock);
    uint64_t end = sw_clock_now(&sw_S.clock);
    set_gen(0);
    sw_clock_refine(&sw_S.clock, clock_cache, boot_id_buf);
    const char *hook_error = sw_hook_error_message();
    sw_bytes kv = {0};
    sw_kv_uint(&kv, "end_ticks", end);
    sw_kv_f64(&kv, "clock_hz_refined", sw_S.clock.hz);
    if (hook_error)
        sw_kv_str(&kv, "hook_error", hook_error);
    if (more_end && more_end->len)
        sw_bytes_put(&kv, more_end->data, more_end->len);
    if (kernel_kv.len)
        sw_bytes_put(&kv, kernel_kv.data, kernel_kv.len);
    sw_bytes_free(&kernel_kv);
    int rc = sw_writer_close(sw_S.w, &kv);
    sw_bytes_free(&kv);
    sw_writer_totals tot;
    sw_writer_totals_get(sw_S.w, &tot);
    char msg[256] = "";
    sw_writer_error(sw_S.w, msg, sizeof msg);
    sw_writer_free(sw_S.w);
    sw_S.w = NULL;
    pthread_mutex_unlock(&sw_S.lock);
    sw_globs_free(sw_S.include);
    sw_globs_free(sw_S.exclude);
    sw_S.include = sw_S.exclude = NULL;
    sw_S.nfilters = 0;
    PyObject *path = PyUnicode_DecodeFSDefault(sw_S.path ? sw_S.path : "");
    PyMem_RawFree(sw_S.path);
    sw_S.path = NULL;
    PyObject *err = rc ? PyUnicode_FromString(msg) : (hook_error ? PyUnicode_FromString(hook_error) : Py_NewRef(Py_None));
    /* The consumer went: what only it needed goes off (the hook, and with
     * it the threads' recursion bonuses). */
    sw_dispatch_file_set(0, NULL);
    sw_dispatch_changed();
    PyObject *d = Py_BuildValue("{s:N,s:K,s:K,s:K,s:K,s:K,s:N}", "path", path, "events",
                                (unsigned long long)tot.events, "dropped",
                                (unsigned long long)tot.dropped, "bytes",
                                (unsigned long long)tot.bytes, "threads",
                                (unsigned long long)tot.threads, "codes",
                                (unsigned long long)tot.codes, "error", err);
    if (d && kernel) {   /* run --kernel: what the summary says of it */
        PyObject *c = PyLong_FromUnsignedLongLong(kernel_calls), *l = PyLong_FromUnsignedLongLong(kernel_lost);
        if (!c || !l || PyDict_SetItemString(d, "syscalls", c) < 0 || PyDict_SetItemString(d, "kernel_lost", l) < 0)
            Py_CLEAR(d);
        Py_XDECREF(c);
        Py_XDECREF(l);
    }
    return d;
}

int sw_session_after_fork_child(void)
{
    if (!sw_S.gen && !fork_child_pending)
        return 0;
    fork_child_pending = 0;
    /* Never write the parent's file: fork_child() closed our descriptor
     * already (also when Python code ran before this); the writer is
     * forgotten, not freed (its buffers belong to threads that do not
     * exist here). */
    sw_flusher_forget();
    sw_session_attachments_forget();   /* their threads are the parent's */
    set_gen(0);
    if (sw_S.w)
        sw_writer_abandon(sw_S.w);
    sw_S.w = NULL;
    pthread_mutex_init(&sw_S.lock, NULL);
    sw_recursion_bonus_take_back();
    sw_S.include = sw_S.exclude = NULL;
    sw_S.nfilters = 0;
    sw_dispatch_file_set(0, NULL);
    sw_dispatch_changed();
    return 1;
}
