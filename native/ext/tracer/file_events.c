/*
 * file_events.c - the file tracer as a consumer of the dispatch layer's
 * events other than calls: line, instruction, exception, GC, object and
 * thread events become EXT records (format.h, SW_EXT_*) in the thread's
 * stream, on the same clock as its calls.
 */
#include "file_events.h"

#include "ext/dispatch/handlers.h"
#include "ext/tracer/thread_state.h"
#include "ext/tracer/session.h"
#include "ext/tracer/frame_compat.h"

#include "base/base.h"

#include <string.h>

int sw_file_wants_code(PyCodeObject *co)
{
    if (!sw_S.gen || !co)
        return 0;
    if (sw_code_id(co, NULL) & SW_ID_SKIP)
        return 0;
    return 1;
}

int sw_file_wants_lines(PyCodeObject *co)
{
    return sw_file_wants_code(co) && sw_handlers_file_lines_in(co);
}

/* The EXT kind of each dispatch kind: the rows of trace/records.h written
 * by the dispatch layer (from DISPATCH) have its kinds' names. */
#define SW_X_FROM_DISPATCH(K) [SW_K_##K] = SW_EXT_##K,
#define SW_X_FROM_WRITER(K)
#define SW_X_FROM_TRACER(K)
#define SW_X_FROM_PROGRAM(K)
#define SW_X_FROM_KERNEL(K)
#define SW_X_FROM_OLDER(K)
#define SW_X_EXT_OF_(K, n, name, since, from, ...) SW_X_FROM_##from(K)
static const unsigned ext_of[SW_K_COUNT] = {SW_RECORD_KINDS(SW_X_EXT_OF_, SW_X_REC_NONE_)};

/* Strings of a record are cut at this many bytes, never the record. */
#define STR_MAX 200

static uint64_t nonneg(long long v) { return v < 0 ? 0 : (uint64_t)v; }

/* The id of an interned string (records.h sw_intern_fn; ctx: the thread):
 * the one the thread interned last again without the writer's table (a
 * channel's records follow each other), else the writer's. */
static int intern_last(void *ctx, const char *s, size_t len, uint64_t *id)
{
    sw_tracer_thread *t = ctx;
    if (t->istr_gen == sw_S.gen && t->istr_len == len && memcmp(t->istr, s, len) == 0) {
        *id = t->istr_id;
        return 0;
    }
    int rc = sw_writer_intern(sw_S.w, s, len, id);
    if (rc == 0 && len <= sizeof t->istr) {
        memcpy(t->istr, s, len);
        t->istr_len = (uint32_t)len;
        t->istr_id = *id;
        t->istr_gen = sw_S.gen;
    }
    return rc;
}

/* A thread whose name was not known when it attached (threading
 * registers a thread after its first task record) is looked up again at
 * its next records, a few times: in a session without calls no frame
 * hook does it. */
#define NAME_LOOKUP_TRIES 32

static SW_NOINLINE void name_again(sw_tracer_thread *t)
{
    if (++t->name_tries > NAME_LOOKUP_TRIES)
        t->name_pending = 0;
    else
        sw_thread_name_lookup(t);
    sw_tracer_thread_ready(t);
}

void sw_file_record_ext(int kind, const sw_evdata *d)
{
    sw_tracer_thread *t = &sw_TT;
    if (kind < 0 || kind >= SW_K_COUNT || !ext_of[kind] || sw_T.busy || !sw_thread_attach(t))
        return;
    if (SW_UNLIKELY(t->name_pending) && sw_S.no_calls)
        name_again(t);
    uint32_t code = SW_EXT_NO_CODE;   /* located nowhere */
    if (d->code) {
        uint32_t id = sw_code_id(d->code, NULL);
        if (id & SW_ID_SKIP)
            return;
        code = id & SW_ID_MASK;
    }
    /* The payload: the row's fields (records.h) from their slots. */
    sw_ext v = {.code = code, .line = nonneg(d->line), .a = nonneg(d->a), .b = nonneg(d->b), .c = nonneg(d->c),
                .s1 = d->name, .s2 = d->file};
    uint8_t buf[SW_EXT_MAX];
    long n = sw_record_encode_interned(ext_of[kind], &v, STR_MAX, intern_last, t, buf, sizeof buf);
    if (n < 0)
        return;
    sw_tbuf_ext(t->tb, sw_clock_now(&sw_S.clock), ext_of[kind], buf, (size_t)n);
}

/* Appends the decimal digits of v to buf at *n (room checked by the
 * caller: at most 20). */
static void put_decimal(char *buf, size_t *n, uint64_t v)
{
    char d[SW_DECIMAL_MAX];
    const char *digits = sw_decimal(d, v);
    size_t k = strlen(digits);
    memcpy(buf + *n, digits, k);
    *n += k;
}

/* A frame of a creation stack's walk: a frame object, or (3.11+) the
 * evaluator's own frame, read in place (PyEval_GetFrame and PyFrame_GetBack
 * make a frame object of each frame they pass, which the frame's exit then
 * takes over: most of a walk's cost). */
typedef struct {
    PyFrameObject *obj;   /* held, or NULL */
#if PY_VERSION_HEX >= 0x030B0000
    SW_FRAME *ev;         /* with obj NULL: a complete frame, or NULL */
#endif
} stack_frame;

static int stack_frame_at(const stack_frame *f)
{
#if PY_VERSION_HEX >= 0x030B0000
    return f->obj || f->ev;
#else
    return f->obj != NULL;
#endif
}

/* The frame's code (borrowed: its frame holds it), or NULL (not a code object). */
static PyCodeObject *stack_frame_code(const stack_frame *f)
{
    if (f->obj) {
        PyCodeObject *co = PyFrame_GetCode(f->obj);
        Py_DECREF(co);
        return co;
    }
#if PY_VERSION_HEX >= 0x030B0000
    PyCodeObject *co = sw_frame_code(f->ev);
    return PyCode_Check((PyObject *)co) ? co : NULL;
#else
    return NULL;
#endif
}

/* Its line, as PyFrame_GetLineNumber says (a frame object's own line
 * number, set by a trace function, first). */
static int stack_frame_line(const stack_frame *f)
{
    if (f->obj)
        return PyFrame_GetLineNumber(f->obj);
#if PY_VERSION_HEX >= 0x030B0000
    if (f->ev->frame_obj)
        return PyFrame_GetLineNumber(f->ev->frame_obj);
    return PyCode_Addr2Line(sw_frame_code(f->ev), _PyInterpreterFrame_LASTI(f->ev) * (int)sizeof(_Py_CODEUNIT));
#else
    return -1;
#endif
}

static void stack_frame_back(stack_frame *f)
{
    if (f->obj) {
        Py_SETREF(f->obj, PyFrame_GetBack(f->obj));
        return;
    }
#if PY_VERSION_HEX >= 0x030B0000
    f->ev = sw_complete_frame(f->ev->previous);
#endif
}

/* The last creation stack walked from the evaluator's frames with the
 * program's frame that made the task given (`at`): the codes walked (held),
 * whether the walk ran out of frames after them (else it stopped there:
 * whole frames only, or the task step's frame, decided by the codes
 * alone), and its text's string id. Tasks made one after another at one
 * place (create_task in a loop, gather's arguments) walk the same codes:
 * such a walk is compared code by code and its record written with that
 * id, its text not made nor hashed again. */
#define STACK_CODES_MAX 64
static struct {
    uint64_t gen;   /* the session it holds a stack of; 0: none */
    PyCodeObject *at;                        /* held */
    int at_line, in_task, ended, n;
    PyCodeObject *codes[STACK_CODES_MAX];    /* held */
    uint64_t id;
} last_stack;

static void forget_last_stack(void)
{
    for (int i = 0; i < last_stack.n; i++)
        Py_CLEAR(last_stack.codes[i]);
    Py_CLEAR(last_stack.at);
    last_stack.n = 0;
    last_stack.gen = 0;
}

/* 1 if the walk from f (not taken: the evaluator's frames) is the last
 * stack's. */
static int same_stack(stack_frame f, PyCodeObject *at, int at_line, int in_task)
{
    if (!last_stack.gen || last_stack.gen != sw_S.gen || last_stack.at != at || last_stack.at_line != at_line ||
        last_stack.in_task != in_task || f.obj)
        return 0;
    int k = 0;
    for (; stack_frame_at(&f); stack_frame_back(&f)) {
        PyCodeObject *co = stack_frame_code(&f);
        if (!co)
            continue;
        if (k == last_stack.n || co != last_stack.codes[k])
            return 0;
        if (++k == last_stack.n && !last_stack.ended)
            return 1;
    }
    return k == last_stack.n;
}

/* The intern function of a TASK_STACK record: the last stack's id when
 * known, else intern_last's, kept. */
typedef struct {
    sw_tracer_thread *t;
    int known;
    uint64_t id;
} stack_intern;

static int intern_stack(void *ctx, const char *s, size_t len, uint64_t *id)
{
    stack_intern *si = ctx;
    if (si->known) {
        *id = si->id;
        return 0;
    }
    int rc = intern_last(si->t, s, len, id);
    if (rc == 0) {
        si->known = 1;
        si->id = *id;
    }
    return rc;
}

/* The stack from frame f outwards (f taken), as TASK_STACK's text. */
static void record_stack(stack_frame *f, PyCodeObject *at, int at_line, uint64_t task, uint64_t native_id)
{
    sw_tracer_thread *t = &sw_TT;
    char text[STR_MAX + 1];
    size_t n = 0;
    /* The frames of the running task's track, as a replay of the trace
     * would have them open: while the thread runs an asyncio task, those
     * of its coroutines and what they call, and the frame that runs its
     * step (asyncio's Handle._run), not the loop's below it. */
    int in_task = t->tb->task != 0, coroutines = 0, placed = 0, last = 0;
    stack_intern si = {.t = t};
    int keep = at && !f->obj;   /* (kept as the last stack: see last_stack) */
    if (keep && same_stack(*f, at, at_line, in_task)) {
        si.known = 1;
        si.id = last_stack.id;
        f->obj = NULL;
#if PY_VERSION_HEX >= 0x030B0000
        f->ev = NULL;
#endif
    }
    PyCodeObject *walked[STACK_CODES_MAX];
    int nwalked = 0;
    for (; stack_frame_at(f); stack_frame_back(f)) {
        PyCodeObject *co = stack_frame_code(f);
        if (!co)
            continue;
        if (nwalked < STACK_CODES_MAX)
            walked[nwalked] = co;
        nwalked++;
        uint32_t id = sw_code_id(co, NULL);
        int coroutine = (co->co_flags & (CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR)) != 0;
        int here = !placed && (at ? co == at : 1);
        last = in_task && coroutines && !coroutine;
        coroutines |= coroutine;
        if (!(id & SW_ID_SKIP)) {   /* (not stackwatch's own frames) */
            char frame[48];
            size_t k = 0;
            put_decimal(frame, &k, id & SW_ID_MASK);
            if (here) {   /* the frame that made it: its line too */
                frame[k++] = ':';
                put_decimal(frame, &k, (uint64_t)nonneg(at ? at_line : stack_frame_line(f)));
                placed = 1;
            }
            if (n + (n > 0) + k > STR_MAX)
                break;   /* whole frames only: the outermost go */
            if (n)
                text[n++] = ' ';
            memcpy(text + n, frame, k);
            n += k;
        }
        if (last)
            break;
    }
    int ended = !stack_frame_at(f);
    Py_CLEAR(f->obj);
    text[n] = 0;
    sw_ext v = {.code = SW_EXT_NO_CODE, .a = task, .c = native_id, .s1 = si.known ? "" : text};
    int was_known = si.known;
    uint8_t buf[SW_EXT_MAX];
    long len = sw_record_encode_interned(SW_EXT_TASK_STACK, &v, STR_MAX, intern_stack, &si, buf, sizeof buf);
    if (len >= 0)
        sw_tbuf_ext(t->tb, sw_clock_now(&sw_S.clock), SW_EXT_TASK_STACK, buf, (size_t)len);
    if (keep && !was_known && si.known && nwalked <= STACK_CODES_MAX) {
        forget_last_stack();
        for (int i = 0; i < nwalked; i++)
            last_stack.codes[i] = (PyCodeObject *)Py_NewRef(walked[i]);
        last_stack.n = nwalked;
        last_stack.at = (PyCodeObject *)Py_NewRef(at);
        last_stack.at_line = at_line;
        last_stack.in_task = in_task;
        last_stack.ended = ended;
        last_stack.id = si.id;
        last_stack.gen = sw_S.gen;
    }
    sw_err_drop();
}

static int stack_wanted(void)
{
    return sw_S.no_calls && !sw_T.busy && sw_thread_attach(&sw_TT);
}

void sw_file_record_stack(PyFrameObject *f, PyCodeObject *at, int at_line, uint64_t task, uint64_t native_id)
{
    if (!f || !stack_wanted())
        return;
    stack_frame from = {.obj = (PyFrameObject *)Py_NewRef(f)};
    record_stack(&from, at, at_line, task, native_id);
}

void sw_file_record_stack_here(PyCodeObject *at, int at_line, uint64_t task)
{
#if PY_VERSION_HEX >= 0x030B0000
    stack_frame from = {.obj = NULL, .ev = sw_complete_frame(sw_thread_iframe(PyThreadState_Get()))};
    if (!from.ev || !stack_wanted())
        return;
    record_stack(&from, at, at_line, task, 0);
#else
    sw_file_record_stack(PyEval_GetFrame(), at, at_line, task, 0);
#endif
}
