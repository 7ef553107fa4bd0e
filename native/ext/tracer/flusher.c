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

#include <errno.h>
#include <time.h>

static pthread_t thread;
static int running;
static int stop_requested;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int cv_ready;
static double interval_s;

static void *loop(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        double whole = (double)(long)interval_s;
        deadline.tv_sec += (time_t)whole;
        deadline.tv_nsec += (long)((interval_s - whole) * 1e9);
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&mu);
        while (!stop_requested) {
            int rc = pthread_cond_timedwait(&cv, &mu, &deadline);
            if (rc == ETIMEDOUT)
                break;
        }
        int quit = stop_requested;
        pthread_mutex_unlock(&mu);
        if (quit)
            break;
        PyGILState_STATE g = PyGILState_Ensure();
        pthread_mutex_lock(&sw_S.lock);
        if (sw_S.gen && sw_S.w)
            sw_writer_flush_quiet(sw_S.w);
        pthread_mutex_unlock(&sw_S.lock);
        PyGILState_Release(g);
    }
    return NULL;
}

int sw_flusher_start(double seconds)
{
    if (running || seconds <= 0)
        return 0;
    if (!cv_ready) {
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&cv, &a);
        pthread_condattr_destroy(&a);
        cv_ready = 1;
    }
    interval_s = seconds;
    stop_requested = 0;
    if (pthread_create(&thread, NULL, loop, NULL) != 0) {
        sw_hook_error("could not start the background flusher (events are written when buffers fill)");
        return 0;
    }
    running = 1;
    return 0;
}

void sw_flusher_stop(void)
{
    if (!running)
        return;
    pthread_mutex_lock(&mu);
    stop_requested = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(thread, NULL);
    Py_END_ALLOW_THREADS
    running = 0;
}

/* Around fork(): CPython 3.12+ warns when a process with more than one OS
 * thread forks, so the flusher is stopped before and restarted after, in
 * the parent. */
static double paused_interval;

void sw_flusher_pause(void)
{
    paused_interval = running ? interval_s : 0;
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
    running = 0;
    pthread_mutex_init(&mu, NULL);
    cv_ready = 0;
}
