/*
 * samplecheck.h - what the tests of samples in trace files share
 * (test_samples.c, test_sample_frames.c): code objects as the stack reader
 * hands them out (SC_CODE), one sample fed to the sample stream with its
 * frames given outermost first, and a thread's samples read back into
 * fixed arrays. Header-only.
 */
#ifndef SW_SAMPLECHECK_H
#define SW_SAMPLECHECK_H

#include "trace/sample_stream.h"
#include "trace/trace.h"

#include <stdint.h>

/* A code object as the stack reader hands it out (not yet given an id by
 * the sink). */
#define SC_CODE(a, n, f, l) \
    {.addr = a, .name = n, .filename = f, .name_len = sizeof n - 1, .filename_len = sizeof f - 1, \
     .firstlineno = l, .sink_id = SW_NO_ID}

#define SC_MAX_FRAMES  16   /* frames of a sample fed or read back */
#define SC_MAX_SAMPLES 64   /* samples sc_collect() keeps */

/* Feeds one sample of `n` frames, given outermost first as indexes into
 * codes[] (the sink takes them innermost first), each with its line from
 * lines[] (NULL: a sample without lines); weight 1 ms, no CPU time. */
static inline void sc_feed(sw_sample_stream *st, sw_sample_code *codes, uint64_t ident, uint64_t tid,
                           int64_t mono, uint32_t state, int n, const int *outer_first, const int32_t *lines)
{
    sw_sample_code *fr[SC_MAX_FRAMES];
    int32_t ln[SC_MAX_FRAMES];
    for (int i = 0; i < n && i < SC_MAX_FRAMES; i++) {
        fr[i] = &codes[outer_first[n - 1 - i]];
        ln[i] = lines ? lines[n - 1 - i] : 0;
    }
    sw_sample s = {.thread_id = ident, .native_tid = tid, .t_ns = mono, .weight_ns = 1000000,
                   .depth = (uint32_t)n, .frames = fr, .state = state, .cpu_ns = SW_NO_CPU,
                   .lines = lines ? ln : NULL};
    sw_sample_stream_sink(st, &s);
}

/* A thread's samples read back, frames and lines copied out of the
 * cursor's buffers. */
typedef struct sc_got {
    sw_trace_sample s[SC_MAX_SAMPLES];
    uint32_t frames[SC_MAX_SAMPLES][SC_MAX_FRAMES], lines[SC_MAX_SAMPLES][SC_MAX_FRAMES];
    int n;
} sc_got;

/* Reads the samples of the thread at `thread` (SIZE_MAX: every thread)
 * into g, at most SC_MAX_SAMPLES. Returns what the cursor last returned:
 * 0 at the end, 1 if stopped early with more to read, negative on error
 * (-1 if no cursor could be made). */
static inline int sc_collect(sw_trace *t, size_t thread, sc_got *g)
{
    sw_sample_cursor *c = sw_sample_cursor_new(t, thread);
    if (!c)
        return -1;
    g->n = 0;
    sw_trace_sample s;
    int rc;
    while ((rc = sw_sample_cursor_next(c, &s)) == 1 && g->n < SC_MAX_SAMPLES) {
        g->s[g->n] = s;
        for (uint32_t k = 0; k < s.depth && k < SC_MAX_FRAMES; k++) {
            g->frames[g->n][k] = s.frames[k];
            g->lines[g->n][k] = s.lines ? s.lines[k] : 0;
        }
        g->s[g->n].frames = g->frames[g->n];
        g->s[g->n].lines = s.lines ? g->lines[g->n] : NULL;
        g->n++;
    }
    sw_sample_cursor_free(c);
    return rc;
}

#endif
