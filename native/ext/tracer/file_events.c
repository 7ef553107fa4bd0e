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

void sw_file_record_ext(int kind, const sw_evdata *d)
{
    sw_tracer_thread *t = &sw_TT;
    if (kind < 0 || kind >= SW_K_COUNT || !ext_of[kind] || sw_T.busy || !sw_thread_attach(t))
        return;
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
