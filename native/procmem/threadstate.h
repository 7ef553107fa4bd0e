/*
 * threadstate.h - what an OS thread is doing and how much CPU it has used,
 * asked of the kernel by thread id: the part of a sample that the
 * interpreter's memory cannot tell. Linux only; works for the own process
 * and (with ptrace permission, as for reading its memory) another one.
 *
 * The state comes from one read of /proc/PID/task/TID/syscall, which the
 * kernel answers with "running" for a thread that is on a CPU or runnable,
 * and else with the system call the thread sleeps in and its arguments:
 *
 *   running or runnable                              -> SW_STATE_RUNNING
 *   asleep in futex() on an address inside the GIL   -> SW_STATE_GIL_WAIT
 *     (the GIL's mutex and condition variables live in its struct: a thread
 *     in take_gil(), or one that dropped it on request and waits for the
 *     switch, sleeps on one of them)
 *   asleep in anything else (or blocked outside a system call)
 *                                                    -> SW_STATE_IDLE
 *   the file cannot be read or parsed                -> SW_STATE_UNKNOWN
 *
 * So a thread running C code with the GIL released (hashlib on big data,
 * zlib, numpy) is running, like one running Python code.
 *
 * CPU time: in the own process the thread's CPU-time clock (clock_gettime
 * on the clock id the kernel derives from the thread id, ns-exact); for
 * another process the first field of /proc/PID/task/TID/schedstat.
 *
 * The syscall file of each thread (and for another process its schedstat
 * file) is kept open and read again with pread (at most max_fds
 * descriptors in all; further threads open and close them per probe),
 * O_CLOEXEC. A descriptor is
 * only ever closed after fstat() shows it is still that file, so a program
 * that closed it and reused the number keeps its own file.
 *
 * Used by one thread at a time (the sampler's).
 */
#ifndef SW_THREADSTATE_H
#define SW_THREADSTATE_H

#include "base/base.h"

typedef struct sw_threadstate sw_threadstate;

typedef struct sw_threadstate_stats {
    uint64_t probes;         /* calls of sw_threadstate_probe */
    uint64_t unknown;        /* probes whose state could not be read */
    uint64_t no_cpu;         /* probes whose CPU time could not be read */
    uint64_t opens;          /* files opened */
} sw_threadstate_stats;

/* A prober of the threads of process pid. NULL if out of memory. */
sw_threadstate *sw_threadstate_new(int pid, uint32_t max_fds);
void sw_threadstate_free(sw_threadstate *t);

/* Reads the CPU time of every thread of the process now, the sampling's
 * start: a thread's first probe then gives the CPU time it used since,
 * not 0 (a thread that computes from the start, the sampler's first round
 * late on a loaded machine: its first tens of ms of CPU time were lost),
 * and a thread not read then, born since, is new even in the first round
 * (all its CPU time counts).
 * Returns the number of threads read, or -1 if the list could not be. */
int sw_threadstate_mark_start(sw_threadstate *t);

/* The state of thread `tid` now (SW_STATE_*), given the GIL's bytes
 * [gil_lo, gil_hi) in the target (both 0: GIL waits are not told apart
 * from other sleeps). *cpu_delta receives the CPU time the thread used
 * since the previous probe of that tid (or since sw_threadstate_mark_start),
 * or SW_NO_CPU. Else (no mark) a thread probed for
 * the first time in the first round anyone was probed gets 0 (its earlier
 * CPU time predates the sampling); one first probed later is new, and all
 * its CPU time counts. `round` increases by one per sampling round. */
uint32_t sw_threadstate_probe(sw_threadstate *t, uint32_t tid, uint64_t round, uint64_t gil_lo, uint64_t gil_hi,
                              uint64_t *cpu_delta);

/* As sw_threadstate_probe for a thread known to be running (it holds the
 * GIL): SW_STATE_RUNNING, its state file not read, only its CPU time. */
uint32_t sw_threadstate_probe_running(sw_threadstate *t, uint32_t tid, uint64_t round, uint64_t *cpu_delta);

/* From now on a thread's CPU time is read only when `every` rounds have
 * passed since it was last read (every > 1), else every round: the probes
 * in between give a delta of 0 and the next read all the CPU time since
 * the last (so the sum over a thread's probes stays exact, up to its last
 * read), for callers that only add the deltas up (a profile by wall
 * time): reading schedstat costs a system call (~1 us) per thread. */
void sw_threadstate_set_cpu_every(sw_threadstate *t, uint32_t every);

/* stopped 1: the reader has stopped every thread of the process with
 * ptrace (freeze.h) for the probes that follow; a thread stopped outside a
 * system call (the kernel's syscall file says "-1" for it, as for one
 * blocked outside a system call) was running or runnable, so it is
 * SW_STATE_RUNNING. One stopped inside a system call shows that call,
 * which it goes on with when let go: told as before. */
void sw_threadstate_set_stopped(sw_threadstate *t, int stopped);

/* Forgets the threads not probed in `round` (they have ended, or their
 * thread state is gone) and closes their files. */
void sw_threadstate_sweep(sw_threadstate *t, uint64_t round);

void sw_threadstate_get_stats(const sw_threadstate *t, sw_threadstate_stats *out);

/* Parses the text of /proc/PID/task/TID/syscall (exposed for the tests). */
uint32_t sw_threadstate_parse(const char *text, uint64_t gil_lo, uint64_t gil_hi);

#endif
