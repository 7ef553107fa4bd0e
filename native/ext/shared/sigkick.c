/*
 * sigkick.c - the nudge that makes a fatal signal's Python stand-in
 * handler run even when the main thread blocks first (sigkick.h).
 */
#include "sigkick.h"
#include "base/base.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KICK_NS 20000000L   /* 20 ms between kicks */

static struct sigaction python_action[NSIG];  /* CPython's, called first */
static timer_t timers[NSIG];
static volatile sig_atomic_t have_timer[NSIG];
static volatile sig_atomic_t armed[NSIG];
static volatile sig_atomic_t kicking;

/* The timer of `sig`, aimed at the calling thread (the main thread). */
static void make_timer(int sig)
{
    have_timer[sig] = sw_clock_thread_timer(sig, &timers[sig]) == 0;
}

static void set_timers(long ns)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_nsec = ns;
    its.it_interval.tv_nsec = ns;
    for (int s = 1; s < NSIG; s++)
        if (have_timer[s])
            timer_settime(timers[s], 0, &its, NULL);  /* async-signal-safe */
}

static void on_signal(int sig, siginfo_t *info, void *context)
{
    int saved = errno;
    struct sigaction *pa = &python_action[sig];
    if (pa->sa_flags & SA_SIGINFO)
        pa->sa_sigaction(sig, info, context);
    else if (pa->sa_handler != SIG_DFL && pa->sa_handler != SIG_IGN)
        pa->sa_handler(sig);
    if (armed[sig] && have_timer[sig] && !kicking) {
        kicking = 1;
        struct itimerspec its;
        memset(&its, 0, sizeof its);
        its.it_value.tv_nsec = KICK_NS;
        its.it_interval.tv_nsec = KICK_NS;
        timer_settime(timers[sig], 0, &its, NULL);
    }
    errno = saved;
}

/* _sigkick_arm(sig): CPython's handler of `sig` (installed by
 * signal.signal just before) is wrapped by ours. Called in the main thread. */
static PyObject *py_arm(PyObject *self, PyObject *arg)
{
    (void)self;
    long sig = PyLong_AsLong(arg);
    if (sig == -1 && PyErr_Occurred())
        return NULL;
    if (sig <= 0 || sig >= NSIG) {
        PyErr_SetString(PyExc_ValueError, "signal number out of range");
        return NULL;
    }
    struct sigaction current;
    if (sigaction((int)sig, NULL, &current) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL)
        Py_RETURN_FALSE;      /* nothing of CPython's to wrap */
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_signal)
        Py_RETURN_TRUE;       /* armed already */
    python_action[sig] = current;
    if (!have_timer[sig])
        make_timer((int)sig);
    struct sigaction ours = current;
    ours.sa_sigaction = on_signal;
    ours.sa_flags = (current.sa_flags & SA_ONSTACK) | SA_SIGINFO;
    armed[sig] = 1;
    if (sigaction((int)sig, &ours, NULL) != 0) {
        armed[sig] = 0;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_TRUE;
}

/* _sigkick_disarm(): no more kicks (the Python handler runs, or stackwatch
 * stands in no longer). */
static PyObject *py_disarm(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    set_timers(0);
    kicking = 0;
    Py_RETURN_NONE;
}

/* _sigkick_after_fork(): in the child, whose timers were not inherited and
 * whose main thread is another: new timers for the armed signals. */
static PyObject *py_after_fork(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    kicking = 0;
    for (int s = 1; s < NSIG; s++) {
        have_timer[s] = 0;
        if (armed[s])
            make_timer(s);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"_sigkick_arm", py_arm, METH_O, "_sigkick_arm(sig) -> bool: wrap CPython's handler of sig"},
    {"_sigkick_disarm", py_disarm, METH_NOARGS, "_sigkick_disarm(): stop the kicks"},
    {"_sigkick_after_fork", py_after_fork, METH_NOARGS, "_sigkick_after_fork(): timers of the child"},
    {NULL, NULL, 0, NULL},
};

int sw_sigkick_add_to_module(PyObject *m)
{
    return PyModule_AddFunctions(m, methods);
}
