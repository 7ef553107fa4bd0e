/*
 * objects.c - object-lifetime events for instances of Python classes:
 * new_start / new_done around an instance's allocation, delete_start when
 * its destruction begins (before its __del__, if any) and delete_done once
 * its memory is freed; each with the class's qualified name and the file
 * that defines the class.
 *
 * Mechanism (the same on 3.9 - 3.13), switched on only while some consumer
 * wants these events (the switching owner, switch.c, calls sw_objects_sync):
 * every Python class (a heap type whose tp_dealloc is CPython's
 * subtype_dealloc, i.e. made by a class statement or type(name, bases, ns))
 * gets three of its slots wrapped:
 *   tp_alloc     every instance is allocated through it (object.__new__,
 *                the __new__ of builtin bases, copy/pickle's cls.__new__);
 *                a tp_alloc other than PyType_GenericAlloc also keeps 3.13
 *                from specialising the class's calls into
 *                CALL_ALLOC_AND_ENTER_INIT, which allocates without it
 *                (PyType_Modified drops the specialisations made earlier);
 *   tp_finalize  subtype_dealloc calls it first (and the collector, before
 *                it breaks a cycle); the class's own finalizer (__del__)
 *                is called after the event;
 *   tp_free      every dealloc ends with it.
 * tp_dealloc itself cannot be wrapped: subtype_dealloc finds the base
 * dealloc to chain to by comparing the slots of the class and its bases
 * with itself. Classes created later are covered by wrapping the tp_new of
 * `type` (and of every metaclass that inherited it; all of them at once,
 * because type.__new__ refuses a metaclass whose tp_new differs from
 * type's): a new Python class is wrapped as soon as it exists. Turning the
 * events off restores every slot. While on, stackwatch holds a reference to
 * each wrapped class (its address keys the table of original slots).
 */
#include "objects.h"

#include "ext/dispatch/dispatch.h"
#include "ext/tracer/thread_state.h"
#include "ext/tracer/file_events.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    PyTypeObject *tp;        /* NULL: unused (entries are pooled, never freed:
                              * a wrapper may still be running with one) */
    allocfunc alloc;
    freefunc free;
    destructor finalize;
    char *name, *file;
} entry;

static entry **pool;          /* every entry ever made */
static size_t npool, pool_cap, nused;
static entry **table;         /* open addressing by type address; NULL = empty */
static size_t table_cap;      /* power of two, or 0 */
static int on;
static newfunc type_new_orig; /* CPython's type_new, while wrapped */
static destructor subtype_dealloc_fn;

static size_t slot_of(const PyTypeObject *tp)
{
    uintptr_t h = (uintptr_t)tp;
    h ^= h >> 17;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (table_cap - 1);
}

static entry *lookup(const PyTypeObject *tp)
{
    if (!table_cap)
        return NULL;
    for (size_t i = slot_of(tp);; i = (i + 1) & (table_cap - 1)) {
        entry *e = table[i];
        if (!e || e->tp == tp)
            return e;
    }
}

static int table_put(entry *e)
{
    if ((nused + 1) * 2 > table_cap) {
        size_t cap = table_cap ? table_cap * 2 : 256;
        entry **t = calloc(cap, sizeof *t);
        if (!t)
            return -1;
        entry **old = table;
        size_t oldcap = table_cap;
        table = t;
        table_cap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i])
                for (size_t j = slot_of(old[i]->tp);; j = (j + 1) & (cap - 1))
                    if (!table[j]) {
                        table[j] = old[i];
                        break;
                    }
        free(old);
    }
    for (size_t j = slot_of(e->tp);; j = (j + 1) & (table_cap - 1))
        if (!table[j]) {
            table[j] = e;
            nused++;
            return 0;
        }
}

static int finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

static char *class_file(PyTypeObject *tp);

static void emit(int kind, entry *e)
{
    if (!(sw_D.mask & SW_EVB(kind)) || sw_T.calls_off || finalizing())
        return;
    if (!e->file) {
        /* Looked up at the first event, not when the class is made: a
         * factory (namedtuple) sets __module__ after making the class. */
        sw_exc_state es;
        sw_exc_save(&es);
        sw_busy_enter(&sw_T);
        e->file = class_file(e->tp);
        sw_busy_exit(&sw_T);
        sw_exc_restore(&es);
        if (!e->file)
            return;
    }
    sw_evdata d = {.line = -1, .name = e->name, .file = e->file};
    if (sw_D.file & SW_EVB(kind)) {
        sw_exc_state es;
        sw_exc_save(&es);
        sw_file_record_ext(kind, &d);
        sw_exc_restore(&es);
    }
    sw_emit(kind, &d);
}

/* ---- the wrappers ---- */

static void obj_finalize(PyObject *o);

/* The tp_finalize a type would have without ours: the first base in its
 * MRO with one (a wrapped base counts with its original). */
static destructor inherited_finalize(PyTypeObject *tp)
{
    PyObject *mro = tp->tp_mro;
    if (!mro || !PyTuple_Check(mro))
        return NULL;
    for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *b = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        entry *e = lookup(b);
        destructor f = e ? e->finalize : b->tp_finalize;
        if (f && f != obj_finalize)
            return f;
    }
    return NULL;
}

static PyObject *obj_alloc(PyTypeObject *tp, Py_ssize_t n)
{
    entry *e = lookup(tp);
    if (!e)
        return PyType_GenericAlloc(tp, n);
    allocfunc orig = e->alloc;
    emit(SW_K_NEW_START, e);
    PyObject *o = orig(tp, n);
    if (e->tp == tp) {
        /* Out of the collector's sight while the handlers run: it is
         * allocated, not made yet (a class a metaclass makes has no flags
         * yet, and a collection the handlers trigger then failed
         * type_traverse's check of them, ending the program). */
        int tracked = o && orig == PyType_GenericAlloc && PyType_IS_GC(tp);   /* (it tracks those; and a
                                                                             * class's tp_is_gc says no
                                                                             * until its flags are set) */
        if (tracked)
            PyObject_GC_UnTrack(o);
        emit(SW_K_NEW_DONE, e);
        if (tracked)
            PyObject_GC_Track(o);
    }
    return o;
}

static void obj_finalize(PyObject *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    entry *e = lookup(tp);
    destructor orig = e ? e->finalize : inherited_finalize(tp);
    if (e)
        emit(SW_K_DEL_START, e);
    if (orig)
        orig(o);
}

static void obj_free(void *p)
{
    PyTypeObject *tp = Py_TYPE((PyObject *)p);
    entry *e = lookup(tp);
    freefunc orig = e ? e->free : (PyType_IS_GC(tp) ? PyObject_GC_Del : PyObject_Free);
    orig(p);
    if (e && e->tp == tp)
        emit(SW_K_DEL_DONE, e);
}

/* ---- wrapping a class ---- */

static int is_python_class(PyTypeObject *tp)
{
    return PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE) && subtype_dealloc_fn &&
           tp->tp_dealloc == subtype_dealloc_fn;
}

static char *dup_utf8(PyObject *s)
{
    const char *c = (s && PyUnicode_Check(s)) ? PyUnicode_AsUTF8(s) : NULL;
    if (!c)
        PyErr_Clear();
    return strdup(c ? c : "");
}

/* The file that defines tp: its module's __file__ (the module named by
 * __module__), else the file of the first function in its namespace,
 * else "". */
static char *class_file(PyTypeObject *tp)
{
    PyObject *dict = tp->tp_dict, *k, *v;
    char *out = NULL;
    PyObject *modname = dict && PyDict_Check(dict) ? PyDict_GetItemString(dict, "__module__") : NULL;
    PyObject *mod = modname && PyUnicode_Check(modname) ? PyImport_GetModule(modname) : NULL;
    if (mod) {
        PyObject *f = PyObject_GetAttrString(mod, "__file__");
        if (f && PyUnicode_Check(f))
            out = dup_utf8(f);
        Py_XDECREF(f);
        Py_DECREF(mod);
    }
    PyErr_Clear();
    Py_ssize_t pos = 0;
    while (!out && dict && PyDict_Check(dict) && PyDict_Next(dict, &pos, &k, &v)) {
        PyObject *code = PyFunction_Check(v) ? PyFunction_GET_CODE(v) : NULL;
        if (code && PyCode_Check(code))
            out = dup_utf8(((PyCodeObject *)code)->co_filename);
    }
    return out ? out : strdup("");
}

static entry *new_entry(void)
{
    for (size_t i = 0; i < npool; i++)
        if (!pool[i]->tp)
            return pool[i];
    if (npool == pool_cap) {
        size_t cap = pool_cap ? pool_cap * 2 : 256;
        entry **p = realloc(pool, cap * sizeof *p);
        if (!p)
            return NULL;
        pool = p;
        pool_cap = cap;
    }
    entry *e = calloc(1, sizeof *e);
    if (e)
        pool[npool++] = e;
    return e;
}

static void wrap_class(PyTypeObject *tp)
{
    if (!is_python_class(tp) || lookup(tp))
        return;
    entry *e = new_entry();
    if (!e)
        return;
    free(e->name);
    free(e->file);
    PyObject *qn = ((PyHeapTypeObject *)tp)->ht_qualname;
    e->name = dup_utf8(qn);
    e->file = NULL;
    e->alloc = tp->tp_alloc == obj_alloc ? PyType_GenericAlloc : tp->tp_alloc;
    e->free = tp->tp_free == obj_free ? (PyType_IS_GC(tp) ? PyObject_GC_Del : PyObject_Free) : tp->tp_free;
    e->finalize = tp->tp_finalize == obj_finalize ? NULL : tp->tp_finalize;
    e->tp = (PyTypeObject *)Py_NewRef(tp);
    if (!e->name || table_put(e) < 0) {
        Py_CLEAR(e->tp);
        return;
    }
    if (tp->tp_finalize == obj_finalize)
        e->finalize = inherited_finalize(tp);
    tp->tp_alloc = obj_alloc;
    tp->tp_free = obj_free;
    tp->tp_finalize = obj_finalize;
    PyType_Modified(tp);   /* drops 3.13's CALL_ALLOC_AND_ENTER_INIT specialisations */
}

static PyObject *type_new_hook(PyTypeObject *meta, PyObject *args, PyObject *kw)
{
    PyObject *t = type_new_orig(meta, args, kw);
    if (t && on && PyType_Check(t)) {
        sw_exc_state es;
        sw_exc_save(&es);
        wrap_class((PyTypeObject *)t);
        PyErr_Clear();
        sw_exc_restore(&es);
    }
    return t;
}

static int find_subtype_dealloc(void)
{
    if (subtype_dealloc_fn)
        return 0;
    PyObject *t = PyObject_CallFunction((PyObject *)&PyType_Type, "s()N", "_stackwatch_probe_class", PyDict_New());
    if (!t)
        return -1;
    subtype_dealloc_fn = ((PyTypeObject *)t)->tp_dealloc;
    Py_DECREF(t);
    return 0;
}

/* Every class reachable from object through type.__subclasses__ (type and
 * the other metaclasses included), each once, depth first: a new list, or
 * NULL with an exception set. */
static PyObject *all_classes(void)
{
    PyObject *subclasses = PyObject_GetAttrString((PyObject *)&PyType_Type, "__subclasses__");
    PyObject *out = PyList_New(0), *seen = PySet_New(NULL), *stack = PyList_New(0);
    int err = !subclasses || !out || !seen || !stack || PyList_Append(stack, (PyObject *)&PyBaseObject_Type) < 0;
    while (!err && PyList_GET_SIZE(stack)) {
        Py_ssize_t n = PyList_GET_SIZE(stack);
        PyObject *t = Py_NewRef(PyList_GET_ITEM(stack, n - 1));
        err = PyList_SetSlice(stack, n - 1, n, NULL) < 0 || PyList_Append(out, t) < 0;
        PyObject *subs = err ? NULL : PyObject_CallOneArg(subclasses, t);
        Py_DECREF(t);
        if (!subs) {
            if (!err && PyErr_ExceptionMatches(PyExc_TypeError))
                PyErr_Clear();   /* not a type after all */
            else
                err = 1;
            continue;
        }
        err = !PyList_Check(subs);
        for (Py_ssize_t i = 0; !err && i < PyList_GET_SIZE(subs); i++) {
            PyObject *sub = PyList_GET_ITEM(subs, i);
            PyObject *key = PyLong_FromVoidPtr(sub);
            int known = key ? PySet_Contains(seen, key) : -1;
            err = known < 0 || (!known && (PySet_Add(seen, key) < 0 || PyList_Append(stack, sub) < 0));
            Py_XDECREF(key);
        }
        Py_DECREF(subs);
    }
    Py_XDECREF(subclasses);
    Py_XDECREF(seen);
    Py_XDECREF(stack);
    if (err) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a class's __subclasses__() is not a list");
        Py_CLEAR(out);
    }
    return out;
}

/* Wraps every Python class in the list and the tp_new of type and of the
 * metaclasses in it that inherited type's. Returns 0, or -1 with an
 * exception set. */
static int objects_on(PyObject *classes)
{
    if (find_subtype_dealloc() < 0)
        return -1;
    if (!type_new_orig)
        type_new_orig = PyType_Type.tp_new;
    on = 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(classes); i++) {
        PyObject *c = PyList_GET_ITEM(classes, i);
        if (!PyType_Check(c))
            continue;
        PyTypeObject *tp = (PyTypeObject *)c;
        if (tp->tp_new == type_new_orig && PyType_IsSubtype(tp, &PyType_Type))
            tp->tp_new = type_new_hook;
        wrap_class(tp);
    }
    PyType_Type.tp_new = type_new_hook;
    return 0;
}

/* Restores every slot wrapped, in the listed classes too (metaclasses and
 * classes made while on inherit the wrappers). */
static void objects_off(PyObject *classes)
{
    on = 0;
    if (type_new_orig)
        PyType_Type.tp_new = type_new_orig;
    PyObject *held = PyList_New(0);
    for (size_t i = 0; i < npool; i++) {
        entry *e = pool[i];
        if (!e->tp)
            continue;
        PyTypeObject *tp = e->tp;
        if (tp->tp_alloc == obj_alloc)
            tp->tp_alloc = e->alloc;
        if (tp->tp_free == obj_free)
            tp->tp_free = e->free;
        if (tp->tp_finalize == obj_finalize)
            tp->tp_finalize = e->finalize;
        PyType_Modified(tp);
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(classes); i++) {
        PyObject *c = PyList_GET_ITEM(classes, i);
        if (!PyType_Check(c))
            continue;
        PyTypeObject *tp = (PyTypeObject *)c;
        if (tp->tp_new == type_new_hook)
            tp->tp_new = type_new_orig;
        if (lookup(tp))
            continue;
        int changed = 0;
        if (tp->tp_alloc == obj_alloc)
            tp->tp_alloc = PyType_GenericAlloc, changed = 1;
        if (tp->tp_free == obj_free)
            tp->tp_free = PyType_IS_GC(tp) ? PyObject_GC_Del : PyObject_Free, changed = 1;
        if (tp->tp_finalize == obj_finalize)
            tp->tp_finalize = inherited_finalize(tp), changed = 1;
        if (changed)
            PyType_Modified(tp);
    }
    /* Forget the table, then drop the references (a class may die now). */
    for (size_t i = 0; i < npool; i++) {
        entry *e = pool[i];
        if (!e->tp)
            continue;
        if (!held || PyList_Append(held, (PyObject *)e->tp) < 0)
            PyErr_Clear();
        Py_DECREF(e->tp);
        e->tp = NULL;
    }
    memset(table, 0, table_cap * sizeof *table);
    nused = 0;
    Py_XDECREF(held);
}

void sw_objects_sync(int want)
{
    if (!want == !on)
        return;
    sw_exc_state es;
    sw_exc_save(&es);
    PyObject *classes = all_classes();
    if (classes && want)
        objects_on(classes);
    else if (classes)
        objects_off(classes);
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(NULL);   /* a warning: the hooks never raise */
        PyErr_Clear();
    }
    Py_XDECREF(classes);
    sw_exc_restore(&es);
}

static PyObject *py_count(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("{s:n,s:i}", "classes", (Py_ssize_t)nused, "on", on);
}

static PyMethodDef methods[] = {
    {"_objects_state", py_count, METH_NOARGS, "{'classes': wrapped classes, 'on': bool}"},
    {NULL, NULL, 0, NULL},
};

int sw_objects_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
