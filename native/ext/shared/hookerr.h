/*
 * hookerr.h - the first error a hook met. Hooks (the frame evaluator, the
 * sys.monitoring, trace and profile callbacks, the hand-over of events to
 * handlers, the flusher's start) never raise into the traced program: they
 * record what went wrong here, and the tracing session reports it when it
 * stops (TraceSummary.error, the END key hook_error). Called with the GIL.
 */
#ifndef SW_HOOKERR_H
#define SW_HOOKERR_H

/* Records `what` (copied, cut at 255 bytes) unless an error is recorded
 * already: the first one is the one reported. */
void sw_hook_error(const char *what);

/* Forgets the recorded error (a session starts). */
void sw_hook_error_reset(void);

/* The recorded error, or NULL if none. */
const char *sw_hook_error_message(void);

#endif
