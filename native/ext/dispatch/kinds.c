/*
 * kinds.c - the names and group masks of the event kinds, from the table
 * in kinds.h, for C and for Python (_native.EVENT_KINDS, EVENT_GROUPS).
 */
#include "kinds.h"

#define SW_X_NAME_(K, n, g, m, mon, a) #n,
const char *const sw_kind_names[SW_K_COUNT] = {SW_EVENT_KINDS(SW_X_NAME_, _)};

static int add_group(PyObject *d, const char *name, uint32_t mask)
{
    PyObject *v = PyLong_FromUnsignedLong(mask);
    int rc = v ? PyDict_SetItemString(d, name, v) : -1;
    Py_XDECREF(v);
    return rc;
}

int sw_kinds_add_to_module(PyObject *m)
{
    PyObject *names = PyTuple_New(SW_K_COUNT);
    for (int i = 0; names && i < SW_K_COUNT; i++) {
        PyObject *s = PyUnicode_FromString(sw_kind_names[i]);
        if (!s)
            Py_CLEAR(names);
        else
            PyTuple_SET_ITEM(names, i, s);
    }
    if (!names || PyModule_AddObject(m, "EVENT_KINDS", names) < 0) {
        Py_XDECREF(names);
        return -1;
    }
    PyObject *groups = PyDict_New();
    int err = !groups;
#define SW_G_ADD_(G, n, named) \
    if (!err && (named)) err = add_group(groups, #n, SW_GROUP_MASK(G)) < 0;
    SW_EVENT_GROUPS(SW_G_ADD_)
    if (!err)
        err = add_group(groups, "all", SW_MASK_ALL) < 0;
    if (err || PyModule_AddObject(m, "EVENT_GROUPS", groups) < 0) {
        Py_XDECREF(groups);
        return -1;
    }
    return 0;
}
