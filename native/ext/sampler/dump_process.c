/*
 * dump_process.c - _native.dump_process: one reading of every thread's
 * stack of another Python process (see dump_process.h).
 */
#include "dump_process.h"
#include "sampler_layout.h"

#include "procmem/procmem.h"

#include <stdio.h>
#include <string.h>

#define DUMP_ROUNDS 5   /* rounds taken until every thread's stack reads whole */

typedef struct dump_sink {
    PyObject *threads;   /* list, or NULL after an error */
    int failed;          /* threads whose stack could not be read */
} dump_sink;

static const char *state_name(uint32_t s)
{
    return s == SW_STATE_RUNNING ? "running" : s == SW_STATE_GIL_WAIT ? "gil_wait" : s == SW_STATE_IDLE ? "idle"
                                                                                                       : "unknown";
}

static PyObject *frames_of(const sw_sample *s)
{
    PyObject *frames = PyList_New(s->depth);
    for (uint32_t i = 0; frames && i < s->depth; i++) {
        const sw_sample_code *c = s->frames[i];
        PyObject *f = Py_BuildValue("(s#s#i)", c->name, (Py_ssize_t)c->name_len, c->filename,
                                    (Py_ssize_t)c->filename_len, s->lines ? (int)s->lines[i] : 0);
        if (!f) {
            Py_CLEAR(frames);
            break;
        }
        PyList_SET_ITEM(frames, i, f);
    }
    return frames;
}

/* The sink: called during sw_pystack_sample_all, on this thread, with
 * the GIL held. */
static void collect(void *ud, sw_sample *s)
{
    dump_sink *d = ud;
    if (!d->threads)
        return;
    int failed = (s->flags & SW_SAMPLE_FAILED) != 0;
    d->failed += failed;
    PyObject *frames = frames_of(s);
    PyObject *gil = (s->flags & SW_SAMPLE_GIL_HELD) ? Py_True : Py_False;
    PyObject *t = frames ? Py_BuildValue("{s:K,s:K,s:O,s:s,s:O,s:N}", "thread_id", (unsigned long long)s->thread_id,
                                         "native_id", (unsigned long long)s->native_tid, "gil", gil, "state",
                                         state_name(s->state), "failed", failed ? Py_True : Py_False, "frames",
                                         frames)
                         : NULL;
    if (!t || PyList_Append(d->threads, t) < 0)
        Py_CLEAR(d->threads);
    Py_XDECREF(t);
}

PyObject *sw_dump_raise_for(sw_target_why why, const char *msg)
{
    PyObject *type = why == SW_TARGET_NO_PROCESS ? PyExc_ProcessLookupError
                     : why == SW_TARGET_PERMISSION ? PyExc_PermissionError
                     : why == SW_TARGET_FAILED ? PyExc_RuntimeError : PyExc_ValueError;
    PyErr_SetString(type, msg);
    return NULL;
}

/* The layout of the target's release: this extension's own for its own
 * release; else a generated one; else, for 3.13, one from the target's
 * _Py_DebugOffsets over the generated layout of another 3.13 release
 * (source "debug_offsets" forces that for any 3.13 target: for the tests). */
int sw_dump_choose_layout(sw_target *t, const char *source, sw_py_layout *l, const char **used, char *err,
                         size_t errlen)
{
    int forced = strcmp(source, "debug_offsets") == 0;
    sw_py_layout base;
    sw_sampler_layout_fill(l);
    *used = "own";
    if (!forced && (t->version_hex >> 8) == (l->version_hex >> 8))
        return SW_OK;
    *used = "generated";
    if (!forced && t->version_hex && sw_layout_known(t->version_hex, l) == SW_OK) {
        if (l->tstate_native_thread_id == SW_NO_OFFSET)
            l->thread_tid = sw_sampler_thread_tid_offset();
        return SW_OK;
    }
    char tv[32], own[32], known[256], why[256];
    sw_target_version_str(t->version_hex, tv, sizeof tv);
    sw_target_version_str(l->version_hex, own, sizeof own);
    sw_layout_known_list(known, sizeof known);
    if (t->debug_offsets && sw_layout_known_minor(t->version_hex, &base) == SW_OK) {
        unsigned char raw[SW_DEBUG_OFFSETS_SIZE];
        int rc = sw_mem_read(&t->mem, t->runtime_addr, raw, sizeof raw) == SW_OK
                     ? sw_layout_from_debug_offsets(raw, sizeof raw, &base, l, why, sizeof why)
                     : (snprintf(why, sizeof why, "its _PyRuntime cannot be read"), SW_EIO);
        *used = "debug_offsets";
        if (rc == SW_OK)
            return SW_OK;
        snprintf(err, errlen, "process %d runs Python %s, whose debug offsets are refused: %s", t->pid, tv, why);
        return rc;
    }
    snprintf(err, errlen, "process %d runs Python %s, which this stackwatch cannot read: it reads %s, any 3.13 "
             "through its debug offsets, and its own Python's release, %s", t->pid, tv, known, own);
    return SW_EVERSION;
}

static PyObject *dump_process(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"pid", "max_depth", "layout", NULL};
    int pid;
    unsigned int max_depth = 1024;
    const char *layout = "auto";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i|Is", kwlist, &pid, &max_depth, &layout))
        return NULL;
    if (strcmp(layout, "auto") != 0 && strcmp(layout, "debug_offsets") != 0) {
        PyErr_SetString(PyExc_ValueError, "layout must be 'auto' or 'debug_offsets'");
        return NULL;
    }
    char err[1024];
    sw_target t;
    sw_target_why why;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_target_open_pid(&t, pid, &why, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc != SW_OK)
        return sw_dump_raise_for(why, err);
    sw_py_layout l;
    const char *used = "";
    if (sw_dump_choose_layout(&t, layout, &l, &used, err, sizeof err) != SW_OK) {
        sw_target_close(&t);
        return sw_dump_raise_for(SW_TARGET_UNSUPPORTED, err);
    }
    uint64_t interp;
    if (sw_target_bind_layout(&t, &l, &interp, &why, err, sizeof err) != SW_OK) {
        sw_target_close(&t);
        return sw_dump_raise_for(why, err);
    }
    sw_pystack_limits lim = {.max_threads = 4096, .max_depth = max_depth, .max_codes = 65536, .code_ttl = 0,
                             .thread_states = 1, .lines = 1, .native = 0};
    sw_pystack *r = sw_pystack_new(&l, pid, interp, &lim, interp, 8, err, sizeof err);
    if (!r) {
        sw_target_close(&t);
        return sw_dump_raise_for(SW_TARGET_FAILED, err);
    }
    dump_sink d = {NULL, 0};
    for (int round = 0; round < DUMP_ROUNDS; round++) {
        Py_XDECREF(d.threads);
        d.threads = PyList_New(0);
        d.failed = 0;
        if (!d.threads)
            break;
        rc = sw_pystack_sample_all(r, 0, 0, collect, &d);
        if (rc < 0) {
            Py_CLEAR(d.threads);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_RuntimeError, "process %d: its thread list cannot be read (exiting?)", pid);
            break;
        }
        if (!d.threads || !d.failed)
            break;
    }
    sw_pystack_free(r);
    char version[32];
    sw_target_version_str(t.version_hex, version, sizeof version);
    PyObject *path = d.threads ? PyUnicode_DecodeFSDefault(t.python_path) : NULL;   /* any bytes */
    PyObject *out = path ? Py_BuildValue("{s:i,s:s,s:N,s:s,s:N}", "pid", pid, "version", version, "python", path,
                                         "layout", used, "threads", d.threads)
                         : NULL;
    if (!path)
        Py_XDECREF(d.threads);
    sw_target_close(&t);
    if (!out && !PyErr_Occurred())
        PyErr_NoMemory();
    return out;
}

static PyMethodDef methods[] = {
    {"dump_process", (PyCFunction)(void (*)(void))dump_process, METH_VARARGS | METH_KEYWORDS,
     "dump_process(pid, max_depth=1024, layout='auto') -> {pid, version, python, layout, threads: [{thread_id, "
     "native_id, gil, state, failed, frames: [(qualname, filename, line)]}]}: every thread's Python stack of "
     "process pid, read once from outside; layout='debug_offsets' reads a 3.13 target through its debug offsets"},
    {NULL, NULL, 0, NULL},
};

int sw_dump_process_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
