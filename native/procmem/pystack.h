/*
 * pystack.h - reading the Python stacks of every thread of an interpreter
 * from memory, without the GIL and without the target's cooperation:
 * interpreter -> thread states -> frames -> code objects, through the
 * offsets of an sw_py_layout and the fault-safe reads of mem.h.
 *
 * The target keeps running while it is read, so what is read may be torn
 * or freed under the reader: every pointer is checked (the thread state
 * must point back to the interpreter, a frame's code must be a code
 * object), every walk is bounded (threads, depth, string length), and a
 * stack that cannot be read whole is counted as failed, never reported.
 *
 * An sw_pystack is used by one thread at a time (the sampler's).
 */
#ifndef SW_PYSTACK_H
#define SW_PYSTACK_H

#include "base/base.h"
#include "layout.h"
#include "mem.h"
#include "symbols.h"

#define SW_PYSTACK_MAX_DEPTH_LIMIT 16384u
#define SW_PYSTACK_MAX_THREADS_LIMIT 65536u

typedef struct sw_pystack_limits {
    uint32_t max_threads;    /* thread states visited per sample round */
    uint32_t max_depth;      /* frames kept per stack (leaf-most); deeper stacks are truncated */
    uint32_t max_codes;      /* code objects cached before the cache is emptied */
    uint32_t code_ttl;       /* a cached code object is re-read (confirmed) at most every
                                code_ttl + 1 rounds; 0 = every round it is seen */
    uint32_t thread_states;  /* 1: give each sample its thread's state, CPU time and
                                GIL ownership (threadstate.h; ~1-3 us per thread) */
    uint32_t lines;          /* 1: give each sample the line each frame is running
                                (sw_sample.lines; needs layout.linetable_kind) */
    uint32_t native;         /* 1: merge each thread's native frames into its stack
                                (this process: captured by a signal handler,
                                nativestack.h, which the caller installs; another
                                process: each thread stopped with ptrace while it is
                                read, and unwound from outside, unwind.h; a core:
                                unwound from its registers) */
    uint32_t frame_addrs;    /* 1: give each sample the address of each of its frames
                                (sw_sample.frame_addrs; not with native frames merged) */
    uint32_t park;           /* 1: a torn walk is redone with the thread parked (in-process
                                only: nativestack.h; the caller installs the handler with
                                sw_nstack_park_install), and the checks are strict */
    uint32_t park_always;    /* (tests, benches) with park: 0, the thread holding the GIL is
                                parked before its walk when its walks have been tearing
                                (pystack.c "Parking ahead"); 1, it always is, not only
                                after a torn walk, and waits as long; 2 (tests), its park
                                is counted as not answered, no signal sent: every such
                                sample takes the unparked walk that follows a failed park
                                (after_park); 3 (benches), never: parked only after a
                                torn walk */
    uint32_t cpu_every;      /* with thread_states, > 1: a thread's CPU time is read every
                                cpu_every rounds only (sw_threadstate_set_cpu_every), for
                                samples whose CPU time only adds up per thread (wall mode);
                                0 or 1: every round */
    uint32_t skip_idle;      /* with thread_states, without native: a thread not holding the
                                GIL is probed before its walk, and when idle it is not
                                walked: its sample goes to the sink flagged
                                SW_SAMPLE_NOT_WALKED (for a sink that leaves idle threads'
                                samples out) */
    uint32_t blocking;       /* another process: every thread of it stopped with ptrace
                                (freeze.h) for the whole of each round and let go after,
                                so no stack read can be torn; with native, the unwinder
                                reads the threads so stopped */
    uint32_t fail_every;     /* (tests) > 0: every fail_every-th walk of a thread's stack is
                                counted and reported as failed, as one torn after its retries */
    uint32_t native_lines;   /* with native and lines, this process: native frames get their
                                pc's source line too, and their functions their sources,
                                when looked up (sw_symbols_new_lines; another process's
                                always do) */
} sw_pystack_limits;

typedef struct sw_pystack_stats {
    uint64_t rounds;         /* calls of sw_pystack_sample_all */
    uint64_t samples;        /* stacks read whole and given to the sink */
    uint64_t failed;         /* stacks (or thread lists) that could not be read */
    uint64_t empty;          /* threads with no Python frame at that instant */
    uint64_t truncated;      /* stacks cut at max_depth */
    uint64_t retried;        /* walks redone: a frame died, or the walk was torn, while read */
    uint64_t torn;           /* walks torn: a generator left, or a chain broke, under the
                                reader (pystack.c "Torn stacks"); each is redone, and
                                counted in failed if still torn after the retries */
    uint64_t unfit;          /* 3.11+: walks whose frames did not fit their code objects'
                                frame sizes (pystack.c "Frames that fit"): torn, counted in
                                failed */
    uint64_t half_made;      /* 3.11/3.12: walks torn at a run of the interpreter half made
                                (pystack.c "Runs half made"): redone, or failed */
    uint64_t parked;         /* with limits.park: walks redone with the thread parked */
    uint64_t park_failed;    /* ... threads that did not park in time (then walked unparked:
                                after_park) */
    uint64_t parked_ns;      /* ... time from each park request to its release */
    uint64_t after_park;     /* ... samples read whole by an unparked walk after their park
                                failed (not answered in time, or its walk not whole) */
    uint64_t parked_ahead;   /* ... of them parked before any unparked walk (a thread whose
                                walks have been tearing, pystack.c "Parking ahead", or
                                limits.park_always) */
    uint64_t threads_skipped;   /* threads beyond max_threads */
    uint64_t muted_failed;   /* in-process: failed samples of a thread whose parks were stopped
                                for a while (muted: its parks kept failing, or it blocked the
                                signal), walked unparked and checked strictly */
    uint64_t relisted;       /* times a round's walk of the thread list met a thread state
                                freed under it and read the list again from its head (up
                                to 8 times a round: pystack.c sample_round) */
    uint64_t returned;       /* 3.11/3.12, in-process: unparked walks whose leaf rested on a
                                return instruction, treated as torn (pystack.c "Returned
                                frames"; counted in torn too) */
    uint64_t read_by_thread;   /* in-process: parked walks made from one read the thread made
                                  itself in the signal handler, not parked (pystack.c
                                  walk_read_by_thread; counted in parked too) */
    uint64_t read_short;     /* ... such reads that did not hold the whole walk: the thread
                                then parked */
    uint64_t code_hits, code_misses;
    uint64_t codes_by_counter;   /* code objects of walks whose header was not read again: the
                                    target made no code object since it was confirmed
                                    (sw_pystack_set_code_counter) */
    uint64_t checked_ahead;  /* 3.11+ from outside: walks checked with no read of their own, the
                                check's bytes read with the walk's (pystack.c "Checked ahead") */
    uint64_t reads, failed_reads;   /* memory reads (system calls) */
    uint64_t state_unknown;  /* thread states that could not be told (no kernel thread id,
                                or the kernel did not say) */
    uint64_t cpu_unknown;    /* CPU times that could not be read */
    uint64_t gil_unknown;    /* rounds in which the GIL could not be read */
    uint64_t native;         /* native mode: samples with native frames merged in */
    uint64_t native_failed;  /* native mode: samples whose native stack could not be captured */
    uint64_t native_stopped_ns;   /* another process's native mode: time its threads were
                                     stopped, in all (unwind.h) */
    uint64_t native_by_fp;   /* ... frames whose caller was found by frame pointers */
    uint64_t blocked_rounds; /* limits.blocking: rounds read with the process stopped */
    uint64_t block_failed;   /* ... rounds not read: the stop failed (sw_pystack_block_error);
                                each is counted in failed too */
    uint64_t blocked_ns;     /* ... time from the start of each stop to the end of its
                                release, in all */
    char block_error[384];   /* ... why the last stop failed, or "" */
} sw_pystack_stats;

typedef struct sw_pystack sw_pystack;

/* A reader of the interpreter at interp_addr in process pid. The layout is
 * validated and copied. probe_addr/probe_len: memory known to be readable,
 * to check that reading works. Returns NULL with a reason in err. */
sw_pystack *sw_pystack_new(const sw_py_layout *l, int pid, uint64_t interp_addr, const sw_pystack_limits *lim,
                           uint64_t probe_addr, size_t probe_len, char *err, size_t errlen);
/* The same over the memory of a core file's process (coremem.h; it must
 * outlive the reader): without thread states; native frames unwound from
 * the core's registers. */
struct sw_coremem;
sw_pystack *sw_pystack_new_core(const sw_py_layout *l, struct sw_coremem *core, uint64_t interp_addr,
                                const sw_pystack_limits *lim, char *err, size_t errlen);
void sw_pystack_free(sw_pystack *r);

/* Reads the stack of every thread once and passes each to sink, stamped
 * t_ns and weight_ns (see sw_sample), and with limits.thread_states its
 * state, CPU time since the previous round, and whether it held the GIL:
 * the GIL's `locked` and `last_holder` are read once per round, first; a
 * thread is its holder if it is last_holder while the GIL is locked. Returns the number of samples given
 * to the sink, or SW_EIO if the thread list itself could not be read. */
int sw_pystack_sample_all(sw_pystack *r, int64_t t_ns, uint64_t weight_ns, sw_sample_sink sink, void *ud);

void sw_pystack_get_stats(const sw_pystack *r, sw_pystack_stats *out);

/* The sampling starts now: with limits.thread_states, each thread's CPU
 * time is read, so that its first sample gives the CPU time it used since
 * (sw_threadstate_mark_start). */
void sw_pystack_mark_start(sw_pystack *r);

/* Native mode in this process: the source lines of the native frames'
 * functions, found now (sw_symbols_sources_later). Not while r samples. */
void sw_pystack_native_sources(sw_pystack *r, sw_symbols_source_fn fn, void *ud);

/* With limits.native_lines: reads now the line tables of
 * the object holding code address addr (sw_symbols_source), which the
 * first sample naming a function of it would read on the sampling thread
 * otherwise (libpython's, libc's debug file's: most of a second there
 * under load). Not while r samples. */
void sw_pystack_native_lines_ahead(sw_pystack *r, uint64_t addr);

/* 3.11+, without native frames (this process too): addr is the target's
 * counter of code objects made (sw_target_code_counter), read after each
 * walk's frames, so that the code objects' headers are read again only
 * after it moved (pystack.c "Code objects by counter"); interps (3.13, or
 * 0) the count of interpreters made, read after it: the counter is
 * trusted only while that count is 1. 0, or SW_EARG (not used: another
 * reader, or unreadable). */
int sw_pystack_set_code_counter(sw_pystack *r, uint64_t addr, uint64_t interps);

/* Native mode from outside: why a thread's native stack could not be
 * read (the last such reason: it could not be stopped, unwind.h), or ""
 * if none failed so. */
const char *sw_pystack_native_error(const sw_pystack *r);

/* limits.blocking: 0 if the calling thread may stop process pid's thread
 * pid with ptrace (it is stopped and let go at once), else SW_EIO with the
 * reason in err (freeze.h's words: permission, and what grants it;
 * already traced). For a check before sampling starts. */
int sw_pystack_block_check(int pid, char *err, size_t errlen);

#endif
