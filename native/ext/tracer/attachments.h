/*
 * attachments.h - producers that write streams of their own into the
 * running tracing session's trace file, beside the threads' events: the
 * sampler's samples (stackwatch run --sample, SAMPLES chunks) today; the
 * kernel reader's and the native-function runtime's records next. Each
 * attaches to the session with the stream it writes and a way to stop it;
 * the session lends it its writer and clock origin, and detaches it when
 * it stops. Kept apart so that a producer (ext/sampler, ...) does not
 * depend on the session's internals, nor the session on the producers.
 *
 * Order (all with the GIL):
 *   start  a producer attaches while a session records (after
 *          sw_session_start), and writes only once sw_session_attach has
 *          returned the writer; one producer per stream.
 *   stop   when the session stops, sw_session_detach_all() calls each
 *          attachment's detach, the last attached first (a later one may
 *          rest on an earlier one), each stopping its producer and writing
 *          its last records; then the session writes END and closes the
 *          writer. So no record is ever written through a closed or freed
 *          writer, whatever order the Python layer stops things in.
 *   early  a producer that stops by itself (or is freed) writes its last
 *          records, then calls sw_session_detach(): its detach is not called
 *          again.
 *   fork   a forked child forgets the list (sw_session_attachments_forget,
 *          from sw_session_after_fork_child): the producers' threads stayed
 *          in the parent, and the parent's writer is abandoned there.
 */
#ifndef SW_ATTACHMENTS_H
#define SW_ATTACHMENTS_H

#include "trace/trace.h"

#define SW_ATTACH_MAX 8   /* producers attached at once */

typedef struct sw_attachment {
    const char *name;        /* what it is, for messages ("sampler") */
    unsigned stream;         /* the chunk type it writes (trace/format.h SW_CHUNK_*) */
    void (*detach)(void *ud);  /* stops it and writes its last records */
    void *ud;                /* its own, handed to detach */
} sw_attachment;

/* What sw_session_attach returns. */
#define SW_ATTACH_OK         0
#define SW_ATTACH_NO_SESSION 1   /* no session records */
#define SW_ATTACH_TAKEN      2   /* another producer writes that stream */
#define SW_ATTACH_FULL       3   /* SW_ATTACH_MAX producers are attached */

/* Attaches a producer (copied) to the running session: on SW_ATTACH_OK
 * sets *w to the session's writer and *mono0_ns to its CLOCK_MONOTONIC
 * origin (META mono0_ns); else leaves them. */
int sw_session_attach(const sw_attachment *a, sw_writer **w, uint64_t *mono0_ns);

/* Removes the attachments whose ud is `ud`, without calling their detach
 * (the producer stopped by itself). Nothing if there are none. */
void sw_session_detach(void *ud);

/* Detaches every attachment, the last attached first (the session stops,
 * before END). */
void sw_session_detach_all(void);

/* Forgets every attachment without calling anything (a forked child). */
void sw_session_attachments_forget(void);

#endif
