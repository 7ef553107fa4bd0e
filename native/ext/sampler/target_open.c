/*
 * target_open.c - another Python process opened and bound to the layout
 * of its release (see target_open.h).
 */
#include "target_open.h"
#include "sampler_layout.h"

#include <stdio.h>
#include <string.h>

PyObject *sw_target_raise(sw_target_why why, const char *msg)
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
static int choose_layout(sw_target *t, const char *source, sw_py_layout *l, const char **used, char *err,
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
    if (!t->debug_offsets && t->version_hex && sw_layout_known_minor(t->version_hex, &base) == SW_OK) {
        /* another patch release of a known minor: what differs from the
         * known release's layout, as far as its build tells */
        char bv[32], diff[512];
        sw_target_version_str(base.version_hex, bv, sizeof bv);
        int differs = sw_target_check_build(t, &base, diff, sizeof diff) != SW_OK;
        snprintf(err, errlen, "process %d runs Python %s, whose layout this stackwatch does not have (it has %s's)%s%s",
                 t->pid, tv, bv,
                 differs ? "; against that layout its build differs: "
                         : "; its type sizes agree with that layout, but a patch release may move fields inside "
                           "structures, so it is not read (scripts/gen-layouts.py adds a release's layout)",
                 differs ? diff : "");
        return SW_EVERSION;
    }
    snprintf(err, errlen, "process %d runs Python %s, which this stackwatch cannot read: it reads %s, any 3.13 "
             "through its debug offsets, and its own Python's release, %s", t->pid, tv, known, own);
    return SW_EVERSION;
}

/* Binds the layout of the opened target's release. 0, or -1 with an
 * exception set and t closed. */
static int bind_opened(sw_target *t, const char *source, sw_py_layout *l, uint64_t *interp, const char **used)
{
    char err[1024];
    sw_target_why why;
    if (choose_layout(t, source, l, used, err, sizeof err) != SW_OK) {
        sw_target_close(t);
        sw_target_raise(SW_TARGET_UNSUPPORTED, err);
        return -1;
    }
    if (sw_target_bind_layout(t, l, interp, &why, err, sizeof err) != SW_OK) {
        sw_target_close(t);
        sw_target_raise(why, err);
        return -1;
    }
    return 0;
}

int sw_target_open_bound(int pid, const char *source, sw_target *t, sw_py_layout *l, uint64_t *interp,
                         const char **used)
{
    char err[1024];
    sw_target_why why;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_target_open_pid(t, pid, &why, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc != SW_OK) {
        sw_target_raise(why, err);
        return -1;
    }
    return bind_opened(t, source, l, interp, used);
}

int sw_target_open_core_bound(const char *core, const char *exe, const char *source, sw_target *t, sw_py_layout *l,
                              uint64_t *interp, const char **used)
{
    char err[4096];
    sw_target_why why;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sw_target_open_core(t, core, exe, &why, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc != SW_OK) {
        sw_target_raise(why == SW_TARGET_NOT_PYTHON ? why : SW_TARGET_UNSUPPORTED, err);
        return -1;
    }
    return bind_opened(t, source, l, interp, used);
}
