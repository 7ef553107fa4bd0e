/*
 * task_imports.c - the finder of events/task_imports.py in C (task_imports.h):
 * it lets the other finders on sys.meta_path find a module that task
 * events hook and gives its spec a loader that runs the module, then the
 * hooks. In C so that no frame of stackwatch's comes between the import
 * system's frames and the module's: the trace leaves stackwatch's frames
 * out and keeps what they call, a sample is cut at them, and the two would
 * disagree about every stack of an import the program makes while task
 * events are wanted.
 */
#include "task_imports.h"

#include "ext/shared/tstate.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    PyObject *hooks;   /* {module name: [hook(module), ...]}: task_imports.py's, entries taken as found */
    PyObject *run;     /* task_imports._run(hook, module, name) */
    int busy;          /* asking the other finders (a module they import meanwhile is theirs) */
} sw_import_finder;

typedef struct {
    PyObject_HEAD
    PyObject *loader;  /* the loader the other finders gave */
    PyObject *name;
    PyObject *hooks;   /* [hook(module), ...] */
    PyObject *run;
} sw_import_then;

static PyTypeObject then_type;

/* The first spec another finder on sys.meta_path gives (new reference),
 * None when none does; NULL with an exception set. */
static PyObject *others_spec(sw_import_finder *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *meta = PySys_GetObject("meta_path");   /* borrowed */
    PyObject *finders = meta ? PySequence_List(meta) : NULL;
    if (!finders)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *spec = Py_NewRef(Py_None);
    for (Py_ssize_t i = 0; spec == Py_None && i < PyList_GET_SIZE(finders); i++) {
        PyObject *finder = PyList_GET_ITEM(finders, i);
        if (finder == (PyObject *)self)
            continue;
        PyObject *find = PyObject_GetAttrString(finder, "find_spec");
        if (!find && !PyErr_ExceptionMatches(PyExc_AttributeError)) {
            Py_CLEAR(spec);
            break;
        }
        PyErr_Clear();   /* (no find_spec: not a finder of specs) */
        if (find) {
            Py_SETREF(spec, PyObject_Vectorcall(find, args, (size_t)nargs, NULL));
            Py_DECREF(find);
            if (!spec)
                break;
        }
    }
    Py_DECREF(finders);
    return spec;
}

/* find_spec(name, path=None, target=None): for a module hooked, the spec
 * the other finders give, its loader wrapped (sw_import_then); else None. */
static PyObject *finder_find_spec(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    sw_import_finder *self = (sw_import_finder *)op;
    if (nargs < 1 || nargs > 3)
        return PyErr_Format(PyExc_TypeError, "find_spec(name, path=None, target=None)");
    PyObject *hooks = self->busy ? NULL : PyDict_GetItemWithError(self->hooks, args[0]);   /* borrowed */
    if (!hooks)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_INCREF(hooks);   /* (the other finders run Python, which may change the table) */
    self->busy = 1;
    PyObject *spec = others_spec(self, args, nargs);
    self->busy = 0;
    if (!spec) {   /* (ours never raises: the import system asks the others again) */
        PyErr_Clear();
        Py_DECREF(hooks);
        return Py_NewRef(Py_None);
    }
    PyObject *loader = spec != Py_None ? PyObject_GetAttrString(spec, "loader") : NULL;
    int runs = loader && loader != Py_None && PyObject_HasAttrString(loader, "exec_module");
    sw_import_then *then = runs ? PyObject_GC_New(sw_import_then, &then_type) : NULL;
    if (then) {
        then->loader = Py_NewRef(loader);
        then->name = Py_NewRef(args[0]);
        then->hooks = Py_NewRef(hooks);
        then->run = Py_NewRef(self->run);
        PyObject_GC_Track((PyObject *)then);
        if (PyObject_SetAttrString(spec, "loader", (PyObject *)then) == 0)
            PyDict_DelItem(self->hooks, args[0]);   /* (its hooks run once) */
        Py_DECREF(then);
    }
    Py_XDECREF(loader);
    Py_DECREF(hooks);
    PyErr_Clear();
    return spec;
}

static PyObject *finder_invalidate_caches(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_RETURN_NONE;
}

static int finder_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((sw_import_finder *)op)->hooks);
    Py_VISIT(((sw_import_finder *)op)->run);
    return 0;
}

static int finder_clear(PyObject *op)
{
    Py_CLEAR(((sw_import_finder *)op)->hooks);
    Py_CLEAR(((sw_import_finder *)op)->run);
    return 0;
}

static void finder_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    finder_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyMethodDef finder_methods[] = {
    {"find_spec", (PyCFunction)(void (*)(void))finder_find_spec, METH_FASTCALL,
     "find_spec(name, path=None, target=None): a hooked module's spec from the other finders, its loader wrapped"},
    {"invalidate_caches", finder_invalidate_caches, METH_NOARGS, "nothing to forget"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject finder_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.task_import_finder",
    .tp_basicsize = sizeof(sw_import_finder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = finder_traverse,
    .tp_clear = finder_clear,
    .tp_dealloc = finder_dealloc,
    .tp_methods = finder_methods,
    .tp_doc = "the finder that hooks modules for task events as the program imports them (ext/tracer/task_imports.c)",
};

static PyObject *then_create_module(PyObject *op, PyObject *spec)
{
    return PyObject_CallMethod(((sw_import_then *)op)->loader, "create_module", "O", spec);
}

/* exec_module(module): its own loader put back (the module sees its own),
 * the module run, then the hooks (each through task_imports._run, which
 * never raises). */
static PyObject *then_exec_module(PyObject *op, PyObject *module)
{
    sw_import_then *self = (sw_import_then *)op;
    PyObject *spec = PyObject_GetAttrString(module, "__spec__");
    if (!spec || PyObject_SetAttrString(module, "__loader__", self->loader) < 0 ||
        PyObject_SetAttrString(spec, "loader", self->loader) < 0) {
        Py_XDECREF(spec);
        return NULL;
    }
    Py_DECREF(spec);
    PyObject *r = PyObject_CallMethod(self->loader, "exec_module", "O", module);
    if (!r)
        return NULL;
    Py_DECREF(r);
    for (Py_ssize_t i = 0; PyList_Check(self->hooks) && i < PyList_GET_SIZE(self->hooks); i++) {
        PyObject *hook = Py_NewRef(PyList_GET_ITEM(self->hooks, i));
        /* stackwatch's work (its calls are not the program's), which
         * records the module's tasks alive now (task events kept) */
        sw_quiet_enter(&sw_T);
        PyObject *done = PyObject_CallFunctionObjArgs(self->run, hook, module, self->name, NULL);
        sw_quiet_exit(&sw_T);
        Py_DECREF(hook);
        Py_XDECREF(done);
        PyErr_Clear();
    }
    Py_RETURN_NONE;
}

/* Anything else is the wrapped loader's. */
static PyObject *then_getattro(PyObject *op, PyObject *name)
{
    PyObject *r = PyObject_GenericGetAttr(op, name);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    return PyObject_GetAttr(((sw_import_then *)op)->loader, name);
}

static int then_traverse(PyObject *op, visitproc visit, void *arg)
{
    sw_import_then *self = (sw_import_then *)op;
    Py_VISIT(self->loader);
    Py_VISIT(self->name);
    Py_VISIT(self->hooks);
    Py_VISIT(self->run);
    return 0;
}

static int then_clear(PyObject *op)
{
    sw_import_then *self = (sw_import_then *)op;
    Py_CLEAR(self->loader);
    Py_CLEAR(self->name);
    Py_CLEAR(self->hooks);
    Py_CLEAR(self->run);
    return 0;
}

static void then_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    then_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyMethodDef then_methods[] = {
    {"create_module", then_create_module, METH_O, "create_module(spec): the wrapped loader's"},
    {"exec_module", then_exec_module, METH_O, "exec_module(module): the wrapped loader's, then the hooks"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject then_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.task_import_loader",
    .tp_basicsize = sizeof(sw_import_then),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_getattro = then_getattro,
    .tp_traverse = then_traverse,
    .tp_clear = then_clear,
    .tp_dealloc = then_dealloc,
    .tp_methods = then_methods,
    .tp_doc = "a loader that runs its module, then task events' hooks of it (ext/tracer/task_imports.c)",
};

/* hooks.task_import_finder(hooks, run) -> a new finder over the dict hooks
 * ({name: [hook, ...]}, shared: entries added later count), running each
 * hook found as run(hook, module, name). */
static PyObject *task_import_finder(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *hooks, *run;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &hooks, &run))
        return NULL;
    if (PyType_Ready(&finder_type) < 0 || PyType_Ready(&then_type) < 0)
        return NULL;
    sw_import_finder *f = PyObject_GC_New(sw_import_finder, &finder_type);
    if (!f)
        return NULL;
    f->hooks = Py_NewRef(hooks);
    f->run = Py_NewRef(run);
    f->busy = 0;
    PyObject_GC_Track((PyObject *)f);
    return (PyObject *)f;
}

static PyMethodDef methods[] = {
    {"task_import_finder", task_import_finder, METH_VARARGS,
     "task_import_finder(hooks, run) -> a sys.meta_path finder that runs run(hook, module, name) after a hooked "
     "module is imported"},
    {NULL, NULL, 0, NULL},
};

int sw_task_imports_add_hooks(PyObject *hooks)
{
    return PyModule_AddFunctions(hooks, methods);
}
