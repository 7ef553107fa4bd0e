/*
 * perf_syscalls.h - the kernel's events of this process's threads: system
 * calls (raw_syscalls:sys_enter / sys_exit tracepoints), scheduler
 * switches (sched:sched_switch for the reason a thread leaves its CPU, and
 * PERF_RECORD_SWITCH for when it comes back, with every task's sched_switch
 * on each CPU for the task it took the CPU from; a thread's first switch
 * in too, with no switch out before it), wakeups (sched:sched_waking, in
 * the waker; sched:sched_wakeup_new, a new thread by the one starting it)
 * and page faults (the software event PERF_COUNT_SW_PAGE_FAULTS, every
 * one), as asked by a mask of SW_KERNEL_*.
 *
 * sw_syscalls_open() opens, for each online CPU, one perf event per
 * event source on this process with `inherit` (the threads it starts later
 * are counted too; one ring per process with inherit cannot be mapped, so
 * the rings are per CPU: the exit event of a CPU writes into the ring of
 * its enter event), and the same for each thread that already runs
 * (their events go to the same rings). Records carry CLOCK_MONOTONIC
 * times (use_clockid). sw_syscalls_start() starts a thread that reads the
 * rings, pairs each thread's enter with its exit, and hands every finished
 * call and every other event to the sink, each thread's in the order of
 * their times (a system call at its entry time, after its exit was read;
 * the events inside it are held until then); records of other processes (children
 * inherit the events) and of the reading thread itself are left out.
 * PERF_RECORD_LOST records (the ring was full) are counted and handed to
 * the sink's `lost`. Every record read from a ring is bounded by the ring
 * and validated against the tracepoints' formats (read once from tracefs)
 * before use.
 *
 * The sink runs on the reading thread (and, at stop, on the caller's).
 */
#ifndef SW_PERF_SYSCALLS_H
#define SW_PERF_SYSCALLS_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sw_syscall {
    uint32_t tid;            /* the calling thread (kernel tid) */
    long nr;                 /* its number */
    const char *name;        /* its name (syscall_names.h), or NULL */
    int64_t ret;             /* what it returned (negative: -errno) */
    uint64_t enter_ns, exit_ns;  /* CLOCK_MONOTONIC */
} sw_syscall;

/* What to read (a mask). */
#define SW_KERNEL_SYSCALLS 1u
#define SW_KERNEL_SCHED    2u   /* switches (off-CPU intervals) and wakeups */
#define SW_KERNEL_FAULTS   4u

/* A kernel event other than a system call. */
enum sw_kevent_kind {
    SW_KEV_OFF_CPU = 1,      /* the thread left CPU `cpu`; a: prev_state, reason: its name; peer, comm:
                                the task that runs next (sched_switch's next_pid, next_comm; 0, "":
                                unprivileged, not seen) */
    SW_KEV_ON_CPU,           /* the thread runs (again) on CPU `cpu`: after an OFF_CPU, or as its
                                first record (a thread started since: its first run, a: the
                                thread that started it, b: ns since; one that was off CPU at
                                the start); a: the tid of the thread of
                                this process that woke it last while it was off (0: none seen),
                                b: ns from that wakeup to now; peer, comm: the task that ran before
                                it there (sched_switch's prev_pid, prev_comm, any process's; 0, "":
                                unprivileged, not seen) */
    SW_KEV_WAKEUP,           /* the thread woke thread `a` (which should run on CPU `cpu`), named comm */
    SW_KEV_FAULT,            /* a page fault at address a, on CPU `cpu` */
};
typedef struct sw_kevent {
    uint32_t tid;
    uint32_t kind;           /* enum sw_kevent_kind */
    uint32_t cpu;
    uint64_t t_ns;           /* CLOCK_MONOTONIC */
    uint64_t a, b;
    const char *reason;      /* OFF_CPU: "sleeping" (S), "blocked" (D), "preempted" (R), else "other";
                                unprivileged: "preempted" or "waiting" (S or D), a 0 */
    uint32_t peer;           /* OFF_CPU: the task that runs next on the CPU (any process's; 0: idle);
                                ON_CPU: the task that ran before */
    char comm[16];           /* OFF_CPU, ON_CPU: that task's name; WAKEUP: the wakee's ("": not seen); printable
                                ASCII, any other byte made '?' */
} sw_kevent;

typedef struct sw_syscall_sink {
    void (*syscall)(void *ud, const sw_syscall *s);
    void (*event)(void *ud, const sw_kevent *e);   /* NULL: not asked */
    /* `count` records were lost at about mono_ns (0: unknown), in the
     * ring of a CPU. */
    void (*lost)(void *ud, uint64_t mono_ns, uint64_t count);
    void *ud;
} sw_syscall_sink;

typedef struct sw_syscalls_stats {
    uint64_t records;        /* enter and exit records read */
    uint64_t calls;          /* calls handed to the sink */
    uint64_t lost;           /* records the kernel lost (rings full) */
    uint64_t unpaired;       /* enters without exit, exits without enter */
    uint64_t unfinished;     /* calls still running when reading stopped */
    uint64_t malformed;      /* records that failed validation */
    uint64_t off_cpu, wakeups, faults;   /* events handed to the sink */
    unsigned cpus;           /* rings */
} sw_syscalls_stats;

typedef struct sw_syscalls sw_syscalls;

/* Opens the events `what` asks for (SW_KERNEL_*) and maps the rings
 * (ring_bytes per CPU, rounded to a power of two pages; 0: 512 KiB). On failure returns a negative code and
 * writes one line into err saying what is missing (e.g. root or
 * CAP_PERFMON and the perf_event_paranoid level). When tracefs was not
 * mounted and could be, it is mounted at /sys/kernel/tracing and `note`
 * says so (else note is ""). Without the privilege, sched and faults (not
 * system calls) fall back to what a process may always see of itself:
 * its threads' own switch records (PERF_RECORD_SWITCH of a dummy event:
 * preempted or waiting, no wakeups) and its page faults in user mode;
 * `note` then says what was refused and what is recorded instead. */
int sw_syscalls_open(sw_syscalls **out, unsigned what, size_t ring_bytes, char *err, size_t errlen, char *note, size_t notelen);
/* Starts the reading thread. Returns 0 or a negative code. */
int sw_syscalls_start(sw_syscalls *s, const sw_syscall_sink *sink);
/* Stops the thread after reading everything the rings hold; calls still
 * running are counted as unfinished. The sink is not called after. */
void sw_syscalls_stop(sw_syscalls *s);
/* The reason a thread left its CPU, from sched_switch's prev_state. */
const char *sw_sched_reason(uint64_t prev_state);
void sw_syscalls_stats_get(sw_syscalls *s, sw_syscalls_stats *out);
/* Closes the events (stops first if needed). NULL is fine. */
void sw_syscalls_free(sw_syscalls *s);

#endif
