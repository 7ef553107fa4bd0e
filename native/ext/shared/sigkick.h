/*
 * sigkick.h - makes sure the Python handler that stands in for a fatal
 * signal's default action (stackwatch/tracer/signals.py) runs.
 *
 * CPython's C handler only notes a signal; the Python handler runs when the
 * main thread next checks. A signal that comes just before the main thread
 * enters a blocking call that does not return on its own (a multiprocessing
 * pool worker waiting for a lock its parent holds while it terminates the
 * pool) would then wait for ever, where the default action killed at once.
 * Armed for a signal, a C handler of ours calls CPython's, then starts a
 * timer that sends the signal again to the main thread every 20 ms: the
 * blocking call returns with EINTR, and CPython runs the Python handler,
 * which stops the timer (sw_sigkick_disarm) before anything else.
 */
#ifndef SW_EXT_SIGKICK_H
#define SW_EXT_SIGKICK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>   /* first, as in every file of native/ext */

/* Adds _sigkick_arm(sig), _sigkick_disarm() and _sigkick_after_fork() to
 * the module. Returns 0, or -1 with an exception set. */
int sw_sigkick_add_to_module(PyObject *m);

#endif
