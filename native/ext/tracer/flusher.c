/*
 * flusher.c - a background thread that, every flush interval, seals the
 * pending records of threads that have not sealed a chunk by themselves,
 * so that events reach the file even when a thread records slowly and a
 * process killed by a signal (SIGTERM, SIGKILL) loses at most one interval.
 *
 * It holds the GIL while flushing (no hook can append then) and the
 * session lock (so does a thread flushing itself at exit). It is stopped
 * and joined by stop() and before fork() (restarted after, in the parent:
 * CPython 3.12+ warns when a multi-threaded process forks); a forked child
 * simply forgets it.
 */
#include "flusher.h"

#include "ext/shared/hookerr.h"
#include "ext/tracer/session.h"
#include "ext/shared/ticker.h"

static sw_ticker ticker;

static void flush_tick(void *arg)
{
    (void)arg;
    PyGILState_STATE g = PyGILState_Ensure();
    pthread_mutex_lock(&sw_S.lock);
    if (sw_S.gen && sw_S.w)
        sw_writer_flush_quiet(sw_S.w);
    pthread_mutex_unlock(&sw_S.lock);
    PyGILState_Release(g);
}

int sw_flusher_start(double seconds)
{
    if (ticker.running || seconds <= 0)
        return 0;
    if (sw_ticker_start(&ticker, seconds, 0, flush_tick, NULL) != 0)
        sw_hook_error("could not start the background flusher (events are written when buffers fill)");
    return 0;
}

void sw_flusher_stop(void)
{
    sw_ticker_stop(&ticker);
}

/* Around fork(): CPython 3.12+ warns when a process with more than one OS
 * thread forks, so the flusher is stopped before and restarted after, in
 * the parent. */
static double paused_interval;

void sw_flusher_pause(void)
{
    paused_interval = ticker.running ? ticker.interval_s : 0;
    sw_flusher_stop();
}

void sw_flusher_resume(void)
{
    if (paused_interval > 0 && sw_S.gen)
        sw_flusher_start(paused_interval);
    paused_interval = 0;
}

void sw_flusher_forget(void)
{
    /* The child after fork(): the thread does not exist here. */
    sw_ticker_forget(&ticker);
}
