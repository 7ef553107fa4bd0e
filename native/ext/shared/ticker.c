/*
 * ticker.c - a background pthread calling a function every interval
 * (ticker.h).
 */
#include "ticker.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

static void make_sync(sw_ticker *t)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, &a);
    pthread_condattr_destroy(&a);
    t->ready = 1;
}

/* Waits one interval; returns 1 if asked to stop meanwhile. */
static int wait_interval(sw_ticker *t)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double whole = (double)(long)t->interval_s;
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((t->interval_s - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        if (pthread_cond_timedwait(&t->cv, &t->mu, &deadline) == ETIMEDOUT)
            break;
    }
    int quit = t->stop;
    pthread_mutex_unlock(&t->mu);
    return quit;
}

static void *loop(void *arg)
{
    sw_ticker *t = arg;
    if (t->tick_first)
        t->tick(t->arg);
    while (!wait_interval(t))
        t->tick(t->arg);
    return NULL;
}

int sw_ticker_start(sw_ticker *t, double seconds, int tick_first, void (*tick)(void *), void *arg)
{
    if (t->running)
        return 0;
    if (!t->ready)
        make_sync(t);
    t->tick = tick;
    t->arg = arg;
    t->interval_s = seconds;
    t->tick_first = tick_first;
    t->stop = 0;
    /* Every signal blocked in the thread: a signal sent to the process goes
     * to one of the program's threads, as without stackwatch (one taken by
     * this thread would leave the main thread asleep in a blocking call while
     * its Python handler waited). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&t->thread, NULL, loop, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    t->running = 1;
    return 0;
}

void sw_ticker_stop(sw_ticker *t)
{
    if (!t->running)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(t->thread, NULL);
    Py_END_ALLOW_THREADS
    t->running = 0;
}

void sw_ticker_forget(sw_ticker *t)
{
    t->running = 0;
    t->stop = 0;
    make_sync(t);
}
