/*
 * sample_stream.h - the statistical sampler's samples written into a trace
 * file, beside the exact tracer's events (stackwatch run --sample; format
 * 1.2/1.3, SAMPLE_FRAMES and SAMPLES chunks, see format.h and docs/format.md).
 *
 * sw_sample_stream_sink is a sample sink (sample.h): it runs on the
 * sampler's thread, encodes each sample into a buffer and gives each code
 * object a frame id the first time it appears (cached in the producer's
 * sink_id slot), queuing its definition. The buffer is written as a
 * SAMPLE_FRAMES chunk (new definitions) followed by a SAMPLES chunk when it
 * holds 64 KiB or 250 ms of samples, and by sw_sample_stream_flush once the
 * sampler has stopped. Times are stored as CLOCK_MONOTONIC minus the
 * trace's mono0_ns: the reader's nanoseconds since the calibration point.
 *
 * Only one thread may use a stream at a time: the sampler's thread while it
 * runs, the owner after it stopped. The writer must outlive the stream's
 * last flush. A frame whose file name starts with skip_prefix
 * (stackwatch's own package) is left out of the stack together with the
 * frames outside it (whoever called stackwatch: "python -m stackwatch"'s
 * runpy frames), as the tracer leaves them out of the trace; a native
 * frame of a shared object under skip_prefix (the tracer's own C code) is
 * left out alone. A sample any of whose frames runs one of the code objects
 * given to sw_sample_stream_set_ignore (the attach's pending call: its
 * code and everything it calls, the program's audit hooks or
 * threading's join included) holds nothing of the program: it is not
 * stored, only counted (cut). Native frames (sample.h: "symbol [native]") are written
 * as SW_FRAME_NATIVE frames named by the bare symbol, and a sample with
 * lines (sw_sample.lines) carries the line each frame runs (format 1.3).
 */
#ifndef SW_SAMPLE_STREAM_H
#define SW_SAMPLE_STREAM_H

#include "base/base.h"
#include "writer.h"

typedef struct sw_sample_stream sw_sample_stream;

typedef struct sw_sample_stream_stats {
    uint64_t samples;        /* written or buffered */
    uint64_t frames;         /* frame definitions */
    uint64_t chunks;         /* SAMPLES chunks written */
    uint64_t lost;           /* samples lost (out of memory, write errors) */
    uint64_t cut;            /* samples of a thread running stackwatch's own code
                              * (skip_prefix, or inside an ignored code object):
                              * nothing of the program, not stored */
} sw_sample_stream_stats;

/* Returns NULL when out of memory. skip_prefix may be NULL or "". */
sw_sample_stream *sw_sample_stream_new(sw_writer *w, uint64_t mono0_ns, const char *skip_prefix);
/* The code objects (their addresses, sw_sample_code.addr) a sample taken
 * inside of is cut whole; at most SW_SAMPLE_STREAM_MAX_IGNORE, else SW_EARG.
 * Before the first sample (the sink reads the list unlocked). */
#define SW_SAMPLE_STREAM_MAX_IGNORE 8
int sw_sample_stream_set_ignore(sw_sample_stream *st, const uint64_t *addrs, size_t n);
void sw_sample_stream_sink(void *stream, sw_sample *s);
/* Writes what is buffered. Returns 0 or the writer's error. */
int sw_sample_stream_flush(sw_sample_stream *st);
void sw_sample_stream_stats_get(const sw_sample_stream *st, sw_sample_stream_stats *out);
void sw_sample_stream_free(sw_sample_stream *st);

#endif
