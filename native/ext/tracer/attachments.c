/*
 * attachments.c - the producers attached to the running session's writer
 * (attachments.h): a short list, in the order they attached, changed and
 * read with the GIL only.
 */
#include "ext/tracer/session.h"   /* first: Python.h before any system header */

#include "attachments.h"

static sw_attachment list[SW_ATTACH_MAX];
static size_t count;

int sw_session_attach(const sw_attachment *a, sw_writer **w, uint64_t *mono0_ns)
{
    if (!sw_S.gen || !sw_S.w)
        return SW_ATTACH_NO_SESSION;
    for (size_t i = 0; i < count; i++)
        if (list[i].stream == a->stream)
            return SW_ATTACH_TAKEN;
    if (count == SW_ATTACH_MAX)
        return SW_ATTACH_FULL;
    list[count++] = *a;
    *w = sw_S.w;
    *mono0_ns = sw_S.clock.mono0_ns;
    return SW_ATTACH_OK;
}

void sw_session_detach(void *ud)
{
    size_t k = 0;
    for (size_t i = 0; i < count; i++)
        if (list[i].ud != ud)
            list[k++] = list[i];
    count = k;
}

void sw_session_detach_all(void)
{
    /* Each is taken off the list before its detach runs: a detach that
     * calls sw_session_detach finds nothing left to remove. */
    while (count > 0) {
        sw_attachment a = list[--count];
        a.detach(a.ud);
    }
}

void sw_session_attachments_forget(void)
{
    count = 0;
}
