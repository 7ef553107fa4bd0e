/*
 * ticker.h - a background pthread that calls a function every interval
 * until it is stopped: the file tracer's flusher (ext/tracer/flusher.c)
 * and the USDT probes' semaphore watcher (ext/dispatch/probes.c) are two.
 *
 * The thread waits on a condition variable with CLOCK_MONOTONIC deadlines,
 * so sw_ticker_stop() wakes it at once. The tick runs on that thread
 * without the GIL (it takes what it needs itself). A ticker is
 * zero-initialised static storage; one start, one stop, and so on.
 */
#ifndef SW_EXT_TICKER_H
#define SW_EXT_TICKER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>   /* first, as in every file of native/ext */

#include <pthread.h>

typedef struct sw_ticker {
    void (*tick)(void *arg);
    void *arg;
    double interval_s;
    int tick_first;          /* call tick once at start, before the first wait */
    int running;
    int stop;
    int ready;               /* mutex and condition variable made */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} sw_ticker;

/* Starts the thread: tick(arg) every `seconds` (first at once when
 * tick_first). Returns 0, or -1 if the thread could not be made (nothing
 * runs then). Nothing happens if it runs already. */
int sw_ticker_start(sw_ticker *t, double seconds, int tick_first, void (*tick)(void *), void *arg);

/* Stops the thread and joins it, releasing the GIL while it waits (call it
 * with the GIL held). Nothing happens if it is not running. */
void sw_ticker_stop(sw_ticker *t);

/* The child after fork(): the thread does not exist there; the ticker is
 * made new (its mutex may have been copied held). */
void sw_ticker_forget(sw_ticker *t);

#endif
