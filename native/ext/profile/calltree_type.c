/*
 * calltree_type.c - stackwatch._native.CallTree and call trees as nested
 * dicts (see calltree_type.h).
 */
#include "calltree_type.h"

#include "ext/shared/globs.h"
#include "ext/shared/pyerr.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    sw_functab *ft;
    sw_calltree *t;
    PyObject *shared;    /* NULL: ft is this object's own; else a capsule owning the
                            table that the CallTrees of one snapshot share (its
                            context: a Py_ssize_t, how many of them are held) */
    Py_ssize_t held;     /* writers reading the tree while Python runs (sw_py_calltree_hold) */
} CallTreeObject;

static PyTypeObject CallTreeType;

int sw_py_tree_error(int rc, const char *what)
{
    sw_pyerr(rc, PyExc_RuntimeError, "%s failed (%s)", what, sw_strerror(rc));
    return -1;
}

static PyObject *CallTree_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, ":CallTree", kwlist))
        return NULL;
    CallTreeObject *self = (CallTreeObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->ft = sw_functab_new();
    self->t = self->ft ? sw_calltree_new(self->ft) : NULL;
    if (!self->t) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

PyObject *sw_py_calltree_new(void)
{
    PyObject *args = PyTuple_New(0);
    PyObject *t = args ? CallTree_new(&CallTreeType, args, NULL) : NULL;
    Py_XDECREF(args);
    return t;
}

sw_calltree *sw_py_calltree_get(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &CallTreeType)) {
        PyErr_Format(PyExc_TypeError, "expected a CallTree, not %.100s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return ((CallTreeObject *)obj)->t;
}

const sw_functab *sw_py_calltree_shared_table(PyObject *obj)
{
    if (!PyObject_TypeCheck(obj, &CallTreeType) || !((CallTreeObject *)obj)->shared)
        return NULL;
    return ((CallTreeObject *)obj)->ft;
}

static void free_functab_capsule(PyObject *capsule)
{
    sw_functab_free(PyCapsule_GetPointer(capsule, "stackwatch.functab"));
    PyMem_Free(PyCapsule_GetContext(capsule));
}

/* How many trees of obj's snapshot are held, or NULL if its table is its own. */
static Py_ssize_t *snapshot_held(const CallTreeObject *o)
{
    return o->shared ? PyCapsule_GetContext(o->shared) : NULL;
}

void sw_py_calltree_hold(PyObject *obj, int hold)
{
    CallTreeObject *o = (CallTreeObject *)obj;
    Py_ssize_t *snap = snapshot_held(o);
    if (hold) {
        Py_INCREF(obj);
        o->held++;
        if (snap)
            ++*snap;
    } else {
        o->held--;
        if (snap)
            --*snap;
        Py_DECREF(obj);
    }
}

PyObject *sw_py_calltree_list_shared(sw_functab *ft, sw_calltree **trees, size_t n)
{
    Py_ssize_t *held = PyMem_Calloc(1, sizeof *held);
    PyObject *owner = held ? PyCapsule_New(ft, "stackwatch.functab", free_functab_capsule) : NULL;
    if (owner && PyCapsule_SetContext(owner, held) < 0)
        Py_CLEAR(owner);   /* (cannot fail for a capsule just made) */
    PyObject *list = owner ? PyList_New((Py_ssize_t)n) : NULL;
    if (!owner) {
        sw_functab_free(ft);
        PyMem_Free(held);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
    }
    for (size_t i = 0; i < n; i++) {
        CallTreeObject *o = list ? PyObject_New(CallTreeObject, &CallTreeType) : NULL;
        if (!o) {
            Py_CLEAR(list);
            for (size_t k = i; k < n; k++)    /* those not given to an object yet */
                sw_calltree_free(trees[k]);
            break;
        }
        o->ft = ft;
        o->t = trees[i];
        o->held = 0;
        Py_INCREF(owner);
        o->shared = owner;
        PyList_SET_ITEM(list, (Py_ssize_t)i, (PyObject *)o);
    }
    Py_XDECREF(owner);
    return list;
}

sw_functab *sw_py_functab_copy(const sw_functab *ft)
{
    sw_functab *out = sw_functab_new();
    for (uint32_t i = 0; out && i < sw_functab_count(ft); i++) {
        const sw_func *f = sw_functab_get(ft, i);
        uint32_t id;
        if (sw_functab_intern(out, f->name, strlen(f->name), f->filename, strlen(f->filename), f->line, &id) !=
                SW_OK ||
            id != i) {
            sw_functab_free(out);
            out = NULL;
        }
    }
    return out;
}

static void CallTree_dealloc(CallTreeObject *self)
{
    sw_calltree_free(self->t);
    if (self->shared)
        Py_DECREF(self->shared);
    else
        sw_functab_free(self->ft);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* merge(*trees): adds every sample of the given CallTrees to this one. */
static PyObject *CallTree_merge(CallTreeObject *self, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyObject_TypeCheck(PyTuple_GET_ITEM(args, i), &CallTreeType)) {
            PyErr_Format(PyExc_TypeError, "merge() takes CallTree objects, not %.100s",
                         Py_TYPE(PyTuple_GET_ITEM(args, i))->tp_name);
            return NULL;
        }
    }
    Py_ssize_t *snap = snapshot_held(self);
    if (self->held || (snap && *snap)) {
        PyErr_SetString(PyExc_RuntimeError, "merge(): the call tree (or one sharing its function table) is being "
                                            "written; merge into it after that");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        CallTreeObject *o = (CallTreeObject *)PyTuple_GET_ITEM(args, i);
        int rc;
        if (o == self) {
            /* Merging a tree into itself: through a copy. */
            sw_calltree *copy = sw_calltree_new(self->ft);
            rc = copy ? sw_calltree_merge(copy, self->t) : SW_ENOMEM;
            if (rc == SW_OK)
                rc = sw_calltree_merge(self->t, copy);
            sw_calltree_free(copy);
        } else {
            rc = sw_calltree_merge(self->t, o->t);
        }
        if (rc != SW_OK) {
            sw_py_tree_error(rc, "merging call trees");
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* graft(tree, name, filename=""): adds every sample of `tree` under a
 * node of function (name, filename, line 0) that is a child of this tree's
 * root (created if missing): the frame that stands for a process in the
 * trees of several processes merged. */
static PyObject *CallTree_graft(CallTreeObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"tree", "name", "filename", NULL};
    PyObject *other;
    const char *name, *file = "";
    Py_ssize_t nlen, flen = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!s#|s#:graft", kwlist, &CallTreeType, &other, &name, &nlen, &file,
                                     &flen))
        return NULL;
    if ((CallTreeObject *)other == self) {
        PyErr_SetString(PyExc_ValueError, "graft() takes another tree, not this one");
        return NULL;
    }
    uint32_t func, node;
    int rc = sw_functab_intern(self->ft, name, (size_t)nlen, file, (size_t)flen, 0, &func);
    if (rc == SW_OK)
        rc = sw_calltree_child(self->t, SW_CALLTREE_ROOT, func, &node);
    if (rc == SW_OK)
        rc = sw_calltree_merge_under(self->t, ((CallTreeObject *)other)->t, node);
    if (rc != SW_OK) {
        sw_py_tree_error(rc, "grafting a call tree");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* 1 if f is a native frame: named "symbol [native]" (base/sample.h; its
 * line is 0, or its source's where the frame was read with one: a
 * function's table entry keeps no library to tell them by). */
static int is_native(const sw_func *f)
{
    size_t n = strlen(f->name), k = strlen(SW_NATIVE_SUFFIX);
    return n > k && memcmp(f->name + n - k, SW_NATIVE_SUFFIX, k) == 0;
}

static PyObject *node_dict(const sw_functab *ft, const sw_calltree_node *n)
{
    const sw_func *f = n->func == SW_NODE_NONE ? NULL : sw_functab_get(ft, n->func);
    const char *name = f ? f->name : "<root>", *file = f ? f->filename : "";
    PyObject *d = Py_BuildValue("{s:N,s:N,s:i,s:K,s:K,s:K,s:K,s:N}", "name",
                         PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace"), "filename",
                         PyUnicode_DecodeUTF8(file, (Py_ssize_t)strlen(file), "replace"), "line", f ? f->line : 0,
                         "count", (unsigned long long)n->count, "self", (unsigned long long)n->self, "time_ns",
                         (unsigned long long)n->weight, "self_time_ns", (unsigned long long)n->self_weight,
                         "children", PyList_New(0));
    if (d && f && is_native(f) && PyDict_SetItemString(d, "native", Py_True) < 0)
        Py_CLEAR(d);
    return d;
}

/* Nodes are stored parents first, so one pass in index order can append
 * every node to its parent's children list. */
PyObject *sw_py_tree_to_dicts(const sw_calltree *t)
{
    size_t n = sw_calltree_node_count(t);
    PyObject **dicts = PyMem_Calloc(n, sizeof *dicts);
    if (!dicts)
        return PyErr_NoMemory();
    const sw_functab *ft = sw_calltree_functab(t);
    PyObject *root = NULL;
    size_t i = 0;
    for (; i < n; i++) {
        const sw_calltree_node *nd = sw_calltree_get_node(t, (uint32_t)i);
        dicts[i] = node_dict(ft, nd);
        if (!dicts[i])
            break;
        if (i > 0) {
            PyObject *children = PyDict_GetItemString(dicts[nd->parent], "children");
            if (PyList_Append(children, dicts[i]) < 0)
                break;
        }
    }
    if (i == n) {
        root = dicts[0];
        Py_INCREF(root);
    }
    for (size_t k = 0; k < n; k++)
        Py_XDECREF(dicts[k]);
    PyMem_Free(dicts);
    return root;
}

static PyObject *CallTree_tree(CallTreeObject *self, PyObject *unused)
{
    (void)unused;
    return sw_py_tree_to_dicts(self->t);
}

/* ---- FunctionWalk: a tree's nodes in the order of its per-function
 * tables (render/functions.py), one tuple per node, made as that table
 * wants them, without ever holding the nodes as Python objects ---- */

#define LEAVE 0x80000000u    /* a stack entry closing a node (its id | LEAVE) */

typedef struct {
    PyObject_HEAD
    CallTreeObject *tree;    /* a reference: the tree outlives the walk */
    uint32_t *stack;         /* node ids, and node ids | LEAVE */
    size_t depth, cap;
    int started;
} FunctionWalkObject;

static void FunctionWalk_dealloc(FunctionWalkObject *self)
{
    Py_XDECREF(self->tree);
    free(self->stack);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int walk_push(FunctionWalkObject *w, uint32_t v)
{
    uint32_t *st = sw_array_grow(w->stack, &w->cap, w->depth + 1, sizeof *st, 256);
    if (!st)
        return -1;
    w->stack = st;
    w->stack[w->depth++] = v;
    return 0;
}

/* Pushes the children of node id in order (the last is taken first). */
static int walk_push_children(FunctionWalkObject *w, uint32_t id)
{
    const sw_calltree *t = w->tree->t;
    for (uint32_t c = sw_calltree_get_node(t, id)->first_child; c != SW_NODE_NONE;
         c = sw_calltree_get_node(t, c)->next_sibling)
        if (walk_push(w, c) < 0)
            return -1;
    return 0;
}

/* The next node: (leaves, filename, line, name, self, self_time_ns,
 * time_ns), leaves the nodes closed since the previous one (so its
 * caller is the node `leaves` levels up the path from the previous one). */
static PyObject *FunctionWalk_next(FunctionWalkObject *self)
{
    if (!self->started) {
        self->started = 1;
        if (walk_push_children(self, SW_CALLTREE_ROOT) < 0)
            return PyErr_NoMemory();
    }
    unsigned long long leaves = 0;
    while (self->depth && (self->stack[self->depth - 1] & LEAVE)) {
        self->depth--;
        leaves++;
    }
    if (!self->depth)
        return NULL;
    uint32_t id = self->stack[--self->depth];
    const sw_calltree_node *n = sw_calltree_get_node(self->tree->t, id);
    const sw_func *f = n ? sw_functab_get(self->tree->ft, n->func) : NULL;
    if (!f) {
        PyErr_SetString(PyExc_RuntimeError, "a call tree node without a function");
        return NULL;
    }
    if (walk_push(self, id | LEAVE) < 0 || walk_push_children(self, id) < 0)
        return PyErr_NoMemory();
    /* Fresh objects for each node, as tree()'s dicts gave them: pstats'
     * marshalled bytes depend on which objects are shared. */
    const char *name = f->name, *file = f->filename;
    return Py_BuildValue("(KNiNKKK)", leaves, PyUnicode_DecodeUTF8(file, (Py_ssize_t)strlen(file), "replace"),
                         f->line, PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace"),
                         (unsigned long long)n->self, (unsigned long long)n->self_weight,
                         (unsigned long long)n->weight);
}

static PyTypeObject FunctionWalkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.FunctionWalk",
    .tp_basicsize = sizeof(FunctionWalkObject),
    .tp_dealloc = (destructor)FunctionWalk_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "the nodes of a CallTree in the order of its per-function tables (CallTree.function_walk())",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)FunctionWalk_next,
};

/* function_walk() -> an iterator of (leaves, filename, line, name, self,
 * self_time_ns, time_ns) per node: the walk render/functions.py's tables
 * take (each node's children last first). */
static PyObject *CallTree_function_walk(CallTreeObject *self, PyObject *unused)
{
    (void)unused;
    if (PyType_Ready(&FunctionWalkType) < 0)
        return NULL;
    FunctionWalkObject *w = PyObject_New(FunctionWalkObject, &FunctionWalkType);
    if (!w)
        return NULL;
    Py_INCREF(self);
    w->tree = self;
    w->stack = NULL;
    w->depth = w->cap = 0;
    w->started = 0;
    return (PyObject *)w;
}

typedef struct first_seen {
    uint8_t *seen;           /* per function id */
    PyObject *list;
} first_seen;

static int first_seen_node(void *ud, const sw_calltree *t, uint32_t id, const sw_calltree_node *n)
{
    first_seen *fs = ud;
    const sw_func *f = id == SW_CALLTREE_ROOT ? NULL : sw_functab_get(sw_calltree_functab(t), n->func);
    if (!f || fs->seen[n->func])
        return 0;
    fs->seen[n->func] = 1;
    PyObject *item = Py_BuildValue("(INNiO)", n->func,
                                   PyUnicode_DecodeUTF8(f->name, (Py_ssize_t)strlen(f->name), "replace"),
                                   PyUnicode_DecodeUTF8(f->filename, (Py_ssize_t)strlen(f->filename), "replace"),
                                   f->line,
                                   is_native(f) ? Py_True : Py_False);
    int rc = item ? PyList_Append(fs->list, item) : -1;
    Py_XDECREF(item);
    return rc < 0;
}

/* preorder_functions() -> [(function id, name, filename, line, native)]:
 * the tree's functions in the order a pre-order walk (children in
 * insertion order) first meets them. */
static PyObject *CallTree_preorder_functions(CallTreeObject *self, PyObject *unused)
{
    (void)unused;
    uint32_t n = sw_functab_count(self->ft);
    first_seen fs = {calloc(n ? n : 1, 1), PyList_New(0)};
    if (!fs.seen || !fs.list) {
        free(fs.seen);
        Py_XDECREF(fs.list);
        return PyErr_NoMemory();
    }
    if (sw_calltree_walk(self->t, first_seen_node, &fs))
        Py_CLEAR(fs.list);
    free(fs.seen);
    return fs.list;
}

static PyObject *CallTree_get_total(CallTreeObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(sw_calltree_total(self->t));
}

static PyObject *CallTree_get_nodes(CallTreeObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(sw_calltree_node_count(self->t));
}

/* 1 if a function's frames are kept by include/exclude globs, by the rule
 * a trace's filter uses too (sw_globs_keep): its name (the qualified name),
 * the name after its last dot, or its file. */
static int keep_func(const sw_func *f, char *const *include, char *const *exclude)
{
    const char *dot = strrchr(f->name, '.');
    const char *fields[3] = {f->name, dot && !is_native(f) ? dot + 1 : f->name, f->filename};
    return sw_globs_keep(include, exclude, fields, 3);
}

/* filtered(include=None, exclude=None, max_depth=0) -> a new CallTree
 * without the frames left out (sw_calltree_filter): those of functions
 * that match no include glob (when there are any) or an exclude glob,
 * whose callees become their caller's and own counts their caller's own;
 * and those deeper than max_depth kept frames. */
static PyObject *CallTree_filtered(CallTreeObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"include", "exclude", "max_depth", NULL};
    PyObject *inc = Py_None, *exc = Py_None;
    unsigned int max_depth = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOI:filtered", kwlist, &inc, &exc, &max_depth))
        return NULL;
    char **include = NULL, **exclude = NULL;
    if (sw_globs_copy(inc, "include", &include) < 0)
        return NULL;
    if (sw_globs_copy(exc, "exclude", &exclude) < 0) {
        sw_globs_free(include);
        return NULL;
    }
    uint32_t n = sw_functab_count(self->ft);
    uint8_t *keep = malloc(n ? n : 1);
    sw_calltree *tmp = keep ? sw_calltree_new(self->ft) : NULL;
    PyObject *out = tmp ? sw_py_calltree_new() : NULL;
    int rc = out ? SW_OK : SW_ENOMEM;
    if (rc == SW_OK) {
        for (uint32_t i = 0; i < n; i++)
            keep[i] = (uint8_t)keep_func(sw_functab_get(self->ft, i), include, exclude);
        rc = sw_calltree_filter(tmp, self->t, include || exclude ? keep : NULL, max_depth);
    }
    /* Onto the new tree's own function table, in the same order. */
    if (rc == SW_OK)
        rc = sw_calltree_merge(((CallTreeObject *)out)->t, tmp);
    sw_calltree_free(tmp);
    free(keep);
    sw_globs_free(include);
    sw_globs_free(exclude);
    if (rc != SW_OK) {
        Py_XDECREF(out);
        if (!PyErr_Occurred())
            sw_py_tree_error(rc, "filtering a call tree");
        return NULL;
    }
    return out;
}

static PyMethodDef CallTree_methods[] = {
    {"filtered", (PyCFunction)(void (*)(void))CallTree_filtered, METH_VARARGS | METH_KEYWORDS,
     "filtered(include=None, exclude=None, max_depth=0) -> a new CallTree without the frames the globs "
     "(name, qualified name or file) or the depth leave out; their callees become their caller's"},
    {"merge", (PyCFunction)CallTree_merge, METH_VARARGS, "merge(*trees): add the samples of other CallTrees"},
    {"function_walk", (PyCFunction)CallTree_function_walk, METH_NOARGS,
     "function_walk() -> iterator of (leaves, filename, line, name, self, self_time_ns, time_ns) per node, "
     "in the order of the per-function tables (each node's children last first)"},
    {"preorder_functions", (PyCFunction)CallTree_preorder_functions, METH_NOARGS,
     "preorder_functions() -> [(function id, name, filename, line, native)] in the order a pre-order walk "
     "first meets them"},
    {"graft", (PyCFunction)(void (*)(void))CallTree_graft, METH_VARARGS | METH_KEYWORDS,
     "graft(tree, name, filename='') -> None: add the samples of another CallTree under a frame (name, filename) "
     "below this tree's root"},
    {"tree", (PyCFunction)CallTree_tree, METH_NOARGS,
     "tree() -> nested dicts {name, filename, line, count, self, time_ns, self_time_ns, children}"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef CallTree_getset[] = {
    {"total", (getter)CallTree_get_total, NULL, "number of samples", NULL},
    {"nodes", (getter)CallTree_get_nodes, NULL, "number of nodes, the root included", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CallTreeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.CallTree",
    .tp_basicsize = sizeof(CallTreeObject),
    .tp_dealloc = (destructor)CallTree_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CallTree(): a call tree of samples with its own function table (empty when made).",
    .tp_methods = CallTree_methods,
    .tp_getset = CallTree_getset,
    .tp_new = CallTree_new,
};

int sw_calltree_type_add_to_module(PyObject *m)
{
    if (PyType_Ready(&CallTreeType) < 0)
        return -1;
    Py_INCREF(&CallTreeType);
    if (PyModule_AddObject(m, "CallTree", (PyObject *)&CallTreeType) < 0) {
        Py_DECREF(&CallTreeType);
        return -1;
    }
    return 0;
}
