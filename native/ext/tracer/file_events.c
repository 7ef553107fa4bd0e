/*
 * file_events.c - the file tracer as a consumer of the dispatch layer's
 * events other than calls: line, instruction, exception, GC, object and
 * thread events become EXT records (format.h, SW_EXT_*) in the thread's
 * stream, on the same clock as its calls.
 */
#include "file_events.h"

#include "ext/dispatch/handlers.h"
#include "ext/shared/tstate.h"
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

typedef struct { uint8_t b[SW_EXT_MAX]; size_t n; int full; } payload;

static void put_u(payload *p, uint64_t v)
{
    if (p->n + SW_VARINT_MAX > sizeof p->b) {
        p->full = 1;
        return;
    }
    p->n = (size_t)(sw_put_varint_fast(p->b + p->n, v) - p->b);
}

static void put_s(payload *p, const char *s)
{
    size_t len = s ? strlen(s) : 0;
    if (len > 200)
        len = 200;   /* names are cut, never the record */
    put_u(p, len);
    if (p->n + len > sizeof p->b) {
        p->full = 1;
        return;
    }
    if (len)
        memcpy(p->b + p->n, s, len);
    p->n += len;
}

static const unsigned ext_of[SW_K_COUNT] = {
    [SW_K_LINE] = SW_EXT_LINE, [SW_K_INSTRUCTION] = SW_EXT_INSTRUCTION,
    [SW_K_RAISE] = SW_EXT_RAISE, [SW_K_HANDLED] = SW_EXT_HANDLED,
    [SW_K_GC_START] = SW_EXT_GC_START, [SW_K_GC_DONE] = SW_EXT_GC_DONE,
    [SW_K_NEW_START] = SW_EXT_NEW_START, [SW_K_NEW_DONE] = SW_EXT_NEW_DONE,
    [SW_K_DEL_START] = SW_EXT_DEL_START, [SW_K_DEL_DONE] = SW_EXT_DEL_DONE,
    [SW_K_THREAD_START] = SW_EXT_THREAD_START, [SW_K_THREAD_EXIT] = SW_EXT_THREAD_EXIT,
};

void sw_file_record_ext(int kind, const sw_evdata *d)
{
    sw_tstate *t = &sw_T;
    if (kind < 0 || kind >= SW_K_COUNT || !ext_of[kind] || t->busy || !sw_thread_attach(t))
        return;
    payload p = {.n = 0};
    uint32_t code = 0;
    if (d->code) {
        uint32_t id = sw_code_id(d->code, NULL);
        if (id & SW_ID_SKIP)
            return;
        code = id & SW_ID_MASK;
    }
    switch (kind) {
    case SW_K_LINE:
        put_u(&p, code);
        put_u(&p, d->line < 0 ? 0 : (uint64_t)d->line);
        break;
    case SW_K_INSTRUCTION:
        put_u(&p, code);
        put_u(&p, d->line < 0 ? 0 : (uint64_t)d->line);
        put_u(&p, (uint64_t)(d->a < 0 ? 0 : d->a));
        put_u(&p, (uint64_t)(d->b < 0 ? 0 : d->b));
        put_s(&p, d->name);
        break;
    case SW_K_RAISE:
    case SW_K_HANDLED:
        put_u(&p, code);
        put_u(&p, d->line < 0 ? 0 : (uint64_t)d->line);
        put_s(&p, d->name);
        break;
    case SW_K_GC_START:
        put_u(&p, (uint64_t)(d->a < 0 ? 0 : d->a));
        break;
    case SW_K_GC_DONE:
        put_u(&p, (uint64_t)(d->a < 0 ? 0 : d->a));
        put_u(&p, (uint64_t)(d->b < 0 ? 0 : d->b));
        put_u(&p, (uint64_t)(d->c < 0 ? 0 : d->c));
        break;
    case SW_K_NEW_START:
    case SW_K_NEW_DONE:
    case SW_K_DEL_START:
    case SW_K_DEL_DONE:
        put_s(&p, d->name);
        put_s(&p, d->file);
        break;
    case SW_K_THREAD_START:
    case SW_K_THREAD_EXIT:
        put_s(&p, d->name);
        put_u(&p, (uint64_t)(d->a < 0 ? 0 : d->a));
        break;
    }
    if (p.full)
        return;
    sw_tbuf_ext(t->tb, sw_clock_now(&sw_S.clock), ext_of[kind], p.b, p.n);
}
