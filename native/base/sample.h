/*
 * sample.h - the record a statistical sampler produces: one Python stack of
 * one thread at one instant. Plain data, no Python.h: the producer (the
 * memory reader in native/procmem) and the consumers (the call-tree
 * aggregator in profile.c, later other sinks) share only these types.
 */
#ifndef SW_SAMPLE_H
#define SW_SAMPLE_H

#include "common.h"

/* What is known about one code object (one Python function). The strings
 * are UTF-8, NUL-terminated, owned by the producer's code cache and valid
 * only during the sink call that received them. */
typedef struct sw_sample_code {
    uint64_t addr;           /* the code object's address in the target */
    const char *name;        /* qualified name where the version has one */
    const char *filename;
    uint32_t name_len, filename_len;
    int32_t firstlineno;
    /* A slot the consumer may use to cache its own id for this code object
     * (e.g. a function-table id). The producer sets it to SW_NO_ID whenever
     * the entry is (re)built, and never reads it. */
    uint32_t sink_id;
    /* A native frame named from its library's debug information: the
     * library (filename and firstlineno are then the function's source
     * file and line). NULL otherwise. */
    const char *library;
} sw_sample_code;

#define SW_NO_ID 0xffffffffu

/* A native (C) frame of the profiler's native mode is an sw_sample_code
 * too (native/procmem/symbols.h): named "symbol [native]", its shared
 * object as filename, first line 0; or, where the object's DWARF line
 * tables give the function's source (another process's frames), its
 * source file and line, the object as library. */
#define SW_NATIVE_SUFFIX " [native]"
#define SW_NATIVE_SUFFIX_LEN 9u

static inline int sw_sample_code_is_native(const sw_sample_code *c)
{
    const uint32_t k = SW_NATIVE_SUFFIX_LEN;
    if ((c->firstlineno != 0 && !c->library) || c->name_len <= k)
        return 0;
    for (uint32_t i = 0; i < k; i++)
        if (c->name[c->name_len - k + i] != SW_NATIVE_SUFFIX[i])
            return 0;
    return 1;
}

/* sw_sample.flags */
#define SW_SAMPLE_TRUNCATED 1u   /* the stack was deeper than the walk bound:
                                    frames[] holds the leaf-most frames */
#define SW_SAMPLE_FAILED 2u      /* the thread's stack could not be read this
                                    time (depth 0): only the thread id, time,
                                    weight, state and CPU time are valid */
#define SW_SAMPLE_GIL_HELD 4u    /* the thread held the GIL (as read at the
                                    start of the sampling round) */
#define SW_SAMPLE_NOT_WALKED 8u  /* an idle thread whose samples are left out,
                                    its stack not read (depth 0; the reader's
                                    limits.skip_idle) */

/* sw_sample.state: what the thread was doing when it was sampled, from the
 * kernel's view of it (see native/procmem/threadstate.h for the rule).
 * One table, S(STATE, number, name), gives the SW_STATE_* numbers (stored
 * in profiles and traces), the names every export and the Python view use
 * (sw_thread_state_name, _native.THREAD_STATES), in the order views list
 * them:
 *   RUNNING   on a CPU or runnable: Python code, or C code with or without
 *             the GIL
 *   GIL_WAIT  asleep waiting to take the GIL
 *   IDLE      asleep in any other blocking call (sleep, I/O, a lock, a
 *             join, select, ...)
 *   UNKNOWN   could not be told (counted, treated as running) */
#define SW_THREAD_STATES(S)   \
    S(RUNNING, 1u, running)   \
    S(GIL_WAIT, 2u, gil_wait) \
    S(IDLE, 3u, idle)         \
    S(UNKNOWN, 0u, unknown)
#define SW_X_STATE_NUM_(K, n, name) SW_STATE_##K = n,
enum { SW_THREAD_STATES(SW_X_STATE_NUM_) };
#define SW_X_STATE_ONE_(K, n, name) +1
#define SW_STATE_COUNT (0u SW_THREAD_STATES(SW_X_STATE_ONE_))

/* The name of a state ("running", ...; "unknown" for a number no row has). */
static inline const char *sw_thread_state_name(uint32_t state)
{
#define SW_X_STATE_CASE_(K, n, name) case n: return #name;
    switch (state) { SW_THREAD_STATES(SW_X_STATE_CASE_) default: return "unknown"; }
#undef SW_X_STATE_CASE_
}

#define SW_NO_CPU UINT64_MAX     /* sw_sample.cpu_ns when unknown */

typedef struct sw_sample {
    uint64_t thread_id;      /* threading.get_ident() of the thread */
    uint64_t native_tid;     /* the OS thread id, 0 where unknown */
    int64_t t_ns;            /* CLOCK_MONOTONIC when the sample was taken: the
                                round's start, or for a native capture the
                                moment the thread stopped for it */
    uint64_t weight_ns;      /* wall time it stands for: since the previous sampling round */
    uint32_t depth;          /* number of entries in frames */
    uint32_t flags;          /* SW_SAMPLE_* */
    sw_sample_code **frames;   /* leaf first, root last */
    uint32_t state;          /* SW_STATE_* */
    uint64_t cpu_ns;         /* CPU time the thread used since it was last
                                sampled, or SW_NO_CPU (it can exceed weight_ns:
                                the thread's two probes are further apart than
                                the two rounds' starts when the sampler was held
                                up within the later round) */
    int32_t *lines;          /* when lines were asked for: the line each frame
                                is running, parallel to frames (0 where unknown
                                or native); else NULL */
    uint64_t *frame_addrs;   /* when frame addresses were asked for (and no native
                                frames merged in): each frame's address in the
                                target, parallel to frames; else NULL */
    uint64_t *native_pcs;    /* with native frames merged in: each native frame's
                                code address (the leaf's instruction, else a
                                return address), 0 for a Python frame, parallel
                                to frames; else NULL */
} sw_sample;

/* A consumer of samples. Called on the sampler's thread, one call per
 * sample (failed ones included, flagged SW_SAMPLE_FAILED); must not block
 * for long. */
typedef void (*sw_sample_sink)(void *ud, sw_sample *s);

#endif
