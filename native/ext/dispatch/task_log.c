/*
 * task_log.c - _native.TaskLog, the readable log's writer and its lines of
 * task events (task_log.h): per thread, the names of the tasks it has met
 * (task ids are a thread's: ext/tracer/tasks.c), the task running and each
 * task's state, in the order met; a switch's line lists the running task
 * and then the others, at most STATES_SHOWN (a switch costs the same with
 * 10,000 tasks). Lines are buffered and handed to the stream's write() a
 * buffer at a time (a line at a time to stderr: a live log). To a regular
 * file (`run --log FILE`, or `--log -` with stderr a file) the lines are
 * written to its descriptor with the GIL held: a stream's write() lets the
 * GIL go for the system call, and most task lines are made where the
 * program holds a lock (a queue.Queue's put and get, a Condition's
 * notify): every other thread then ran into that lock, and on the threads'
 * program of `make bench` the queue's lock convoyed now and then (a run in
 * 3 to 8 in 20 made 80,000-170,000 context switches, plain 5,500; up to 4x
 * plain's wall where the instructions are 1.5x; `--log -` to a file, a
 * write a line, 3.6x).
 *
 *     TaskLog(out, thread_name, thread_of_native, task_kinds, outcomes, reasons)
 *
 * out: a stream of text, or of bytes (one without an `encoding`: the
 * lines' UTF-8 as it is); None: sys.stderr, looked up at each write; thread_name(ident):
 * a thread's name, or None when unknown; thread_of_native(native_id): the
 * live threading.Thread of that native id, or None (the writer keeps the
 * one found under each native id and reads its name itself, with no
 * Python run, while that thread is alive and answers to the id: a wake's
 * line names the thread it wakes, mostly where the program holds a lock);
 * the three tuples: names of TASK_CREATE's kind, TASK_EXIT's outcome and
 * TASK_BLOCK's reason by number (events/task_hooks.py).
 * Methods: line(time_ns, ident, kind, body) writes another kind's line
 * (verbose's) with the same time origin and thread names; flush().
 */
#include "task_log.h"

#include "base/base.h"
#include "ext/dispatch/handlers.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATES_SHOWN 8
#define FLUSH_AT (64 * 1024)

enum { ST_NONE, ST_RUNNABLE, ST_RUNNING, ST_BLOCKED };

typedef struct {
    uint64_t ident, task;    /* the thread (threading.get_ident()) and its task id (0: the thread) */
    char *name;              /* NULL: "task N" (task 0: the thread's name) */
    size_t name_len;
    uint32_t thread;         /* index of its thread */
    uint32_t prev, next;     /* its neighbours in its thread's list of tasks with a state */
    int listed;              /* it has a state (is in that list) */
    int state;
    char *blocked;           /* ST_BLOCKED: what it waits on */
    size_t blocked_len;
} tl_task;

typedef struct {
    uint64_t ident;
    char *name;              /* the cached name (NULL: ask thread_name) */
    size_t name_len;
    uint64_t native;         /* the native id whose entry has this name now (0: none yet) */
    uint64_t running;        /* the task it runs */
    uint32_t head, tail;     /* its tasks with a state, in the order met (as a dict's keys: one
                              * that loses its state and gets one again goes last) */
    size_t live;
} tl_thread;

typedef struct {
    uint64_t native;
    char *name;
    PyObject *thread;        /* a weak reference to the live thread last found under it (NULL: none) */
    uint64_t ident;          /* the thread last met under it (0: none) */
} tl_native;

typedef struct {
    PyObject_HEAD
    PyObject *out, *thread_name, *thread_of_native, *kinds, *outcomes, *reasons;
    tl_task *tasks;
    size_t n_tasks, cap_tasks;
    sw_hashtab task_ix;
    uint32_t recent[2];      /* the tasks last looked up (a switch's line asks for the same few) */
    tl_thread *threads;
    size_t n_threads, cap_threads, last_thread;
    sw_hashtab thread_ix;
    tl_native *natives;
    size_t n_natives, cap_natives;
    sw_hashtab native_ix;
    sw_bytes buf;            /* the lines not written yet; a line is made in place, at its end */
    long long t0;
    int started, line_buffered, binary;   /* binary: out takes bytes (a file opened "ab") */
    int whole_writes;        /* out is a buffered or raw binary file of io's: written from the buffer as it is */
    int direct;              /* ... and a regular file: written to its descriptor, GIL held (the file's
                              * device and inode, checked at each write: the descriptor is still its) */
    dev_t dev;
    ino_t ino;
    PyObject *err_out;       /* out None: the sys.stderr last met (held), and whether it is a UTF-8 text
                              * stream of a regular file (written so; not asked again while it is that) */
    int err_direct;
} TaskLog;

static PyTypeObject TaskLogType;
static PyObject *S_write, *S_flush, *S_encoding;   /* "write", "flush", "encoding", interned */
/* threading's module, Thread, _active and _limbo; Thread's properties and
 * the attributes they read */
static PyObject *S_threading, *S_Thread, *S_active, *S_limbo, *S_name, *S_ident, *S_native_id, *S__name, *S__ident,
    *S__native_id;

/* This thread's native id (0: not asked yet; CPython asks the kernel each
 * time). A forked child asks again. */
static __thread uint64_t my_native __attribute__((tls_model("initial-exec")));

static void forked_child(void)
{
    my_native = 0;
}

int sw_task_log_check(PyObject *o)
{
    return Py_IS_TYPE(o, &TaskLogType);
}

static char *copy_str(const char *s)
{
    return s ? sw_dup_n(s, strlen(s)) : NULL;
}

/* *dst (of length *len) becomes a copy of s (NULL: none). */
static void set_text(char **dst, size_t *len, const char *s)
{
    free(*dst);
    *len = s ? strlen(s) : 0;
    *dst = s ? sw_dup_n(s, *len) : NULL;
}

static inline void put_n(sw_bytes *b, const char *s, size_t n)
{
    if (b->len + n <= b->cap) {   /* (most lines: the buffers have grown) */
        memcpy(b->data + b->len, s, n);
        b->len += n;
    } else {
        sw_bytes_put(b, s, n);
    }
}

/* A string literal, its length known. */
#define PUT_LIT(b, s) put_n((b), "" s, sizeof(s) - 1)

static inline void put(sw_bytes *b, const char *s)
{
    put_n(b, s ? s : "None", strlen(s ? s : "None"));
}

static void put_u64(sw_bytes *b, uint64_t v)
{
    char s[SW_DECIMAL_MAX];
    put(b, sw_decimal(s, v));
}

/* ns as Python's f"{ns / 1e6:12.3f}" writes it: the ms rounded to the µs
 * (the same digits unless ns ends in exactly 500, where the double's
 * rounding decides: printf then, as for a negative time). */
static inline void put_ms(sw_bytes *b, long long ns)
{
    char s[48];
    if (ns < 0 || ns % 1000 == 500) {
        snprintf(s, sizeof s, "%12.3f", (double)ns / 1e6);
        put(b, s);
        return;
    }
    uint64_t us = ((uint64_t)ns + 500) / 1000;
    char d[SW_DECIMAL_MAX], *whole = sw_decimal(d, us / 1000);
    size_t n = strlen(whole);
    if (n + 4 < 12)
        put_n(b, "            ", 12 - (n + 4));
    put_n(b, whole, n);
    char frac[4] = {'.', (char)('0' + us % 1000 / 100), (char)('0' + us % 100 / 10), (char)('0' + us % 10)};
    put_n(b, frac, 4);
}

/* ---- threads and tasks ---- */

static inline tl_thread *thread_at(TaskLog *l, uint64_t ident)
{
    if (l->last_thread < l->n_threads && l->threads[l->last_thread].ident == ident)
        return &l->threads[l->last_thread];   /* (most lines: the thread of the one before) */
    uint32_t i = SW_HT_NONE, pos;
    uint64_t h = sw_hash_u64(ident);
    for (i = sw_hashtab_first(&l->thread_ix, h, &pos); i != SW_HT_NONE && l->threads[i].ident != ident;
         i = sw_hashtab_next(&l->thread_ix, h, &pos)) {
    }
    if (i != SW_HT_NONE) {
        l->last_thread = i;
        return &l->threads[i];
    }
    tl_thread *a = sw_array_grow(l->threads, &l->cap_threads, l->n_threads + 1, sizeof *a, 8);
    if (!a)
        return NULL;
    l->threads = a;
    if (sw_hashtab_add(&l->thread_ix, h, (uint32_t)l->n_threads) != SW_OK)
        return NULL;
    a[l->n_threads] = (tl_thread){.ident = ident, .head = SW_HT_NONE, .tail = SW_HT_NONE};
    return &a[l->n_threads++];
}

/* The task (ident, task), made when `make` and not met yet; NULL when
 * absent (or out of memory). */
static inline tl_task *task_in(TaskLog *l, uint64_t ident, uint64_t task, int make)
{
    for (int r = 0; r < 2; r++) {
        uint32_t i = l->recent[r];
        if (i < l->n_tasks && l->tasks[i].task == task && l->tasks[i].ident == ident) {
            l->recent[r] = l->recent[0];
            l->recent[0] = i;
            return &l->tasks[i];
        }
    }
    uint32_t i, pos;
    uint64_t h = sw_hash_u64(ident ^ sw_hash_u64(task));
    for (i = sw_hashtab_first(&l->task_ix, h, &pos);
         i != SW_HT_NONE && (l->tasks[i].ident != ident || l->tasks[i].task != task);
         i = sw_hashtab_next(&l->task_ix, h, &pos)) {
    }
    if (i != SW_HT_NONE) {
        l->recent[1] = l->recent[0];
        l->recent[0] = i;
        return &l->tasks[i];
    }
    if (!make)
        return NULL;
    tl_thread *th = thread_at(l, ident);
    if (!th)
        return NULL;
    tl_task *a = sw_array_grow(l->tasks, &l->cap_tasks, l->n_tasks + 1, sizeof *a, 64);
    if (!a)
        return NULL;
    l->tasks = a;
    if (sw_hashtab_add_after(&l->task_ix, h, (uint32_t)l->n_tasks, pos) != SW_OK)
        return NULL;
    a[l->n_tasks] = (tl_task){.ident = ident, .task = task, .thread = (uint32_t)(th - l->threads),
                              .prev = SW_HT_NONE, .next = SW_HT_NONE};
    return &a[l->n_tasks++];
}

static tl_task *task_at(TaskLog *l, uint64_t ident, uint64_t task)
{
    return task_in(l, ident, task, 1);
}

/* A str result of fn(arg) as a new malloc'd UTF-8 copy; NULL for None or
 * an error (cleared). */
static char *call_for_name(PyObject *fn, uint64_t arg)
{
    PyObject *r = PyObject_CallFunction(fn, "K", (unsigned long long)arg);
    char *s = NULL;
    if (r && PyUnicode_Check(r)) {
        Py_ssize_t n;
        const char *u = PyUnicode_AsUTF8AndSize(r, &n);
        s = u ? sw_dup_n(u, (size_t)n) : NULL;
    }
    Py_XDECREF(r);
    PyErr_Clear();
    return s;
}

/* Asks for the thread's name when it has none (Python: another thread's
 * line may be rendered meanwhile, so every question is asked before a
 * line's state is touched). Kept until forgotten (a thread event). 1 if
 * it asked (Python ran). */
static int ask_thread(TaskLog *l, uint64_t ident)
{
    tl_thread *th = thread_at(l, ident);
    int asked = th && !th->name;
    if (asked) {
        char *s = call_for_name(l->thread_name, ident);
        th = thread_at(l, ident);   /* (the table may have moved meanwhile) */
        if (th && !th->name) {
            th->name = s;
            th->name_len = s ? strlen(s) : 0;
        } else {
            free(s);
        }
    }
    return asked;
}

/* The thread's name, as verbose names it (asked by ask_thread); its ident
 * when it is not listed yet. */
static inline void put_thread(TaskLog *l, sw_bytes *b, uint64_t ident)
{
    tl_thread *th = thread_at(l, ident);
    if (th && th->name)
        put_n(b, th->name, th->name_len);
    else
        put_u64(b, ident);
}

/* Task `task` of thread `ident` by name (t: its entry, when known). */
static inline void put_task_at(TaskLog *l, sw_bytes *b, uint64_t ident, uint64_t task, const tl_task *t)
{
    if (!task) {
        put_thread(l, b, ident);
    } else if (t && t->name_len) {
        put_n(b, t->name, t->name_len);
    } else {
        PUT_LIT(b, "task ");
        put_u64(b, task);
    }
}

static inline void put_task(TaskLog *l, sw_bytes *b, uint64_t ident, uint64_t task)
{
    put_task_at(l, b, ident, task, task ? task_in(l, ident, task, 0) : NULL);
}

static tl_native *native_at(TaskLog *l, uint64_t native, int make)
{
    uint32_t i, pos;
    uint64_t h = sw_hash_u64(native);
    for (i = sw_hashtab_first(&l->native_ix, h, &pos); i != SW_HT_NONE && l->natives[i].native != native;
         i = sw_hashtab_next(&l->native_ix, h, &pos)) {
    }
    if (i != SW_HT_NONE || !make)
        return i != SW_HT_NONE ? &l->natives[i] : NULL;
    tl_native *a = sw_array_grow(l->natives, &l->cap_natives, l->n_natives + 1, sizeof *a, 8);
    if (!a)
        return NULL;
    l->natives = a;
    if (sw_hashtab_add_after(&l->native_ix, h, (uint32_t)l->n_natives, pos) != SW_OK)
        return NULL;
    a[l->n_natives] = (tl_native){.native = native};
    return &a[l->n_natives++];
}

/* 1 if threads of type tp tell their name, ident and native_id as
 * threading.Thread's do (its properties, reading _name, _ident and
 * _native_id) and those read with no Python run: the generic getattr, no
 * __hash__ of their own (threading._limbo is keyed by thread). The last
 * type found so is kept while its version tag holds. */
static int plain_thread_type(PyTypeObject *tp, PyObject *thread_type)
{
    static PyTypeObject *known;
    static unsigned int known_version;
    if (tp == known && tp->tp_version_tag == known_version && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return 1;
    if (!PyType_Check(thread_type) || !PyType_IsSubtype(tp, (PyTypeObject *)thread_type) ||
        tp->tp_getattro != PyObject_GenericGetAttr || tp->tp_hash != PyBaseObject_Type.tp_hash)
        return 0;
    PyObject *const props[] = {S_name, S_ident, S_native_id}, *const own[] = {S__name, S__ident, S__native_id};
    for (int i = 0; i < 3; i++)
        if (_PyType_Lookup(tp, props[i]) != _PyType_Lookup((PyTypeObject *)thread_type, props[i]) ||
            _PyType_Lookup(tp, own[i]))
            return 0;
    if (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) {
        known = tp;
        known_version = tp->tp_version_tag;
    }
    return 1;
}

/* The name (new reference) of thread t when it is alive (listed in
 * threading._active under its ident, or in _limbo, as enumerate() lists
 * them) with native id `native`, read with no Python run; NULL when it is
 * not, or cannot be read so. No exception left. */
static PyObject *live_name(PyObject *t, uint64_t native)
{
    PyObject *m = PyImport_GetModule(S_threading), *d = m ? PyModule_GetDict(m) : NULL;
    PyObject *thread_type = d ? PyDict_GetItemWithError(d, S_Thread) : NULL;   /* (borrowed: the module holds them) */
    PyObject *active = d ? PyDict_GetItemWithError(d, S_active) : NULL;
    PyObject *limbo = d ? PyDict_GetItemWithError(d, S_limbo) : NULL;
    PyObject *name = NULL;
    if (thread_type && active && PyDict_Check(active) && limbo && PyDict_Check(limbo) &&
        plain_thread_type(Py_TYPE(t), thread_type)) {
        PyObject *nid = PyObject_GetAttr(t, S__native_id);
        PyObject *ident = nid && PyLong_Check(nid) && PyLong_AsUnsignedLongLong(nid) == native
                              ? PyObject_GetAttr(t, S__ident) : NULL;
        PyObject *listed = ident && !PyErr_Occurred() ? PyDict_GetItemWithError(active, ident) : NULL;
        if (listed == t || (ident && !PyErr_Occurred() && PyDict_Contains(limbo, t) == 1))
            name = PyObject_GetAttr(t, S__name);
        Py_XDECREF(ident);
        Py_XDECREF(nid);
    }
    Py_XDECREF(m);
    if (name && !PyUnicode_Check(name))
        Py_CLEAR(name);
    sw_err_drop();
    return name;
}

/* The name of the live thread whose native id is `native` (a malloc'd
 * copy), or NULL when none is: the thread last found under that id when it
 * still answers to it, else the one thread_of_native finds (Python). */
static char *live_thread_name(TaskLog *l, uint64_t native)
{
    tl_native *n = native_at(l, native, 1);
    PyObject *t = n && n->thread ? sw_weak_target(n->thread) : NULL;
    PyObject *name = t ? live_name(t, native) : NULL;
    Py_XDECREF(t);
    if (!name) {
        PyObject *found = PyObject_CallFunction(l->thread_of_native, "K", (unsigned long long)native);
        if (found && found != Py_None) {
            name = live_name(found, native);
            if (!name)   /* (a thread of its own kind: its name property) */
                name = PyObject_GetAttr(found, S_name);
            n = native_at(l, native, 1);   /* (Python ran: the table may have moved) */
            if (n && name) {
                Py_XSETREF(n->thread, PyWeakref_NewRef(found, NULL));
                sw_err_drop();
            }
        }
        Py_XDECREF(found);
        sw_err_drop();
    }
    Py_ssize_t len;
    const char *u = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &len) : NULL;
    char *s = u ? sw_dup_n(u, (size_t)len) : NULL;
    Py_XDECREF(name);
    sw_err_drop();
    return s;
}

/* Another thread by its native id (0: the thread `ident`): its name now
 * (`now`, asked before the line: NULL when it is not alive), else the name
 * it had when last met, else "thread N". */
static void put_native(TaskLog *l, sw_bytes *b, uint64_t native, uint64_t ident, const char *now)
{
    if (!native) {
        put_thread(l, b, ident);
        return;
    }
    tl_native *n = now ? NULL : native_at(l, native, 0);
    if (now || (n && n->name)) {
        put(b, now ? now : n->name);
    } else {
        PUT_LIT(b, "thread ");
        put_u64(b, native);
    }
}

/* The thread `ident` (the one running the event) is met under native id
 * `native`: its name is kept for when it has ended. */
static void met_native(TaskLog *l, uint64_t ident, uint64_t native)
{
    tl_thread *th = thread_at(l, ident);
    if (th && th->native == native)   /* (met before under this name) */
        return;
    tl_native *n = native_at(l, native, 1);
    if (!n)
        return;
    n->ident = ident;
    char id[SW_DECIMAL_MAX];
    const char *name = th && th->name ? th->name : sw_decimal(id, ident);
    if (!n->name || strcmp(n->name, name) != 0) {
        free(n->name);
        n->name = copy_str(name);
    }
    if (th && th->name && n->name)
        th->native = native;
}

/* ---- states ---- */

static void set_state(TaskLog *l, uint64_t ident, uint64_t task, int state, const char *blocked)
{
    tl_task *t = task_at(l, ident, task);
    if (!t)
        return;
    tl_thread *th = &l->threads[t->thread];
    if (!t->listed) {
        uint32_t i = (uint32_t)(t - l->tasks);
        t->listed = 1;
        t->prev = th->tail;
        t->next = SW_HT_NONE;
        if (th->tail != SW_HT_NONE)
            l->tasks[th->tail].next = i;
        else
            th->head = i;
        th->tail = i;
        th->live++;
    }
    t->state = state;
    if (t->blocked || state == ST_BLOCKED)
        set_text(&t->blocked, &t->blocked_len, state == ST_BLOCKED ? blocked : NULL);
}

static int state_of(TaskLog *l, uint64_t ident, uint64_t task)
{
    tl_task *t = task_in(l, ident, task, 0);
    return t && t->listed ? t->state : ST_NONE;
}

static void drop_state(TaskLog *l, uint64_t ident, uint64_t task)
{
    tl_task *t = task_in(l, ident, task, 0);
    if (!t || !t->listed)
        return;
    tl_thread *th = &l->threads[t->thread];
    if (t->prev != SW_HT_NONE)
        l->tasks[t->prev].next = t->next;
    else
        th->head = t->next;
    if (t->next != SW_HT_NONE)
        l->tasks[t->next].prev = t->prev;
    else
        th->tail = t->prev;
    t->listed = 0;
    t->state = ST_NONE;
    set_text(&t->blocked, &t->blocked_len, NULL);
    th->live--;
}

static inline void put_state(TaskLog *l, sw_bytes *b, const tl_task *t)
{
    put_task_at(l, b, t->ident, t->task, t);
    if (t->state == ST_RUNNING) {
        PUT_LIT(b, ": running");
    } else if (t->state == ST_RUNNABLE) {
        PUT_LIT(b, ": runnable");
    } else {
        PUT_LIT(b, ": blocked on ");
        if (t->blocked)
            put_n(b, t->blocked, t->blocked_len);
    }
}

/* The running task first, then the others in the order met, at most
 * STATES_SHOWN, and how many more. */
static void put_states(TaskLog *l, sw_bytes *b, uint64_t ident)
{
    tl_thread *th = thread_at(l, ident);
    if (!th)
        return;
    size_t shown = 0;
    tl_task *run = state_of(l, ident, th->running) == ST_RUNNING ? task_in(l, ident, th->running, 0) : NULL;
    if (run) {
        put_state(l, b, run);
        shown++;
    }
    for (uint32_t i = th->head; i != SW_HT_NONE && shown < STATES_SHOWN; i = l->tasks[i].next) {
        const tl_task *t = &l->tasks[i];
        if (t->task == th->running && t->state == ST_RUNNING)
            continue;
        if (shown++)
            PUT_LIT(b, ", ");
        put_state(l, b, t);
    }
    if (th->live > shown) {
        PUT_LIT(b, ", and ");
        put_u64(b, th->live - shown);
        PUT_LIT(b, " more");
    }
}

/* ---- lines ---- */

/* The name of number i in tuple names ("None" for None), or `other`. */
static const char *name_in(PyObject *names, long long i, const char *other)
{
    if (i < 0 || i >= PyTuple_GET_SIZE(names))
        return other;
    PyObject *s = PyTuple_GET_ITEM(names, i);
    const char *u = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
    PyErr_Clear();
    return u ? u : "None";
}

typedef struct {
    int kind;
    long long time_ns;
    uint64_t ident;
    long long a, b, c;
    const char *name, *s2;               /* NULL: None */
    const char *function, *file;         /* file NULL: nowhere */
    int line;                            /* -1: unknown */
} tl_event;

/* The words of a task event's line (after its kind), onto l->buf;
 * other: the name of the thread e->c now, when the kind names one (NULL:
 * not alive). No Python runs here. */
static void describe(TaskLog *l, const tl_event *e, const char *other)
{
    sw_bytes *b = &l->buf;
    uint64_t ident = e->ident;
    tl_thread *th = thread_at(l, ident);
    if (!th)
        return;
    uint64_t running = th->running;
    int named = e->name && e->name[0];
    switch (e->kind) {
    case SW_K_TASK_SWITCH: {
        uint64_t origin = (uint64_t)e->a, task = (uint64_t)e->b;
        th->running = task;
        if (state_of(l, ident, origin) == ST_RUNNING)
            set_state(l, ident, origin, ST_RUNNABLE, NULL);
        set_state(l, ident, task, ST_RUNNING, NULL);
        put_task(l, b, ident, origin);
        PUT_LIT(b, " -> ");
        put_task(l, b, ident, task);
        PUT_LIT(b, "  [");
        put_states(l, b, ident);
        PUT_LIT(b, "]");
        break;
    }
    case SW_K_TASK_CREATE: {
        const char *what = name_in(l->kinds, e->b, "task");
        if (strcmp(what, "thread") == 0) {   /* written by the new thread (named by named_thread); made by a
                                              * task of thread native_id */
            put_thread(l, b, ident);
            PUT_LIT(b, " (thread) created by ");
            put_native(l, b, (uint64_t)e->c, ident, other);
            break;
        }
        size_t mark = b->len;
        put_task(l, b, ident, running);   /* the creator, named before the new task is */
        sw_bytes me = {0};
        sw_bytes_put(&me, b->data + mark, b->len - mark);
        b->len = mark;
        tl_task *t = task_at(l, ident, (uint64_t)e->a);
        if (t && named)
            set_text(&t->name, &t->name_len, e->name);
        set_state(l, ident, (uint64_t)e->a, ST_RUNNABLE, NULL);
        put_task(l, b, ident, (uint64_t)e->a);
        PUT_LIT(b, " (");
        put(b, what);
        PUT_LIT(b, ") created by ");
        sw_bytes_put(b, me.data, me.len);
        sw_bytes_free(&me);
        break;
    }
    case SW_K_TASK_EXIT:
        drop_state(l, ident, (uint64_t)e->a);
        put_task(l, b, ident, (uint64_t)e->a);
        PUT_LIT(b, " exited: ");
        put(b, name_in(l->outcomes, e->b, "?"));
        if (named) {
            PUT_LIT(b, " ");
            put(b, e->name);
        } else if (e->name) {
            PUT_LIT(b, " not known");   /* (an empty value: nobody saw it, docs/format.md) */
        }
        break;
    case SW_K_TASK_BLOCK: {
        sw_bytes what = {0};
        put(&what, name_in(l->reasons, e->a, "?"));
        if (named) {
            PUT_LIT(&what, " ");
            put(&what, e->name);
        }
        sw_bytes_u8(&what, 0);
        const char *w = what.failed ? "?" : (const char *)what.data;
        set_state(l, ident, running, ST_BLOCKED, w);
        put_task(l, b, ident, running);
        PUT_LIT(b, " blocks on ");
        put(b, w);
        sw_bytes_free(&what);
        break;
    }
    case SW_K_TASK_WAKE:
        if (e->c) {   /* a thread, by its native id: the task it runs, when that blocked (in threading's code) */
            tl_native *n = native_at(l, (uint64_t)e->c, 0);
            uint64_t to = n ? n->ident : 0;
            tl_thread *th = to ? thread_at(l, to) : NULL;
            uint64_t task = th ? th->running : 0;
            if (task && state_of(l, to, task) == ST_BLOCKED) {
                set_state(l, to, task, ST_RUNNABLE, NULL);
                put_task(l, b, to, task);
            } else {
                put_native(l, b, (uint64_t)e->c, ident, other);
            }
        } else {
            set_state(l, ident, (uint64_t)e->a, ST_RUNNABLE, NULL);
            put_task(l, b, ident, (uint64_t)e->a);
        }
        PUT_LIT(b, " woken by ");
        if (e->b > 0)   /* by what (I/O readiness), no task: records.h TASK_WAKE's cause */
            put(b, name_in(l->reasons, e->b - 1, "?"));
        else
            put_task(l, b, ident, running);
        if (named) {
            PUT_LIT(b, " (");
            put(b, e->name);
            PUT_LIT(b, ")");
        }
        break;
    case SW_K_TASK_WOKEN:   /* written by the woken task */
        set_state(l, ident, running, ST_RUNNING, NULL);
        put_task(l, b, ident, running);
        PUT_LIT(b, " woken by ");
        put_native(l, b, (uint64_t)e->c, ident, other);
        if (named) {
            PUT_LIT(b, " (");
            put(b, e->name);
            PUT_LIT(b, ")");
        }
        break;
    case SW_K_TASK_SEND: case SW_K_TASK_RECEIVE:
        put_task(l, b, ident, running);
        put(b, e->kind == SW_K_TASK_SEND ? " sends " : " receives ");
        put(b, e->s2);
        put(b, e->kind == SW_K_TASK_SEND ? " to " : " from ");
        put(b, e->name);
        break;
    case SW_K_TASK_NAME:
        if (e->c) {
            put_native(l, b, (uint64_t)e->c, ident, other);
        } else {
            put_task(l, b, ident, (uint64_t)e->a);
            tl_task *t = task_at(l, ident, (uint64_t)e->a);
            if (t)
                set_text(&t->name, &t->name_len, e->name);
        }
        PUT_LIT(b, " named ");
        put(b, e->name);
        if (e->s2 && e->s2[0]) {
            PUT_LIT(b, " (group ");
            put(b, e->s2);
            PUT_LIT(b, ")");
        }
        break;
    default:
        break;
    }
}

/* The descriptor of stream out when it is a regular file (its device and
 * inode in *st), else -1 (not one, or out is closed). No exception left. */
static int regular_file(PyObject *out, struct stat *st)
{
    int fd = PyObject_AsFileDescriptor(out);
    if (fd < 0 || fstat(fd, st) < 0 || !S_ISREG(st->st_mode))
        fd = -1;
    sw_err_drop();
    return fd;
}

/* 1 if text stream out encodes as UTF-8 (the writer's lines as they are). */
static int utf8_stream(PyObject *out)
{
    PyObject *enc = PyObject_GetAttr(out, S_encoding);
    const char *e = enc && PyUnicode_Check(enc) ? PyUnicode_AsUTF8(enc) : NULL;
    int r = e && (strcasecmp(e, "utf-8") == 0 || strcasecmp(e, "utf8") == 0);
    Py_XDECREF(enc);
    sw_err_drop();
    return r;
}

/* The descriptor that stream out's lines are written to with the GIL
 * held, what out itself buffers written first (so that lines and anything
 * else written to out stay in order): its regular file (not a pipe or a
 * terminal, which may block), for a binary file of io's still the one
 * first met, for sys.stderr (a line at a time) when it is UTF-8. -1: out's
 * write() (which also says when out is closed). */
static int direct_fd(TaskLog *l, PyObject *out)
{
    if (!l->direct) {
        if (l->out != Py_None)
            return -1;
        if (out != l->err_out) {
            struct stat st;
            Py_XSETREF(l->err_out, Py_NewRef(out));
            l->err_direct = utf8_stream(out) && regular_file(out, &st) >= 0;
        }
        if (!l->err_direct)
            return -1;
    }
    PyObject *r = PyObject_CallMethodNoArgs(out, S_flush);   /* (nothing buffered: no system call) */
    Py_XDECREF(r);
    sw_err_drop();
    struct stat st;
    int fd = regular_file(out, &st);
    return fd >= 0 && (!l->direct || (st.st_dev == l->dev && st.st_ino == l->ino)) ? fd : -1;
}

/* The buffer written to fd. 0, or -1 (OSError set). */
static int write_all(TaskLog *l, int fd)
{
    size_t done = 0;
    while (done < l->buf.len) {
        ssize_t n = write(fd, l->buf.data + done, l->buf.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

static int flush(TaskLog *l)
{
    if (!l->buf.len)
        return 0;
    PyObject *out = l->out != Py_None ? l->out : PySys_GetObject("stderr");   /* (borrowed) */
    int fd = out && out != Py_None ? direct_fd(l, out) : -1;
    if (fd >= 0) {
        int w = write_all(l, fd);
        l->buf.len = 0;
        return w;
    }
    /* io's binary files take a view of the buffer (written through or
     * copied into theirs before write returns: not kept); other streams
     * an object of their own. */
    PyObject *s = l->whole_writes ? PyMemoryView_FromMemory((char *)l->buf.data, (Py_ssize_t)l->buf.len, PyBUF_READ)
                  : l->binary ? PyBytes_FromStringAndSize((const char *)l->buf.data, (Py_ssize_t)l->buf.len)
                              : PyUnicode_DecodeUTF8((const char *)l->buf.data, (Py_ssize_t)l->buf.len, "replace");
    if (!s) {
        l->buf.len = 0;
        return -1;
    }
    PyObject *r = out && out != Py_None ? PyObject_CallMethodOneArg(out, S_write, s) : NULL;
    l->buf.len = 0;
    Py_DECREF(s);
    if (!r)
        return out && out != Py_None ? -1 : 0;   /* (no stderr: the line is lost, as print's would be) */
    Py_DECREF(r);
    return 0;
}

/* A line begins: time since the log's first line, thread, kind (its
 * words follow, then end_line). */
static inline void start_line(TaskLog *l, long long time_ns, uint64_t ident, const char *kind)
{
    if (!l->started) {
        l->started = 1;
        l->t0 = time_ns;
    }
    put_ms(&l->buf, time_ns - l->t0);
    PUT_LIT(&l->buf, " ms  [");
    put_thread(l, &l->buf, ident);   /* (asked before: no Python until the line is whole) */
    PUT_LIT(&l->buf, "] ");
    size_t kind_len = strlen(kind);
    put_n(&l->buf, kind, kind_len);
    if (kind_len < 12)   /* (f"{kind:<12}") */
        put_n(&l->buf, "            ", 12 - kind_len);
}

/* The line ends; written when the stream is a live log or the buffer is
 * full. A line short of memory is written as far as it got; -1 (the
 * buffer dropped, MemoryError) when not even its end fits. */
static int end_line(TaskLog *l)
{
    l->buf.failed = 0;
    PUT_LIT(&l->buf, "\n");
    if (l->buf.failed) {
        l->buf.failed = 0;
        l->buf.len = 0;
        PyErr_NoMemory();
        return -1;
    }
    return l->line_buffered || l->buf.len >= FLUSH_AT ? flush(l) : 0;
}

/* The thread of the event met under its native id (its name kept for
 * when it has ended), then, when the event is its creation with a name,
 * named so: before the line begins, which names it. */
static void named_thread(TaskLog *l, const tl_event *e)
{
    if (!my_native)
        my_native = (uint64_t)PyThread_get_thread_native_id();
    met_native(l, e->ident, my_native);
    if (e->kind == SW_K_TASK_CREATE && e->name && e->name[0] &&
        strcmp(name_in(l->kinds, e->b, "task"), "thread") == 0) {
        tl_thread *th = thread_at(l, e->ident);
        if (th) {
            set_text(&th->name, &th->name_len, e->name);
            th->native = 0;
        }
    }
}

static int render(TaskLog *l, const tl_event *e)
{
    /* Every question to Python first: then the line is made and appended
     * with none (another thread's line cannot come between). */
    int asked = ask_thread(l, e->ident);
    char *other = NULL;
    if (e->c && (e->kind == SW_K_TASK_CREATE || e->kind == SW_K_TASK_WAKE || e->kind == SW_K_TASK_WOKEN ||
                 e->kind == SW_K_TASK_NAME)) {
        other = live_thread_name(l, (uint64_t)e->c);
        asked = 1;
    }
    if (asked)   /* (Python ran: a thread event of its own may have made it forget meanwhile) */
        ask_thread(l, e->ident);
    named_thread(l, e);
    start_line(l, e->time_ns, e->ident, sw_kind_names[e->kind]);
    PUT_LIT(&l->buf, " ");
    describe(l, e, other);
    free(other);
    if (e->file) {
        const char *base = strrchr(e->file, '/');
        char line[SW_DECIMAL_MAX];
        const char *at = e->line >= 0 ? sw_decimal(line, (uint64_t)e->line) : "?";
        PUT_LIT(&l->buf, "  at ");
        put(&l->buf, e->function);
        PUT_LIT(&l->buf, " (");
        put(&l->buf, base ? base + 1 : e->file);
        PUT_LIT(&l->buf, ":");
        put(&l->buf, at);
        PUT_LIT(&l->buf, ")");
    }
    return end_line(l);
}

static const char *utf8_or_null(PyObject *o)
{
    const char *s = o && PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (!s)
        PyErr_Clear();
    return s;
}

int sw_task_log_emit(PyObject *o, int kind, const sw_evdata *d)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    tl_event e = {.kind = kind, .time_ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
                  .ident = PyThread_get_thread_ident(), .a = d->a, .b = d->b, .c = d->c, .name = d->name,
                  .s2 = d->file, .line = d->line};
    if (d->code) {
        e.file = utf8_or_null(d->code->co_filename);
        e.function = utf8_or_null(sw_code_qualname(d->code));
    }
    return render((TaskLog *)o, &e);
}

/* ---- the Python type ---- */

static int tl_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    TaskLog *l = (TaskLog *)self;
    PyObject *out, *tn, *tnat, *kinds, *outcomes, *reasons;
    (void)kwds;
    if (!PyArg_ParseTuple(args, "OOOO!O!O!", &out, &tn, &tnat, &PyTuple_Type, &kinds, &PyTuple_Type, &outcomes,
                          &PyTuple_Type, &reasons))
        return -1;
    if (!PyCallable_Check(tn) || !PyCallable_Check(tnat)) {
        PyErr_SetString(PyExc_TypeError, "TaskLog: thread_name and thread_of_native must be callable");
        return -1;
    }
    Py_XSETREF(l->out, Py_NewRef(out));
    Py_XSETREF(l->thread_name, Py_NewRef(tn));
    Py_XSETREF(l->thread_of_native, Py_NewRef(tnat));
    Py_XSETREF(l->kinds, Py_NewRef(kinds));
    Py_XSETREF(l->outcomes, Py_NewRef(outcomes));
    Py_XSETREF(l->reasons, Py_NewRef(reasons));
    /* To stderr (or a terminal) a line at a time: a live log. */
    l->line_buffered = out == Py_None;
    l->binary = out != Py_None && !PyObject_HasAttrString(out, "encoding");   /* (no text layer) */
    const char *tp = Py_TYPE(out)->tp_name;
    l->whole_writes = l->binary && (strcmp(tp, "_io.BufferedWriter") == 0 || strcmp(tp, "_io.FileIO") == 0 ||
                                    strcmp(tp, "_io.BufferedRandom") == 0);
    struct stat st;
    l->direct = l->whole_writes && regular_file(out, &st) >= 0;   /* (not a pipe, which may block) */
    if (l->direct) {
        l->dev = st.st_dev;
        l->ino = st.st_ino;
    }
    if (!l->line_buffered) {
        PyObject *tty = PyObject_CallMethod(out, "isatty", NULL);
        l->line_buffered = tty && PyObject_IsTrue(tty) == 1;
        Py_XDECREF(tty);
        PyErr_Clear();
    }
    return 0;
}

static void tl_dealloc(PyObject *self)
{
    TaskLog *l = (TaskLog *)self;
    if (l->buf.len && flush(l) < 0)
        PyErr_Clear();
    for (size_t i = 0; i < l->n_tasks; i++) {
        free(l->tasks[i].name);
        free(l->tasks[i].blocked);
    }
    for (size_t i = 0; i < l->n_threads; i++) {
        free(l->threads[i].name);
    }
    for (size_t i = 0; i < l->n_natives; i++) {
        free(l->natives[i].name);
        Py_XDECREF(l->natives[i].thread);
    }
    free(l->tasks);
    free(l->threads);
    free(l->natives);
    sw_hashtab_free(&l->task_ix);
    sw_hashtab_free(&l->thread_ix);
    sw_hashtab_free(&l->native_ix);
    sw_bytes_free(&l->buf);
    Py_XDECREF(l->out);
    Py_XDECREF(l->err_out);
    Py_XDECREF(l->thread_name);
    Py_XDECREF(l->thread_of_native);
    Py_XDECREF(l->kinds);
    Py_XDECREF(l->outcomes);
    Py_XDECREF(l->reasons);
    Py_TYPE(self)->tp_free(self);
}

static int ready(TaskLog *l)
{
    if (l->kinds)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "TaskLog: not initialised");
    return -1;
}

/* An attribute of a stackwatch.Event, or of its data (None when absent). */
static long long data_int(PyObject *data, const char *key)
{
    PyObject *v = key && data && PyDict_Check(data) ? PyDict_GetItemString(data, key) : NULL;
    long long x = v && PyLong_Check(v) ? PyLong_AsLongLong(v) : 0;
    PyErr_Clear();
    return x;
}

/* Called with a stackwatch.Event of a task kind (a Python path to the same
 * line: verbose handed it one). */
static PyObject *tl_call(PyObject *self, PyObject *args, PyObject *kwds)
{
    TaskLog *l = (TaskLog *)self;
    PyObject *ev;
    (void)kwds;
    if (ready(l) < 0 || !PyArg_ParseTuple(args, "O", &ev))
        return NULL;
    PyObject *f[8];
    for (int i = 0; i < 8; i++)
        f[i] = PyTuple_Check(ev) && PyTuple_GET_SIZE(ev) >= 8 ? PyTuple_GET_ITEM(ev, i) : NULL;
    const char *kind = f[0] ? utf8_or_null(f[0]) : NULL;
    int k = -1;
    for (int i = SW_K_TASK_SWITCH; kind && i <= SW_K_TASK_WOKEN; i++)
        if (strcmp(kind, sw_kind_names[i]) == 0)
            k = i;
    if (k < 0)
        return PyErr_Format(PyExc_ValueError, "TaskLog: not an event of a task kind");
    const char *const *keys = sw_task_keys[k - SW_K_TASK_SWITCH];
    PyObject *data = f[7];
    PyObject *s2 = keys[3] && PyDict_Check(data) ? PyDict_GetItemString(data, keys[3]) : NULL;
    tl_event e = {.kind = k, .time_ns = PyLong_AsLongLong(f[1]), .ident = PyLong_AsUnsignedLongLong(f[2]),
                  .a = data_int(data, keys[0]), .b = data_int(data, keys[1]), .c = data_int(data, keys[2]),
                  .name = utf8_or_null(f[6]), .s2 = utf8_or_null(s2), .function = utf8_or_null(f[4]),
                  .file = utf8_or_null(f[3]), .line = f[5] != Py_None ? (int)PyLong_AsLong(f[5]) : -1};
    if (PyErr_Occurred())
        return NULL;
    if (render(l, &e) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* line(time_ns, ident, kind, body, forget=False): another kind's line;
 * forget: the thread's name is asked again (a thread event). */
static PyObject *tl_line(PyObject *self, PyObject *args)
{
    TaskLog *l = (TaskLog *)self;
    long long t;
    unsigned long long ident;
    const char *kind, *body;
    Py_ssize_t n;
    int forget = 0;
    if (ready(l) < 0 || !PyArg_ParseTuple(args, "LKss#|p", &t, &ident, &kind, &body, &n, &forget))
        return NULL;
    if (forget) {
        tl_thread *th = thread_at(l, ident);
        if (th) {
            set_text(&th->name, &th->name_len, NULL);
            th->native = 0;
        }
    }
    ask_thread(l, ident);
    start_line(l, t, ident, kind);
    put_n(&l->buf, body, (size_t)n);
    if (end_line(l) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *tl_flush(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (flush((TaskLog *)self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef tl_methods[] = {
    {"line", tl_line, METH_VARARGS, "line(time_ns, ident, kind, body, forget=False): another kind's line"},
    {"flush", tl_flush, METH_NOARGS, "writes the buffered lines to the stream"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TaskLogType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stackwatch._native.TaskLog",
    .tp_basicsize = sizeof(TaskLog),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TaskLog(out, thread_name, thread_of_native, task_kinds, outcomes, reasons): the readable log's "
              "writer and its task lines (a handler of the task kinds)",
    .tp_new = PyType_GenericNew,
    .tp_init = tl_init,
    .tp_dealloc = tl_dealloc,
    .tp_call = tl_call,
    .tp_methods = tl_methods,
};

int sw_task_log_add_to_module(PyObject *m)
{
    if (PyType_Ready(&TaskLogType) < 0 || !(S_write = PyUnicode_InternFromString("write")) ||
        !(S_flush = PyUnicode_InternFromString("flush")) || !(S_encoding = PyUnicode_InternFromString("encoding")))
        return -1;
    PyObject **const names[] = {&S_threading, &S_Thread, &S_active, &S_limbo, &S_name, &S_ident, &S_native_id,
                                &S__name, &S__ident, &S__native_id};
    const char *const texts[] = {"threading", "Thread", "_active", "_limbo", "name", "ident", "native_id", "_name",
                                 "_ident", "_native_id"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!(*names[i] = PyUnicode_InternFromString(texts[i])))
            return -1;
    pthread_atfork(NULL, NULL, forked_child);
    Py_INCREF(&TaskLogType);
    if (PyModule_AddObject(m, "TaskLog", (PyObject *)&TaskLogType) < 0) {
        Py_DECREF(&TaskLogType);
        return -1;
    }
    return 0;
}
