/*
 * threadnames.c - Python's names of a target's threads (see threadnames.h).
 */
#include "threadnames.h"
#include "asyncio_layout.h"
#include "pyobj.h"
#include "pystr.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    sw_mem *m;
    const sw_py_layout *l;
    sw_threadname *out;
    size_t max, n;
} names;

static int add_thread(void *ud, uint64_t key, uint64_t thread)
{
    names *q = ud;
    uint64_t ident, name;
    int negative;
    char s[SW_STR_BUF];
    if (q->n >= q->max)
        return 1;
    if (sw_pylong_read(q->m, q->l, key, &ident, &negative) != SW_OK || negative ||
        sw_pyobj_attr(q->m, q->l, thread, "_name", &name) != SW_OK || sw_pystr_read(q->m, q->l, name, s) < 0)
        return 0;
    q->out[q->n].ident = ident;
    sw_utf8_copy_cut(q->out[q->n].name, sizeof q->out[q->n].name, s);
    q->n++;
    return 0;
}

int sw_threadnames_read(sw_mem *m, const sw_py_layout *target_layout, uint64_t interp, sw_threadname *out,
                        size_t max, size_t *n, char *err, size_t errlen)
{
    *n = 0;
    /* 3.9/3.10: the dict fields their headers do not give, from the
     * generated table of that release (asyncio_layout.h) */
    sw_py_layout objects = *target_layout, *l = &objects;
    sw_asyncio_layout a;
    if (sw_asyncio_layout_known(l->version_hex, &a) == SW_OK)
        sw_asyncio_bind_objects(&a, l);
    int rc = sw_pyobj_usable(l, err, errlen);
    if (rc != SW_OK)
        return rc;
    /* sys.modules -> threading -> its dict -> _active: each step a pointer
     * at an offset or a str key's value, each failure said by its step. */
    uint64_t at = interp;
    static const struct { const char *key; const char *what; } steps[] = {
        {NULL, "the interpreter's sys.modules cannot be read"}, {"threading", "threading is not imported"},
        {NULL, "the threading module cannot be read"}, {"_active", "threading._active cannot be read"},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        unsigned char b[8];
        if (steps[i].key)
            rc = sw_pydict_get(m, l, at, steps[i].key, &at);
        else if ((rc = sw_mem_read(m, at + (i == 0 ? l->interp_modules : l->module_dict), b, 8)) == 0)
            memcpy(&at, b, 8);
        if (rc != SW_OK) {
            snprintf(err, errlen, "%s", steps[i].what);
            return rc < 0 ? rc : SW_EIO;
        }
    }
    uint64_t active = at;
    names q = {m, l, out, max, 0};
    rc = sw_pydict_each(m, l, active, add_thread, &q);
    if (rc != SW_OK) {
        snprintf(err, errlen, "threading._active cannot be read");
        return rc;
    }
    *n = q.n;
    return SW_OK;
}
