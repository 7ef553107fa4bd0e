/*
 * init_gap.c - CPython 3.13 only: the specialised constructor call
 * CALL_ALLOC_AND_ENTER_INIT pushes the __init__ frame inline, without the
 * PEP 523 check, so the frame-evaluation hook never sees such calls. To stay
 * exact, stackwatch enables sys.monitoring PY_START/PY_RETURN as *local*
 * events on every Python __init__ code object (hooks.init_gap_begin, below),
 * and PY_UNWIND globally (the switching owner, switch.c, asks
 * src/stackwatch/events/monitoring.py), with the C callbacks below:
 *
 *  - PY_START: if the starting frame is the one the hook just entered, the
 *    hook has recorded it already; otherwise it was pushed inline: record a
 *    call and remember the frame.
 *  - PY_RETURN / PY_UNWIND (callbacks of exit_line.c, which calls
 *    sw_init_gap_exit): if the frame is one we remembered, record its
 *    return (or unwind); frames the hook entered are closed by the hook.
 *
 * A function watcher extends the local events to __init__ functions created
 * after tracing started, a dict watcher on the classes' dicts to functions
 * of any name assigned as __init__, and eval_slow asks, at a code's first
 * hooked frame, whether it is the __init__ of its first argument's class
 * (a class created while tracing with `__init__ = f`), and eval_slow looks
 * into a class body's namespace when the body ends (an `__init__ = f` whose
 * code the trace already knew as an ordinary function). Every such code is
 * flagged SW_ID_INIT, so that its hooked frames take eval_slow, which
 * PY_START recognises (t->hook_frame); through the fast path they would be
 * recorded twice. On other versions this file adds nothing.
 */
#include "init_gap.h"

#include "base/base.h"
#include "ext/dispatch/dispatch.h"
#include "ext/shared/hookerr.h"
#include "ext/tracer/thread_state.h"
#include "ext/tracer/lines_local.h"
#include "ext/tracer/session.h"
#include "ext/tracer/switch.h"

#if PY_VERSION_HEX >= 0x030D0000

static PyObject *set_local_events;  /* sys.monitoring.set_local_events */
static int tool_id = -1;
static int local_events;
static int watcher_id = -1;       /* function watcher: new __init__ functions */
static int code_watcher_id = -1;  /* code watcher: codes freed, out of init_codes */
static int dict_watcher_id = -1;  /* class dicts: __init__ assigned */

static _PyInterpreterFrame *current_frame(void)
{
    return PyThreadState_Get()->current_frame;
}

/* Frames remembered by mon_start carry, in their low bits (frames are
 * pointer-aligned), what was done at their start: recorded in the file,
 * handed to the other consumers. */
#define REC_FILE 1u
#define REC_EMIT 2u

static int others_want(int kind) { return (sw_D.slow & SW_EVB(kind)) != 0; }

static PyObject *mon_start(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    int others = others_want(SW_K_CALL) || others_want(SW_K_RETURN) || others_want(SW_K_UNWIND);
    if ((!sw_session_calls() && !others) || n < 1 || !PyCode_Check(args[0]))
        Py_RETURN_NONE;
    sw_tracer_thread *t = &sw_TT;
    if (sw_T.calls_off)
        Py_RETURN_NONE;
    int file = sw_session_calls() && (t->session == sw_S.gen || sw_thread_attach(t));
    if (sw_T.calls_off)
        Py_RETURN_NONE;
    if (t->mon_gen != sw_S.gen) {
        t->mon_depth = 0;
        t->mon_gen = sw_S.gen;
    }
    _PyInterpreterFrame *f = current_frame();
    if (!f || (void *)f == t->hook_frame)
        Py_RETURN_NONE;  /* entered through the hook: already recorded */
    PyCodeObject *co = (PyCodeObject *)args[0];
    uintptr_t rec = 0;
    uint32_t id = 0;
    if (file) {
        id = sw_code_id(co, f->f_globals);
        if (!((id & SW_ID_SKIP) || (sw_S.max_depth && t->tb->depth >= sw_S.max_depth)))
            rec |= REC_FILE;
    }
    if (others)
        rec |= REC_EMIT;
    if (!rec)
        Py_RETURN_NONE;
    if (t->mon_depth == t->mon_cap) {
        uint32_t cap = t->mon_cap ? t->mon_cap * 2 : 32;
        void **p = PyMem_RawRealloc(t->mon_frames, cap * sizeof *p);
        if (!p) {
            sw_hook_error("out of memory recording an __init__ frame");
            Py_RETURN_NONE;
        }
        t->mon_frames = p;
        t->mon_cap = cap;
    }
    t->mon_frames[t->mon_depth++] = (void *)((uintptr_t)f | rec);
    if (rec & REC_FILE)
        sw_tbuf_enter(t->tb, sw_event_now(t->tb), SW_OP_CALL, id & SW_ID_MASK);
    if ((rec & REC_EMIT) && others_want(SW_K_CALL))   /* (unrecorded: a session runs and leaves it out) */
        sw_emit_frame_rec(SW_K_CALL, co, co->co_firstlineno, sw_S.gen && !(rec & REC_FILE));
    Py_RETURN_NONE;
}

void sw_init_gap_exit(int kind, PyObject *code, int line)
{
    unsigned op = kind == SW_K_RETURN ? SW_OP_RETURN : SW_OP_UNWIND;
    sw_tracer_thread *t = &sw_TT;
    if (t->mon_gen != sw_S.gen || !t->mon_depth)
        return;
    uintptr_t top = (uintptr_t)t->mon_frames[t->mon_depth - 1];
    if ((top & ~(uintptr_t)3) != (uintptr_t)current_frame())
        return;
    t->mon_depth--;
    if ((top & REC_FILE) && sw_S.gen && t->session == sw_S.gen)
        sw_tbuf_exit(t->tb, sw_event_now(t->tb), op);
    if ((top & REC_EMIT) && others_want(kind) && !sw_T.calls_off)
        sw_emit_frame_rec(kind, (code && PyCode_Check(code)) ? (PyCodeObject *)code : NULL, line,
                          sw_S.gen && !(top & REC_FILE));
}

/* Whether CPython 3.13 can push this __init__ inline: only a "simple"
 * function (specialize.c function_kind: no *args, **kwargs or keyword-only
 * parameters, optimized code) is ever entered by CALL_ALLOC_AND_ENTER_INIT;
 * the others always go through the frame-evaluation hook. */
static int may_be_inlined(PyCodeObject *co)
{
    return !(co->co_flags & (CO_VARARGS | CO_VARKEYWORDS)) && co->co_kwonlyargcount == 0 &&
           (co->co_flags & CO_OPTIMIZED);
}

/* A set of object addresses: the addresses, indexed by a base/hashtab.h
 * table. */
typedef struct {
    uint64_t *keys;
    size_t n, cap;
    sw_hashtab index;
} ptrset;

/* 1 if added, 0 if there already, -1 out of memory. */
static int ptrset_add(ptrset *s, void *p)
{
    uint64_t key = (uint64_t)(uintptr_t)p;
    if (sw_hashtab_get_u64(&s->index, s->keys, key) != SW_HT_NONE)
        return 0;
    uint64_t *k = sw_array_grow(s->keys, &s->cap, s->n + 1, sizeof *k, 1024);
    if (!k)
        return -1;
    s->keys = k;
    if (s->n >= SW_HT_NONE || sw_hashtab_add(&s->index, sw_hash_u64(key), (uint32_t)s->n) != SW_OK)
        return -1;
    s->keys[s->n++] = key;
    return 1;
}

/* Takes p out of the set, if there (its key becomes 0, which no object
 * address is). */
static void ptrset_remove(ptrset *s, const void *p)
{
    uint32_t i = sw_hashtab_get_u64(&s->index, s->keys, (uint64_t)(uintptr_t)p);
    if (i != SW_HT_NONE)
        s->keys[i] = 0;
}

static void ptrset_free(ptrset *s)
{
    free(s->keys);
    sw_hashtab_free(&s->index);
    memset(s, 0, sizeof *s);
}

/* The codes given the local events in this gap, alive: a code freed
 * leaves it (on_code), since the next code object allocated at its
 * address (an import's code is freed once run, and the next import's
 * takes its place at once) is another, which needs its own events. Kept,
 * such an address made watch_code skip the new __init__, whose inlined
 * calls the trace then lacked. */
static ptrset init_codes;

static int on_code(PyCodeEvent event, PyCodeObject *co)
{
    if (event == PY_CODE_EVENT_DESTROY)
        ptrset_remove(&init_codes, co);
    return 0;
}

static int ptrset_has(const ptrset *s, const void *p)
{
    return sw_hashtab_get_u64(&s->index, s->keys, (uint64_t)(uintptr_t)p) != SW_HT_NONE;
}

int sw_init_gap_is_init(PyCodeObject *co)
{
    return set_local_events && ptrset_has(&init_codes, co);
}

/* Gives co (an __init__ CPython may push inline) the local events, once,
 * and routes its hooked frames through eval_slow (SW_ID_INIT), which tells
 * the PY_START callback that the hook has recorded them. Never raises. */
static void watch_code(PyCodeObject *co)
{
    if (!set_local_events || tool_id < 0 || !may_be_inlined(co) || ptrset_has(&init_codes, co))
        return;
    sw_exc_state es;
    sw_exc_save(&es);
    if (ptrset_add(&init_codes, co) < 0) {
        PyErr_Clear();
        sw_hook_error("out of memory watching an __init__");
        sw_exc_restore(&es);
        return;
    }
    sw_code_mark_init(co);
    /* Keeps the code's local line events (lines_local.c), if any. */
    long lines = sw_lines_local_bits(co);
    PyErr_Clear();
    PyObject *r = PyObject_CallFunction(set_local_events, "iOl", tool_id, (PyObject *)co, (long)local_events | lines);
    if (!r) {
        PyErr_Clear();
        sw_hook_error("could not enable events on a new __init__");
    }
    Py_XDECREF(r);
    sw_exc_restore(&es);
}

static int gap_wanted(void) { return set_local_events && (sw_session_calls() || (sw_D.slow & SW_MASK_CALLS)); }

/* New functions named __init__ get the local events too. */
static int on_function(PyFunction_WatchEvent event, PyFunctionObject *func, PyObject *new_value)
{
    (void)new_value;
    if (event != PyFunction_EVENT_CREATE || !gap_wanted())
        return 0;
    PyObject *name = func->func_name;
    if (name && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "__init__") == 0 &&
        PyCode_Check(func->func_code))
        watch_code((PyCodeObject *)func->func_code);
    return 0;
}

static PyObject *init_str;  /* "__init__", interned */

static int is_init_key(PyObject *key)
{
    return key == init_str ||
           (key && PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "__init__") == 0);
}

/* A function of any name set as __init__ in a class's dict (the dict
 * watcher fires before the dict changes, with the new value). */
static int on_class_dict(PyDict_WatchEvent event, PyObject *dict, PyObject *key, PyObject *new_value)
{
    (void)dict;
    if ((event == PyDict_EVENT_ADDED || event == PyDict_EVENT_MODIFIED) && gap_wanted() && new_value &&
        PyFunction_Check(new_value) && is_init_key(key) && PyCode_Check(PyFunction_GET_CODE(new_value)))
        watch_code((PyCodeObject *)PyFunction_GET_CODE(new_value));
    return 0;
}

static void watch_class_dict(PyTypeObject *tp)
{
    if (dict_watcher_id < 0 || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || !tp->tp_dict)
        return;
    if (PyDict_Watch(dict_watcher_id, tp->tp_dict) < 0)
        PyErr_Clear();
}

/* At a hooked frame's start: a frame of a function that is the __init__ of
 * its first argument's class, whatever its name (a class created while
 * tracing with `__init__ = f` in its body or through type()), gets the
 * events for its later, inlined calls; the class's dict is watched from
 * then on. */
void sw_init_gap_check_frame(_PyInterpreterFrame *f)
{
    PyCodeObject *co = sw_frame_code(f);
    if (!gap_wanted() || co->co_argcount < 1 || !may_be_inlined(co) ||
        (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) || ptrset_has(&init_codes, co))
        return;
    PyObject *self = f->localsplus[0];
    if (!self || !PyFunction_Check(f->f_funcobj))
        return;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject *init = _PyType_Lookup(tp, init_str);   /* borrowed; never raises */
    if (init != f->f_funcobj)
        return;
    watch_code(co);
    watch_class_dict(tp);
}

/* At the end of a frame of code that is not CO_OPTIMIZED (a class body;
 * also a module body or exec'd code): an `__init__` in the namespace it
 * filled may be a function the trace has already seen as an ordinary one
 * (`__init__ = f` in a class body), which the check at a code's first
 * hooked frame cannot catch. Only a dict namespace is looked into (a
 * mapping from __prepare__ could run user code). Never raises. */
void sw_init_gap_check_namespace(PyObject *ns)
{
    if (!gap_wanted() || !init_str || !PyDict_Check(ns))
        return;
    sw_exc_state es;
    sw_exc_save(&es);
    sw_busy_enter(&sw_T);
    PyObject *init = PyDict_GetItemWithError(ns, init_str);   /* borrowed */
    Py_XINCREF(init);
    PyErr_Clear();
    if (init && PyFunction_Check(init) && PyCode_Check(PyFunction_GET_CODE(init)))
        watch_code((PyCodeObject *)PyFunction_GET_CODE(init));
    Py_XDECREF(init);
    sw_busy_exit(&sw_T);
    sw_exc_restore(&es);
}

/* Calls visit on every class alive now (object and all its subclasses,
 * transitively), each once; stops at the first that returns -1. The walk
 * keeps a reference to every class on its stack. Returns 0, or -1 with an
 * exception set. */
typedef int (*class_visit)(PyTypeObject *tp, void *arg);

static int walk_classes(class_visit visit, void *arg)
{
    PyObject *subclasses = PyObject_GetAttrString((PyObject *)&PyType_Type, "__subclasses__");
    ptrset types = {0};
    PyObject **stack = NULL;
    size_t depth = 0, cap = 0;
    int err = !subclasses || ptrset_add(&types, &PyBaseObject_Type) < 0;
    if (!err) {
        cap = 256;
        stack = PyMem_Malloc(cap * sizeof *stack);
        err = !stack;
        if (!err)
            stack[depth++] = Py_NewRef((PyObject *)&PyBaseObject_Type);
    }
    while (!err && depth) {
        PyObject *t = stack[--depth];   /* owned */
        PyObject *subs = PyObject_CallOneArg(subclasses, t);
        if (!subs) {
            PyErr_Clear();   /* not a type after all */
            Py_DECREF(t);
            continue;
        }
        err = !PyList_Check(subs);
        for (Py_ssize_t i = 0; !err && i < PyList_GET_SIZE(subs); i++) {
            PyObject *sub = PyList_GET_ITEM(subs, i);
            int added = ptrset_add(&types, sub);
            if (added < 0) {
                err = 1;
            } else if (added) {
                if (depth == cap) {
                    PyObject **p = PyMem_Realloc(stack, 2 * cap * sizeof *stack);
                    if (!p) {
                        err = 1;
                        break;
                    }
                    stack = p;
                    cap *= 2;
                }
                stack[depth++] = Py_NewRef(sub);
            }
        }
        Py_DECREF(subs);
        if (!err && PyType_Check(t))
            err = visit((PyTypeObject *)t, arg) < 0;
        err = err || PyErr_Occurred();
        Py_DECREF(t);
    }
    while (depth)
        Py_DECREF(stack[--depth]);
    PyMem_Free(stack);
    ptrset_free(&types);
    Py_XDECREF(subclasses);
    if (err && !PyErr_Occurred())
        PyErr_NoMemory();
    return err ? -1 : 0;
}

/* What collect_init_codes gathers: the codes, each once. */
typedef struct {
    PyObject *codes;   /* list */
    ptrset seen;
} init_codes_found;

/* Watches the class's dict; adds its __init__'s code if CPython may push
 * that function inline. */
static int collect_init_codes(PyTypeObject *tp, void *arg)
{
    init_codes_found *found = arg;
    watch_class_dict(tp);
    PyObject *dict = PyType_GetDict(tp);
    PyObject *init = dict ? PyDict_GetItemWithError(dict, init_str) : NULL;   /* borrowed */
    int err = 0;
    if (init && PyFunction_Check(init)) {
        PyObject *code = PyFunction_GET_CODE(init);
        if (PyCode_Check(code) && may_be_inlined((PyCodeObject *)code)) {
            int added = ptrset_add(&found->seen, code);
            err = added < 0 || (added && PyList_Append(found->codes, code) < 0);
        }
    }
    Py_XDECREF(dict);
    if (err && !PyErr_Occurred())
        PyErr_NoMemory();
    return err || PyErr_Occurred() ? -1 : 0;
}

/* The code objects of the Python __init__ functions that CPython may push
 * inline (may_be_inlined), defined by any class alive now, each once; the
 * classes' dicts are watched from here on. */
static PyObject *existing_init_codes(void)
{
    init_codes_found found = {PyList_New(0), {0}};
    if (!found.codes)
        return NULL;
    int err = walk_classes(collect_init_codes, &found);
    ptrset_free(&found.seen);
    if (err < 0) {
        Py_DECREF(found.codes);
        return NULL;
    }
    return found.codes;
}

/* Takes the watcher's bit off the class's dict: with the watcher gone, the
 * next tool given its id would otherwise be told of changes to dicts it
 * never watched. */
static int unwatch_class_dict(PyTypeObject *tp, void *arg)
{
    (void)arg;
    if ((tp->tp_flags & Py_TPFLAGS_HEAPTYPE) && tp->tp_dict && PyDict_Unwatch(dict_watcher_id, tp->tp_dict) < 0)
        PyErr_Clear();
    return 0;
}

/* hooks.init_gap_begin(tool_id): sets the gap's local events
 * (SW_INIT_GAP_LOCAL_EVENTS) on every existing __init__ (found in C: a walk
 * in Python cost more instructions than a short traced program) and
 * watches for new ones. Returns the list of code objects it set them on. */
static PyObject *gap_begin(PyObject *self, PyObject *arg)
{
    (void)self;
    int tid = PyLong_AsInt(arg);
    if (tid == -1 && PyErr_Occurred())
        return NULL;
    if (!init_str && !(init_str = PyUnicode_InternFromString("__init__")))
        return NULL;
    PyObject *mon = PySys_GetObject("monitoring");   /* borrowed */
    PyObject *fn = mon ? PyObject_GetAttrString(mon, "set_local_events") : NULL;
    if (!fn)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_RuntimeError, "sys.monitoring is missing");
    if (dict_watcher_id < 0 && (dict_watcher_id = PyDict_AddWatcher(on_class_dict)) < 0)
        return NULL;
    if (code_watcher_id < 0 && (code_watcher_id = PyCode_AddWatcher(on_code)) < 0)
        PyErr_Clear();   /* (every code watcher taken: a reused address is then missed, as before) */
    PyObject *list = existing_init_codes();
    if (!list) {
        Py_DECREF(fn);
        return NULL;
    }
    Py_XSETREF(set_local_events, fn);
    tool_id = tid;
    local_events = SW_INIT_GAP_LOCAL_EVENTS;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        watch_code((PyCodeObject *)PyList_GET_ITEM(list, i));
    if (watcher_id < 0) {
        watcher_id = PyFunction_AddWatcher(on_function);
        if (watcher_id < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

static PyObject *gap_end(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (watcher_id >= 0) {
        if (PyFunction_ClearWatcher(watcher_id) < 0)
            return NULL;
        watcher_id = -1;
    }
    /* The dicts watched (every class's found at start or at a frame since)
     * lose the watcher's bit before the watcher goes. */
    if (dict_watcher_id >= 0) {
        if (walk_classes(unwatch_class_dict, NULL) < 0)
            PyErr_Clear();   /* out of memory: those dicts keep the bit */
        if (PyDict_ClearWatcher(dict_watcher_id) < 0)
            return NULL;
        dict_watcher_id = -1;
    }
    if (code_watcher_id >= 0) {
        if (PyCode_ClearWatcher(code_watcher_id) < 0)
            return NULL;
        code_watcher_id = -1;
    }
    Py_CLEAR(set_local_events);
    tool_id = -1;
    ptrset_free(&init_codes);
    Py_RETURN_NONE;
}

static PyMethodDef gap_methods[] = {
    {"init_gap_begin", gap_begin, METH_O,
     "init_gap_begin(tool_id) -> list of the __init__ code objects given the gap's local events"},
    {"init_gap_end", gap_end, METH_NOARGS, "init_gap_end(): stop watching new __init__ functions"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef mon_start_def = {"mon_start", (PyCFunction)(void (*)(void))mon_start, METH_FASTCALL,
                                     "sys.monitoring PY_START callback"};

int sw_init_gap_add_hooks(PyObject *hooks)
{
    if (PyModule_AddFunctions(hooks, gap_methods) < 0 ||
        sw_hooks_add_monitoring_callback(hooks, SW_MON(PY_START), &mon_start_def) < 0)
        return -1;
    return 0;
}

#else

int sw_init_gap_add_hooks(PyObject *hooks)
{
    (void)hooks;
    return 0;
}

#endif
