/*
 * runtime.c - libstackwatch_cyg.so, the native-function runtime (cyg.h):
 * the entry and exit of every function of an extension compiled with
 * -finstrument-functions, written into the thread's trace buffer as
 * C_CALL / C_RETURN events with the writer's own inline encoders. No
 * Python.h: what it needs of the interpreter and the session comes through
 * the sw_cyg_thread the tracer set for the thread.
 */
#define _GNU_SOURCE 1   /* clock_gettime, RTLD_NOLOAD */
#include "cyg/cyg.h"

#include "base/base.h"
#include "trace/trace.h"

#define SW_CYG_EXPORT __attribute__((visibility("default"), no_instrument_function))
#define SW_CYG_LOCAL static __attribute__((no_instrument_function))

static __thread sw_cyg_thread *current __attribute__((tls_model("initial-exec")));

SW_CYG_EXPORT void stackwatch_cyg_set_thread(sw_cyg_thread *t)
{
    current = t;
}

/* Whether this thread may write now (the GIL first: the session's
 * generation is read under it). */
SW_CYG_LOCAL inline int may_record(const sw_cyg_thread *t)
{
    return t->current() == t->me && *t->live == t->gen && !*t->busy;
}

SW_CYG_LOCAL uint32_t code_of(sw_cyg_thread *t, void *fn)
{
    sw_cyg_slot *s = &t->cache[((uintptr_t)fn >> 4) & (SW_CYG_CACHE - 1)];
    if (SW_LIKELY(s->fn == fn))
        return s->id;
    uint32_t id = t->define(fn);
    s->fn = fn;
    s->id = id;
    return id;
}

SW_CYG_EXPORT void stackwatch_cyg_enter(void *fn, void *site)
{
    (void)site;
    sw_cyg_thread *t = current;
    if (!t)
        return;
    if (SW_UNLIKELY(t->depth == SW_CYG_MAX_OPEN)) {
        t->over++;
        return;
    }
    uint32_t rec = 0;
    if (may_record(t)) {
        uint32_t id = code_of(t, fn);
        struct sw_tbuf *b = t->tb;
        if (id != SW_CYG_SKIP && (sw_tbuf_enter_fits(b) || t->make_room(b))) {
            sw_tbuf_put_enter(b, sw_clock_now(t->clock), SW_OP_C_CALL, id);
            t->events++;
            rec = 1;
            if (SW_UNLIKELY(*t->emit_on))
                t->emit(0, fn);
        }
    }
    t->open[t->depth++] = (sw_cyg_open){fn, rec};
}

SW_CYG_EXPORT void stackwatch_cyg_exit(void *fn, void *site)
{
    (void)site;
    sw_cyg_thread *t = current;
    if (!t)
        return;
    if (SW_UNLIKELY(t->over)) {
        t->over--;
        return;
    }
    /* fn's frame, innermost first; the frames above it were left by a
     * longjmp and end here too. A function that started before this
     * thread's state was set has none. */
    uint32_t i = t->depth;
    while (i && t->open[i - 1].fn != fn)
        i--;
    if (!i)
        return;
    int can = may_record(t);
    uint64_t now = 0;
    for (uint32_t j = t->depth; j >= i; j--) {
        if (!t->open[j - 1].recorded || !can)
            continue;
        struct sw_tbuf *b = t->tb;
        if (SW_UNLIKELY(b->pos > b->limit) && !t->make_room(b))
            continue;
        if (!now)
            now = sw_clock_now(t->clock);
        sw_tbuf_put_exit(b, now, SW_OP_C_RETURN);
        t->events++;
        if (SW_UNLIKELY(*t->emit_on))
            t->emit(1, t->open[j - 1].fn);
    }
    t->depth = i - 1;
}
