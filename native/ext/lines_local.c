/*
 * lines_local.c - line and instruction events of chosen files only, on
 * 3.12+: when every consumer of those events limits itself to some files
 * (handlers' `where`, the file tracer's line filter), src/stackwatch/
 * _monitor.py asks sys.monitoring for LINE / INSTRUCTION as *local* events
 * of the matching code objects that exist (found through gc and the
 * threads' stacks), and this code watcher adds them to matching code
 * objects created later (a module imported, a function or lambda defined
 * by exec / compile). Other code objects carry no such events: other files
 * run at full speed (global LINE events returning DISABLE leave 3.12's
 * code slower for good).
 *
 * _lines_local_begin(tool_id, bits, get_local_events, set_local_events)
 * _lines_local_end()
 * _lines_wanted(code) -> sys.monitoring bits (of `bits`) a consumer wants there
 * _lines_restricted() -> every line/instruction consumer is limited to files
 * _lines_key() -> changes whenever the answer of _lines_wanted may have
 * _codes_referred(objects) -> the code objects among / referred to by them
 */
#include "dispatch.h"

#include "session.h"

#if PY_VERSION_HEX >= 0x030C0000

static int tool_id = -1;
static long bits;             /* sys.monitoring.events.LINE | INSTRUCTION, as wanted */
static long line_bit, instruction_bit;
static PyObject *get_local, *set_local;
static int watcher_id = -1;

static long wanted_bits(PyCodeObject *co)
{
    long w = 0;
    if ((bits & line_bit) && sw_events_wanted_in(SW_K_LINE, co))
        w |= line_bit;
    if ((bits & instruction_bit) && sw_events_wanted_in(SW_K_INSTRUCTION, co))
        w |= instruction_bit;
    return w;
}

long sw_lines_local_bits(PyCodeObject *co)
{
    return tool_id >= 0 && bits ? wanted_bits(co) : 0;
}

static int on_code(PyCodeEvent event, PyCodeObject *co)
{
    if (event != PY_CODE_EVENT_CREATE || tool_id < 0 || !bits || !set_local)
        return 0;
    sw_exc_state es;
    sw_exc_save(&es);
    long w = wanted_bits(co);
    PyErr_Clear();
    if (w) {
        PyObject *old = PyObject_CallFunction(get_local, "iO", tool_id, (PyObject *)co);
        long o = old ? PyLong_AsLong(old) : 0;
        Py_XDECREF(old);
        PyErr_Clear();
        PyObject *r = PyObject_CallFunction(set_local, "iOl", tool_id, (PyObject *)co, o | w);
        if (!r) {
            PyErr_Clear();
            sw_session_error("could not enable line events on a new code object");
        }
        Py_XDECREF(r);
    }
    sw_exc_restore(&es);
    return 0;
}

static PyObject *local_begin(PyObject *self, PyObject *args)
{
    (void)self;
    int tid;
    long b, lb, ib;
    PyObject *g, *s;
    if (!PyArg_ParseTuple(args, "illlOO", &tid, &b, &lb, &ib, &g, &s))
        return NULL;
    if (watcher_id < 0 && (watcher_id = PyCode_AddWatcher(on_code)) < 0)
        return NULL;
    tool_id = tid;
    bits = b;
    line_bit = lb;
    instruction_bit = ib;
    Py_XSETREF(get_local, Py_NewRef(g));
    Py_XSETREF(set_local, Py_NewRef(s));
    Py_RETURN_NONE;
}

static PyObject *local_end(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    tool_id = -1;
    bits = 0;
    Py_CLEAR(get_local);
    Py_CLEAR(set_local);
    if (watcher_id >= 0) {
        int id = watcher_id;
        watcher_id = -1;
        if (PyCode_ClearWatcher(id) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *lines_wanted(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *co;
    long b, lb, ib;
    if (!PyArg_ParseTuple(args, "O!lll", &PyCode_Type, &co, &b, &lb, &ib))
        return NULL;
    long w = 0;
    if ((b & lb) && sw_events_wanted_in(SW_K_LINE, (PyCodeObject *)co))
        w |= lb;
    if ((b & ib) && sw_events_wanted_in(SW_K_INSTRUCTION, (PyCodeObject *)co))
        w |= ib;
    PyErr_Clear();
    return PyLong_FromLong(w);
}

static PyObject *lines_restricted(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    uint32_t lines = SW_EVB(SW_K_LINE) | SW_EVB(SW_K_INSTRUCTION);
    int everywhere = (sw_D.probes & lines) || ((sw_D.file & lines) && sw_file_lines_everywhere()) ||
                     sw_handlers_everywhere(lines);
    return PyBool_FromLong(!everywhere);
}

/* _lines_key() -> a value that changes whenever which code objects want
 * line events may have changed (the handler set or the file tracer's
 * filters, a session, the masks). */
static PyObject *lines_key(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    uint32_t lines = SW_EVB(SW_K_LINE) | SW_EVB(SW_K_INSTRUCTION);
    return Py_BuildValue("(KKkkk)", (unsigned long long)sw_D.hgen, (unsigned long long)sw_S.gen,
                         (unsigned long)(sw_D.handlers & lines), (unsigned long)(sw_D.file & lines),
                         (unsigned long)(sw_D.probes & lines));
}

static int visit_code(PyObject *o, void *arg)
{
    if (o && PyCode_Check(o) && PySet_Add((PyObject *)arg, o) < 0)
        return -1;
    return 0;
}

/* _codes_referred(objects) -> set of the code objects among them and
 * among what they refer to (tp_traverse): functions, generators, and code
 * kept in a container or an attribute (e.g. a script compiled before the
 * consumer came). In C: a Python walk of gc.get_referents() costs more
 * than a short traced program. */
static PyObject *codes_referred(PyObject *self, PyObject *objs)
{
    (void)self;
    PyObject *fast = PySequence_Fast(objs, "_codes_referred needs a sequence");
    if (!fast)
        return NULL;
    PyObject *out = PySet_New(NULL);
    for (Py_ssize_t i = 0; out && i < PySequence_Fast_GET_SIZE(fast); i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        traverseproc tr = Py_TYPE(o)->tp_traverse;
        if (visit_code(o, out) < 0 || (tr && tr(o, visit_code, out) < 0))
            Py_CLEAR(out);
    }
    Py_DECREF(fast);
    return out;
}

static PyMethodDef methods[] = {
    {"_codes_referred", codes_referred, METH_O,
     "_codes_referred(objects) -> set of the code objects among them or referred to by them"},
    {"_lines_local_begin", local_begin, METH_VARARGS,
     "_lines_local_begin(tool_id, bits, LINE, INSTRUCTION, get_local_events, set_local_events)"},
    {"_lines_local_end", local_end, METH_NOARGS, "_lines_local_end(): the code watcher is removed"},
    {"_lines_wanted", lines_wanted, METH_VARARGS,
     "_lines_wanted(code, bits, LINE, INSTRUCTION) -> the bits a consumer wants in code"},
    {"_lines_key", lines_key, METH_NOARGS, "_lines_key() -> changes when the line filters may have"},
    {"_lines_restricted", lines_restricted, METH_NOARGS,
     "_lines_restricted() -> every line/instruction consumer is limited to some files"},
    {NULL, NULL, 0, NULL},
};

int sw_lines_local_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}

#else

int sw_lines_local_add_to_module(PyObject *m)
{
    (void)m;
    return 0;
}

#endif
