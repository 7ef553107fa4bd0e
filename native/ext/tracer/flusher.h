/*
 * flusher.h - the background thread that seals the pending records of
 * threads that record slowly, every flush interval (flusher.c). Called with
 * the GIL held.
 */
#ifndef SW_FLUSHER_H
#define SW_FLUSHER_H

/* Starts it (seconds > 0; 0 = off). Returns 0; a thread that cannot be
 * started is recorded as the session's error, not raised. */
int sw_flusher_start(double seconds);
/* Stops and joins it (the session stops). */
void sw_flusher_stop(void);
/* Around fork(): stopped before, restarted after in the parent. */
void sw_flusher_pause(void);
void sw_flusher_resume(void);
/* The child after fork(): the thread does not exist there. */
void sw_flusher_forget(void);

#endif
