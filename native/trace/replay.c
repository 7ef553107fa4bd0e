/*
 * replay.c - the replay of a thread's events (see replay.h, reader.h,
 * docs/format.md "Damage and recovery" and "Tasks"): its EVENTS chunks read
 * in sequence order from the chunk index (chunk_index.h), each event
 * handed to the callback with its time, depth and code; frames still open
 * at a gap, a malformed chunk or the end closed by synthetic returns, the
 * next chunk's prefix reopened by synthetic calls; TEARDOWN records ending
 * a frame before its exit; the frames of each task (format 1.7) kept apart
 * and relabelled at a TASK_SWITCH, and reopened from a TASK_FRAMES chunk
 * after a gap.
 */
#define _GNU_SOURCE
#include "replay.h"

#include "base/base.h"
#include "chunk_index.h"
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Replay state: the open frames as the stream has them. A frame whose
 * TEARDOWN event was read has been handed to the callback as ended but is
 * still open in the stream (`ended`) until its exit comes, which is then
 * dropped; callbacks get depths without such frames. */
/* The open frames of a task the replay's thread does not run now. */
typedef struct task_frames {
    uint64_t task;
    uint32_t *stack;
    uint8_t *ended;
    uint32_t depth, cap, nended;
} task_frames;

typedef struct replay {
    uint32_t *stack;
    uint8_t *ended;
    uint32_t depth, cap;
    uint32_t nended;         /* frames of the stack that are `ended` */
    /* Tasks (format 1.7): the stack above is the running task's; the
     * callback gets the events of task `want` only (the stack is task
     * `running`'s) (0: the thread's own). */
    uint64_t running, want;
    task_frames *tasks;      /* the other tasks with open frames */
    size_t ntasks, tasks_cap;
    const thread_rec *tr;    /* the thread replayed, and the index of the */
    size_t chunk;            /* chunk being read (for reading ahead) */
    int64_t last_ns;
    uint64_t side_only;      /* records of side-stream kinds refused in this chunk */
    sw_event_fn fn;
    void *ud;
    unsigned flags;          /* SW_REPLAY_* */
    sw_bytes cur, ahead;     /* a file's chunk being replayed, and one read ahead */
    char s1[SW_EXT_STR_MAX + 1], s2[SW_EXT_STR_MAX + 1];
} replay;

static int push(replay *r, uint32_t code)
{
    if (r->depth == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 256;
        uint32_t *s = realloc(r->stack, (size_t)cap * sizeof *s);
        if (!s)
            return SW_ENOMEM;
        r->stack = s;
        uint8_t *e = realloc(r->ended, cap);
        if (!e)
            return SW_ENOMEM;
        r->ended = e;
        r->cap = cap;
    }
    r->ended[r->depth] = 0;
    r->stack[r->depth++] = code;
    return SW_OK;
}

/* The depth callbacks see for the stream's current depth. */
static uint32_t seen_depth(const replay *r) { return r->depth - r->nended; }

/* The code of the innermost open frame not ended (seen_depth(r) > 0). */
static uint32_t innermost_seen(const replay *r)
{
    uint32_t d = r->depth;
    while (d > 0 && r->ended[d - 1])
        d--;
    return d ? r->stack[d - 1] : SW_EXT_NO_CODE;
}

static int emit(replay *r, int kind, uint32_t code, uint32_t depth, int synthetic)
{
    if (r->running != r->want)
        return 0;
    sw_event ev = {r->last_ns, code, depth, (uint8_t)kind, (uint8_t)synthetic, NULL, NULL};
    return r->fn(r->ud, &ev);
}

/* Pops the innermost open frame and hands its end to the callback, unless
 * a TEARDOWN event already did. */
static int pop(replay *r, int kind, int synthetic)
{
    r->depth--;
    if (r->ended[r->depth]) {
        r->ended[r->depth] = 0;
        r->nended--;
        return 0;
    }
    return emit(r, kind, r->stack[r->depth], seen_depth(r), synthetic);
}

/* Exchanges the running task's frames with k's. */
static void task_frames_swap(replay *r, task_frames *k)
{
    task_frames run = {r->running, r->stack, r->ended, r->depth, r->cap, r->nended};
    r->running = k->task;
    r->stack = k->stack;
    r->ended = k->ended;
    r->depth = k->depth;
    r->cap = k->cap;
    r->nended = k->nended;
    *k = run;
}

/* The running task's open frames handed to the callback as synthetic
 * calls (open) or returns, without changing them (a relabelling). */
static int task_frames_emit(replay *r, int open)
{
    int rc;
    if (open) {
        for (uint32_t d = 0, seen = 0; d < r->depth; d++)
            if (!r->ended[d] && (rc = emit(r, SW_OP_CALL, r->stack[d], seen++, 1)))
                return rc;
    } else {
        for (uint32_t d = r->depth, seen = seen_depth(r); d-- > 0;)
            if (!r->ended[d] && (rc = emit(r, SW_OP_RETURN, r->stack[d], --seen, 1)))
                return rc;
    }
    return 0;
}

/* The frames the replay keeps for task, not running (r->running is task
 * itself when called): ended in its own view and forgotten. Only a damaged
 * trace switches from a task whose frames are kept as suspended. */
static int task_frames_drop(replay *r, uint64_t task)
{
    for (size_t i = 0; i < r->ntasks; i++) {
        if (r->tasks[i].task != task)
            continue;
        task_frames k = r->tasks[i];
        r->tasks[i] = r->tasks[--r->ntasks];
        int rc = 0;
        for (uint32_t d = k.depth, seen = k.depth - k.nended; d-- > 0 && !rc;)
            if (!k.ended[d])
                rc = emit(r, SW_OP_RETURN, k.stack[d], --seen, 1);
        free(k.stack);
        free(k.ended);
        return rc;
    }
    return 0;
}

/* A TASK_SWITCH record: the open frames are origin's (relabelled when the
 * replay had them as another task's: its first switch, or after a gap),
 * kept as origin's, and target's become the running ones. */
static int task_switch(replay *r, uint64_t origin, uint64_t target)
{
    int rc;
    if (r->running != origin) {
        if ((rc = task_frames_emit(r, 0)))
            return rc;
        r->running = origin;
        if ((rc = task_frames_drop(r, origin)) || (rc = task_frames_emit(r, 1)))
            return rc;
    }
    if (origin == target)
        return 0;
    task_frames mine = {origin, r->stack, r->ended, r->depth, r->cap, r->nended};
    task_frames next = {target, NULL, NULL, 0, 0, 0};
    for (size_t i = 0; i < r->ntasks; i++)
        if (r->tasks[i].task == target) {
            next = r->tasks[i];
            r->tasks[i] = r->tasks[--r->ntasks];
            break;
        }
    if (mine.depth) {
        task_frames *g = sw_array_grow(r->tasks, &r->tasks_cap, r->ntasks + 1, sizeof *g, 8);
        if (!g)
            return SW_ENOMEM;
        r->tasks = g;
        r->tasks[r->ntasks++] = mine;
    } else if (next.cap) {   /* reuse nothing: free the empty arrays */
        free(mine.stack);
        free(mine.ended);
    } else {
        next.stack = mine.stack;   /* keep the empty arrays for the target */
        next.ended = mine.ended;
        next.cap = mine.cap;
    }
    r->stack = next.stack;
    r->ended = next.ended;
    r->depth = next.depth;
    r->cap = next.cap;
    r->nended = next.nended;
    r->running = target;
    return 0;
}

/* Closes open frames down to depth `keep`, as synthetic returns. */
static int close_to(replay *r, uint32_t keep)
{
    while (r->depth > keep) {
        int rc = pop(r, SW_OP_RETURN, 1);
        if (rc)
            return rc;
    }
    return 0;
}

/* Closes every task's open frames (a gap, or the end): the callback's
 * task's as synthetic returns. The running task stays the running one. */
static int close_all(replay *r)
{
    int rc = close_to(r, 0);
    for (size_t i = 0; i < r->ntasks && !rc; i++)
        if (r->tasks[i].task == r->want) {
            task_frames_swap(r, &r->tasks[i]);
            rc = close_to(r, 0);
            task_frames_swap(r, &r->tasks[i]);
        }
    if (rc)
        return rc;
    for (size_t i = 0; i < r->ntasks; i++) {
        free(r->tasks[i].stack);
        free(r->tasks[i].ended);
    }
    r->ntasks = 0;
    return 0;
}

/* How the innermost open frame ends: its exit op, read ahead from c (n
 * events left in the chunk, then the thread's next chunks while no gap
 * comes between), or SW_OP_RETURN if the stream ends (or is damaged)
 * first, as the frame is then closed by a synthetic return. */
static unsigned peek_exit(const sw_trace *t, replay *r, sw_cursor c, uint64_t n)
{
    uint64_t level = 0;
    size_t k = r->chunk;
    for (;;) {
        for (; n > 0; n--) {
            uint64_t x, v, len;
            if (sw_cur_varint(&c, &x))
                return SW_OP_RETURN;
            unsigned op = (unsigned)(x & ((1u << SW_OP_BITS) - 1));
            switch (op) {
            case SW_OP_CALL:
            case SW_OP_RESUME:
            case SW_OP_C_CALL:
                if (sw_cur_varint(&c, &v))
                    return SW_OP_RETURN;
                level++;
                break;
            case SW_OP_EXT:
                if (sw_cur_varint(&c, &v) || sw_cur_varint(&c, &len) || len > (uint64_t)(c.end - c.p))
                    return SW_OP_RETURN;
                c.p += len;
                break;
            default:
                if (level == 0)
                    return op;
                level--;
            }
        }
        if (++k >= r->tr->nchunks || r->tr->chunks[k].seq != r->tr->chunks[k - 1].seq + 1)
            return SW_OP_RETURN;
        sw_cursor nc;
        events_head h;
        if (sw_index_payload(t, &r->tr->chunks[k], &r->ahead, &nc) || sw_index_events_head(&nc, &h))
            return SW_OP_RETURN;
        c.p = h.body;
        c.end = nc.end;
        n = h.n;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Checks the entries of a TASK_FRAMES payload (c after its `n`): each
 * one's frames are there and are code ids, no entry names the running
 * task, and no task is listed twice. */
static int task_frames_check(sw_cursor c, uint64_t running, uint64_t n)
{
    if (n > (uint64_t)(c.end - c.p) / 2)   /* an entry takes 2 bytes at least */
        return SW_EFORMAT;
    uint64_t *tasks = malloc((size_t)(n ? n : 1) * sizeof *tasks);
    if (!tasks)
        return SW_ENOMEM;
    int rc = SW_OK;
    for (uint64_t k = 0; k < n && !rc; k++) {
        uint64_t depth = 0, id;
        if (sw_cur_varint(&c, &tasks[k]) || sw_cur_varint(&c, &depth) || depth > (uint64_t)(c.end - c.p) ||
            tasks[k] == running)
            rc = SW_EFORMAT;
        for (uint64_t d = 0; d < depth && !rc; d++)
            if (sw_cur_varint(&c, &id) || id > UINT32_MAX)
                rc = SW_EFORMAT;
    }
    if (!rc && n > 1) {
        qsort(tasks, (size_t)n, sizeof *tasks, cmp_u64);
        for (uint64_t k = 1; k < n && !rc; k++)
            if (tasks[k] == tasks[k - 1])
                rc = SW_EFORMAT;
    }
    free(tasks);
    return rc;
}

/* A chunk read after a gap (or alone): its TASK_FRAMES chunk (format 1.7),
 * when it has one, says which task ran when it started (the one whose
 * frames its prefix lists) and the other tasks' open frames, which are
 * opened (synthetic calls) for the callback's task. A TASK_FRAMES chunk
 * that cannot be read or does not parse is taken as none, the whole of it
 * (checked before any of it is used). */
static int task_frames_load(sw_trace *t, replay *r, uint64_t seq)
{
    const chunk_ref *ref = NULL;
    for (size_t i = 0; i < r->tr->ntask_frames && !ref; i++)
        if (r->tr->task_frames[i].seq == seq)
            ref = &r->tr->task_frames[i];
    sw_cursor c;
    uint64_t index, s, running, n;
    if (!ref || sw_index_payload(t, ref, &r->ahead, &c) || sw_cur_varint(&c, &index) || sw_cur_varint(&c, &s) ||
        sw_cur_varint(&c, &running) || sw_cur_varint(&c, &n))
        return 0;
    int rc = task_frames_check(c, running, n);
    if (rc)
        return rc == SW_ENOMEM ? rc : 0;
    r->running = running;
    for (uint64_t k = 0; k < n && !rc; k++) {
        uint64_t task = 0, depth = 0, id = 0;
        sw_cur_varint(&c, &task);   /* checked above */
        sw_cur_varint(&c, &depth);
        task_frames f = {task, NULL, NULL, 0, 0, 0};
        task_frames_swap(r, &f);   /* f holds the running task's frames now */
        for (uint64_t d = 0; d < depth && !rc; d++) {
            sw_cur_varint(&c, &id);
            rc = push(r, (uint32_t)id);
        }
        if (!rc)
            rc = task_frames_emit(r, 1);
        task_frames_swap(r, &f);   /* f holds the task's frames */
        task_frames *g = f.depth ? sw_array_grow(r->tasks, &r->tasks_cap, r->ntasks + 1, sizeof *g, 8) : NULL;
        if (g) {
            r->tasks = g;
            r->tasks[r->ntasks++] = f;
        } else {
            free(f.stack);
            free(f.ended);
            if (f.depth && !rc)
                rc = SW_ENOMEM;
        }
    }
    return rc;
}

/* Replays one chunk. gap: the previous chunk of the thread was not read
 * (lost, discarded or malformed); quiet: the previous ones were skipped on
 * purpose (sw_trace_replay_from), so no DROPPED event says so. */
static int replay_chunk(sw_trace *t, replay *r, const chunk_ref *ch, int gap, int quiet)
{
    sw_cursor c;
    events_head h;
    int rc = sw_index_payload(t, ch, &r->cur, &c);
    if (rc)
        return rc == SW_EFORMAT ? SW_EIO : rc;   /* indexed: only reading can fail */
    if ((rc = sw_index_events_head(&c, &h)))
        return rc;
    uint64_t now = h.t0;
    int64_t t0_ns = sw_trace_units_to_ns(t, h.t0);
    /* Reconcile the open frames with the chunk's prefix: after a gap
     * nothing is known of what happened between, so close everything and
     * reopen the prefix; without a gap they must already agree. */
    int agree = !gap && h.depth == r->depth;
    sw_cursor pc = {h.prefix, h.body};
    for (uint64_t k = 0; agree && k < h.depth; k++) {
        uint64_t id;
        if (sw_cur_varint(&pc, &id))
            return SW_EFORMAT;
        agree = id == r->stack[k];
    }
    if (!agree) {
        if ((rc = close_all(r)))
            return rc;
        if (t0_ns > r->last_ns)
            r->last_ns = t0_ns;
        if ((h.dropped || gap) && !quiet) {
            if ((rc = emit(r, SW_EV_DROPPED, (uint32_t)(h.dropped > UINT32_MAX ? UINT32_MAX : h.dropped), 0, 1)))
                return rc;
        }
        if ((rc = task_frames_load(t, r, h.seq)))
            return rc;
        pc.p = h.prefix;
        for (uint64_t k = 0; k < h.depth; k++) {
            uint64_t id;
            if (sw_cur_varint(&pc, &id) || id > UINT32_MAX)
                return SW_EFORMAT;
            if (push(r, (uint32_t)id))
                return SW_ENOMEM;
            if ((rc = emit(r, SW_OP_CALL, (uint32_t)id, r->depth - 1, 1)))
                return rc;
        }
    } else if (h.dropped) {
        if (t0_ns > r->last_ns)
            r->last_ns = t0_ns;
        if ((rc = emit(r, SW_EV_DROPPED, (uint32_t)(h.dropped > UINT32_MAX ? UINT32_MAX : h.dropped), seen_depth(r), 1)))
            return rc;
    }
    c.p = h.body;
    for (uint64_t k = 0; k < h.n; k++) {
        uint64_t x;
        if (sw_cur_varint(&c, &x))
            return SW_EFORMAT;
        unsigned op = (unsigned)(x & ((1u << SW_OP_BITS) - 1));
        now += x >> SW_OP_BITS;
        int64_t ns = sw_trace_units_to_ns(t, now);
        if (ns > r->last_ns)
            r->last_ns = ns;
        switch (op) {
        case SW_OP_CALL:
        case SW_OP_RESUME:
        case SW_OP_C_CALL: {
            uint64_t id;
            if (sw_cur_varint(&c, &id) || id > UINT32_MAX)
                return SW_EFORMAT;
            if (push(r, (uint32_t)id))
                return SW_ENOMEM;
            if ((rc = emit(r, (int)op, (uint32_t)id, seen_depth(r) - 1, 0)))
                return rc;
            break;
        }
        case SW_OP_RETURN:
        case SW_OP_YIELD:
        case SW_OP_UNWIND:
        case SW_OP_C_RETURN:
            if (r->depth == 0)
                break;  /* cannot happen in a well-formed stream: ignore */
            if ((rc = pop(r, (int)op, 0)))
                return rc;
            break;
        case SW_OP_EXT: {
            uint64_t kind, len;
            const sw_record_kind *rk;
            if (sw_cur_varint(&c, &kind) || sw_cur_varint(&c, &len) || len > (uint64_t)(c.end - c.p))
                return SW_EFORMAT;
            if (sw_record_side_only(kind)) {
                r->side_only++;   /* (only a damaged trace has one here) */
            } else if (kind == SW_EXT_DROPPED) {
                sw_cursor e = {c.p, c.p + len};
                uint64_t n = 0;
                if (sw_cur_varint(&e, &n))
                    return SW_EFORMAT;
                if ((rc = emit(r, SW_EV_DROPPED, (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n), seen_depth(r), 0)))
                    return rc;
            } else if (kind == SW_EXT_TASK_SWITCH) {
                sw_ext x;
                sw_record_decode((uint32_t)kind, c.p, (size_t)len, &t->strings, r->s1, r->s2, &x);
                /* Delivered (SW_REPLAY_TASKS) before the switch: located
                 * at the innermost frame of the task switched away from. */
                if ((r->flags & SW_REPLAY_TASKS) && (r->flags & SW_REPLAY_EXT)) {
                    x.code = x.malformed || r->depth <= r->nended ? SW_EXT_NO_CODE : innermost_seen(r);
                    sw_event ev = {r->last_ns, x.code, seen_depth(r), SW_EV_EXT, 0, &x, NULL};
                    if ((rc = r->fn(r->ud, &ev)))
                        return rc;
                }
                if (!x.malformed && (rc = task_switch(r, x.a, x.b)))
                    return rc;
            } else if (kind == SW_EXT_TEARDOWN) {
                /* The first of a clearing's TEARDOWN events ends the frame. */
                if (r->depth > 0 && !r->ended[r->depth - 1]) {
                    sw_cursor rest = {c.p + len, c.end};
                    unsigned exit_op = peek_exit(t, r, rest, h.n - k - 1);
                    r->ended[r->depth - 1] = 1;
                    r->nended++;
                    if ((rc = emit(r, (int)exit_op, r->stack[r->depth - 1], seen_depth(r), 0)))
                        return rc;
                }
            } else if ((r->flags & SW_REPLAY_EXT) && (rk = sw_record_kind_of(kind)) &&
                       (rk->shape != SW_RS_REPLAY || ((r->flags & SW_REPLAY_TASKS) && kind == SW_EXT_TASK_STACK))) {
                sw_ext x;
                sw_record_decode((uint32_t)kind, c.p, (size_t)len, &t->strings, r->s1, r->s2, &x);
                sw_event ev = {r->last_ns, x.code, seen_depth(r), SW_EV_EXT, 0, &x, NULL};
                if ((r->running == r->want || (r->flags & SW_REPLAY_TASKS)) && (rc = r->fn(r->ud, &ev)))
                    return rc;
            }
            c.p += len;
            break;
        }
        }
    }
    if (c.p != c.end)
        return SW_EFORMAT;
    return SW_OK;
}

int sw_trace_replay(sw_trace *t, size_t i, sw_event_fn fn, void *ud)
{
    return sw_trace_replay_ext(t, i, 0, fn, ud);
}

int sw_trace_replay_ext(sw_trace *t, size_t i, unsigned flags, sw_event_fn fn, void *ud)
{
    return sw_trace_replay_from(t, i, flags, INT64_MIN, fn, ud);
}

void sw_trace_set_progress(sw_trace *t, sw_progress_fn fn, void *ud)
{
    t->progress = fn;
    t->progress_ud = ud;
}

uint64_t sw_trace_events_bytes(const sw_trace *t, size_t i)
{
    uint64_t n = 0;
    if (i < t->nthreads && t->threads[i].info.task)
        i = t->threads[i].owner;
    for (size_t k = 0; i < t->nthreads && k < t->threads[i].nchunks; k++)
        n += t->threads[i].chunks[k].len;
    return n;
}

/* Tells the progress callback of `bytes` more replayed; nonzero: stop. */
static int progressed(sw_trace *t, uint64_t bytes)
{
    return t->progress ? t->progress(t->progress_ud, bytes) : 0;
}

/* A failure of reading or memory ends a replay; a chunk that does not
 * decode does not. */
static int fatal(int rc) { return rc == SW_ENOMEM || rc == SW_EIO || rc == SW_ECANCELED; }

/* Frees what a replay holds: every task's frames, its buffers. */
static void replay_free(replay *r)
{
    for (size_t k = 0; k < r->ntasks; k++) {
        free(r->tasks[k].stack);
        free(r->tasks[k].ended);
    }
    free(r->tasks);
    free(r->stack);
    free(r->ended);
    sw_bytes_free(&r->cur);
    sw_bytes_free(&r->ahead);
}

/* Chunk k of tr is damage (the trace's list, once): its events do not
 * decode (refused 0), or it holds `refused` records of kinds written only
 * into side streams (kernel records: the writer puts them in THREAD_RECORDS
 * only), which the replay leaves out. What the chunk gave is kept. */
static void chunk_damaged(sw_trace *t, const thread_rec *tr, size_t k, uint64_t refused)
{
    sw_damage d = {tr->chunks[k].off - SW_CHUNK_HEADER_LEN, SW_CHUNK_HEADER_LEN + tr->chunks[k].len, 1,
                   SW_DAMAGE_MALFORMED, 0, ""};
    unsigned long long seq = tr->chunks[k].seq;
    if (refused)
        snprintf(d.what, sizeof d.what, "corrupted: %llu kernel records refused in the events of thread %u, chunk %llu",
                 (unsigned long long)refused, tr->info.index, seq);
    else
        snprintf(d.what, sizeof d.what, "corrupted: malformed events in thread %u, chunk %llu", tr->info.index, seq);
    sw_index_add_damage(t, &d);
}

int sw_trace_replay_from(sw_trace *t, size_t i, unsigned flags, int64_t from_ns, sw_event_fn fn, void *ud)
{
    if (i >= t->nthreads)
        return SW_EARG;
    thread_rec *tr = &t->threads[i];
    replay r;
    memset(&r, 0, sizeof r);
    if (tr->info.task) {   /* a task: its thread's events while it ran */
        r.want = tr->info.task;
        if (tr->owner == SIZE_MAX)
            return SW_OK;
        tr = &t->threads[tr->owner];
    }
    r.fn = fn;
    r.ud = ud;
    r.flags = flags;
    int rc = SW_OK, bad = SW_OK, after_bad = 0;
    r.last_ns = INT64_MIN;
    r.tr = tr;
    /* Chunks that end before from_ns are skipped: chunk k ends where chunk
     * k + 1 starts (times never go back in a thread's stream). */
    size_t first = 0;
    uint64_t skipped = 0;
    while (from_ns != INT64_MIN && first + 1 < tr->nchunks &&
           sw_trace_units_to_ns(t, tr->chunks[first + 1].t0) <= from_ns)
        skipped += tr->chunks[first++].len;
    if (skipped && progressed(t, skipped))
        rc = SW_ECANCELED;
    for (size_t k = first; k < tr->nchunks && (rc == SW_OK || (rc < 0 && !fatal(rc))); k++) {
        r.chunk = k;
        int gap = k > 0 ? tr->chunks[k].seq != tr->chunks[k - 1].seq + 1 : tr->chunks[k].seq != 0;
        int quiet = k == first && first > 0;
        r.side_only = 0;
        rc = replay_chunk(t, &r, &tr->chunks[k], gap || after_bad || quiet, quiet && !gap);
        if (rc >= 0 && progressed(t, tr->chunks[k].len))
            rc = SW_ECANCELED;
        after_bad = rc < 0;
        if (rc < 0 && !fatal(rc)) {
            /* An intact chunk whose events do not decode: what it gave is
             * kept, and the next chunk is read as after a gap. */
            chunk_damaged(t, tr, k, 0);
            bad = rc;
        } else if (rc == SW_OK && r.side_only) {
            chunk_damaged(t, tr, k, r.side_only);
        }
    }
    if (rc == SW_OK || (rc < 0 && !fatal(rc)))
        rc = bad;
    if ((rc >= 0 && rc != SW_OK) || fatal(rc)) {
        replay_free(&r);
        return rc;  /* the callback asked to stop, or reading failed */
    }
    int rc2 = SW_OK;
    /* The thread's last chunks lost (END says how many it sealed, 1.5):
     * what it did after its last event read is unknown, so its frames end
     * there, after a DROPPED event. Else they were still open when tracing
     * stopped. */
    if (tr->nchunks && tr->written > tr->chunks[tr->nchunks - 1].seq + 1)
        rc2 = emit(&r, SW_EV_DROPPED, 0, seen_depth(&r), 1);
    else if (t->end_ns > r.last_ns && (r.depth || r.ntasks))
        r.last_ns = t->end_ns;
    if (rc2 == SW_OK)
        rc2 = close_all(&r);
    replay_free(&r);
    return rc2 ? rc2 : rc;
}
