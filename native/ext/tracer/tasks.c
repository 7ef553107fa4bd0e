/*
 * tasks.c - greenlet switches as task switches (tasks.h). A greenlet is a
 * task: its id is given when the trace first meets it (1, 2, ... per
 * session; a thread's main greenlet is the thread itself, task 0) and is
 * defined in the trace with its name, "greenlet " and the qualified name
 * of its run function: the first frame it records after its first switch
 * in (greenlet has dropped .run by then; sw_tasks_name). The ids are held weakly: a greenlet ended
 * (or collected) leaves the table, and an address reused by another
 * greenlet gets a new id.
 */
#include "tasks.h"

#include "base/base.h"
#include "ext/dispatch/dispatch.h"
#include "ext/tracer/file_events.h"
#include "ext/tracer/thread_state.h"
#include "ext/tracer/session.h"

#include <stdio.h>
#include <string.h>

/* Values (messages, results) are recorded as their repr, cut at this many
 * characters (events/task_hooks.py VALUE_MAX). */
#define SW_TASK_VALUE_MAX 200

/* greenlet.settrace is per thread: ours is set on the thread that turns
 * task events on (or imports greenlet), and on any other thread at its
 * first switch() from Python meanwhile (greenlet_switch). */
static int installed;          /* ours is (or was last set as) greenlet's */
static uint64_t installs;      /* times it was: a thread whose sw_TT.greenlet_gen differs lacks ours */
static int chains;             /* some thread's callback is chained (in its thread dict, chained_key) */
static PyObject *chained_key;  /* "stackwatch greenlet chained": the callback ours replaced on the thread */
/* The task ids of this session, by object: its address (only compared),
 * a weak reference to it (held: one it had already when there is one, so
 * that a task costs no allocation the collector counts: two a task, the
 * pair and the reference, brought a 10,000-task asyncio run one full
 * collection more), its id. An address met again after its object died
 * is given the new object. Indexed by address in the one hash table. */
typedef struct {
    void *addr;
    PyObject *ref;             /* NULL: forgotten (an ended greenlet) */
    uint64_t id;
} task_ref;
static task_ref *refs;
static size_t nrefs, refs_cap;
static sw_hashtab refs_index;
static uint64_t ids_gen;       /* the session the table belongs to */
static int ids_made;
static uint64_t next_id;

PyObject *sw_tasks_weak_target(PyObject *wr)
{
    return sw_weak_target(wr);
}

/* 1 if g is a thread's main greenlet (the only kind without a parent). */
static int is_main(PyObject *g)
{
    PyObject *parent = PyObject_GetAttrString(g, "parent");
    if (!parent) {
        sw_err_drop();
        return 1;
    }
    int r = parent == Py_None;
    Py_DECREF(parent);
    return r;
}

/* The session's table of ids (emptied for a new session). */
static void ids_table(void)
{
    if (ids_gen != sw_S.gen || !ids_made) {
        for (size_t i = 0; i < nrefs; i++)
            Py_CLEAR(refs[i].ref);
        nrefs = 0;
        sw_hashtab_clear(&refs_index);
        ids_gen = sw_S.gen;
        ids_made = 1;
        next_id = 1;
    }
}

/* The entry of address o, or SW_HT_NONE. */
static uint32_t ref_of(PyObject *o)
{
    uint64_t h = sw_hash_u64((uint64_t)(uintptr_t)o);
    uint32_t pos, i;
    for (i = sw_hashtab_first(&refs_index, h, &pos); i != SW_HT_NONE && refs[i].addr != (void *)o;
         i = sw_hashtab_next(&refs_index, h, &pos)) {
    }
    return i;
}

/* The id of entry i if it is o's (alive), else 0. */
static uint64_t id_at(uint32_t i, PyObject *o)
{
    if (i == SW_HT_NONE || !refs[i].ref)
        return 0;
    PyObject *t = sw_tasks_weak_target(refs[i].ref);
    Py_XDECREF(t);
    return t == o ? refs[i].id : 0;
}

/* A weak reference to o (new reference): the first of those it has (any
 * ref, with a callback or not: all are cleared as it dies; not a proxy),
 * else a new one; NULL when it has
 * none and none can be made. */
static PyObject *weak_ref_to(PyObject *o)
{
    Py_ssize_t off = Py_TYPE(o)->tp_weaklistoffset;
    if (off && !PyType_Check(o)) {   /* (3.12+: a negative offset for a class's managed list, as CPython reads it) */
        for (PyWeakReference *r = *(PyWeakReference **)((char *)o + off); r; r = r->wr_next)
            if (r->wr_object == o && PyWeakref_CheckRef((PyObject *)r))   /* (not a proxy) */
                return Py_NewRef((PyObject *)r);
    }
    PyObject *wr = PyWeakref_NewRef(o, NULL);
    sw_err_drop();
    return wr;
}

/* Gives o the task id `id` (its entry i, or SW_HT_NONE: a new one). 1 if
 * done, 0 when out of memory. */
static int bind_at(PyObject *o, uint32_t i, uint64_t id)
{
    PyObject *wr = weak_ref_to(o);
    if (!wr)
        return 0;
    if (i == SW_HT_NONE) {
        task_ref *grown = nrefs < SW_HT_NONE - 1 ? sw_array_grow(refs, &refs_cap, nrefs + 1, sizeof *refs, 256) : NULL;
        if (!grown || sw_hashtab_add(&refs_index, sw_hash_u64((uint64_t)(uintptr_t)o), (uint32_t)nrefs) != SW_OK) {
            refs = grown ? grown : refs;
            Py_DECREF(wr);
            return 0;
        }
        refs = grown;
        i = (uint32_t)nrefs++;
        refs[i] = (task_ref){.addr = o};
    }
    Py_XSETREF(refs[i].ref, wr);
    refs[i].id = id;
    return 1;
}

/* The task id of o (a greenlet, an asyncio task, ...: 0 when out of
 * memory); *fresh set when it was given now. */
static uint64_t id_of(PyObject *g, int *fresh)
{
    *fresh = 0;
    ids_table();
    uint32_t i = ref_of(g);
    uint64_t id = id_at(i, g);
    if (id)
        return id;
    id = next_id++;
    *fresh = bind_at(g, i, id);
    return *fresh ? id : 0;
}

uint64_t sw_tasks_id(PyObject *o, int *fresh)
{
    return id_of(o, fresh);
}

uint64_t sw_tasks_reserve(void)
{
    ids_table();
    return next_id++;
}

int sw_tasks_bind(PyObject *o, uint64_t id)
{
    ids_table();
    return bind_at(o, ref_of(o), id);
}

uint64_t sw_tasks_known(PyObject *o)
{
    if (ids_gen != sw_S.gen || !ids_made || !nrefs)
        return 0;
    return id_at(ref_of(o), o);
}

/* g's task id (0 for a main greenlet, or when out of memory); *fresh set
 * when it was given now. */
static uint64_t task_of(PyObject *g, int *fresh)
{
    *fresh = 0;
    return is_main(g) ? 0 : id_of(g, fresh);
}

/* Forgets an ended greenlet. */
static void forget_if_dead(PyObject *g)
{
    PyObject *dead = PyObject_GetAttrString(g, "dead");
    if (dead == Py_True && ids_made && ids_gen == sw_S.gen) {
        uint32_t i = ref_of(g);
        if (i != SW_HT_NONE)
            Py_CLEAR(refs[i].ref);
    }
    sw_err_drop();
    Py_XDECREF(dead);
}

/* The line frame f runs. PyFrame_GetLineNumber reads the code's line
 * table from its start (thousands of instructions in a long function),
 * so the lines are kept in a small table by code object (held: its
 * address is never another code's) and instruction. */
#define LINE_CACHE 256
static struct {
    PyCodeObject *code;
    int lasti, line;
} line_cache[LINE_CACHE];

/* The line of code co at instruction `lasti` (a frame's, or -1: from
 * frame f), through the table. */
static int line_at(PyCodeObject *co, int lasti, PyFrameObject *f)
{
    size_t slot = (((uintptr_t)co >> 4) ^ (unsigned)lasti * 2654435761u) % LINE_CACHE;
    if (lasti >= 0 && line_cache[slot].code == co && line_cache[slot].lasti == lasti)
        return line_cache[slot].line;
    int line = f ? PyFrame_GetLineNumber(f) : PyCode_Addr2Line(co, lasti);
    if (lasti >= 0) {
        Py_INCREF(co);
        Py_XSETREF(line_cache[slot].code, co);
        line_cache[slot].lasti = lasti;
        line_cache[slot].line = line;
    }
    return line;
}

static int frame_line(PyFrameObject *f)
{
#if PY_VERSION_HEX >= 0x030B0000
    int lasti = PyFrame_GetLasti(f);
#else
    int lasti = f->f_lasti;
#endif
    PyCodeObject *co = PyFrame_GetCode(f);
    int line = line_at(co, lasti, f);
    Py_DECREF(co);
    return line;
}

/* Records a task event of dispatch kind `kind` (its EXT record and the
 * handlers'), located at frame f or, when its code is not recorded (a
 * filter's, or stackwatch's own), at the first caller whose code is
 * (borrowed; NULL: nowhere). Fields as sw_evdata's (records.h). */
static void task_record_at(int kind, PyFrameObject *f, PyCodeObject *at, int at_line, long long a, long long b,
                           long long c, const char *s1, const char *s2);

static void task_record(int kind, PyFrameObject *f, long long a, long long b, long long c, const char *s1,
                        const char *s2)
{
    task_record_at(kind, f, NULL, -1, a, b, c, s1, s2);
}

void sw_task_record(int kind, PyFrameObject *f, long long a, long long b, long long c, const char *s1, const char *s2)
{
    task_record_at(kind, f, NULL, -1, a, b, c, s1, s2);
}

void sw_task_record_code(int kind, PyCodeObject *co, int offset, long long a, long long b, long long c,
                         const char *s1, const char *s2)
{
    task_record_at(kind, NULL, co, co && offset >= 0 ? line_at(co, offset, NULL) : -1, a, b, c, s1, s2);
}

uint64_t sw_task_running(void)
{
    sw_tracer_thread *t = &sw_TT;
    return sw_S.gen && t->tb && t->session == sw_S.gen ? t->tb->task : t->task_now;
}

/* The same, located at code `at`, line at_line when f is NULL. */
static void task_record_at(int kind, PyFrameObject *f, PyCodeObject *at, int at_line, long long a, long long b,
                           long long c, const char *s1, const char *s2)
{
    if (!(sw_D.mask & SW_EVB(kind)))
        return;
    Py_XINCREF(f);
    while (f && sw_S.gen) {
        PyCodeObject *co = PyFrame_GetCode(f);
        int skip = (sw_code_id(co, NULL) & SW_ID_SKIP) != 0;
        Py_DECREF(co);
        if (!skip)
            break;
        Py_SETREF(f, PyFrame_GetBack(f));
    }
    if (!f && at && sw_S.gen && (sw_code_id(at, NULL) & SW_ID_SKIP))
        at = NULL;
    PyCodeObject *co = f ? PyFrame_GetCode(f) : at;
    if (!f)
        Py_XINCREF(co);
    sw_evdata d = {.code = co, .line = f ? frame_line(f) : at ? at_line : -1, .name = s1, .file = s2,
                   .a = a, .b = b, .c = c};
    if (sw_D.file & SW_EVB(kind)) {
        sw_file_record_ext(kind, &d);
        /* No frames to replay for its creation stack: it is taken here,
         * an asyncio task's from the running frame (the library's frames
         * inside the program's that made it too), a greenlet's from where
         * its creator stopped; a thread's by its starter (task_stack). */
        if (kind == SW_K_TASK_CREATE && sw_S.no_calls && b != 3) {
            if (b == 2 || !f)
                sw_file_record_stack_here(co, d.line, (uint64_t)a);
            else
                sw_file_record_stack(f, co, d.line, (uint64_t)a, 0);
        }
    }
    sw_emit(kind, &d);
    Py_XDECREF(co);
    Py_XDECREF(f);
    sw_err_drop();
}

/* The frame greenlet g stopped in (new reference), or NULL. */
static PyFrameObject *suspended_frame(PyObject *g)
{
    PyObject *f = PyObject_GetAttrString(g, "gr_frame");
    if (!f || !PyFrame_Check(f)) {
        sw_err_drop();
        Py_XDECREF(f);
        return NULL;
    }
    return (PyFrameObject *)f;
}

static void define_task(sw_tracer_thread *t, uint64_t id, const char *what)
{
    char name[256];
    snprintf(name, sizeof name, "greenlet%s%s", what && what[0] ? " " : "", what ? what : "");
    sw_writer_define_task(sw_S.w, id, t->tb->index, name);
}

/* Defines task id named after code co (its run function's). */
static void name_after_code(sw_tracer_thread *t, uint64_t id, PyCodeObject *co)
{
    PyObject *qn = sw_code_qualname(co);
    const char *s = qn && PyUnicode_Check(qn) ? PyUnicode_AsUTF8(qn) : NULL;
    sw_err_drop();
    define_task(t, id, s);
}

void sw_tasks_name(sw_tracer_thread *t, PyCodeObject *co)
{
    uint64_t id = t->task_unnamed;
    t->task_unnamed = 0;
    if (t->task_unnamed_gen == sw_S.gen && sw_S.gen && t->session == sw_S.gen) {
        PyObject *qn = sw_code_qualname(co);
        const char *s = qn && PyUnicode_Check(qn) ? PyUnicode_AsUTF8(qn) : NULL;
        sw_err_drop();
        define_task(t, id, s);
    }
    sw_tracer_thread_ready(t);
}

/* The qualified name of the outermost frame of f's chain (a greenlet's:
 * its run function's), into buf. Takes f (a new reference). */
static void outermost_name(PyObject *f, char *buf, size_t len)
{
    buf[0] = 0;
    PyFrameObject *back;
    while ((back = PyFrame_GetBack((PyFrameObject *)f)))
        Py_SETREF(f, (PyObject *)back);
    PyCodeObject *co = PyFrame_GetCode((PyFrameObject *)f);
    const char *s = PyUnicode_AsUTF8(sw_code_qualname(co));
    if (s)
        snprintf(buf, len, "%s", s);
    sw_err_drop();
    Py_DECREF(co);
    Py_DECREF(f);
}

/* 1 if type tp is gevent's (or derives from one of gevent's types: its
 * Greenlet keeps the function it runs as _run; its run is its own
 * Greenlet.run). The last type asked is kept. */
static int gevent_type(PyTypeObject *tp)
{
    static PyTypeObject *last;   /* (only compared) */
    static int last_is;
    if (tp == last)
        return last_is;
    PyObject *mro = tp->tp_mro;
    int is = 0;
    for (Py_ssize_t i = 0; mro && PyTuple_Check(mro) && i < PyTuple_GET_SIZE(mro) && !is; i++) {
        PyObject *mod = PyObject_GetAttrString(PyTuple_GET_ITEM(mro, i), "__module__");
        const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
        is = m && strncmp(m, "gevent.", 7) == 0;
        Py_XDECREF(mod);
        sw_err_drop();
    }
    last = tp;
    last_is = is;
    return is;
}

/* The qualified name of the function a gevent Greenlet g runs (its _run:
 * `outer` for gevent.spawn(outer), `AsyncResult.get` for
 * gevent.spawn(result.get)), into buf; 0 when g is none or has none. */
static int gevent_run_name(PyObject *g, char *buf, size_t len)
{
    if (!gevent_type(Py_TYPE(g)))
        return 0;
    PyObject *run = PyObject_GetAttrString(g, "_run");
    PyObject *qn = run && PyCallable_Check(run) ? PyObject_GetAttrString(run, "__qualname__") : NULL;
    const char *s = qn && PyUnicode_Check(qn) ? PyUnicode_AsUTF8(qn) : NULL;
    if (s)
        snprintf(buf, len, "%s", s);
    Py_XDECREF(qn);
    Py_XDECREF(run);
    sw_err_drop();
    return s != NULL;
}

/* The qualified name of the outermost frame of a suspended greenlet (its
 * run function's), into buf; "" when it has none. */
static void suspended_name(PyObject *g, char *buf, size_t len)
{
    buf[0] = 0;
    PyObject *f = PyObject_GetAttrString(g, "gr_frame");
    if (!f || !PyFrame_Check(f)) {
        sw_err_drop();
        Py_XDECREF(f);
        return;
    }
    outermost_name(f, buf, len);
}

/* The message of the switch about to happen (set by greenlet_switch):
 * its value's repr (a str, held), for the switch to the greenlet at
 * msg_to (an address, only compared), and when that switch starts it, its
 * run function's code (held: the first receive is located there; else
 * NULL). Every switch takes or drops them. */
static PyObject *msg_value, *msg_start;
static void *msg_to;
/* The channel of the messages of greenlet switches. */
#define SW_GREENLET_CHANNEL "switch"

/* Takes the message of a switch of `event` ("switch", "throw") to target:
 * the repr (new reference; *start: the run function's code, new
 * reference, or NULL), or NULL when it carries none. */
static PyObject *take_message(PyObject *event, PyObject *target, PyObject **start)
{
    PyObject *v = msg_value, *code = msg_start;
    int mine = v && msg_to == (void *)target && PyUnicode_Check(event) &&
               PyUnicode_CompareWithASCIIString(event, "switch") == 0;
    msg_value = msg_start = NULL;
    msg_to = NULL;
    if (!mine) {
        Py_XDECREF(v);
        Py_CLEAR(code);
        v = NULL;
    }
    *start = code;
    return v;
}

/* The repr of what the run function of the greenlet at result_of returned
 * (or raised), set by run_returned as it ends (held), for its exit. */
static PyObject *result_value;
static void *result_of;

/* Takes the result of greenlet g, which just ended (new reference), or NULL. */
static PyObject *take_result(PyObject *g)
{
    PyObject *r = result_value;
    int mine = r && result_of == (void *)g;
    result_value = NULL;
    result_of = NULL;
    if (!mine)
        Py_CLEAR(r);
    return r;
}

/* The repr of res, or when it is NULL of the exception pending (kept
 * pending), cut at SW_TASK_VALUE_MAX characters (new reference; NULL when
 * it fails). */
static PyObject *outcome_repr(PyObject *res)
{
    sw_exc_state exc;
    sw_exc_save(&exc);   /* (res NULL: the exception it raised, put back after) */
    PyObject *v = res;
#if PY_VERSION_HEX >= 0x030C0000
    if (!v)
        v = exc.exc;
#else
    if (!v) {
        PyErr_NormalizeException(&exc.t, &exc.v, &exc.tb);
        v = exc.v;
    }
#endif
    PyObject *r = v ? PyObject_Repr(v) : NULL;
    if (r && PyUnicode_GET_LENGTH(r) > SW_TASK_VALUE_MAX) {
        PyObject *cut = PyUnicode_Substring(r, 0, SW_TASK_VALUE_MAX - 3);
        Py_SETREF(r, cut ? PyUnicode_FromFormat("%U...", cut) : NULL);
        Py_XDECREF(cut);
    }
    sw_err_drop();
    sw_exc_restore(&exc);
    return r;
}

/* A greenlet's run function, wrapped when our switch() starts it: self is
 * (the run function, the greenlet's address); its result's repr (or its
 * exception's) is kept for the greenlet's exit. No frame of its own. */
static PyObject *run_returned(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *run = PyTuple_GET_ITEM(self, 0);
    PyObject *res = PyObject_Call(run, args, kwargs);
    if (!(sw_D.mask & SW_EVB(SW_K_TASK_EXIT)))
        return res;
    Py_XSETREF(result_value, outcome_repr(res));
    sw_exc_state exc;
    sw_exc_save(&exc);
    result_of = PyLong_AsVoidPtr(PyTuple_GET_ITEM(self, 1));
    sw_err_drop();
    sw_exc_restore(&exc);
    return res;
}

/* Greenlets suspended in our switch() (set by greenlet_switch just before
 * it switches, taken by greenlet_trace for the origin of that switch):
 * their addresses (only compared), in a set. A greenlet that began before
 * task events ends into its parent with a result that only the parent's
 * switch() returns: when the parent waits in ours, the exit is recorded
 * there, with it (exit_pending); else its result is not known. */
static void *switching_in_ours;   /* the greenlet our switch() switches to (only compared), or NULL */
static PyObject *suspended_in_ours;
static uint64_t suspended_gen;   /* the session the set belongs to (emptied for a new one) */
static struct {
    void *into;     /* the parent it ended into (only compared); NULL: none pending */
    void *thread;   /* its thread state (only compared): another thread's switch() does not return it */
    uint64_t task;
    int threw;
} exit_pending;

static PyObject *address_key(PyObject *g)
{
    return PyLong_FromVoidPtr(g);
}

/* 1 if greenlet g waits in our switch() (and it resumes now: forgotten). */
static int resumes_in_ours(PyObject *g)
{
    if (suspended_in_ours && suspended_gen != sw_S.gen)
        PySet_Clear(suspended_in_ours);
    suspended_gen = sw_S.gen;
    if (!suspended_in_ours || !PySet_GET_SIZE(suspended_in_ours))
        return 0;
    PyObject *key = address_key(g);
    int r = key ? PySet_Discard(suspended_in_ours, key) : 0;
    Py_XDECREF(key);
    sw_err_drop();
    return r > 0;
}

/* Greenlet g switches away from inside our switch(). */
static void suspends_in_ours(PyObject *g)
{
    if (!suspended_in_ours)
        suspended_in_ours = PySet_New(NULL);
    PyObject *key = suspended_in_ours ? address_key(g) : NULL;
    if (key)
        PySet_Add(suspended_in_ours, key);
    Py_XDECREF(key);
    sw_err_drop();
}

/* Records the exit of task `task` (threw: by an exception), its result
 * result (a repr) or, when NULL, "" (not known). A pending exception
 * stays (the one a switch() returning the greenlet's raises). */
static void record_greenlet_exit(uint64_t task, int threw, PyObject *result)
{
    sw_exc_state exc;
    sw_exc_save(&exc);
    const char *r = result ? PyUnicode_AsUTF8(result) : NULL;
    sw_err_drop();
    task_record(SW_K_TASK_EXIT, NULL, (long long)task, threw, 0, r ? r : "", NULL);
    sw_exc_restore(&exc);
}

static PyMethodDef run_def = {"run", (PyCFunction)(void (*)(void))run_returned, METH_VARARGS | METH_KEYWORDS,
                              "a greenlet's run function, its result kept for its exit (stackwatch task events)"};

static PyObject *greenlet_trace(PyObject *self, PyObject *args);

/* The greenlet trace callback ours replaced on this thread (new
 * reference), or NULL. */
static PyObject *thread_chained(void)
{
    PyObject *d = chains ? PyThreadState_GetDict() : NULL;   /* borrowed */
    PyObject *prev = d && chained_key ? PyDict_GetItemWithError(d, chained_key) : NULL;
    sw_err_drop();
    Py_XINCREF(prev);
    return prev;
}

/* Ours is set on this thread, replacing prev (None: none; ours: it was
 * set already, and what it chains stays). */
static void chain_here(PyObject *prev)
{
    sw_TT.greenlet_gen = installs;
    if (PyCFunction_Check(prev) && PyCFunction_GET_FUNCTION(prev) == greenlet_trace)
        return;
    PyObject *d = PyThreadState_GetDict();   /* borrowed */
    if (!chained_key)
        chained_key = PyUnicode_InternFromString("stackwatch greenlet chained");
    if (!d || !chained_key)
        return;
    if (prev == Py_None) {
        if (PyDict_DelItem(d, chained_key) < 0)
            sw_err_drop();
    } else if (PyDict_SetItem(d, chained_key, prev) == 0) {
        chains = 1;
    }
    sw_err_drop();
}

/* Ours on this thread too (greenlet.settrace(hooks.greenlet_trace)), the
 * thread's callback chained. Never raises. */
static void install_here(void)
{
    sw_exc_state exc;
    sw_exc_save(&exc);
    sw_TT.greenlet_gen = installs;   /* (once, even if it fails) */
    PyObject *name = PyUnicode_FromString("greenlet");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL;
    PyObject *settrace = mod ? PyObject_GetAttrString(mod, "settrace") : NULL;
    PyObject *hooks = PyImport_ImportModule("stackwatch._native");
    PyObject *ns = hooks ? PyObject_GetAttrString(hooks, "hooks") : NULL;
    PyObject *ours = ns ? PyObject_GetAttrString(ns, "greenlet_trace") : NULL;
    PyObject *prev = settrace && ours ? PyObject_CallOneArg(settrace, ours) : NULL;
    if (prev)
        chain_here(prev);
    Py_XDECREF(prev);
    Py_XDECREF(ours);
    Py_XDECREF(ns);
    Py_XDECREF(hooks);
    Py_XDECREF(settrace);
    Py_XDECREF(mod);
    Py_XDECREF(name);
    sw_err_drop();
    sw_exc_restore(&exc);
}

/* hooks.greenlet_trace(event, (origin, target)): greenlet calls it on
 * the target's side of every switch ("switch") or throw ("throw"), before
 * the target runs on. Records, then calls the chained callback. */
static PyObject *greenlet_trace(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *event, *pair, *origin, *target;
    if (!PyArg_ParseTuple(args, "OO", &event, &pair))
        return NULL;
    int k = SW_K_TASK_SWITCH;
    uint64_t unnamed = 0;   /* a new task, named after its first frame */
    int pair_ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2;
    PyObject *start_code, *msg = take_message(event, pair_ok ? PyTuple_GET_ITEM(pair, 1) : NULL, &start_code);
    if ((sw_D.mask & SW_EVB(k)) && pair_ok) {
        sw_exc_state exc;   /* hooks never raise, nor lose a pending exception */
        sw_exc_save(&exc);
        origin = PyTuple_GET_ITEM(pair, 0);
        target = PyTuple_GET_ITEM(pair, 1);
        int origin_fresh, target_fresh;
        uint64_t from = task_of(origin, &origin_fresh), to = task_of(target, &target_fresh);
        /* A greenlet ended (greenlet switches to its parent: with the
         * exception it raised, "throw"), or met at its start: made, as
         * far as greenlet tells, by the greenlet that starts it, where
         * it stopped to. Its result and the switch values are not
         * visible here. */
        PyObject *dead = PyObject_GetAttrString(origin, "dead");
        int died = dead == Py_True;
        Py_XDECREF(dead);
        sw_err_drop();
        int parent_in_ours = resumes_in_ours(target);
        if (switching_in_ours == (void *)target) {   /* (not a switch a collection makes meanwhile) */
            suspends_in_ours(origin);
            switching_in_ours = NULL;
        }
        if (died) {
            PyObject *result = take_result(origin);
            int threw = PyUnicode_Check(event) && PyUnicode_CompareWithASCIIString(event, "throw") == 0;
            if (exit_pending.into) {   /* (one whose parent's switch() never returned to ours) */
                record_greenlet_exit(exit_pending.task, exit_pending.threw, NULL);
                exit_pending.into = NULL;
            }
            if (!result && parent_in_ours)   /* the parent's switch() returns it: recorded there */
                exit_pending.into = target, exit_pending.thread = PyThreadState_Get(), exit_pending.task = from,
                exit_pending.threw = threw;
            else
                record_greenlet_exit(from, threw, result);
            Py_XDECREF(result);
        }
        const char *value = msg ? PyUnicode_AsUTF8(msg) : NULL;
        sw_err_drop();
        if (value || target_fresh) {   /* the origin's: where it called switch() */
            PyFrameObject *f = died ? NULL : suspended_frame(origin);
            if (value)   /* handed over: a send to the target */
                task_record(SW_K_TASK_SEND, f, (long long)to + 1, 0, 0, SW_GREENLET_CHANNEL, value);
            if (target_fresh)
                task_record(SW_K_TASK_CREATE, f, (long long)to, 1, 0, "", NULL);
            Py_XDECREF(f);
        }
        sw_tracer_thread *t = &sw_TT;
        if ((sw_D.file & SW_EVB(k)) && sw_S.gen && !sw_T.busy && sw_thread_attach(t)) {
            if (t->task_unnamed) {   /* it recorded no frame: no name */
                if (t->task_unnamed_gen == sw_S.gen)
                    define_task(t, t->task_unnamed, NULL);
                t->task_unnamed = 0;
                sw_tracer_thread_ready(t);
            }
            if (origin_fresh) {   /* running when tracing started */
                char name[256];
                suspended_name(origin, name, sizeof name);
                define_task(t, from, name);
            }
            sw_tbuf_task_switch(t->tb, sw_clock_now(&sw_S.clock), from, to);
            PyFrameObject *resumed = target_fresh ? PyEval_GetFrame() : NULL;   /* borrowed */
            char name[256] = "";
            if (resumed) {   /* it began before task events: named after its run's frame, the outermost */
                outermost_name(Py_NewRef((PyObject *)resumed), name, sizeof name);
                define_task(t, to, name);
            } else if (target_fresh && gevent_run_name(target, name, sizeof name))
                define_task(t, to, name);   /* (its first frame is gevent's own, or the function's callee) */
            else if (target_fresh && sw_S.no_calls && start_code)   /* (no frame hook names it) */
                name_after_code(t, to, (PyCodeObject *)start_code);
            else if (target_fresh)
                unnamed = to;
        }
        sw_evdata d = {.line = -1, .a = (long long)from, .b = (long long)to};
        sw_emit(k, &d);
        t->task_now = to;
        if (value && start_code)   /* its run starts with it: received there */
            task_record_at(SW_K_TASK_RECEIVE, NULL, (PyCodeObject *)start_code,
                           ((PyCodeObject *)start_code)->co_firstlineno, (long long)from + 1, 0, 0,
                           SW_GREENLET_CHANNEL, value);
        else if (value)   /* the target's switch() returns it: received */
            task_record(SW_K_TASK_RECEIVE, PyEval_GetFrame(), (long long)from + 1, 0, 0, SW_GREENLET_CHANNEL, value);
        forget_if_dead(origin);
        sw_exc_restore(&exc);
    }
    Py_XDECREF(msg);
    Py_XDECREF(start_code);
    PyObject *chained = thread_chained();
    PyObject *r = chained ? PyObject_CallFunctionObjArgs(chained, event, pair, NULL) : Py_NewRef(Py_None);
    Py_XDECREF(chained);
    /* After the chained callback: its frames are not the task's run. */
    if (unnamed && sw_S.gen) {
        sw_tracer_thread *t = &sw_TT;
        t->task_unnamed = unnamed;
        t->task_unnamed_gen = sw_S.gen;
        sw_tracer_thread_ready(t);
    }
    return r;
}

/* The repr of what a switch() passes (greenlet's own rule for what the
 * receiver gets: one argument as itself, several as a tuple, keywords as a
 * dict, both as (args, kwargs)), cut at SW_TASK_VALUE_MAX characters
 * (new reference; NULL with no error when it fails). */
static PyObject *message_repr(PyObject *args, PyObject *kwargs)
{
    int kw = kwargs && PyDict_GET_SIZE(kwargs) > 0;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *r;
    if (kw)
        r = n ? PyUnicode_FromFormat("(%R, %R)", args, kwargs) : PyObject_Repr(kwargs);
    else
        r = PyObject_Repr(n == 1 ? PyTuple_GET_ITEM(args, 0) : args);
    if (!r) {
        sw_err_drop();
        return NULL;
    }
    if (PyUnicode_GET_LENGTH(r) > SW_TASK_VALUE_MAX) {
        PyObject *cut = PyUnicode_Substring(r, 0, SW_TASK_VALUE_MAX - 3);
        Py_SETREF(r, cut ? PyUnicode_FromFormat("%U...", cut) : NULL);
        Py_XDECREF(cut);
        sw_err_drop();
    }
    return r;
}

/* 1 if the running frame (the caller of a C function) is gevent's: its
 * hub's switches carry no user value. */
static int called_by_gevent(void)
{
    PyFrameObject *f = PyEval_GetFrame();   /* borrowed */
    if (!f)
        return 0;
    PyCodeObject *co = PyFrame_GetCode(f);
    PyObject *file = PyObject_GetAttrString((PyObject *)co, "co_filename");
    const char *s = file && PyUnicode_Check(file) ? PyUnicode_AsUTF8(file) : NULL;
    int r = s && strstr(s, "/gevent/") != NULL;
    sw_err_drop();
    Py_XDECREF(file);
    Py_DECREF(co);
    return r;
}

/* greenlet's switch while task events are wanted (greenlet_switch_wrap):
 * a switch() called from Python that passes a value marks it as the
 * message of the switch to self (taken by greenlet_trace), then switches
 * as greenlet's own does. No frame of its own (greenlet's frames and
 * gr_frame stay the program's). */
/* The code of greenlet g's run function, not started yet (new
 * reference), or NULL. */
static PyObject *run_code(PyObject *g)
{
    PyObject *run = PyObject_GetAttrString(g, "run");
    PyObject *code = run ? PyObject_GetAttrString(run, "__code__") : NULL;
    Py_XDECREF(run);
    sw_err_drop();
    if (code && !PyCode_Check(code))
        Py_CLEAR(code);
    return code;
}

/* Sets greenlet g's run (not started yet) to run_returned over it. */
static void wrap_run(PyObject *g)
{
    sw_exc_state exc;
    sw_exc_save(&exc);
    PyObject *run = PyObject_GetAttrString(g, "run");
    PyObject *addr = run ? PyLong_FromVoidPtr(g) : NULL;
    PyObject *pair = addr ? PyTuple_Pack(2, run, addr) : NULL;
    PyObject *ours = pair ? PyCFunction_NewEx(&run_def, pair, NULL) : NULL;
    if (ours && PyObject_SetAttrString(g, "run", ours) < 0)
        sw_err_drop();
    Py_XDECREF(ours);
    Py_XDECREF(pair);
    Py_XDECREF(addr);
    Py_XDECREF(run);
    sw_err_drop();
    sw_exc_restore(&exc);
}

static PyObject *switch_orig;       /* greenlet's own switch (a method descriptor), while ours is set */
static PyTypeObject *switch_type;   /* the greenlet type ours is set in */

static PyObject *greenlet_switch(PyObject *self, PyObject *args, PyObject *kwargs)
{
    if (!switch_orig)
        return PyErr_Format(PyExc_RuntimeError, "greenlet's switch is gone");
    if (installed && sw_TT.greenlet_gen != installs)
        install_here();   /* a thread that switches for the first time meanwhile */
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if ((n || (kwargs && PyDict_GET_SIZE(kwargs))) && (sw_D.mask & SW_EVB(SW_K_TASK_SEND))) {
        sw_exc_state exc;
        sw_exc_save(&exc);
        PyObject *r = called_by_gevent() ? NULL : message_repr(args, kwargs);
        Py_XSETREF(msg_value, r);
        msg_to = r ? self : NULL;
        Py_CLEAR(msg_start);
        if (r && PyObject_IsTrue(self) == 0)   /* not active: the switch starts it (or it is dead: none) */
            msg_start = run_code(self);
        sw_err_drop();
        sw_exc_restore(&exc);
    }
    if ((sw_D.mask & SW_EVB(SW_K_TASK_EXIT)) && Py_TYPE(self) == switch_type && PyObject_IsTrue(self) == 0)
        wrap_run(self);   /* it starts now (unless dead): its result is its exit's */
    sw_err_drop();
    PyObject *all = PyTuple_New(n + 1);
    if (!all)
        return NULL;
    PyTuple_SET_ITEM(all, 0, Py_NewRef(self));
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(all, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    PyObject *orig = Py_NewRef(switch_orig);
    switching_in_ours = (sw_D.mask & SW_EVB(SW_K_TASK_EXIT)) ? (void *)self : NULL;
    PyObject *res = PyObject_Call(orig, all, kwargs);
    switching_in_ours = NULL;   /* (it did not switch) */
    Py_DECREF(orig);
    Py_DECREF(all);
    if (exit_pending.into && exit_pending.thread == (void *)PyThreadState_Get()) {
        /* a greenlet that began before task events ended into this one: res is its result */
        PyObject *r = outcome_repr(res);
        record_greenlet_exit(exit_pending.task, exit_pending.threw, r);
        Py_XDECREF(r);
        exit_pending.into = NULL;
    }
    return res;
}

static PyMethodDef switch_def = {
    "switch", (PyCFunction)(void (*)(void))greenlet_switch, METH_VARARGS | METH_KEYWORDS,
    "switch(*args, **kwargs): greenlet's switch, its values recorded as messages (stackwatch task events)"};

/* hooks.greenlet_switch_wrap(type, on): sets (on) or puts back (off)
 * greenlet's switch in type (greenlet.greenlet: immutable, so through its
 * dict; its caches dropped). Off leaves a switch the program set itself. */
static PyObject *greenlet_switch_wrap(PyObject *self, PyObject *args)
{
    (void)self;
    PyTypeObject *tp;
    int on;
    if (!PyArg_ParseTuple(args, "O!p", &PyType_Type, &tp, &on))
        return NULL;
    PyObject *dict = tp->tp_dict;
    if (!dict || !PyDict_Check(dict))
        return PyErr_Format(PyExc_TypeError, "greenlet_switch_wrap: %s has no dict", tp->tp_name);
    PyObject *now = PyDict_GetItemString(dict, "switch");   /* borrowed */
    int ours_now = now && PyObject_TypeCheck(now, &PyMethodDescr_Type) &&
                   ((PyMethodDescrObject *)now)->d_method == &switch_def;
    if (on && !switch_type) {
        if (!now || ours_now)
            return PyErr_Format(PyExc_TypeError, "greenlet_switch_wrap: %s has no switch of its own", tp->tp_name);
        PyObject *ours = PyDescr_NewMethod(tp, &switch_def);
        if (!ours)
            return NULL;
        Py_XSETREF(switch_orig, Py_NewRef(now));
        switch_type = (PyTypeObject *)Py_NewRef((PyObject *)tp);
        int r = PyDict_SetItemString(dict, "switch", ours);
        Py_DECREF(ours);
        if (r < 0) {
            Py_CLEAR(switch_orig);
            Py_CLEAR(switch_type);
            return NULL;
        }
        PyType_Modified(tp);
    } else if (!on && tp == switch_type) {
        if (ours_now && PyDict_SetItemString(dict, "switch", switch_orig) < 0)
            return NULL;
        PyType_Modified(tp);
        /* (switch_orig is kept while a switch() of ours may still run: a
         * greenlet suspended in it calls it when it resumes) */
        Py_CLEAR(switch_type);
    }
    Py_RETURN_NONE;
}

/* hooks.task_id(obj, name, rename=False) -> the task id of obj (an asyncio
 * task, a greenlet), given the first time it is met in the session and
 * then defined (TASK chunk, on this thread) as `name` (a str, or a
 * function of obj that makes it, called only then; with rename, again
 * now); 0 when nobody wants task events, or out of memory. Weakly held. */
static PyObject *task_id(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o, *name;
    int rename = 0;
    if (!PyArg_ParseTuple(args, "OO|p", &o, &name, &rename))
        return NULL;
    if (!sw_S.gen && !(sw_D.mask & SW_EVB(SW_K_TASK_SWITCH)))
        return PyLong_FromLong(0);   /* nobody wants task events */
    int fresh;
    uint64_t id = id_of(o, &fresh);
    sw_tracer_thread *t = &sw_TT;
    if (id && (fresh || rename) && (sw_D.file & SW_EVB(SW_K_TASK_SWITCH)) && !sw_T.busy && sw_thread_attach(t)) {
        /* name: a str, or a function of obj that makes it (called only here) */
        PyObject *s = PyUnicode_Check(name) ? Py_NewRef(name) : PyObject_CallOneArg(name, o);
        const char *u = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        if (!u) {
            Py_XDECREF(s);
            return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_TypeError, "task_id: the name must be a str");
        }
        sw_writer_define_task(sw_S.w, id, t->tb->index, u);
        Py_DECREF(s);
    }
    return PyLong_FromUnsignedLongLong(id);
}

void sw_tasks_define(uint64_t id, const char *name)
{
    sw_tracer_thread *t = &sw_TT;
    if (id && (sw_D.file & SW_EVB(SW_K_TASK_SWITCH)) && sw_S.gen && !sw_T.busy && sw_thread_attach(t))
        sw_writer_define_task(sw_S.w, id, t->tb->index, name);
}

uint64_t sw_tasks_switch(uint64_t to, int *acted)
{
    int k = SW_K_TASK_SWITCH;
    sw_tracer_thread *t = &sw_TT;
    *acted = 0;
    if (!(sw_D.mask & SW_EVB(k)) || sw_T.busy)
        return 0;
    *acted = 1;
    int file = (sw_D.file & SW_EVB(k)) && sw_S.gen && sw_thread_attach(t);
    uint64_t from = file ? t->tb->task : t->task_now;
    if (from != to) {
        if (file)
            sw_tbuf_task_switch(t->tb, sw_clock_now(&sw_S.clock), from, to);
        sw_evdata d = {.line = -1, .a = (long long)from, .b = (long long)to};
        sw_emit(k, &d);
    }
    t->task_now = to;
    return from;
}

/* hooks.task_switch(task) -> the task the thread ran: the thread runs task
 * `task` (an id of task_id; 0: itself) from here on (TASK_SWITCH). */
static PyObject *task_switch(PyObject *self, PyObject *arg)
{
    (void)self;
    unsigned long long to = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    int acted;
    return PyLong_FromUnsignedLongLong(sw_tasks_switch(to, &acted));
}

/* hooks.task_event(kind, a, b, c, s1, s2, where): a task event of dispatch
 * kind `kind` (one of TASK_CREATE..TASK_WOKEN) with its fields (records.h;
 * s1, s2 str or None), located at where: a frame, (code, line) or None.
 * For TASK_WOKEN, b is the time of the wake (time.monotonic_ns()): its
 * `ago` is taken here, with no Python between it and the record's time. */
static PyObject *task_event(PyObject *self, PyObject *args)
{
    (void)self;
    int kind;
    long long a, b, c;
    const char *s1, *s2;
    PyObject *f;
    if (!PyArg_ParseTuple(args, "iLLLzzO", &kind, &a, &b, &c, &s1, &s2, &f))
        return NULL;
    if (kind < SW_K_TASK_CREATE || kind > SW_K_TASK_WOKEN)
        return PyErr_Format(PyExc_ValueError, "not a task event kind: %d", kind);
    PyCodeObject *at = NULL;
    int at_line = -1;
    if (PyTuple_Check(f) && PyTuple_GET_SIZE(f) == 2 && PyCode_Check(PyTuple_GET_ITEM(f, 0))) {
        at = (PyCodeObject *)PyTuple_GET_ITEM(f, 0);
        at_line = PyLong_AsLong(PyTuple_GET_ITEM(f, 1));
        if (at_line < 0 || PyErr_Occurred())
            return NULL;
    }
    if (kind == SW_K_TASK_WOKEN) {   /* b: the wake's CLOCK_MONOTONIC ns, made `ago` next to the record's clock */
        long long now = (long long)sw_clock_ns(CLOCK_MONOTONIC);
        b = now > b && b > 0 ? now - b : 0;
    }
    sw_exc_state exc;
    sw_exc_save(&exc);
    task_record_at(kind, PyFrame_Check(f) ? (PyFrameObject *)f : NULL, at, at_line, a, b, c, s1, s2);
    sw_exc_restore(&exc);
    Py_RETURN_NONE;
}

/* hooks.task_running() -> the task the thread runs now (0: itself, or not
 * tracing). */
static PyObject *task_running(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(sw_task_running());
}

/* hooks.task_stack(native_id, frame): in a session without calls, the
 * stack that started the thread native_id, from frame outwards (a
 * TASK_STACK record of this thread: the new thread writes its
 * TASK_CREATE); nothing otherwise. */
static PyObject *task_stack(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long native_id;
    PyObject *f;
    if (!PyArg_ParseTuple(args, "KO", &native_id, &f))
        return NULL;
    if (sw_S.no_calls && (sw_D.file & SW_EVB(SW_K_TASK_CREATE)) && PyFrame_Check(f)) {
        sw_exc_state exc;
        sw_exc_save(&exc);
        sw_file_record_stack((PyFrameObject *)f, NULL, -1, 0, native_id);
        sw_exc_restore(&exc);
    }
    Py_RETURN_NONE;
}

/* Ours is installed on this thread; prev is the callback it replaced
 * (None: none; ours: what it chained stays). Other threads get it at
 * their first switch() (install_here). */
static PyObject *greenlet_trace_chain(PyObject *self, PyObject *prev)
{
    (void)self;
    installed = 1;
    installs++;
    chain_here(prev);
    Py_RETURN_NONE;
}

/* Ours is removed: returns this thread's callback to put back (None:
 * none). On other threads ours stays set, only calling what it chained
 * there (greenlet.settrace cannot reach another thread). */
static PyObject *greenlet_trace_off(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    installed = 0;
    PyObject *prev = thread_chained();
    chain_here(Py_None);
    if (!prev)
        prev = Py_NewRef(Py_None);
    return prev;
}

static PyObject *greenlet_trace_on(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(installed);
}

static PyMethodDef methods[] = {
    {"greenlet_trace", greenlet_trace, METH_VARARGS,
     "greenlet_trace(event, (origin, target)): the greenlet.settrace callback of task events"},
    {"greenlet_trace_chain", greenlet_trace_chain, METH_O,
     "greenlet_trace_chain(previous): ours is installed; it calls previous (None: none) after recording"},
    {"greenlet_trace_off", greenlet_trace_off, METH_NOARGS,
     "greenlet_trace_off() -> the callback ours replaced (None: none): ours is removed"},
    {"greenlet_trace_on", greenlet_trace_on, METH_NOARGS, "whether greenlet_trace is installed"},
    {"task_id", task_id, METH_VARARGS, "task_id(obj, name, rename=False) -> obj's task id (defined as name when first met, or now with rename)"},
    {"task_switch", task_switch, METH_O, "task_switch(task_id) -> the task id the thread ran: now it runs task_id"},
    {"task_event", task_event, METH_VARARGS,
     "task_event(kind, a, b, c, s1, s2, where): a task event, located at where (a frame, (code, line) or None)"},
    {"task_running", task_running, METH_NOARGS, "task_running() -> the task id the thread runs (0: itself)"},
    {"task_stack", task_stack, METH_VARARGS,
     "task_stack(native_id, frame): without calls, the stack that started thread native_id is recorded"},
    {"greenlet_switch_wrap", greenlet_switch_wrap, METH_VARARGS,
     "greenlet_switch_wrap(type, on): greenlet's switch records the values it passes (on), or is greenlet's again"},
    {NULL, NULL, 0, NULL},
};

int sw_tasks_add_hooks(PyObject *hooks)
{
    return PyModule_AddFunctions(hooks, methods);
}
