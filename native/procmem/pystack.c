/*
 * pystack.c - walking interpreter -> threads -> frames -> code objects in
 * memory (see pystack.h).
 *
 * Cost per thread and sample, in system calls (docs/architecture.md "What
 * a sample costs"): on 3.11+, once the thread was sampled, one read of the
 * thread state with what its last sample lets guess (see "Guesses": its
 * current frame through the same _PyCFrame on 3.11/3.12, the frames its
 * last walk read on their own, the top of its current _PyStackChunk),
 * merged for the first thread into the round's read of the thread list and
 * the GIL; when the guess misses, one bulk copy of the top of the frame
 * stack (with, in the same call, the leaf frame when it lives elsewhere: a
 * generator's); one read per other frame living elsewhere (generators,
 * older chunks, 3.12+ shim frames on the C stack) that the thread's last
 * walk did not read too; and then one read checking that the walk was not
 * torn (the code objects' headers, then the thread state, its current
 * frame and the walked frames again; 3.12+ from outside: the headers only
 * of code objects not trusted by the target's counter of code objects
 * made, see "Code objects by counter"; 3.13 likewise), which from outside
 * on 3.12+, when the walk took every frame from its first read and no
 * header is to be read, is made at the end of that read instead (see
 * "Checked ahead"): one call a thread in all. Before 3.11 the thread state, then
 * one read of the leaf and of the frames of the thread's last walk (from
 * outside: in the thread state's read, guessed_leaf), one per frame not
 * among them, and (in this process) one reading the code
 * objects' headers and the frames again. A
 * walk torn by the thread running on (see "Torn stacks" below) is redone:
 * in this process (limits.park) with the thread parked in a signal handler
 * (nativestack.h), which cannot tear, so the checks can be strict;
 * from outside up to a few times, then the sample is failed. Code objects
 * come from the code cache;
 * before 3.11 those not confirmed in the last few rounds are re-read, all
 * in one batched read (process_vm_readv with many iovecs; requests less
 * than a page apart are one range, mem.c). Strings are only read on a
 * cache miss.
 */
#include "pystack.h"
#include "codecache.h"
#include "freeze.h"
#include "nativemerge.h"
#include "nativestack.h"
#include "symbols.h"
#include "threadstate.h"
#include "unwind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW_MAX (64u * 1024u)       /* bytes copied from the top of a frame stack */
#define MAX_CHUNK_SPAN (1ull << 30)    /* a plausible bound for one stack chunk */
#define OBJECT_RETRIES 4               /* before 3.11: walks redone when a frame died under the reader */
#define TORN_RETRIES 5                 /* 3.11+: whole reads redone when the walk was torn */
#define PARK_WAIT_NS 10000000ull       /* in-process: the wait for a torn thread to park (10 ms) */
#define PARK_FAILS_MUTE 3              /* ... parked walks of a thread failing in a row that mute it */
#define TEARS_ONE 65536u               /* in-process: a thread's tear rate (g_tears) as a fraction of this */
#define TEARS_SHIFT 6                  /* ... an average of its walks weighing each 1/64 ... */
#define TEARS_PARK_AHEAD 1966u         /* ... above 3% of them torn, it is parked ahead of its walks ... */
#define TEARS_PROBE_EVERY 16u          /* ... but for every 16th, walked unparked first (to keep measuring) */
#define AHEAD_HOLD_FIRST 64u           /* a park ahead not answered in time: none for this many walks ... */
#define AHEAD_HOLD_MAX 4096u           /* ... doubled at each such park after one, up to this */
#define GLOBALS_SLOTS 8192u            /* code objects whose last frame's globals are remembered */
#define STATE_FDS 128                  /* /proc files of threads kept open (syscall, schedstat) */
#define MUTE_SLOTS 16                  /* native mode: threads remembered as blocking the signal */
#define MUTE_ROUNDS_FIRST 32           /* ... for this many rounds, ... */
#define MUTE_ROUNDS 256                /* ... doubled at each muting soon after one, up to this (each
                                          timeout costs the sampler 10-20 ms) */
#define SPEC_THREADS 32u               /* threads whose last walk's own-read frames are remembered */
#define SPEC_DEPTH 256u                /* ... at most this many frames each */
#define SORT_BY_INSERTION 64u          /* code_reads: longer lists of new code objects are sorted by qsort */
#define PARK_CODES 64u                 /* code objects whose headers a parked walk reads up front */
enum { PARK_CODE_NOT_ASKED, PARK_CODE_READ, PARK_CODE_UNREADABLE };   /* what became of each one's read */
#define READERS 64u                    /* threads remembered as free to make their parked walk's read */

struct sw_pystack {
    sw_py_layout l;
    sw_pystack_limits lim;
    sw_mem mem;
    uint64_t interp;
    sw_codecache *codes;
    uint64_t walks;                /* with limits.fail_every: the stacks walked */
    uint64_t *code_addrs;          /* [max_depth] this stack's code objects, leaf first */
    uint64_t *globals;             /* [max_depth] with frame_globals: their frames' globals
                                      (3.11+: mixed with their function objects) */
    uint64_t *code_globals;        /* [2 * GLOBALS_SLOTS] with frame_globals: (code object,
                                      the globals its last frame seen ran with) */
    uint64_t *frame_addrs;         /* [max_depth] the frames walked, leaf first */
    uint64_t *kept_addrs;          /* [max_depth] with limits.frame_addrs: the frames kept
                                      (shims left out), parallel to code_addrs */
    uint32_t *gaps;                /* [max_depth] with layout.code_nlocalsplus, parallel to
                                      code_addrs: the bytes from each frame to its callee when
                                      both lie in the copied window, next to each other in the
                                      walk, else 0 (frames_fit) */
    uint64_t *instrs;              /* [max_depth] with lines: each kept frame's current instruction */
    int32_t *lines;                /* [max_depth] with lines: the line each frame runs */
    /* Native mode (nativestack.h, nativemerge.h): */
    sw_symbols *syms;              /* NULL unless native */
    sw_unwinder *unwinder;         /* native, another process: its threads stopped and
                                      unwound from outside (unwind.h), else NULL: this
                                      process, by the signal handler (nativestack.h) */
    uint8_t *pc_flags;             /* [SW_NSTACK_MAX] with unwinder: SW_UNWIND_* of each pc */
    unsigned char *py_end;         /* [max_depth] 1: the root-most frame of an interpreter run */
    uint64_t *pcs;                 /* [SW_NSTACK_MAX] the captured return addresses */
    sw_sample_code **nat;          /* [SW_NSTACK_MAX] their symbols */
    unsigned char *nat_eval;       /* [SW_NSTACK_MAX] 1: the interpreter function */
    int32_t *nat_lines;            /* [SW_NSTACK_MAX] the line each runs (0: unknown) */
    sw_sample_code **merged;       /* [max_depth + SW_NSTACK_MAX] */
    int32_t *merged_lines;         /* [max_depth + SW_NSTACK_MAX] with lines */
    uint64_t *merged_pcs;          /* [max_depth + SW_NSTACK_MAX] each native frame's pc, 0 for Python's */
    uint32_t mute_tid[MUTE_SLOTS];    /* threads that did not answer the signal ... */
    uint64_t mute_until[MUTE_SLOTS];  /* ... are not asked again before this round ... */
    uint32_t mute_len[MUTE_SLOTS];    /* ... the rounds of that muting */
    uint32_t park_fail_tid;        /* in-process: the thread whose last parked walks failed ... */
    uint32_t park_fails;           /* ... how many in a row (PARK_FAILS_MUTE: it is muted) */
    uint64_t seen[16];             /* 1024-bit filter of frame addresses walked */
    unsigned char *code_hdrs;      /* [max_depth * code_size] */
    sw_mem_req *reqs;              /* [3 * max_depth + 8] */
    sw_mem_req *code_reqs;         /* [max_depth] the code objects' headers, read with the check
                                      after a walk (code_reads) */
    uint32_t codes_read;           /* ... how many were read this walk (0: none) */
    int codes_checked;             /* 1: this walk's code objects were checked so (read_with_codes):
                                      each read, or trusted by the counter (below) */
    /* Code objects by counter (see trusted_by_counter): */
    uint64_t code_counter;         /* the target's counter of code objects made, or 0 */
    uint64_t interps_made;         /* 3.13: the count of interpreters made (next_id), or 0 */
    uint32_t counter_now;          /* this walk: its value read in the walk's first read, after
                                      the frames (0: not read, or the counter ran out) */
    int walk_early;                /* this walk: every frame came from that first read */
    int frames_trusted;            /* this walk: every code object trusted so, r->frames set */
    uint64_t *memo_codes;          /* [max_depth] the last walk whose code objects were all
                                      trusted so: its code objects, leaf first ... */
    sw_sample_code **memo_frames;  /* [max_depth] ... their cache entries ... */
    uint32_t memo_n, memo_counter; /* ... how many, and the counter's value then (memo_n 0: none) */
    uint32_t park_counter;         /* the counter as the last parked walk read it (0: not read):
                                      read_tstate reads no header of an entry stamped with it */
    uint64_t *code_order;          /* [3 * max_depth] code_reads: the last walk's code objects in
                                      address order, each once ([0, n_order)), this walk's (the
                                      next third, then swapped), those new in this walk (the last) */
    uint32_t n_order;
    unsigned char *order_seen;     /* [max_depth] code_reads: which of the last walk's are in this one */
    uint64_t *reads_of;            /* [max_depth] code_reads: the code objects it was last given, leaf
                                      first (the same again: its list is code_order as it stands) */
    uint32_t reads_of_n;           /* ... how many (0: none) */
    uint32_t known_of_n;           /* code_known holds the entries of all of that list's code objects,
                                      if this is its length (confirm_codes' take_header), else 0 */
    const unsigned char *name_ok;  /* take_header: a file name read this round (its name_reqs buffer;
                                      NULL: none) found the same as ... */
    const sw_sample_code *name_ok_by;   /* ... this entry's file name (unchanged since: its own
                                      header's turn forgets it) */
    sw_sample_code **frames;         /* [max_depth] */
    /* confirm_codes: the entries confirmed by headers read this walk, and
     * the read that confirms them again. */
    sw_sample_code **confirm;      /* [max_depth] */
    sw_sample_code **known;        /* [max_depth] resolve_codes: frame i's cache entry as looked up, or NULL */
    sw_sample_code **req_known;    /* [max_depth] the same for its header requests r->reqs */
    sw_sample_code **code_known;   /* [max_depth] read_with_codes: r->code_reqs[j]'s entry as looked up */
    uint32_t code_known_n;         /* ... for j below this (0 once code_reads makes another list) */
    uint32_t *confirm_req;         /* [max_depth] each one's request (UINT32_MAX: none) */
    sw_mem_req *confirm_reqs;      /* [max_depth] */
    unsigned char *confirm_buf;    /* their bytes ... */
    size_t confirm_cap;            /* ... its size */
    sw_mem_req *name_reqs;         /* [max_depth] read_with_codes: the file names of the cached
                                      entries of the code objects it reads, read with them ... */
    uint32_t names_read;           /* ... how many (each once) ... */
    unsigned char *name_buf;       /* ... their bytes ... */
    size_t name_cap;               /* ... its size */
    unsigned char *window;         /* [WINDOW_MAX] */
    unsigned char leaf_buf[SW_LAYOUT_MAX_READ + SW_GEN_STATE_BACK_MAX];   /* the leaf frame, outside the window */
    unsigned char leaf_again[SW_LAYOUT_MAX_READ + SW_GEN_STATE_BACK_MAX];   /* ... read again after the walk */
    sw_threadstate *states;        /* with limits.thread_states, else NULL */
    uint64_t gil_addr;             /* the GIL's address, once known, else 0 */
    uint64_t gil_holder;           /* this round: the thread state holding the GIL, or 0 */
    int gil_known;                 /* this round: the GIL was read (gil_holder 0: nobody held it) */
    uint64_t trampoline;           /* 3.12: the shim frames' code object, once read, else 0 */
    uint64_t steps;                /* the last walk: frames visited (shims included) */
    uint64_t walk_lo, walk_hi;     /* the last walk: the span of its frames in the window (among
                                      its first max_depth; walk_lo >= walk_hi if none) */
    unsigned char *recheck;        /* [WINDOW_MAX] 3.11+: the walked part of the window, read again */
    unsigned char *again;          /* [max_depth * frame_size] 3.9/3.10: the walked frames, read again;
                                      [max_depth * (frame_size + gen_state_back)] 3.11+: the frames
                                      the walk read on their own (outside the window: shims,
                                      generators', older chunks'), read again by still_whole */
    unsigned char *own_was;        /* [max_depth * (frame_size + gen_state_back)] 3.11+: those
                                      frames as the walk read them, each at its step */
    /* Speculation: the frames a thread's last walk read on their own
     * (before 3.11 all of them; from 3.11 those outside the copied window:
     * generators', older chunks', shims on the C stack) are read again in
     * the first read of its next walk, in the same system call as its leaf
     * (3.11+: and its window). A thread's callers mostly stay put from one
     * sample to the next, so a walk mostly costs that one call, not one per
     * frame, and reads its frames within a microsecond or two: a stack that
     * changes fast is far more often read whole. */
    uint64_t *spec_tstate;         /* [SPEC_THREADS] the thread state each slot is for */
    uint32_t *spec_n;              /* [SPEC_THREADS] frames remembered */
    uint64_t *spec_addrs;          /* [SPEC_THREADS * SPEC_DEPTH] in address order */
    uint64_t *spec_as_walked;      /* [SPEC_THREADS * SPEC_DEPTH] the same in the walk's order */
    uint64_t *spec_walk;           /* [SPEC_DEPTH] this walk's own-read frames so far */
    uint32_t spec_walked;          /* ... how many */
    sw_mem_req *spec_reqs;         /* [SPEC_DEPTH + 8 + PARK_CODES] the first read of this walk */
    sw_bytes listed;               /* the thread states (uint64_t) sampled this round, in list
                                      order (to skip them when the list is read again) */
    uint32_t spec_first, spec_nreq;   /* spec_reqs[spec_first, spec_nreq) are the speculative ones */
    unsigned char *spec_bytes;     /* [SPEC_DEPTH * (frame_size + gen_state_back)] their bytes */
    unsigned char *spec_again;     /* [SPEC_DEPTH * (frame_size + gen_state_back)] 3.11+ from
                                      outside: the same frames read again at the end of that
                                      read, for the check after the walk ("Checked ahead") */
    /* The check after the walk, read ahead at the end of the walk's first
     * read (see "Checked ahead"): */
    uint64_t pre_frame;            /* the thread state's current frame (3.11/3.12: _PyCFrame) */
    uint64_t pre_cframe, pre_now;  /* the _PyCFrame the walk's first read went through (0: none),
                                      and its current frame */
    uint64_t pre_lo, pre_end;      /* the part of the stack chunk read again, into r->recheck */
    uint32_t pre_req, pre_n;       /* their requests in r->spec_reqs: [pre_req, pre_req + pre_n) */
    int pre_ok;                    /* 1: all of them read, in the last first read */
    uint32_t copy_counter;         /* copy_window: the counter of code objects made, read after
                                      the copy (trusted_by_counter) ... */
    int64_t copy_interps;          /* ... and 3.13's count of interpreters made */
    /* Guesses (see "guess" below), per thread as spec_*: the _PyCFrame
     * its leaf was last found through (3.11/3.12), and the part of its
     * stack chunk last copied (3.11+). */
    uint64_t g_tstate[SPEC_THREADS];
    uint64_t g_cframe[SPEC_THREADS];
    /* 3.11/3.12: the walk's innermost _PyCFrame's previous one, read with
     * its current frame (leaf_frame), and the address of the thread's
     * root _PyCFrame; both 0 when not known (see "Runs half made"). */
    uint64_t walk_cf_previous, walk_root_cframe;
    uint64_t g_chunk[SPEC_THREADS], g_lo[SPEC_THREADS], g_end[SPEC_THREADS];
    uint64_t g_pthread[SPEC_THREADS];   /* before 3.11: its pthread_self(), whose kernel tid is read */
    /* In-process, per thread: the code objects of its last parked walk
     * (address order), whose headers its next parked walk reads in its
     * first read (walk_parked). */
    uint32_t g_ncodes[SPEC_THREADS];
    /* In-process, per thread holding the GIL when walked (its own slots:
     * another thread in the same slot of the guesses, walked or only
     * probed each round, would empty them every round): the share of its
     * first unparked walks found torn, a moving average (TEARS_*), and its
     * walks counted while it is parked ahead of them ("Parking ahead"). */
    uint64_t g_tears_of[SPEC_THREADS];   /* the thread state each slot is for */
    uint32_t g_tears[SPEC_THREADS];
    uint32_t g_ahead_walks[SPEC_THREADS];
    uint32_t g_ahead_hold[SPEC_THREADS];   /* ... walks left with no park ahead (one not answered) */
    uint32_t g_ahead_backoff[SPEC_THREADS];   /* ... the last such hold (0: none yet) */
    uint64_t *g_codes;             /* [SPEC_THREADS * PARK_CODES] */
    unsigned char *park_code_hdrs; /* [PARK_CODES * code_size] their headers, read */
    unsigned char park_code_state[PARK_CODES];   /* ... each PARK_CODE_*: read, unreadable (forgotten then), not asked */
    sw_mem_plan *plan;             /* in-process: the read a parked thread makes itself (walk_read_by_thread) */
    uint32_t reader_tid[READERS];  /* ... threads asked whether they may (read_due) ... */
    unsigned char reader_filtered[READERS];   /* ... seen under a seccomp filter: never asked again ... */
    uint32_t reader_short[READERS];     /* ... and how many of its reads were short (of TEARS_ONE) */
    uint32_t park_codes_read;      /* ... how many were asked for */
    uint64_t head_guess;           /* the first thread state of the last round */
    /* limits.blocking: the process stopped for this round (freeze.h). */
    sw_frozen frozen;
    int frozen_now;                /* 1 while it is */
    char block_err[384];           /* why the last stop failed, or "" */
    sw_pystack_stats st;
    int in_process;                /* 1: the reader's own process (its walks' checks are strict) */
};

static uint64_t u64_at(const unsigned char *p, uint32_t off)
{
    uint64_t v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

static uint32_t frame_back(const sw_py_layout *l);

/* A reader with everything but its memory. */
static sw_pystack *make_reader(const sw_py_layout *l, int pid, uint64_t interp_addr, const sw_pystack_limits *lim,
                               char *err, size_t errlen)
{
    if (sw_layout_validate(l, err, errlen) != SW_OK)
        return NULL;
    if (lim->max_depth == 0 || lim->max_depth > SW_PYSTACK_MAX_DEPTH_LIMIT || lim->max_threads == 0 ||
        lim->max_threads > SW_PYSTACK_MAX_THREADS_LIMIT) {
        snprintf(err, errlen, "max depth must be 1..%u and max threads 1..%u", SW_PYSTACK_MAX_DEPTH_LIMIT,
                 SW_PYSTACK_MAX_THREADS_LIMIT);
        return NULL;
    }
    sw_pystack *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->l = *l;
    r->lim = *lim;
    r->interp = interp_addr;
    size_t d = lim->max_depth;
    r->codes = sw_codecache_new(lim->max_codes);
    r->code_addrs = malloc(d * sizeof *r->code_addrs);
    const int keep_globals = l->frame_globals != SW_NO_OFFSET;
    if (keep_globals) {
        r->globals = malloc(d * sizeof *r->globals);
        r->code_globals = calloc(2 * GLOBALS_SLOTS, sizeof *r->code_globals);
    }
    r->frame_addrs = malloc(d * sizeof *r->frame_addrs);
    if (lim->frame_addrs)
        r->kept_addrs = malloc(d * sizeof *r->kept_addrs);
    if (l->code_nlocalsplus != SW_NO_OFFSET)
        r->gaps = malloc(d * sizeof *r->gaps);
    r->code_hdrs = malloc(d * l->code_size);
    r->reqs = malloc((3 * d + 8) * sizeof *r->reqs);
    r->code_reqs = malloc(d * sizeof *r->code_reqs);
    r->code_order = malloc(3 * d * sizeof *r->code_order);
    r->memo_codes = malloc(d * sizeof *r->memo_codes);
    r->memo_frames = malloc(d * sizeof *r->memo_frames);
    r->order_seen = malloc(d);
    r->reads_of = malloc(d * sizeof *r->reads_of);
    r->frames = malloc(d * sizeof *r->frames);
    r->confirm = malloc(d * sizeof *r->confirm);
    r->known = malloc(d * sizeof *r->known);
    r->req_known = malloc(d * sizeof *r->req_known);
    r->code_known = malloc(d * sizeof *r->code_known);
    r->confirm_req = malloc(d * sizeof *r->confirm_req);
    r->confirm_reqs = malloc(d * sizeof *r->confirm_reqs);
    r->name_reqs = malloc(d * sizeof *r->name_reqs);
    r->window = malloc(WINDOW_MAX);
    if (l->frames_kind == SW_FRAMES_INTERP) {
        r->recheck = malloc(WINDOW_MAX);
        r->again = malloc(d * (l->frame_size + frame_back(l)));
        r->own_was = malloc(d * (l->frame_size + frame_back(l)));
    } else if (l->frame_state != SW_NO_OFFSET)
        r->again = malloc(d * l->frame_size);
    r->spec_tstate = calloc(SPEC_THREADS, sizeof *r->spec_tstate);
    r->spec_n = calloc(SPEC_THREADS, sizeof *r->spec_n);
    r->spec_addrs = malloc((size_t)SPEC_THREADS * SPEC_DEPTH * sizeof *r->spec_addrs);
    r->spec_as_walked = malloc((size_t)SPEC_THREADS * SPEC_DEPTH * sizeof *r->spec_as_walked);
    r->spec_walk = malloc(SPEC_DEPTH * sizeof *r->spec_walk);
    r->spec_reqs = malloc((2 * SPEC_DEPTH + 16 + PARK_CODES) * sizeof *r->spec_reqs);
    if (lim->park) {
        r->g_codes = malloc((size_t)SPEC_THREADS * PARK_CODES * sizeof *r->g_codes);
        r->park_code_hdrs = malloc((size_t)PARK_CODES * l->code_size);
        r->plan = sw_mem_plan_new();
    }
    r->spec_bytes = malloc((size_t)SPEC_DEPTH * (l->frame_size + SW_GEN_STATE_BACK_MAX));
    r->spec_again = malloc((size_t)SPEC_DEPTH * (l->frame_size + SW_GEN_STATE_BACK_MAX));
    /* (the frames' instructions: for their lines, and 3.11/3.12 for
     * returned_leaf) */
    if ((lim->lines && l->linetable_kind) || l->op_return_value != SW_NO_OFFSET)
        r->instrs = malloc(d * sizeof *r->instrs);
    if (lim->lines && l->linetable_kind) {
        r->lines = malloc(d * sizeof *r->lines);
        r->merged_lines = malloc((d + SW_NSTACK_MAX) * sizeof *r->merged_lines);
    }
    int native_ok = 1;
    if (lim->native) {
        /* With lines, a native frame's node is its pc's line too: its
         * symbols get their sources when looked up, as another process's. */
        r->syms = r->lines && lim->native_lines ? sw_symbols_new_lines() : sw_symbols_new();
        r->py_end = calloc(d, 1);
        r->pcs = malloc(SW_NSTACK_MAX * sizeof *r->pcs);
        r->nat = malloc(SW_NSTACK_MAX * sizeof *r->nat);
        r->nat_eval = malloc(SW_NSTACK_MAX);
        r->pc_flags = calloc(SW_NSTACK_MAX, 1);
        r->merged = malloc((d + SW_NSTACK_MAX) * sizeof *r->merged);
        r->merged_pcs = malloc((d + SW_NSTACK_MAX) * sizeof *r->merged_pcs);
        r->nat_lines = malloc(SW_NSTACK_MAX * sizeof *r->nat_lines);
        native_ok = r->syms && r->py_end && r->pcs && r->nat && r->nat_eval && r->pc_flags && r->merged &&
                    r->merged_pcs && r->nat_lines;
    }
    if (lim->thread_states)
        r->states = sw_threadstate_new(pid, STATE_FDS);
    if (r->states)
        sw_threadstate_set_cpu_every(r->states, lim->cpu_every);
    if (!r->codes || !r->code_addrs || (keep_globals && (!r->globals || !r->code_globals)) ||
        !r->frame_addrs || (lim->frame_addrs && !r->kept_addrs) || (l->code_nlocalsplus != SW_NO_OFFSET && !r->gaps) || !r->code_hdrs || !r->reqs || !r->code_reqs ||
        !r->code_order || !r->memo_codes || !r->memo_frames || !r->order_seen || !r->reads_of || !r->frames || !r->known || !r->req_known || !r->code_known ||
        !r->confirm || !r->confirm_req || !r->confirm_reqs || !r->name_reqs || !r->window || !r->spec_tstate || !r->spec_n ||
        !r->spec_addrs || !r->spec_as_walked || !r->spec_walk || !r->spec_reqs || !r->spec_bytes || !r->spec_again ||
        (lim->park && (!r->g_codes || !r->park_code_hdrs || !r->plan)) ||
        (l->frames_kind == SW_FRAMES_INTERP && (!r->recheck || !r->again || !r->own_was)) ||
        (l->frames_kind == SW_FRAMES_OBJECTS && l->frame_state != SW_NO_OFFSET && !r->again) ||
        (lim->thread_states && !r->states) || !native_ok ||
        (lim->lines && l->linetable_kind && (!r->instrs || !r->lines || !r->merged_lines)) ||
        (l->op_return_value != SW_NO_OFFSET && !r->instrs)) {
        snprintf(err, errlen, "out of memory");
        r->mem.fd = -1;
        sw_pystack_free(r);
        return NULL;
    }
    return r;
}

/* Native frames of another process or of a core, by the unwinder u (NULL:
 * out of memory), named by its files. 0, or SW_ENOMEM with r freed. */
static int use_unwinder(sw_pystack *r, sw_unwinder *u, char *err, size_t errlen)
{
    sw_symbols_free(r->syms);
    r->unwinder = u;
    r->syms = u ? sw_symbols_new_remote(u) : NULL;
    if (r->syms)
        return SW_OK;
    snprintf(err, errlen, "out of memory");
    sw_pystack_free(r);
    return SW_ENOMEM;
}

sw_pystack *sw_pystack_new(const sw_py_layout *l, int pid, uint64_t interp_addr, const sw_pystack_limits *lim,
                           uint64_t probe_addr, size_t probe_len, char *err, size_t errlen)
{
    if (lim->blocking && pid == (int)getpid()) {
        snprintf(err, errlen, "a process cannot stop itself to be read (blocking is for another process)");
        return NULL;
    }
    sw_pystack *r = make_reader(l, pid, interp_addr, lim, err, errlen);
    if (r && sw_mem_open(&r->mem, pid, probe_addr, probe_len, err, errlen) != SW_OK) {
        r->mem.fd = -1;
        sw_pystack_free(r);
        return NULL;
    }
    if (r)
        r->in_process = pid == (int)getpid();
    if (r && lim->native && pid != (int)getpid()) {
        /* Native frames of another process: unwound from outside, named
         * by its files. */
        if (!sw_unwind_supported(err, errlen)) {
            sw_pystack_free(r);
            return NULL;
        }
        if (use_unwinder(r, sw_unwinder_new(pid, &r->mem), err, errlen) != SW_OK)
            return NULL;
        sw_unwind_set_held(r->unwinder, (int)lim->blocking);   /* (the round stops the threads) */
    }
    return r;
}

sw_pystack *sw_pystack_new_core(const sw_py_layout *l, struct sw_coremem *core, uint64_t interp_addr,
                                const sw_pystack_limits *lim, char *err, size_t errlen)
{
    if (lim->thread_states) {
        snprintf(err, errlen, "a core file has no threads to probe");
        return NULL;
    }
    sw_pystack *r = make_reader(l, 0, interp_addr, lim, err, errlen);
    if (!r)
        return NULL;
    r->lim.blocking = 0;   /* (nothing runs in a core) */
    sw_mem_open_core(&r->mem, core);
    if (lim->native) {
        /* Native frames: unwound from the core's registers (unwind.h). */
        if (use_unwinder(r, sw_unwinder_new_core(core, &r->mem), err, errlen) != SW_OK)
            return NULL;
    }
    return r;
}

void sw_pystack_free(sw_pystack *r)
{
    if (!r)
        return;
    sw_mem_close(&r->mem);
    sw_threadstate_free(r->states);
    sw_codecache_free(r->codes);
    free(r->code_addrs);
    sw_bytes_free(&r->listed);
    free(r->globals);
    free(r->code_globals);
    free(r->frame_addrs);
    free(r->kept_addrs);
    free(r->instrs);
    free(r->lines);
    free(r->merged_lines);
    sw_symbols_free(r->syms);
    sw_unwinder_free(r->unwinder);   /* (after the symbols, which use it) */
    free(r->pc_flags);
    free(r->py_end);
    free(r->pcs);
    free(r->nat);
    free(r->nat_eval);
    free(r->merged);
    free(r->merged_pcs);
    free(r->nat_lines);
    free(r->gaps);
    free(r->code_hdrs);
    free(r->reqs);
    free(r->code_reqs);
    free(r->code_order);
    free(r->memo_codes);
    free(r->memo_frames);
    free(r->order_seen);
    free(r->reads_of);
    free(r->frames);
    free(r->confirm);
    free(r->known);
    free(r->req_known);
    free(r->code_known);
    free(r->confirm_req);
    free(r->confirm_reqs);
    free(r->confirm_buf);
    free(r->name_reqs);
    free(r->name_buf);
    free(r->window);
    free(r->recheck);
    free(r->again);
    free(r->own_was);
    free(r->spec_tstate);
    free(r->spec_n);
    free(r->spec_addrs);
    free(r->spec_as_walked);
    free(r->spec_walk);
    free(r->spec_reqs);
    free(r->spec_bytes);
    free(r->spec_again);
    free(r->g_codes);
    free(r->park_code_hdrs);
    sw_mem_plan_free(r->plan);
    free(r);
}

/* The copied top of a thread's frame stack: bytes [lo, hi) of the target,
 * in its chunk whose frames begin at base; and the thread's leaf frame
 * when it lies outside them (a generator's), read in the same system call
 * (leaf_bytes points at the frame, gen_state_back bytes into the copy). */
typedef struct window {
    uint64_t lo, hi, base;
    const unsigned char *bytes;
    uint64_t leaf;
    const unsigned char *leaf_bytes;
} window;

/* Whether the frame at `frame` lies in the copied window w. */
static int in_copy(const window *w, const sw_py_layout *l, uint64_t frame)
{
    return frame >= w->lo && frame + l->frame_size <= w->hi && frame + l->frame_size > frame;
}

/* The bytes read before a frame read on its own: 3.11+, a generator's
 * frame state. */
static uint32_t frame_back(const sw_py_layout *l)
{
    return l->frames_kind == SW_FRAMES_INTERP && l->frame_owner != SW_NO_OFFSET ? l->gen_state_back : 0;
}

/* The slot of r->spec_* for a thread state. */
static uint32_t spec_slot(uint64_t tstate)
{
    return (uint32_t)((tstate >> 4) ^ (tstate >> 13)) & (SPEC_THREADS - 1);
}

/* Guesses. A sample mostly finds a thread where the last one did: in the
 * same call of the interpreter (3.11/3.12: the same innermost _PyCFrame,
 * on the C stack, through which its leaf is found) and near the same top
 * of the same stack chunk (3.11+). So the thread state is read in one
 * system call with, after it, the current frame of that _PyCFrame, the
 * part of that chunk from where the last copy began to the end of the page
 * of its top, and the frames the last walk read on their own (spec_*):
 * when the state read names the same _PyCFrame and chunk, with a top and a
 * leaf inside what was read, the walk needs no other read (before the
 * check: still_whole). The order is that of the reads made one after the
 * other: the state, then what it names. */
typedef struct guess {
    uint64_t cframe;          /* the _PyCFrame guessed ... */
    uint64_t cf_words[2];     /* ... its current frame and previous _PyCFrame, read through it */
    int cf_ok;
    uint64_t chunk, lo, end;  /* the window guessed: bytes [lo, end) of the chunk, into r->window */
    int win_ok;
    uint64_t pthread;         /* before 3.11: the thread's pthread_self() guessed ... */
    uint32_t tid;             /* ... and the kernel thread id read in its struct */
    int tid_ok;
    uint32_t counter;         /* the counter of code objects made (code_counter), read last ... */
    int counter_ok;
    int64_t interps;          /* ... but for 3.13's count of interpreters made (interps_made) */
    uint32_t cf_req, win_req, tid_req, counter_req;   /* their indexes in r->spec_reqs, or 0 */
} guess;

static void check_ahead_reqs(sw_pystack *r, uint64_t tstate, uint64_t cframe, uint64_t lo, uint64_t end, uint32_t *k);
static void check_ahead_read(sw_pystack *r);

/* The guess slot of a thread state, emptied if it was another's. */
static uint32_t guess_slot(sw_pystack *r, uint64_t tstate)
{
    const uint32_t slot = spec_slot(tstate);
    if (r->g_tstate[slot] != tstate) {
        r->g_tstate[slot] = tstate;
        r->g_cframe[slot] = r->g_chunk[slot] = r->g_lo[slot] = r->g_end[slot] = r->g_pthread[slot] = 0;
        r->g_ncodes[slot] = 0;
    }
    return slot;
}

static void spec_reqs_add(sw_pystack *r, uint64_t tstate, uint64_t leaf, uint32_t *k);

/* Appends to r->spec_reqs, from *k on, the reads guessed for thread
 * tstate (above), and notes them in g and r->spec_*. */
static void guess_reqs(sw_pystack *r, uint64_t tstate, guess *g, uint32_t *k)
{
    const sw_py_layout *l = &r->l;
    const uint32_t slot = guess_slot(r, tstate);
    memset(g, 0, sizeof *g);
    r->spec_nreq = r->spec_first = r->spec_walked = 0;
    r->pre_n = 0;
    r->pre_ok = 0;
    if (l->tstate_native_thread_id == SW_NO_OFFSET && l->thread_tid != SW_NO_OFFSET && r->g_pthread[slot]) {
        /* Before 3.11 the kernel thread id is in glibc's struct pthread. */
        g->pthread = r->g_pthread[slot];
        g->tid_req = *k;
        r->spec_reqs[(*k)++] = (sw_mem_req){g->pthread + l->thread_tid, &g->tid, sizeof g->tid, 0};
    }
    sw_mem_req cf = {0, NULL, 0, 0};
    if (l->cframe_current_frame != SW_NO_OFFSET && r->g_cframe[slot]) {
        g->cframe = r->g_cframe[slot];
        cf = (sw_mem_req){g->cframe + l->cframe_current_frame, g->cf_words, sizeof g->cf_words, 0};
    }
    if (l->frames_kind != SW_FRAMES_INTERP && !r->lim.park) {
        /* Before 3.11, from outside: the frames the thread's last walk
         * read, its leaf among them, right after its state (guessed_leaf;
         * in this process the first read of a walk stays its own). */
        uint32_t first = *k;
        spec_reqs_add(r, tstate, 0, k);
        r->spec_first = first;
        r->spec_nreq = *k;
        return;
    }
    if (l->frames_kind != SW_FRAMES_INTERP || !r->g_chunk[slot]) {
        if (cf.len) {
            g->cf_req = *k;
            r->spec_reqs[(*k)++] = cf;
        }
        return;
    }
    /* The _PyCFrame and the frames read on their own (3.12: the shim
     * frame of the same call of the interpreter, beside it on the C stack)
     * in address order, so that they are read as one range (mem.c); then
     * the window, after the leaf it must hold. */
    uint32_t first = *k;
    spec_reqs_add(r, tstate, 0, k);
    if (cf.len) {
        if (*k > first && cf.addr < r->spec_reqs[first].addr) {
            memmove(&r->spec_reqs[first + 1], &r->spec_reqs[first], (*k - first) * sizeof *r->spec_reqs);
            g->cf_req = first++;
            (*k)++;
        } else {
            g->cf_req = *k;
            (*k)++;
        }
        r->spec_reqs[g->cf_req] = cf;
    }
    r->spec_first = first;
    r->spec_nreq = cf.len && g->cf_req >= first ? g->cf_req : *k;   /* (the frames only) */
    g->chunk = r->g_chunk[slot];
    g->lo = r->g_lo[slot];
    g->end = r->g_end[slot];
    g->win_req = *k;
    r->spec_reqs[(*k)++] = (sw_mem_req){g->lo, r->window, (size_t)(g->end - g->lo), 0};
    if (r->code_counter) {
        /* (after every frame of the read: see trusted_by_counter) */
        g->counter_req = *k;
        r->spec_reqs[(*k)++] = (sw_mem_req){r->code_counter, &g->counter, sizeof g->counter, 0};
        if (r->interps_made)
            r->spec_reqs[(*k)++] = (sw_mem_req){r->interps_made, &g->interps, sizeof g->interps, 0};
    }
    check_ahead_reqs(r, tstate, cf.len ? g->cframe : 0, g->lo, g->end, k);
}

/* Checked ahead. From outside (3.11+), the check after a walk
 * (still_whole) reads the thread state's current frame (3.11/3.12: its
 * _PyCFrame, and that one's current frame), the frames the walk read on
 * their own, and the copied part of its stack chunk again, all after the
 * copy: in a system call of its own, after the walk, because the walk
 * tells what to read. But the walk's first read already knows it: the
 * window it copies (as guessed, or the copy_window of a guess missed or of
 * a torn walk redone), the _PyCFrame it goes through, and the frames the
 * thread's last walk read on its own, which it reads speculatively. So
 * those bytes are read again at the end of that read, in the same system
 * call, after everything the walk takes from it (the kernel copies the
 * ranges in order: they are of later instants than the walk's bytes, as the
 * check's own read would be; a copy_window's read also reads the counter of
 * code objects made after its frames, as the guessed read does, so that its
 * walk's code objects can be trusted by it: trusted_by_counter). When the
 * walk took every frame from that read and its frames read on their own are
 * among those read again, the check compares the walk with those bytes,
 * the same comparisons, with no read of its own: a thread's walk costs one
 * system call, not two. Else (a frame read on its own after it, code
 * objects' headers to read, the state naming another _PyCFrame, a
 * generator's leaf) the check reads as before. */
/* 1 where walks are checked ahead: from outside (in-process the check
 * is strict, and a torn walk redone parked; native and blocking modes check
 * nothing), through process_vm_readv (each request of a read of
 * /proc/PID/mem or of a core is a call of its own), and with the counter of
 * code objects made (3.12+; without it, 3.11, every check reads the code
 * objects' headers before the frames again). */
static int checks_ahead(const sw_pystack *r)
{
    return !r->lim.park && !r->lim.native && !r->lim.blocking && r->mem.fd < 0 && !r->mem.core && r->code_counter;
}

static void check_ahead_reqs(sw_pystack *r, uint64_t tstate, uint64_t cframe, uint64_t lo, uint64_t end, uint32_t *k)
{
    const sw_py_layout *l = &r->l;
    r->pre_n = 0;
    r->pre_ok = 0;
    if (!checks_ahead(r))
        return;
    const size_t each = l->frame_size + frame_back(l);
    const uint32_t first = *k, nf = r->spec_nreq - r->spec_first;
    const uint64_t cf = cframe ? cframe + l->cframe_current_frame : 0;
    r->spec_reqs[(*k)++] = (sw_mem_req){tstate + l->tstate_frame, &r->pre_frame, sizeof r->pre_frame, 0};
    int cf_left = cf != 0;   /* (in address order with the frames: one range, mem.c) */
    for (uint32_t j = 0; j < nf; j++) {
        const sw_mem_req *q = &r->spec_reqs[r->spec_first + j];
        if (cf_left && cf < q->addr) {
            r->spec_reqs[(*k)++] = (sw_mem_req){cf, &r->pre_now, sizeof r->pre_now, 0};
            cf_left = 0;
        }
        r->spec_reqs[(*k)++] = (sw_mem_req){q->addr, r->spec_again + j * each, q->len, 0};
    }
    if (cf_left)
        r->spec_reqs[(*k)++] = (sw_mem_req){cf, &r->pre_now, sizeof r->pre_now, 0};
    r->spec_reqs[(*k)++] = (sw_mem_req){lo, r->recheck, (size_t)(end - lo), 0};
    r->pre_cframe = cframe;
    r->pre_lo = lo;
    r->pre_end = end;
    r->pre_req = first;
    r->pre_n = *k - first;
}

/* After that read: whether all of it was read. */
static void check_ahead_read(sw_pystack *r)
{
    r->pre_ok = r->pre_n != 0;
    for (uint32_t i = 0; i < r->pre_n; i++)
        r->pre_ok &= r->spec_reqs[r->pre_req + i].ok;
}

/* After the read: the ok flags of what g guessed. */
static void guess_read(sw_pystack *r, guess *g)
{
    g->cf_ok = g->cf_req && r->spec_reqs[g->cf_req].ok;
    g->tid_ok = g->tid_req && r->spec_reqs[g->tid_req].ok;
    g->win_ok = g->win_req && r->spec_reqs[g->win_req].ok;
    g->counter_ok = g->counter_req && r->spec_reqs[g->counter_req].ok &&
                    (!r->interps_made || (r->spec_reqs[g->counter_req + 1].ok && g->interps == 1));
    check_ahead_read(r);
}

/* read_tstate reads the thread state at tstate into ts, with what is
 * guessed of its walk (above), in one system call; with codes (a parked walk, while its
 * frames hold them) also the headers of the code objects of the thread's
 * last parked walk, into r->park_code_hdrs (park_code_state, park_codes_read;
 * taken by park_codes), but for those whose entries are stamped with the
 * counter as the last parked walk read it: while the counter reads the
 * same they are trusted by it (park_codes), and their headers were most
 * of the read (richards on 3.12: 8-10 us of the sampler's CPU time while
 * the thread is parked with them, 3 us without). SW_OK or SW_EIO.
 * tstate_reqs lays its requests out in r->spec_reqs and returns their
 * count (at: the request of each header, 0 if not read), for a read made
 * by the parked thread itself too (walk_read_by_thread). */
static uint32_t tstate_reqs(sw_pystack *r, uint64_t tstate, unsigned char *ts, guess *g, int codes, uint32_t *at)
{
    uint32_t k = 0;
    r->spec_reqs[k++] = (sw_mem_req){tstate, ts, r->l.tstate_size, 0};
    guess_reqs(r, tstate, g, &k);
    const uint32_t slot = spec_slot(tstate), cs = r->l.code_size;
    r->park_codes_read = codes ? r->g_ncodes[slot] : 0;
    for (uint32_t i = 0; i < r->park_codes_read; i++) {
        const uint64_t addr = r->g_codes[(size_t)slot * PARK_CODES + i];
        at[i] = 0;
        if (r->park_counter && sw_codecache_stamped(r->codes, addr, r->park_counter))
            continue;
        at[i] = k;
        r->spec_reqs[k++] = (sw_mem_req){addr, r->park_code_hdrs + (size_t)i * cs, cs, 0};
    }
    return k;
}

/* After the read of tstate_reqs' requests (at: each header's request, 0:
 * not read): the ok flags of the guesses and of the headers. */
static int tstate_read(sw_pystack *r, guess *g, const uint32_t *at)
{
    guess_read(r, g);
    for (uint32_t i = 0; i < r->park_codes_read; i++) {
        r->park_code_state[i] = !at[i] ? PARK_CODE_NOT_ASKED
                                : r->spec_reqs[at[i]].ok ? PARK_CODE_READ : PARK_CODE_UNREADABLE;
    }
    return r->spec_reqs[0].ok ? SW_OK : SW_EIO;
}

static int read_tstate(sw_pystack *r, uint64_t tstate, unsigned char *ts, guess *g, int codes)
{
    uint32_t at[PARK_CODES];   /* (each header's request, 0: not read) */
    const uint32_t k = tstate_reqs(r, tstate, ts, g, codes, at);
    sw_mem_readv(&r->mem, r->spec_reqs, k);
    return tstate_read(r, g, at);
}

/* Remembers the window copied for thread tstate: the next guess reads
 * from its start to the end of the page of its top (readable: that page
 * holds the top's last byte), at most WINDOW_MAX bytes. */
static void guess_keep_window(sw_pystack *r, uint64_t tstate, uint64_t chunk, uint64_t lo, uint64_t top)
{
    const uint32_t slot = guess_slot(r, tstate);
    uint64_t end = (top + 4095) & ~4095ull;
    r->g_chunk[slot] = chunk;
    r->g_lo[slot] = lo;
    r->g_end[slot] = end - lo <= WINDOW_MAX ? end : top;
}

/* Appends to r->spec_reqs, from *k on, the reads of the frames thread
 * tstate's last walk read on its own but leaf, into r->spec_bytes, in
 * address order, as spec_keep keeps them (frames close together are read
 * as one range, mem.c: before 3.11 a thread's frame objects often share
 * pages; and spec_find looks them up by bisection). */
static void spec_reqs_add(sw_pystack *r, uint64_t tstate, uint64_t leaf, uint32_t *k)
{
    const uint32_t back = frame_back(&r->l), slot = spec_slot(tstate), first = *k;
    const size_t each = r->l.frame_size + back;
    if (r->spec_tstate[slot] != tstate)
        return;
    const uint64_t *was = r->spec_addrs + (size_t)slot * SPEC_DEPTH;
    for (uint32_t i = 0; i < r->spec_n[slot]; i++) {
        if (was[i] == leaf || was[i] < back)
            continue;
        r->spec_reqs[*k] = (sw_mem_req){was[i] - back, r->spec_bytes + (size_t)(*k - first) * each, each, 0};
        (*k)++;
    }
}

/* The first read of a walk, one batched read: the npre requests given
 * (the leaf; 3.11+: the window), then the frames the thread's last walk
 * read on its own but the leaf, each with the bytes before it
 * (frame_back); with `ahead` (3.11+, a copy of bytes [lo, end) of the
 * stack chunk, cframe the _PyCFrame the leaf was found through, or 0) then
 * the counter of code objects made (into r->copy_counter, copy_interps)
 * and the check's read (see "Checked ahead"). Sets the ok flags of pre;
 * returns 1 if the counter was read and may be trusted (trusted_by_counter). */
static int first_read(sw_pystack *r, uint64_t tstate, uint64_t leaf, sw_mem_req *pre, uint32_t npre, int ahead,
                      uint64_t cframe, uint64_t lo, uint64_t end)
{
    uint32_t k = npre, ck = 0;
    memcpy(r->spec_reqs, pre, npre * sizeof *pre);
    spec_reqs_add(r, tstate, leaf, &k);
    r->spec_first = npre;
    r->spec_nreq = k;
    r->spec_walked = 0;
    r->pre_n = 0;
    r->pre_ok = 0;
    if (ahead && r->code_counter) {
        ck = k;   /* (after every frame of the read) */
        r->spec_reqs[k++] = (sw_mem_req){r->code_counter, &r->copy_counter, sizeof r->copy_counter, 0};
        if (r->interps_made)
            r->spec_reqs[k++] = (sw_mem_req){r->interps_made, &r->copy_interps, sizeof r->copy_interps, 0};
    }
    if (ahead)
        check_ahead_reqs(r, tstate, cframe, lo, end, &k);
    if (k)
        sw_mem_readv(&r->mem, r->spec_reqs, k);
    check_ahead_read(r);
    for (uint32_t i = 0; i < npre; i++)
        pre[i].ok = r->spec_reqs[i].ok;
    return ck && r->spec_reqs[ck].ok && (!r->interps_made || (r->spec_reqs[ck + 1].ok && r->copy_interps == 1));
}

/* The first of reqs[lo, hi), in address order, at or after addr (hi if
 * none), by bisection. */
static uint32_t req_at_or_after(const sw_mem_req *reqs, uint32_t lo, uint32_t hi, uint64_t addr)
{
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (reqs[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The bytes of the frame at `frame` if the first read had them (read
 * speculatively), else NULL: spec_reqs[spec_first, spec_nreq) are in
 * address order (spec_reqs_add), so bisected. (Looked for in a circle
 * from where the last one was found, before 3.11 it took 40% of a round's
 * instructions: the frame objects' addresses are in no order of the walk.) */
static const unsigned char *spec_find(sw_pystack *r, uint64_t frame, uint32_t back)
{
    if (frame < back)
        return NULL;
    const uint64_t want = frame - back;
    uint32_t lo = req_at_or_after(r->spec_reqs, r->spec_first, r->spec_nreq, want);
    const sw_mem_req *q = &r->spec_reqs[lo];
    return lo < r->spec_nreq && q->addr == want && q->ok ? (const unsigned char *)q->buf + back : NULL;
}

static void sort_by_insertion(uint64_t *a, uint32_t k);
static int by_u64(const void *a, const void *b);

/* Remembers the frames this walk of the thread read on its own, in
 * address order (spec_reqs_add): sorted here, as addresses, not as read
 * requests by qsort each round (a fifth of a round's instructions before
 * 3.11), and only when they are not the last walk's (before 3.11 a code
 * object's frame object is mostly reused by its next call: a stack that
 * changes fast mostly walks the same frame objects). */
static void spec_keep(sw_pystack *r, uint64_t tstate)
{
    const uint32_t slot = spec_slot(tstate);
    uint64_t *a = r->spec_addrs + (size_t)slot * SPEC_DEPTH, *was = r->spec_as_walked + (size_t)slot * SPEC_DEPTH;
    const size_t bytes = r->spec_walked * sizeof *r->spec_walk;
    if (r->spec_tstate[slot] == tstate && r->spec_n[slot] == r->spec_walked && memcmp(was, r->spec_walk, bytes) == 0)
        return;
    r->spec_tstate[slot] = tstate;
    r->spec_n[slot] = r->spec_walked;
    memcpy(was, r->spec_walk, bytes);
    memcpy(a, r->spec_walk, bytes);
    if (r->spec_walked <= SORT_BY_INSERTION)
        sort_by_insertion(a, r->spec_walked);
    else
        qsort(a, r->spec_walked, sizeof *a, by_u64);
}

/* Before 3.11: the first read of a walk, the leaf frame and the frames
 * read on their own by the thread's last walk, in one system call. */
static void read_leaf(sw_pystack *r, uint64_t tstate, uint64_t leaf, window *w)
{
    memset(w, 0, sizeof *w);
    sw_mem_req req = {leaf, r->leaf_buf, r->l.frame_size, 0};
    first_read(r, tstate, leaf, &req, 1, 0, 0, 0, 0);
    if (req.ok) {
        w->leaf = leaf;
        w->leaf_bytes = r->leaf_buf;
    }
}

/* Before 3.11, from outside: 1 if the leaf frame was among the frames the
 * thread's last walk read, as read right after its state (guess_reqs),
 * and is a live frame object (then w holds it, and its callers are looked
 * for there too, spec_find); else 0 (read_leaf reads it: one call more). */
static int frame_object_ok(const sw_py_layout *l, const unsigned char *f);

static int guessed_leaf(sw_pystack *r, uint64_t leaf, window *w)
{
    const unsigned char *f = r->spec_nreq > r->spec_first ? spec_find(r, leaf, 0) : NULL;
    if (!f || !frame_object_ok(&r->l, f))
        return 0;
    memset(w, 0, sizeof *w);
    w->leaf = leaf;
    w->leaf_bytes = f;
    r->spec_walked = 0;
    return 1;
}

/* Copies the used top of the thread's current stack chunk (3.11+), and the
 * leaf frame if it lies outside it (and the frames the thread's last walk
 * read on their own; then the counter of code objects made, and the check's
 * read ahead: when the walk takes every frame from this read, r->walk_early
 * is set, r->counter_now is that counter's). On failure the window is empty
 * and frames are read one by one. */
static void copy_window(sw_pystack *r, uint64_t tstate, const unsigned char *ts, uint64_t leaf, window *w)
{
    const sw_py_layout *l = &r->l;
    w->lo = w->hi = w->base = w->leaf = 0;
    w->bytes = w->leaf_bytes = NULL;
    r->spec_nreq = r->spec_first = r->spec_walked = 0;
    if (l->tstate_datastack_chunk == SW_NO_OFFSET)
        return;
    uint64_t chunk = u64_at(ts, l->tstate_datastack_chunk), top = u64_at(ts, l->tstate_datastack_top);
    uint64_t base = chunk + l->chunk_data;
    if (!chunk || top <= base || top - base > MAX_CHUNK_SPAN)
        return;
    uint64_t lo = top - base > WINDOW_MAX ? top - WINDOW_MAX : base;
    uint32_t back = frame_back(l);
    /* The leaf first: a generator's frame, read as close as can be to the
     * thread state that named it (it may yield any moment). */
    int outside = !(leaf >= lo && leaf + l->frame_size <= top) && leaf >= back;
    sw_mem_req req[2] = {{leaf - back, r->leaf_buf, l->frame_size + back, 0},
                         {lo, r->window, (size_t)(top - lo), 0}};
    uint64_t page_end = (top + 4095) & ~4095ull;   /* (as the check reads it again) */
    uint64_t cframe = l->cframe_current_frame != SW_NO_OFFSET ? r->g_cframe[guess_slot(r, tstate)] : 0;
    int counted = first_read(r, tstate, leaf, outside ? req : req + 1, outside ? 2 : 1, checks_ahead(r), cframe, lo,
                             page_end - lo <= WINDOW_MAX ? page_end : top);
    if (!req[1].ok)
        return;
    if (counted) {
        r->counter_now = r->copy_counter;
        r->walk_early = 1;   /* (until the walk reads a frame on its own) */
    }
    w->lo = lo;
    w->hi = top;
    w->base = base;
    w->bytes = r->window;
    guess_keep_window(r, tstate, chunk, lo, top);
    if (outside && req[0].ok) {
        w->leaf = leaf;
        w->leaf_bytes = r->leaf_buf + back;
    }
}

/* The window as guessed (guess), read with the thread state ts names: 1
 * if ts names the chunk guessed, with its top and the leaf frame inside
 * what was read (then w is set), else 0 (copy_window reads it). */
static int guessed_window(sw_pystack *r, uint64_t tstate, const unsigned char *ts, uint64_t leaf, const guess *g,
                          window *w)
{
    const sw_py_layout *l = &r->l;
    if (!g || !g->win_ok)
        return 0;
    uint64_t chunk = u64_at(ts, l->tstate_datastack_chunk), top = u64_at(ts, l->tstate_datastack_top);
    uint64_t base = chunk + l->chunk_data;
    if (chunk != g->chunk || g->lo < base || top <= g->lo || top > g->end || leaf < g->lo ||
        leaf + l->frame_size > top || leaf + l->frame_size < leaf)
        return 0;
    memset(w, 0, sizeof *w);
    w->lo = g->lo;
    w->hi = top;
    w->base = base;
    w->bytes = r->window;
    guess_keep_window(r, tstate, chunk, g->lo, top);
    return 1;
}

/* Before 3.11 a frame is a heap object: one that was freed (its memory on
 * a free list, its f_back reused as the list's link) while the stack was
 * read has a zero reference count; one reused as another object has
 * another type. */
static int frame_object_ok(const sw_py_layout *l, const unsigned char *f)
{
    uint64_t refcnt = u64_at(f, l->ob_refcnt);
    if (refcnt == 0 || refcnt > (1ull << 48))
        return 0;
    return !l->frame_type || u64_at(f, l->ob_type) == l->frame_type;
}

/* 1 if addr is among the frames seen so far in this walk (a cycle, which
 * only a stack read while it changed can show). A 1024-bit filter keeps
 * the common case to one test. */
static int seen_before(sw_pystack *r, uint64_t addr, uint32_t n)
{
    uint32_t bit = (uint32_t)((addr >> 4) ^ (addr >> 14)) & 1023u;
    if (!(r->seen[bit >> 6] & (1ull << (bit & 63)))) {
        r->seen[bit >> 6] |= 1ull << (bit & 63);
        return 0;
    }
    for (uint32_t i = 0; i < n; i++)
        if (r->frame_addrs[i] == addr)
            return 1;
    return 0;
}

/* Torn stacks. The thread runs on while its frames are read, and a
 * generator's (coroutine's, async generator's) frame is linked to the
 * frame that resumed it only while it runs: when it yields or returns the
 * link is cleared (3.9/3.10: gen_send_ex clears f_back after the frame
 * ran; 3.11+: the frame's `previous` is set to NULL at the yield, and its
 * frame, embedded in the generator object, lies outside the copied top of
 * the stack, so it is read after the copy). A walk that meets such a frame
 * would end there and show the generator as a thread's outermost frame,
 * without its callers. So a walk is torn, and redone (TORN_RETRIES times,
 * then the sample is counted as failed), when it meets:
 *   - 3.11+: a generator's frame whose generator is not running (its frame
 *     state, read in the same read as the frame, is not FRAME_EXECUTING) or
 *     whose link is NULL, or a frame with an owner no live stack holds;
 *   - 3.9/3.10: a generator's frame (f_gen set) whose f_back is NULL, or
 *     a frame whose f_back is NULL that does not run (f_executing /
 *     f_state): a generator's frame being made or just finished, its f_gen
 *     not set yet or cleared already (a frame object of the code's
 *     zombie slot, reused);
 *   - 3.12+: a NULL link anywhere but at a C-stack shim frame: every run
 *     of the interpreter begins with one, so a thread's outermost frame is
 *     always one (3.9-3.11 have no such mark: a NULL link on a frame that
 *     is not a generator's is the thread's root).
 * A generator resumed with no Python frame below it (a thread that runs C
 * code only, iterating it: a C extension's thread, `_thread.
 * start_new_thread(list, (gen,))`) has a NULL link too: 3.9-3.11 cannot
 * tell it from a generator that yields or resumes under the reader (its
 * own link is NULL then), so its samples are counted as failed (torn).
 * 3.12+ link it to the shim frame of its resumer's run of the interpreter,
 * whose link is NULL: the thread's root, unless the generator yielded
 * meanwhile and another run with no Python caller put its shim where the
 * resumer's was. That shape is read whole when a second read of both
 * frames, after the walk, finds the same: the generator still running,
 * linked to that shim, and the shim still the thread's root
 * (gen_root_again); else it is torn. (It used to be torn always: every
 * sample of such a thread failed, in process even parked.)
 *
 * The checks after a walk (still_whole, objects_whole) are strict in this
 * process, where a walk they find torn is redone (unparked a few times,
 * then with the thread parked: walk_parked): 3.9/3.10 read every caller again, 3.11+ ask the callers
 * below the anchor to be at the same instruction. From outside they are
 * not (see those functions): each failure there costs a sample. */
#define WALK_TORN (-2)

/* Runs half made (3.11/3.12). Each run of the interpreter function has a
 * _PyCFrame on the C stack, linked to the one before it, the thread
 * state's root_cframe below the outermost run; the thread's leaf is the
 * current frame of the innermost one (tstate->cframe). A run begins by
 * pointing tstate->cframe at its _PyCFrame and only then sets that one's
 * current frame and previous (3.12.1 as built here: tstate->cframe, the
 * frame's link to the run's shim frame, the shim's own link, then the
 * _PyCFrame's two words; 3.11.7: tstate->cframe, the frame's link, then
 * the _PyCFrame), so a thread parked in between has an innermost
 * _PyCFrame whose words are stale stack memory: a current frame of an
 * earlier occupant of those addresses (a generator freed and made again
 * at the same address is the frame being resumed), and a shim whose link
 * is stale too (NULL: the generator stored as the thread's outermost
 * frame, its callers gone; issue 20, a genexpr resumed by all()). Two
 * words read with the leaf tell it: the innermost run's first link below
 * its own frames (3.12: its shim's; 3.11: its entry frame's, is_entry) is
 * the current frame of the _PyCFrame before the innermost one: NULL when
 * that is the thread's root_cframe (no older run below it; greenlet gives
 * each greenlet's stack a root of its own, whose current frame is NULL:
 * read then), else the frame that called into C; and a thread's outermost
 * frame is always its outermost run's shim (3.12) or entry frame (3.11). A walk
 * that meets otherwise is torn (stats "half_made"). 3.13 keeps no
 * _PyCFrame: its runs set tstate->current_frame last, after the shim's
 * link, and 3.9/3.10 set a frame's f_back before tstate->frame. */
static int run_half_made(sw_pystack *r, uint64_t first_run_link)
{
    if (!r->walk_root_cframe)
        return 0;
    if (r->walk_cf_previous == r->walk_root_cframe)
        return first_run_link != 0;
    if (first_run_link)
        return 0;
    /* A NULL link below another _PyCFrame: one whose current frame is NULL
     * too is a root of its own (greenlet starts each greenlet's stack on a
     * _PyCFrame whose previous is root_cframe and whose current frame it
     * sets NULL); one more read, only for such a first run. */
    uint64_t below = 1;
    if (!r->walk_cf_previous ||
        sw_mem_read(&r->mem, r->walk_cf_previous + r->l.cframe_current_frame, &below, sizeof below) != SW_OK)
        return 1;
    return below != 0;
}

/* 3.12+: whether the generator frame `gen`, walked just before the shim
 * frame `shim` whose link is NULL, is still running and linked to it, and
 * the shim still a root (see "Torn stacks"): one more read of each. */
static int gen_root_again(sw_pystack *r, uint64_t gen, uint64_t shim)
{
    const sw_py_layout *l = &r->l;
    const uint32_t back = frame_back(l);
    unsigned char buf[SW_LAYOUT_MAX_READ + SW_GEN_STATE_BACK_MAX];
    if (gen < back || sw_mem_read(&r->mem, gen - back, buf, l->frame_size + back) != SW_OK)
        return 0;
    const unsigned char *f = buf + back;
    if (f[l->frame_owner] != (unsigned char)l->owner_generator || f[-(long)back] != (unsigned char)l->gen_executing ||
        u64_at(f, l->frame_previous) != shim)
        return 0;
    if (sw_mem_read(&r->mem, shim, buf, l->frame_size) != SW_OK)
        return 0;
    return buf[l->frame_owner] == (unsigned char)l->owner_cstack && u64_at(buf, l->frame_previous) == 0;
}

/* Collects the code object addresses of the thread's frames, leaf first,
 * into r->code_addrs. Returns the count, -1 if a frame could not be read
 * or the frames do not form a plausible stack, or WALK_TORN (above). Sets
 * *truncated if the stack is deeper than max_depth. */
static long walk_frames(sw_pystack *r, uint64_t frame, const window *w, int *truncated)
{
    const sw_py_layout *l = &r->l;
    /* A frame read on its own is read with the bytes before it: a
     * generator's frame state (3.11+). */
    const uint32_t back = frame_back(l);
    unsigned char buf[SW_LAYOUT_MAX_READ + SW_GEN_STATE_BACK_MAX];
    uint32_t n = 0;
    /* Shim frames are not kept, so bound the steps as well as the depth. */
    uint64_t steps = 0, max_steps = 2ull * r->lim.max_depth + 64;
    *truncated = 0;
    r->codes_read = r->names_read = 0;
    r->name_ok = NULL;
    r->codes_checked = 0;
    r->frames_trusted = 0;
    memset(r->seen, 0, sizeof r->seen);
    /* 3.11+: a frame in the window below every frame of the window walked
     * before is none of them, and no frame outside the window (another
     * address): it needs no look in r->seen, which then holds the other
     * frames only. */
    uint64_t win_lo = UINT64_MAX, win_hi = 0;
    int win_only_down = 1;   /* every frame of the window walked so far lay below the one before */
    int callee_gen = 0;   /* 3.12+: the frame walked just before is a generator's */
    uint64_t callee = 0;  /* that frame */
    uint64_t kept_callee = 0;   /* the frame walked just before, if kept and in the window, else 0 */
    int runs = 0;               /* 3.11/3.12: the runs of the interpreter met ("Runs half made") */
    int entry = 0;              /* 3.11: the frame walked is its run's first (is_entry) */
    while (frame) {
        if (++steps > max_steps || n == r->lim.max_depth) {
            *truncated = 1;
            break;
        }
        int in_window = in_copy(w, l, frame);
        if (steps <= r->lim.max_depth) {
            if (in_window && win_only_down && frame < win_lo) {
                win_lo = frame;
                if (frame + l->frame_size > win_hi)
                    win_hi = frame + l->frame_size;
            } else {
                if (in_window) {   /* (not below: the window's frames walked before are not in r->seen) */
                    win_only_down = 0;
                    win_lo = frame < win_lo ? frame : win_lo;
                    win_hi = frame + l->frame_size > win_hi ? frame + l->frame_size : win_hi;
                    for (uint32_t i = 0; i + 1 < steps; i++)
                        if (r->frame_addrs[i] == frame)
                            return -1;
                }
                if (seen_before(r, frame, (uint32_t)steps - 1))
                    return -1;
            }
            r->frame_addrs[steps - 1] = frame;
        }
        const unsigned char *f;
        if (in_window) {
            f = w->bytes + (frame - w->lo);
        } else if (w->leaf_bytes && frame == w->leaf) {
            f = w->leaf_bytes;
            if (l->frames_kind == SW_FRAMES_OBJECTS && r->spec_walked < SPEC_DEPTH)
                r->spec_walk[r->spec_walked++] = frame;
        } else {
            /* (before 3.11 a frame read speculatively, before the frame
             * that links to it, may have died and been made again since) */
            f = spec_find(r, frame, back);
            if (f && l->frames_kind == SW_FRAMES_OBJECTS && !frame_object_ok(l, f))
                f = NULL;
            if (!f) {
                r->walk_early = 0;   /* (read after the counter) */
                if (frame < back || sw_mem_read(&r->mem, frame - back, buf, l->frame_size + back) != SW_OK)
                    return -1;
                f = buf + back;
            }
            if (r->spec_walked < SPEC_DEPTH)
                r->spec_walk[r->spec_walked++] = frame;
        }
        if (!in_window && r->own_was && steps <= r->lim.max_depth)   /* (for still_whole) */
            memcpy(r->own_was + (steps - 1) * (l->frame_size + back), f - back, l->frame_size + back);
        uint64_t previous = u64_at(f, l->frame_previous);
        int shim = 0, internal = 0;
        if (l->frames_kind == SW_FRAMES_OBJECTS) {
            if (!frame_object_ok(l, f))
                return -1;
            if (!previous && l->frame_gen != SW_NO_OFFSET && u64_at(f, l->frame_gen))
                return WALK_TORN;   /* a generator that yielded or returned under the reader */
            if (!previous && l->frame_state != SW_NO_OFFSET &&
                (f[l->frame_state] > 7 || !(l->frame_running & (1u << f[l->frame_state]))))
                return WALK_TORN;   /* one not running: a generator's frame being made (f_gen not
                                       set yet) or finished (f_gen cleared before it is freed) */
        } else if (l->frame_owner != SW_NO_OFFSET) {
            unsigned char owner = f[l->frame_owner];
            shim = l->owner_cstack != SW_NO_OFFSET && owner == (unsigned char)l->owner_cstack;
            if (owner == (unsigned char)l->owner_generator) {
                /* Generators' frames never live on the thread's frame stack. */
                if (in_window || f[-(long)back] != (unsigned char)l->gen_executing || !previous)
                    return WALK_TORN;
            } else if (!shim && owner != (unsigned char)l->owner_thread) {
                return WALK_TORN;
            }
            if (!previous && !shim && l->owner_cstack != SW_NO_OFFSET)
                return WALK_TORN;   /* 3.12+: a thread's outermost frame is a shim */
            entry = l->owner_cstack == SW_NO_OFFSET && l->frame_is_entry != SW_NO_OFFSET && f[l->frame_is_entry];
            if ((shim || entry) && ++runs == 1 && run_half_made(r, previous)) {
                r->st.half_made++;
                return WALK_TORN;
            }
            if (!previous && shim && callee_gen && !gen_root_again(r, callee, frame))
                return WALK_TORN;   /* a generator resumed from C with no Python caller, not
                                       confirmed: its resumer's shim may have been reused since */
            callee_gen = owner == (unsigned char)l->owner_generator;
            callee = frame;
            /* (3.13: the __init__ cleanup frame runs no function) */
            internal = !shim && l->frame_func != SW_NO_OFFSET && l->none_addr && u64_at(f, l->frame_func) == l->none_addr;
        }
        if (r->py_end) {
            /* Where each run of the interpreter function starts (nativemerge.h). */
            if (shim && n)
                r->py_end[n - 1] = 1;
            else if (!shim && !internal && n < r->lim.max_depth)
                r->py_end[n] = l->frames_kind == SW_FRAMES_OBJECTS ||
                               (l->frame_is_entry != SW_NO_OFFSET && f[l->frame_is_entry] != 0);
        }
        if (!shim && !internal) {
            uint64_t code = u64_at(f, l->frame_code);
            if (!code)
                return -1;
            if (code == r->trampoline)
                return WALK_TORN;   /* a shim frame read before its owner was set */
            if (r->instrs) {
                if (l->frame_lasti != SW_NO_OFFSET) {
                    uint32_t lasti;
                    memcpy(&lasti, f + l->frame_lasti, sizeof lasti);
                    r->instrs[n] = lasti;
                } else {
                    r->instrs[n] = u64_at(f, l->frame_instr);
                }
            }
            if (r->globals) {
                /* (3.11+ with the function too: a class body or a module runs
                 * with a function object made for that one run) */
                uint64_t fn = l->frame_func != SW_NO_OFFSET ? u64_at(f, l->frame_func) : 0;
                r->globals[n] = u64_at(f, l->frame_globals) ^ (fn << 17 | fn >> 47);
            }
            if (r->kept_addrs)
                r->kept_addrs[n] = frame;
            if (r->gaps)   /* (a callee below its caller in one chunk: no frame size fits) */
                r->gaps[n] = !kept_callee || !in_window ? 0
                             : kept_callee > frame && kept_callee - frame < UINT32_MAX ? (uint32_t)(kept_callee - frame)
                                                                                      : UINT32_MAX;
            r->code_addrs[n++] = code;
        }
        kept_callee = !shim && !internal && in_window ? frame : 0;
        frame = previous;
    }
    if (!frame && steps && r->walk_root_cframe && l->owner_cstack == SW_NO_OFFSET &&
        l->frame_is_entry != SW_NO_OFFSET && !entry) {
        r->st.half_made++;
        return WALK_TORN;   /* 3.11: a thread's outermost frame not its run's entry frame */
    }
    r->steps = steps;
    r->walk_lo = win_lo;
    r->walk_hi = win_hi;
    return n;
}

/* The slot of r->code_globals for a code object. */
static uint32_t globals_slot(uint64_t code)
{
    return (uint32_t)((code >> 4) ^ (code >> 17)) & (GLOBALS_SLOTS - 1);
}

/* What frame i's code object was last seen run with: the same globals
 * (3.11+: and function object) as frame i's, other ones, or unknown (its
 * slot holds another code object's, or no slots are kept). */
enum { GLOBALS_SAME, GLOBALS_OTHER, GLOBALS_UNKNOWN };
static int globals_seen(const sw_pystack *r, uint32_t i)
{
    if (!r->code_globals)
        return GLOBALS_UNKNOWN;
    const uint64_t *g = r->code_globals + 2 * globals_slot(r->code_addrs[i]);
    return g[0] != r->code_addrs[i] ? GLOBALS_UNKNOWN : g[1] == r->globals[i] ? GLOBALS_SAME : GLOBALS_OTHER;
}

/* A module's code object last seen with other globals is another
 * module's: its strings are read again, not confirmed by pointers
 * (sw_codecache_distrust; modules only: a closure's code runs with a new
 * function object at each call, 3.11+, and that costs no reads). */
static void distrust_other_module(sw_pystack *r, uint32_t i, int seen)
{
    const sw_sample_code *e;
    if (seen == GLOBALS_OTHER && (e = sw_codecache_find(r->codes, r->code_addrs[i])) != NULL &&
        e->name_len == 8 && memcmp(e->name, "<module>", 8) == 0)
        sw_codecache_distrust(r->codes, r->code_addrs[i]);
}

/* Notes the globals each frame of the walk ran its code with. */
static void remember_globals(sw_pystack *r, uint32_t n)
{
    if (!r->code_globals)
        return;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t *g = r->code_globals + 2 * globals_slot(r->code_addrs[i]);
        g[0] = r->code_addrs[i];
        g[1] = r->globals[i];
    }
}

/* Adds to reqs[0..*q) (their bytes in *buf, of *cap bytes, *used used;
 * grown as needed) a request for size bytes at addr, unless one is there
 * already (entries of one module share its file name). Its index, or
 * UINT32_MAX out of memory. */
static uint32_t add_request(sw_mem_req *reqs, uint32_t *q, unsigned char **buf, size_t *cap, size_t *used,
                            uint64_t addr, uint32_t size)
{
    for (uint32_t i = 0; i < *q; i++)
        if (reqs[i].addr == addr && reqs[i].len == size)
            return i;
    if (*used + size > *cap) {
        size_t grown = (*used + size) * 2 + 4096;
        unsigned char *b = realloc(*buf, grown);
        if (!b)
            return UINT32_MAX;
        for (uint32_t i = 0; i < *q; i++)   /* (the buffer moved) */
            reqs[i].buf = b + ((unsigned char *)reqs[i].buf - *buf);
        *buf = b;
        *cap = grown;
    }
    reqs[*q] = (sw_mem_req){addr, *buf + *used, size, 0};
    *used += size;
    return (*q)++;
}

/* The bytes read_with_codes read at info's file name pointer with the
 * code headers (NULL if none), and in *got how many. */
static const unsigned char *name_read(const sw_pystack *r, const sw_sample_code *info, size_t *got)
{
    uint32_t span;
    uint64_t at = sw_codecache_filename_at(info, &span);
    for (uint32_t i = 0; at && i < r->names_read; i++) {
        if (r->name_reqs[i].addr == at && r->name_reqs[i].len == span) {
            *got = r->name_reqs[i].ok ? span : 0;
            return r->name_reqs[i].buf;
        }
    }
    return NULL;
}

/* Sets r->name_reqs to read, with the k code headers reqs ask for, the
 * file name of each one's cache entry (each once); returns how many. A
 * header equal to its entry's is then confirmed by its file name too
 * (take_header), read in the same system call rather than one of its own.
 * known[j]: request j's entry, as looked up already (looked_up) or looked
 * up here (stored there for take_header). */
static uint32_t name_requests(sw_pystack *r, const sw_mem_req *reqs, uint32_t k, sw_sample_code **known,
                              int looked_up)
{
    uint32_t m = 0;
    size_t used = 0;
    for (uint32_t j = 0; j < k; j++) {
        if (!looked_up || (known[j] && known[j]->addr != reqs[j].addr))
            known[j] = sw_codecache_find(r->codes, reqs[j].addr);
        const sw_sample_code *e = known[j];
        uint32_t span;
        uint64_t at = e && sw_codecache_settled(e) ? sw_codecache_filename_at(e, &span) : 0;
        if (!at || (m && r->name_reqs[m - 1].addr == at && r->name_reqs[m - 1].len == span))
            continue;   /* (none; or the last one's: a module's code objects lie together) */
        if (add_request(r->name_reqs, &m, &r->name_buf, &r->name_cap, &used, at, span) == UINT32_MAX)
            break;   /* (out of memory: read after, by confirm_codes) */
    }
    return m;
}

/* The entry for the code object whose header q read (NULL if none can
 * be): made or confirmed by it (sw_codecache_get_known: known, its entry
 * as looked up this round, or NULL), and then by its file name read with
 * it, if it was (name_requests). *pending: 1 if it must still be
 * confirmed (confirm_codes), else 0. */
static sw_sample_code *take_header(sw_pystack *r, const sw_mem_req *q, sw_sample_code *known, uint64_t round,
                                   int *pending)
{
    if (r->name_ok && r->name_ok_by->addr == q->addr)
        r->name_ok = NULL;   /* (its entry may be made again now) */
    sw_sample_code *c = q->ok ? sw_codecache_get_known(r->codes, &r->mem, &r->l, known, q->addr, q->buf, round) : NULL;
    r->memo_n = 0;   /* (an entry may have been made again) */
    size_t got = 0;
    const unsigned char *name = c && sw_codecache_settled(c) ? name_read(r, c, &got) : NULL;
    int same = 0;
    if (name && name == r->name_ok && c->filename_len == r->name_ok_by->filename_len &&
        memcmp(c->filename, r->name_ok_by->filename, c->filename_len) == 0) {
        /* Found the same as the same bytes already (one file name read for
         * all of a module's code objects): the same answer. */
        same = 1;
    } else if (name) {
        same = sw_codecache_check_filename(r->codes, &r->mem, &r->l, c, name, got);
        if (same == 1) {
            r->name_ok = name;
            r->name_ok_by = c;
        }
    }
    *pending = same == 0;
    return same < 0 ? NULL : c;
}

/* Confirms again the k entries resolve_codes took from code headers read
 * this walk (r->confirm, each once), in one batched read after it:
 * - an entry whose strings were just read (a new code object, or one at
 *   an address whose header changed) by its code object's header, read
 *   after them (and after its line table, when lines are kept): the code
 *   object must still be alive and the same (sw_codecache_settle). Read
 *   before, while a frame held it, the header gave the strings' addresses;
 *   the strings themselves were read after that frame may have returned,
 *   and its code object been freed with them (a module's code once its
 *   import ends: its file name's memory then held an exception's message,
 *   read as the frame's file name);
 * - any other by its file name, read again: a header equal pointer for
 *   pointer to the entry's may be of another code object made where the
 *   entry's was freed, its strings where the old one's were (the next
 *   module's code: its name the interned "<module>" too, its file name of
 *   the same length), so that the frame was named after the old module.
 *   A file name found changed has the entry's strings read again, and it
 *   is settled by a second read.
 * 0 if all are confirmed; -1 if not (the sample fails). */
static int confirm_codes(sw_pystack *r, uint32_t k)
{
    const sw_py_layout *l = &r->l;
    for (int pass = 0; pass < 2; pass++) {
        uint32_t q = 0;
        size_t used = 0;
        for (uint32_t j = 0; j < k; j++) {
            sw_sample_code *e = r->confirm[j];
            uint32_t size = 0;
            uint64_t addr = 0;
            r->confirm_req[j] = UINT32_MAX;
            if (!sw_codecache_settled(e)) {
                if (r->lines)
                    sw_codecache_read_lines(e, &r->mem, l);
                addr = e->addr;
                size = l->code_size;
            } else if (pass == 0) {
                addr = sw_codecache_filename_at(e, &size);
            }
            if (addr && (r->confirm_req[j] = add_request(r->confirm_reqs, &q, &r->confirm_buf, &r->confirm_cap, &used,
                                                         addr, size)) == UINT32_MAX)
                return -1;
        }
        if (q == 0)
            return 0;
        sw_mem_readv(&r->mem, r->confirm_reqs, q);
        int again = 0;
        for (uint32_t j = 0; j < k; j++) {
            if (r->confirm_req[j] == UINT32_MAX)
                continue;
            const sw_mem_req *req = &r->confirm_reqs[r->confirm_req[j]];
            sw_sample_code *e = r->confirm[j];
            if (!sw_codecache_settled(e)) {
                if (!req->ok || !sw_codecache_settle(r->codes, l, e, req->buf))
                    return -1;
                continue;
            }
            int same = sw_codecache_check_filename(r->codes, &r->mem, l, e, req->buf, req->ok ? req->len : 0);
            if (same < 0)
                return -1;
            again |= !same;
        }
        r->memo_n = 0;   /* (entries may have been read again) */
        if (!again)
            return 0;
    }
    return -1;   /* (a file name changed again: not reached, pass 1 asks no file name) */
}

/* Resolves r->code_addrs[0..n) into r->frames: from the cache when the
 * entry was confirmed recently, else by reading the code objects' headers,
 * all in one batched read (a run of frames of one code object, as in
 * recursion, is read once), each entry made or confirmed by a header then
 * confirmed again after (confirm_codes). An entry is not trusted, however
 * recent, when
 * the frame runs it with other globals (3.11+: or another function object)
 * than the last frame seen with it:
 * a code object freed and another allocated at its address within the
 * cache's trust (a module's code, freed once the module is imported, and
 * the next module's) would otherwise name the frame after the old one.
 * Returns 0 or -1. */
static int resolve_codes(sw_pystack *r, uint32_t n)
{
    const uint32_t cs = r->l.code_size;
    const uint64_t round = r->st.rounds;
    uint32_t k = 0;
    if (r->codes_checked) {
        for (uint32_t i = 0; r->code_globals && i < n; i++) {
            /* (globals_seen, for GLOBALS_OTHER alone: its test inline, the
             * usual case one comparison a frame) */
            const uint64_t *g = r->code_globals + 2 * globals_slot(r->code_addrs[i]);
            if (g[0] == r->code_addrs[i] && g[1] != r->globals[i])
                distrust_other_module(r, i, GLOBALS_OTHER);
        }
        /* Read with the check after the walk, while their frames were
         * seen alive (so holding them): each entry confirmed, none trusted
         * on its age; and stamped with the counter read before that
         * check (trusted_by_counter), once confirmed again. */
        for (uint32_t j = 0; j < r->codes_read; j++) {
            int pending;
            sw_sample_code *c =
                take_header(r, &r->code_reqs[j], j < r->code_known_n ? r->code_known[j] : NULL, round, &pending);
            if (!c)
                return -1;
            r->code_known[j] = c;
            if (pending)
                r->confirm[k++] = c;
            else
                sw_codecache_stamp(c, r->counter_now);
        }
        r->code_known_n = r->codes_read;
        r->known_of_n = r->codes_read == r->n_order ? r->codes_read : 0;   /* (code_reads) */
        if (confirm_codes(r, k) != 0)
            return -1;
        for (uint32_t j = 0; j < k; j++)
            sw_codecache_stamp(r->confirm[j], r->counter_now);
        for (uint32_t i = 0; i < n && !r->frames_trusted; i++) {
            /* (the entry its header's read gave, found by bisection, else looked up) */
            const uint64_t a = r->code_addrs[i];
            const uint32_t j = req_at_or_after(r->code_reqs, 0, r->codes_read, a);
            r->frames[i] = j < r->codes_read && r->code_reqs[j].addr == a ? r->code_known[j]
                                                                          : sw_codecache_find(r->codes, a);
            if (!r->frames[i])
                return -1;
        }
        remember_globals(r, n);
        return 0;
    }
    /* Each frame's entry is looked up once (r->known), and reused by the
     * header's read and the frames' entries after it: an entry stays put
     * within a round (the cache is emptied only at a round's start). */
    for (uint32_t i = 0; i < n; i++) {
        int seen = globals_seen(r, i);
        distrust_other_module(r, i, seen);
        sw_sample_code *e = r->known[i] = sw_codecache_find(r->codes, r->code_addrs[i]);
        r->frames[i] = e && sw_codecache_is_fresh(r->codes, e, round, r->lim.code_ttl) ? e : NULL;
        if (r->frames[i] && r->code_globals && seen != GLOBALS_SAME)
            r->frames[i] = NULL;
        if (r->frames[i] || (k && r->reqs[k - 1].addr == r->code_addrs[i]))
            continue;
        r->req_known[k] = e;
        r->reqs[k] = (sw_mem_req){r->code_addrs[i], r->code_hdrs + (size_t)k * cs, cs, 0};
        k++;
    }
    if (k == 0) {
        remember_globals(r, n);
        return 0;
    }
    const uint32_t m = name_requests(r, r->reqs, k, r->req_known, 1);
    memcpy(r->reqs + k, r->name_reqs, m * sizeof *r->name_reqs);
    if (sw_mem_readv(&r->mem, r->reqs, k + m) < k)
        return -1;
    for (uint32_t j = 0; j < m; j++)
        r->name_reqs[j].ok = r->reqs[k + j].ok;
    r->names_read = m;
    r->name_ok = NULL;
    r->memo_n = 0;
    uint32_t u = 0;
    for (uint32_t j = 0; j < k; j++) {
        int pending;
        sw_sample_code *c = take_header(r, &r->reqs[j], r->req_known[j], round, &pending);
        if (!c)
            return -1;
        if (!pending)
            continue;
        uint32_t i = 0;
        while (i < u && r->confirm[i] != c)   /* (each once: a code object may recur, not in a run) */
            i++;
        if (i == u)
            r->confirm[u++] = c;
    }
    if (confirm_codes(r, u) != 0)
        return -1;
    /* Everything read is now confirmed in this round. */
    for (uint32_t i = 0; i < n; i++) {
        if (!r->frames[i])   /* (an entry made this round: looked up) */
            r->frames[i] = r->known[i] ? r->known[i] : sw_codecache_find(r->codes, r->code_addrs[i]);
        if (!r->frames[i])
            return -1;
    }
    remember_globals(r, n);
    return 0;
}

/* Frames that fit (3.11+). The interpreter takes each frame from the top
 * of the thread's stack chunk, as many words as its code object needs
 * (layout.h code_nlocalsplus), and gives them back when it returns: a
 * frame called by another in the same chunk begins right where its
 * caller's words end. So two frames of a walk, caller and callee, both
 * in the copied window, must lie exactly the caller's frame size apart.
 * A walk that joined a dead frame to the live frame below it fails that
 * when the live frame is of another code object (of another size) than
 * the one that called the dead frame: a loop calling g (which calls h)
 * then f at g's slot, read with the thread state while h ran and the
 * window once f had taken the slot (h's dead frame above it, still linked
 * there), is h called by f, a stack the program never had. The check
 * after the walk (still_whole) rejects that when it reads the stack again
 * later, but not when a whole round of the loop passed within its one
 * system call, so that both ends of its read saw h and its middle f, as
 * the walk had: the loop runs on on the other core during the read's few
 * microseconds (3.11, load 10: 4 samples in 17,672 of
 * tests/programs/slot_reuse.py, every one of them a misfit). A slot reused
 * by code whose frames are as large as the dead frame's caller's is not
 * told (memory read while the thread runs cannot tell it: only a parked
 * walk, which callees_held asks for). 1 if every such pair of the n
 * frames resolved (r->frames) fits; 0 (the walk is torn) if not. */
static int frames_fit(sw_pystack *r, uint32_t n)
{
    for (uint32_t i = 1; r->gaps && i < n; i++)
        if (r->gaps[i] && r->gaps[i] != (uint64_t)sw_codecache_frame_words(r->frames[i]) * r->l.pointer_size)
            return 0;
    return 1;
}

/* Callers that hold their callees (3.11+, in-process). A Python call
 * leaves the function it calls on the caller's value stack (CALL keeps it
 * there while the callee runs; 3.13's inlined calls write the new frame's
 * address over it; `exec` of a module's code holds the code object), so a
 * callee whose function, code object or address is nowhere in its
 * caller's words, from its locals up to the callee, was either called
 * another way (from C without the function on the caller's stack:
 * __init__ by a class call, a property, __instancecheck__, a key function
 * under map) or is a dead frame still linked to a slot that a call of
 * another function took since, the same-size slot case of frames_fit,
 * which no read made while the thread runs tells (docs/architecture.md
 * "Torn stacks"). Either way an unparked walk is redone parked; a thread
 * that cannot be parked (muted) has its walk retried once, then failed,
 * so that its genuine calls from C fail while it is muted. (They were not
 * asked before: a park timed out on a busy machine muted slot_reuse.py's
 * `same` thread for 256 rounds, and a whole round of its loop within
 * each of the walk's two system calls gave h2 called by f2, still_whole
 * passing: 4 samples in 232 such walks, 1 run in 40 on 3.13, load 17.)
 * The caller's dead stack slots count too: on 3.11/3.12 a function that
 * took the slot and whose stack never reaches the word where its
 * predecessor's callee's function was left still "holds" it (not closed;
 * on 3.13 the return value overwrites that word: docs/architecture.md
 * "Stale words"). Pairs of frames both in the copied window, next to each
 * other in the walk but for C-stack shims between. 1 if every such pair
 * holds. */
static int callees_held(sw_pystack *r, const window *w)
{
    const sw_py_layout *l = &r->l;
    if (l->frame_func == SW_NO_OFFSET || !w->bytes)
        return 1;
    const uint32_t back = frame_back(l);
    uint64_t walked = r->steps < r->lim.max_depth ? r->steps : r->lim.max_depth, callee = 0;
    for (uint64_t i = 0; i < walked; i++) {
        uint64_t a = r->frame_addrs[i];
        if (!in_copy(w, l, a)) {
            const unsigned char *f = r->own_was + i * (l->frame_size + back) + back;
            if (l->owner_cstack == SW_NO_OFFSET || f[l->frame_owner] != (unsigned char)l->owner_cstack)
                callee = 0;   /* (a generator's frame, an older chunk's: not checked) */
            continue;
        }
        const unsigned char *f = w->bytes + (a - w->lo);
        if (callee > a && callee - a <= WINDOW_MAX && w->hi - callee >= l->frame_size) {
            const unsigned char *cf = w->bytes + (callee - w->lo);
            uint64_t fn = u64_at(cf, l->frame_func), code = u64_at(cf, l->frame_code);
            if (fn && fn != l->none_addr) {
                int held = 0;
                for (uint64_t o = l->frame_size; !held && o + 8 <= callee - a; o += 8) {
                    uint64_t v = u64_at(f, (uint32_t)o);
                    held = v == fn || v == callee || v == code;
                }
                if (!held)
                    return 0;
            }
        }
        callee = a;
    }
    return 1;
}

/* Returned frames. 3.11/3.12: 1 if the walk's leaf (its first frame, of
 * n kept) rests on a return instruction: the frame is returning, or it
 * returned and its memory was left as it was, its caller's slot taken by
 * the caller's next call since. A walk that read the thread state while
 * the leaf ran and its frames after that (slot_reuse.py `same`: h2 returns
 * to g2, g2 returns, f2 takes g2's slot, the next round of the loop
 * between the walk's reads) shows h2 called by f2, and callees_held can
 * pass it: on 3.11/3.12 a call pops the callee's function off the caller's
 * stack, so the check looks at the caller's dead words, where f2, in g2's
 * slot, still has g2's word pointing at h2 (1 differing sample in 14,674,
 * 1 run in 15 with a compiler running beside it, 3.11). Such a walk is
 * treated as torn (redone parked). A leaf truly at its return is parked
 * too, rarely: one instruction of its function. The code object must be
 * known to the cache already (its instructions are read on first use);
 * one met for the first time is not told. */
static int returned_leaf(sw_pystack *r, uint32_t n)
{
    if (!n || !r->instrs || r->l.op_return_value == SW_NO_OFFSET)
        return 0;
    sw_sample_code *info = sw_codecache_find(r->codes, r->code_addrs[0]);
    if (!info || !sw_codecache_returns_at(r->codes, info, &r->mem, &r->l, r->instrs[0]))
        return 0;
    r->st.returned++;
    return 1;
}

/* Sorts a[0..k) (k at most SORT_BY_INSERTION), by insertion. */
static void sort_by_insertion(uint64_t *a, uint32_t k)
{
    for (uint32_t j = 1; j < k; j++) {
        uint64_t t = a[j];
        uint32_t i = j;
        for (; i > 0 && a[i - 1] > t; i--)
            a[i] = a[i - 1];
        a[i] = t;
    }
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sets r->code_reqs to read the header of each code object of the walk's
 * n frames (each once, in address order) and returns how many. The
 * checks after a walk (still_whole, objects_whole) read them in their own
 * system call, before the frames (read_with_codes), and resolve_codes
 * takes them from there:
 * a cache entry is then never trusted on its age alone, which named a
 * frame after a freed code object whose address a new one took.
 * In address order, each once: the code objects of one module mostly lie
 * close together, and requests close together are read as one range
 * (mem.c). A walk's code objects are mostly the last walk's: each is
 * looked up in the last walk's ordered list (a binary search), only the
 * new ones are sorted, and the two merged (qsort of the whole list was a
 * third of a sample's instructions at 34 frames). */
static uint32_t code_reads(sw_pystack *r, uint32_t n)
{
    const uint32_t cs = r->l.code_size, d = r->lim.max_depth;
    const uint64_t *old = r->code_order;
    uint64_t *cur = r->code_order + d, *fresh = r->code_order + 2 * (size_t)d;
    uint32_t m = r->n_order, nf = 0;
    r->code_known_n = 0;   /* (another list: read_with_codes looks its entries up) */
    if (n && n == r->reads_of_n && memcmp(r->code_addrs, r->reads_of, n * sizeof *r->reads_of) == 0) {
        /* The same code objects as the last call, frame for frame (most
         * walks of a thread whose deep end comes back to where it was):
         * the same list, taken as it stands. */
        for (uint32_t u = 0; u < m; u++)
            r->code_reqs[u] = (sw_mem_req){old[u], r->code_hdrs + (size_t)u * cs, cs, 0};
        /* Their entries as the last read took them, if it took them all
         * and each is still its address's (none freed: reads_of is
         * forgotten when the cache is emptied). */
        uint32_t ok = r->known_of_n == m;
        for (uint32_t u = 0; ok && u < m; u++)
            ok = !r->code_known[u] || r->code_known[u]->addr == old[u];
        r->code_known_n = ok ? m : 0;
        return m;
    }
    memcpy(r->reads_of, r->code_addrs, n * sizeof *r->reads_of);
    r->reads_of_n = n;
    r->known_of_n = 0;
    memset(r->order_seen, 0, m);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t a = r->code_addrs[i];
        if (i && a == r->code_addrs[i - 1])
            continue;
        uint32_t lo = 0, hi = m;
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (old[mid] < a)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < m && old[lo] == a)
            r->order_seen[lo] = 1;
        else
            fresh[nf++] = a;
    }
    if (nf > SORT_BY_INSERTION)
        qsort(fresh, nf, sizeof *fresh, by_u64);
    else
        sort_by_insertion(fresh, nf);
    uint32_t u = 0, i = 0, j = 0;
    while (i < m || j < nf) {
        uint64_t a;
        if (i < m && !r->order_seen[i]) {
            i++;
            continue;
        }
        if (j >= nf || (i < m && old[i] < fresh[j]))
            a = old[i++];
        else
            a = fresh[j++];
        if (u && cur[u - 1] == a)
            continue;   /* (a code object twice among the new ones) */
        cur[u] = a;
        r->code_reqs[u] = (sw_mem_req){a, r->code_hdrs + (size_t)u * cs, cs, 0};
        u++;
    }
    memcpy(r->code_order, cur, u * sizeof *cur);
    r->n_order = u;
    return u;
}

/* Code objects by counter. 3.12 gives each code object it makes the next
 * value of one process-wide counter (co_version, from
 * _Py_next_func_version; functions' versions are taken from it too),
 * which only grows, and stays 0 once it has run out. 3.13 keeps that
 * counter per interpreter (func_state.next_version, taken by the
 * interpreter that makes the code object): the main interpreter's counts
 * every code object made in the process only while no other interpreter
 * was ever made, so it is trusted only while the count of interpreters
 * made (interpreters.next_id), read right after it, is 1 (a code object
 * made by a subinterpreter, once one exists, could reach a frame of the
 * main one without moving its counter). A code object whose
 * header a check after a walk confirmed (its frames seen holding it
 * before and after that read) was alive at the end of that check: another
 * code object can take its address only once it is freed, after that
 * check, and a frame can hold the new one only once it is made, which
 * moves the counter. So when the counter read before such a check (last
 * in its walk's first read) reads the same in a later walk's first read,
 * after that walk's frames (every frame of the walk taken from that read:
 * walk_early), each code object of that walk whose cache entry carries
 * that value (sw_codecache_stamp) is the one the entry names, and its
 * header is not read again. A program that makes no code objects (most,
 * once started) then costs a read of 4 bytes per walk instead of every
 * code object's header (34 frames of tests/programs/deep_known.py: 31
 * headers in 7 ranges of 9 pages, 60% of the check's read). (The counter
 * is an aligned 4-byte word the kernel copies in one move, lowest byte
 * first if ever byte by byte: a read that an increment tears is still
 * never below the value at its start.) Drops those from
 * r->code_reqs[0, k), keeping the order; returns how many are left. */
static uint32_t trusted_by_counter(sw_pystack *r, uint32_t k)
{
    if (!r->walk_early || !r->counter_now)
        return k;
    uint32_t u = 0;
    for (uint32_t j = 0; j < k; j++)
        if (!sw_codecache_stamped(r->codes, r->code_reqs[j].addr, r->counter_now))
            r->code_reqs[u++] = r->code_reqs[j];
    r->st.codes_by_counter += k - u;
    return u;
}

/* 1 if the code object of each of the walk's n frames is trusted by the
 * counter (above), r->frames then set to their entries: the check reads
 * no header, and resolve_codes looks nothing up (the usual case: a third
 * of the instructions of a sample saved at 34 frames). The outer frames
 * that run the code objects of the last such walk's, at the same depth,
 * take its entries without a lookup (memo_*: the entries stay put, and
 * keep their stamps, while the counter does, no header is read and the
 * cache is not emptied). */
static int all_trusted(sw_pystack *r, uint32_t n)
{
    if (!r->walk_early || !r->counter_now)
        return 0;
    uint32_t same = 0, m = r->memo_counter == r->counter_now ? r->memo_n : 0;
    while (same < n && same < m && r->code_addrs[n - 1 - same] == r->memo_codes[m - 1 - same]) {
        r->frames[n - 1 - same] = r->memo_frames[m - 1 - same];
        same++;
    }
    uint32_t k = same;
    for (uint32_t i = 0; i < n - same; i++) {
        if (i && r->code_addrs[i] == r->code_addrs[i - 1]) {
            r->frames[i] = r->frames[i - 1];
            continue;
        }
        if (!(r->frames[i] = sw_codecache_stamped(r->codes, r->code_addrs[i], r->counter_now)))
            return 0;
        k++;
    }
    r->st.codes_by_counter += k;
    r->frames_trusted = 1;
    memcpy(r->memo_codes, r->code_addrs, n * sizeof *r->code_addrs);
    memcpy(r->memo_frames, r->frames, n * sizeof *r->frames);
    r->memo_n = n;
    r->memo_counter = r->counter_now;
    return 1;
}

/* Performs the k requests of r->code_reqs, then the nreq of r->reqs
 * (which move up by k), in one batched read. 1 if the nreq ones all
 * succeeded; the code reads' ok flags are set in r->code_reqs, and
 * r->codes_read to k.
 * The code objects' headers come first: a code object is known to be the
 * one a frame ran only while that frame holds it, so its header must be
 * read between the walk and the frames' second read, which finds them
 * still alive (and so still holding it). Read after that second read, a
 * header could be of the next code object at its address: the frame's
 * module had run, its code was freed and the next import's took its place
 * (the reader preempted within the read, on a busy machine), which named
 * a module's frame after a function of the next one. */
static int read_with_codes(sw_pystack *r, size_t nreq, uint32_t k)
{
    /* (and their entries' file names; code_reads may know the entries) */
    const uint32_t m = name_requests(r, r->code_reqs, k, r->code_known, k && r->code_known_n == k);
    r->code_known_n = k;
    memmove(r->reqs + k + m, r->reqs, nreq * sizeof *r->reqs);
    memcpy(r->reqs, r->code_reqs, k * sizeof *r->code_reqs);
    memcpy(r->reqs + k, r->name_reqs, m * sizeof *r->name_reqs);
    sw_mem_readv(&r->mem, r->reqs, nreq + k + m);
    for (uint32_t j = 0; j < k; j++)
        r->code_reqs[j].ok = r->reqs[j].ok;
    for (uint32_t j = 0; j < m; j++)
        r->name_reqs[j].ok = r->reqs[k + j].ok;
    r->codes_read = k;
    r->names_read = m;
    r->name_ok = NULL;   /* (take_header: of this read only) */
    r->codes_checked = 1;
    for (size_t i = 0; i < nreq; i++)
        if (!r->reqs[k + m + i].ok)
            return 0;
    return 1;
}

/* The GIL's address (with thread states only: nothing else uses it), found
 * once: the GIL of an interpreter does not move. 0 if unknown. */
static uint64_t gil_address(sw_pystack *r)
{
    const sw_py_layout *l = &r->l;
    if (!r->states || l->gil_size == SW_NO_OFFSET)
        return 0;
    if (!r->gil_addr) {
        uint64_t a = 0;
        if (l->interp_gil != SW_NO_OFFSET) {
            if (sw_mem_read(&r->mem, r->interp + l->interp_gil, &a, sizeof a) != SW_OK)
                a = 0;
        } else {
            a = l->runtime_addr + l->runtime_gil;
        }
        r->gil_addr = a;
    }
    return r->gil_addr;
}

/* The kernel thread id of the thread whose state (at tstate) is ts, or 0:
 * before 3.11 read in its struct pthread, taken from g when g read it
 * there (guess). */
static uint32_t kernel_tid(sw_pystack *r, uint64_t tstate, const unsigned char *ts, const guess *g)
{
    const sw_py_layout *l = &r->l;
    if (l->tstate_native_thread_id != SW_NO_OFFSET)
        return (uint32_t)u64_at(ts, l->tstate_native_thread_id);
    uint32_t tid = 0;
    uint64_t pthread = u64_at(ts, l->tstate_thread_id);
    if (l->thread_tid == SW_NO_OFFSET)
        return 0;
    r->g_pthread[guess_slot(r, tstate)] = pthread;
    if (g && g->tid_ok && g->pthread == pthread)
        return g->tid;
    if (sw_mem_read(&r->mem, pthread + l->thread_tid, &tid, sizeof tid) != SW_OK)
        return 0;
    return tid;
}

/* Fills s->state, s->cpu_ns, s->native_tid and the GIL flag of the thread
 * whose state (at address tstate) is ts. */
static void probe_thread(sw_pystack *r, uint64_t tstate, const unsigned char *ts, const guess *g, sw_sample *s)
{
    s->state = SW_STATE_UNKNOWN;
    s->cpu_ns = SW_NO_CPU;
    uint32_t tid = kernel_tid(r, tstate, ts, g);
    if (tid && !s->native_tid)
        s->native_tid = tid;
    if (!r->states || (!tid && !s->thread_id))
        return;   /* (no tid nor ident: a thread state not bound to its thread yet, it is starting) */
    uint64_t lo = r->gil_addr, hi = r->gil_addr ? r->gil_addr + r->l.gil_size : 0;
    /* The thread found holding the GIL at the round's start runs (or is
     * runnable): its state file is not read, a system call (~1 us) of
     * every sample of a program of one busy thread saved. (A thread that
     * blocks in a system call without releasing the GIL, which a C
     * extension may do, is so counted running, holding every other up.) */
    int holds = r->gil_holder && r->gil_holder == tstate;
    s->state = holds ? sw_threadstate_probe_running(r->states, tid, r->st.rounds, &s->cpu_ns)
                     : sw_threadstate_probe(r->states, tid, r->st.rounds, lo, hi, &s->cpu_ns);
    r->st.state_unknown += s->state == SW_STATE_UNKNOWN;
    /* (Not capped at the sample's weight: that is the time between the
     * rounds' starts, and a thread's two probes lie further apart when the
     * sampler was held up between a round's start and the probe. The
     * deltas of a thread's probes add up to the CPU time it used.) */
    if (s->cpu_ns == SW_NO_CPU)
        r->st.cpu_unknown++;
    if (holds)
        s->flags |= SW_SAMPLE_GIL_HELD;
}

/* Native mode: 1 if thread tid did not answer recently (it blocks the
 * signal): asking it again would cost every round the whole wait. */
static int muted(sw_pystack *r, uint32_t tid)
{
    for (unsigned i = 0; i < MUTE_SLOTS; i++)
        if (r->mute_tid[i] == tid && r->st.rounds < r->mute_until[i])
            return 1;
    return 0;
}

/* 1 if any thread is muted now (muted() then needs the thread's id). */
static int any_muted(const sw_pystack *r)
{
    for (unsigned i = 0; i < MUTE_SLOTS; i++)
        if (r->st.rounds < r->mute_until[i])
            return 1;
    return 0;
}

/* Mutes thread tid: MUTE_ROUNDS_FIRST rounds, or twice its last muting's
 * (up to MUTE_ROUNDS) when that one ended less than four of its lengths
 * ago. A thread that blocks the signal for good is soon muted for the
 * longest, each park it is asked costing a timeout; one whose park timed
 * out on a busy machine (it waited for a CPU, or had just entered the
 * handler) is asked again soon: a muted thread's walks are unparked, and
 * a running thread's mostly tear (pyflakes at 5 kHz beside 8 busy loops on
 * 2 cores: 180 of 1,823 samples failed in one muting of 256 rounds). */
static void mute(sw_pystack *r, uint32_t tid)
{
    unsigned k = 0;
    for (unsigned i = 1; i < MUTE_SLOTS; i++)
        if (r->mute_until[i] < r->mute_until[k])
            k = i;
    uint32_t len = MUTE_ROUNDS_FIRST;
    for (unsigned i = 0; i < MUTE_SLOTS; i++)
        if (r->mute_tid[i] == tid && r->mute_len[i] &&
            r->st.rounds < r->mute_until[i] + 4ull * r->mute_len[i]) {
            k = i;
            len = r->mute_len[i] * 2 > MUTE_ROUNDS ? MUTE_ROUNDS : r->mute_len[i] * 2;
        }
    r->mute_tid[k] = tid;
    r->mute_len[k] = len;
    r->mute_until[k] = r->st.rounds + len;
}

/* Names the nn captured return addresses (the leaf one is the interrupted
 * instruction itself; the others are named by the byte before them, inside
 * the call), with lines the line of each where its symbol has one, and
 * merges them with the np Python frames into r->merged (their pcs into
 * r->merged_pcs). Returns the merged depth, or -1. */
static long merge_native(sw_pystack *r, uint32_t nn, int truncated, uint32_t np)
{
    for (uint32_t k = 0; k < nn; k++) {
        int ev = 0;
        r->nat[k] = sw_symbols_lookup_line(r->syms, k ? r->pcs[k] - 1 : r->pcs[k],
                                           r->unwinder && (r->pc_flags[k] & SW_UNWIND_BY_FP), &ev,
                                           r->lines ? &r->nat_lines[k] : NULL);
        if (!r->nat[k])
            return -1;
        r->nat_eval[k] = (unsigned char)ev;
    }
    sw_native_frames nat = {r->nat, r->nat_eval, r->lines ? r->nat_lines : NULL, r->pcs, nn, truncated};
    long m = sw_merge_native(&nat, r->frames, r->lines, r->py_end, np, r->merged, r->lines ? r->merged_lines : NULL,
                             r->merged_pcs, r->lim.max_depth + SW_NSTACK_MAX);
    return m < 0 ? -1 : m;
}

/* The top frame of the thread whose state (at tstate) is ts (through the
 * cframe on 3.11-3.12: taken from g, read in the same system call as ts,
 * when ts names the cframe g read, else read now). 0 on success, -1 if
 * unreadable, WALK_TORN for a run half made with no current frame. */
static int leaf_frame(sw_pystack *r, uint64_t tstate, const unsigned char *ts, const guess *g, uint64_t *frame)
{
    *frame = u64_at(ts, r->l.tstate_frame);
    r->walk_cf_previous = r->walk_root_cframe = 0;
    if (*frame && r->l.cframe_current_frame != SW_NO_OFFSET) {
        uint64_t cf = *frame, words[2];
        r->g_cframe[guess_slot(r, tstate)] = cf;
        if (g && g->cf_ok && g->cframe == cf)
            memcpy(words, g->cf_words, sizeof words);
        else if (sw_mem_read(&r->mem, cf + r->l.cframe_current_frame, words, sizeof words) != SW_OK)
            return -1;
        *frame = words[0];
        r->walk_cf_previous = words[1];
        r->walk_root_cframe = tstate + r->l.tstate_root_cframe;
        /* No current frame: a thread running no Python code (on its
         * root_cframe, or on a greenlet's own root, whose previous is the
         * root_cframe), else a run half made whose stale current frame is
         * NULL (see "Runs half made"): torn, not a thread without frames
         * (its sample would be lost: the main thread in Thread.join,
         * 1 run in ~50 of test_trace_samples.py's threads that end). */
        if (!words[0] && cf != r->walk_root_cframe && words[1] != r->walk_root_cframe) {
            r->st.half_made++;
            return WALK_TORN;
        }
    }
    return 0;
}

/* 3.11+, the check after a walk: 1 if the thread's current frame `now`
 * is the walk's anchor frame or a callee of it, linked down to it (a
 * thread found above the anchor only by address may stand on frames of
 * another call whose memory still holds the old ones); frames in [lo, rhi)
 * are taken from r->recheck. */
static int at_or_above(sw_pystack *r, uint64_t now, uint64_t anchor, const window *w, uint64_t lo, uint64_t rhi)
{
    const sw_py_layout *l = &r->l;
    if (!anchor || now == anchor)
        return 1;
    if (!(anchor >= w->lo && anchor < w->hi && now > anchor && now - w->base < MAX_CHUNK_SPAN))
        return 0;
    unsigned char buf[SW_LAYOUT_MAX_READ];
    uint64_t f = now;
    for (uint32_t steps = 0; f != anchor; steps++) {
        if (!f || steps > 2 * r->lim.max_depth + 64)
            return 0;
        const unsigned char *fb;
        if (rhi > lo && f >= lo && f < rhi && rhi - f >= l->frame_size) {   /* (f may be anything) */
            fb = r->recheck + (f - lo);
        } else {
            if (sw_mem_read(&r->mem, f, buf, l->frame_size) != SW_OK)
                return 0;
            fb = buf;
        }
        f = u64_at(fb, l->frame_previous);
    }
    return 1;
}

/* The check's read made ahead (see "Checked ahead"), for the walk of
 * n frames in w: 1 if it holds all the check would read (then *now is the
 * thread's current frame from it, and r->again the frames read on their
 * own, read again), else 0. */
static int checked_ahead(sw_pystack *r, const window *w, uint64_t walked, uint64_t cf_walk, uint64_t *now)
{
    const sw_py_layout *l = &r->l;
    if (!r->pre_ok || !r->walk_early || w->lo != r->pre_lo || w->hi > r->pre_end || w->leaf_bytes)
        return 0;
    if (l->cframe_current_frame != SW_NO_OFFSET) {
        if (!cf_walk || cf_walk != r->pre_cframe || r->pre_frame != cf_walk)
            return 0;   /* (another _PyCFrame now: the check reads it) */
        *now = r->pre_now;
    } else {
        *now = r->pre_frame;
    }
    const uint32_t back = frame_back(l), first = r->spec_first, nf = r->spec_nreq - first;
    const size_t each = l->frame_size + back;
    for (uint64_t i = 0; i < walked; i++) {
        uint64_t a = r->frame_addrs[i];
        if (in_copy(w, l, a))
            continue;
        uint32_t j = 0;
        while (j < nf && r->spec_reqs[first + j].addr + back != a)
            j++;
        if (j == nf)
            return 0;
        memcpy(r->again + i * each, r->spec_again + j * each, each);
    }
    return 1;
}

/* 3.11+ (the thread running on while read): 1 if the stack just walked
 * is whole, 0 if torn. One read, after the walk: the thread's current
 * frame, and the part of the copied window that the walk used, whose
 * frames must still link to the same frames and run the same code.
 * The current frame must be the walk's leaf, or (a leaf in the copied
 * window) a frame above it in its chunk: the thread called on; a
 * generator's leaf frame must still run, resumed by the same frame, or
 * else (it yielded since) the thread must be at or above its caller. While the
 * leaf lives its callers cannot return or yield, but the frames read on
 * their own (C-stack shims, generators' frames below the leaf, older
 * chunks) are read apart from the copy, some before it (speculatively,
 * with the thread state), and the leaf may have been replaced by a call of
 * the same code between: those frames are read again too and must be as
 * the walk read them (a frame C entered sampled alone: see below). The copy itself
 * takes microseconds, and a thread that returns below the leaf and calls
 * back up meanwhile (an event loop calling small functions in turn)
 * leaves a copy whose lower frames are of another instant than its upper
 * ones: the second read of those frames tells, and so does a thread found
 * below its leaf. A leaf replaced by a call of the same code, on the same
 * callers, in between is not told: the stack read is then one of the same
 * functions. (Requiring the very same leaf would fail most samples of
 * call-heavy code, whose leaf changes within the walk's microseconds.) */
static int still_whole(sw_pystack *r, uint64_t tstate, uint64_t leaf, const window *w, uint32_t n, int strict)
{
    const sw_py_layout *l = &r->l;
    uint64_t walked = r->steps < r->lim.max_depth ? r->steps : r->lim.max_depth;
    uint64_t lo = r->walk_lo, hi = r->walk_hi;   /* (the walk's frames in w: walk_frames) */
    /* A generator's leaf frame (read with the window, before it) is read
     * again instead of the current frame: still running, resumed by the
     * same frame, it is on the stack, and so are its callers. */
    uint32_t back = l->gen_state_back;
    const uint32_t own_back = frame_back(l);   /* (frames read on their own, as walk_frames reads them) */
    const size_t each = l->frame_size + own_back;
    int gen_leaf = w->leaf_bytes && leaf == w->leaf && w->leaf_bytes[l->frame_owner] == (unsigned char)l->owner_generator;
    /* The thread state afresh: its current frame (3.11/3.12: through its
     * innermost _PyCFrame, which lives on the C stack and changes with
     * every entry into the interpreter, so the pointer to it is never
     * taken from before the walk: the one of the walk is guessed, and if
     * the fresh state names another the rest is read again after it). Then,
     * in the same system call, the current frame and the stack from the
     * lowest frame walked up to the end of the page of the copy's top (a
     * thread that called on: frames above that are read one by one), read
     * again. */
    uint64_t ts_frame = 0, ts_end = 0;   /* (all the check needs of the thread state) */
    uint64_t now = 0, now_end = 0, cframe = 0, cf_walk = 0, rhi = hi;
    int via_cframe = l->cframe_current_frame != SW_NO_OFFSET;
    if (via_cframe)
        cf_walk = r->g_cframe[guess_slot(r, tstate)];
    if (hi > lo) {
        uint64_t page_end = (w->hi + 4095) & ~4095ull;
        rhi = page_end - lo <= WINDOW_MAX ? page_end : hi;
    }
    sw_mem_req *req = r->reqs;
    size_t nreq = 0;
    req[nreq++] = (sw_mem_req){tstate + l->tstate_frame, &ts_frame, sizeof ts_frame, 0};
    const int trusted = all_trusted(r, n);
    const int ahead = !strict && trusted && !gen_leaf && checked_ahead(r, w, walked, cf_walk, &now);
    if (ahead) {
        /* (the check's read, made ahead: the whole copy read again) */
        lo = r->pre_lo;
        rhi = r->pre_end;
        r->codes_read = r->names_read = 0;
        r->name_ok = NULL;
        r->codes_checked = 1;   /* (as read_with_codes with no header to read) */
        r->st.checked_ahead++;
    }
    for (int again = 0; !ahead; again++) {
        if (via_cframe && cf_walk)
            req[nreq++] = (sw_mem_req){cf_walk + l->cframe_current_frame, &now, sizeof now, 0};
        if (rhi > lo)
            req[nreq++] = (sw_mem_req){lo, r->recheck, (size_t)(rhi - lo), 0};
        if (gen_leaf)
            req[nreq++] = (sw_mem_req){leaf - back, r->leaf_again, l->frame_size + back, 0};
        for (uint64_t i = gen_leaf; i < walked; i++)
            if (!in_copy(w, l, r->frame_addrs[i]))
                req[nreq++] = (sw_mem_req){r->frame_addrs[i] - own_back, r->again + i * each, each, 0};
        if (strict) {   /* (the end of the read: below) */
            req[nreq++] = (sw_mem_req){tstate + l->tstate_frame, &ts_end, sizeof ts_end, 0};
            if (via_cframe && cf_walk)
                req[nreq++] = (sw_mem_req){cf_walk + l->cframe_current_frame, &now_end, sizeof now_end, 0};
        }
        if (!read_with_codes(r, nreq, trusted ? 0 : trusted_by_counter(r, code_reads(r, n))))
            return 0;
        if (again)
            break;
        if (via_cframe && !(cframe = ts_frame))
            return 0;
        if (!via_cframe)
            now = ts_frame;
        if (!via_cframe || cframe == cf_walk)
            break;
        cf_walk = cframe;   /* another _PyCFrame: read it, and what follows, after the state */
        nreq = 0;
    }
    /* The frame the thread must be at or above: the leaf, or a generator
     * leaf's caller when the generator yielded since (its caller then ran
     * on from where it resumed it). */
    uint64_t anchor = leaf;
    if (gen_leaf) {
        const unsigned char *g = r->leaf_again + back;
        if (g[-(long)back] == (unsigned char)l->gen_executing &&
            u64_at(g, l->frame_previous) == u64_at(w->leaf_bytes, l->frame_previous))
            anchor = 0;   /* still running, resumed by the same frame */
        else
            anchor = u64_at(w->leaf_bytes, l->frame_previous);
    }
    /* Above it: its callees, linked down to it from the thread's current
     * frame. Strict, also at the end of the read: the thread state and its
     * current frame read again after the copy, in the same system call, so
     * that the copy read again is bracketed by two instants at which the
     * thread stood at or above the anchor. Without the second, a read
     * taken while the leaf ran and a copy taken after the thread had
     * returned below it and called another function at its caller's slot
     * (the leaf's dead frame above, still linked there) passed when the
     * first read had torn the same way: the program's loop, one round
     * later, had left every byte of the frames compared as it was
     * (tests/programs/slot_reuse.py, 3.11, with a core busy: about 1
     * sample in 3,000). A thread that went below the anchor and back up
     * within the one system call is still not told (frames_fit tells it
     * when the slot was taken by code of another frame size). */
    if (!at_or_above(r, now, anchor, w, lo, rhi))
        return 0;
    if (strict) {
        uint64_t end = ts_end;   /* (3.11/3.12: its _PyCFrame) */
        if (via_cframe && end == cf_walk && cf_walk)
            end = now_end;
        else if (via_cframe && (!end || sw_mem_read(&r->mem, end + l->cframe_current_frame, &end, sizeof end) != SW_OK))
            return 0;   /* (another _PyCFrame: its current frame, read now) */
        if (!at_or_above(r, end, anchor, w, lo, rhi))
            return 0;
    }
    /* Each frame walked still links to the same frame and runs the same
     * code; and, strict, those below the anchor, which cannot have run
     * since if the walk is whole, are still byte for byte what they were:
     * the frame and its locals and value stack, up to its callee when that
     * lies above it in the copy. Comparing the instruction alone let a walk
     * through a slot reused by another call pass when both reads tore the
     * same way: a loop calling f, then g (which calls h) at one slot, read
     * with the thread state while h ran and the frames after f was called
     * again (h's dead frame above it, still linked to that slot), in both
     * reads, gave h called by f (3.11, twice in ~500,000 samples of such a
     * loop; once in toolz's suite under pytest: safe_getattr where the trace
     * had _check_for_wrapped_fixture). A loop's next round has other locals
     * (its variable, its iterator's next value on the stack), so the reused
     * slot and its callers no longer compare equal; a loop whose rounds
     * leave every byte of its frames the same (freed ints reused at the
     * same address) is told by the thread state read again at the end of
     * the read (above). Strict only
     * in-process, where a torn walk can mostly be redone with the thread
     * parked (and is failed where it cannot: a muted thread): from outside
     * it failed 24-45% of fast recursive code's walks on a quiet machine. */
    uint64_t still_from = gen_leaf && anchor ? 2 : 1;
    for (uint64_t i = 0; i < walked && hi > lo; i++) {
        uint64_t a = r->frame_addrs[i];
        if (a < lo || a >= hi || hi - a < l->frame_size)
            continue;
        const unsigned char *was = w->bytes + (a - w->lo), *is = r->recheck + (a - lo);
        if (u64_at(was, l->frame_previous) != u64_at(is, l->frame_previous) ||
            u64_at(was, l->frame_code) != u64_at(is, l->frame_code) ||
            (l->frame_owner != SW_NO_OFFSET && was[l->frame_owner] != is[l->frame_owner]))
            return 0;
        if (strict && i >= still_from) {
            uint64_t callee = r->frame_addrs[i - 1], span = l->frame_size;
            if (callee > a && callee < hi)
                span = callee - a;   /* (in the copy: [lo, hi) holds it) */
            if (memcmp(was, is, span) != 0)
                return 0;
        }
    }
    /* And so does each frame read on its own (a generator's still
     * running). A shim frame was read apart from the frame that links to
     * it, at another instant: a frame entered from C (isinstance's
     * __instancecheck__, a key function) may return and the next call from
     * the same place be made at the same addresses between the two reads,
     * the shim's memory reused meanwhile by other C code (its link
     * overwritten: read as NULL, the thread's root, the frame was sampled
     * alone), with the leaf found again after. */
    for (uint64_t i = gen_leaf; i < walked; i++) {
        if (in_copy(w, l, r->frame_addrs[i]))
            continue;
        const unsigned char *was = r->own_was + i * each + own_back, *is = r->again + i * each + own_back;
        if (u64_at(was, l->frame_previous) != u64_at(is, l->frame_previous) ||
            u64_at(was, l->frame_code) != u64_at(is, l->frame_code))
            return 0;
        if (l->frame_owner != SW_NO_OFFSET &&
            (was[l->frame_owner] != is[l->frame_owner] ||
             (was[l->frame_owner] == (unsigned char)l->owner_generator && was[-(long)own_back] != is[-(long)own_back])))
            return 0;
    }
    return 1;
}

/* The header of code object `code` as read by the check after the walk
 * (r->code_reqs, in address order), or NULL. */
static const unsigned char *code_read(const sw_pystack *r, uint64_t code)
{
    uint32_t lo = req_at_or_after(r->code_reqs, 0, r->codes_read, code);
    return lo < r->codes_read && r->code_reqs[lo].addr == code && r->code_reqs[lo].ok ? r->code_reqs[lo].buf : NULL;
}

/* 3.9/3.10 (frames read one by one, leaf first, while the thread runs),
 * in this process only (a failure costs a park; from outside it failed
 * 13% to over half of fast-changing code's walks on a quiet machine and
 * biased time shares): 1 if the frames just walked are a stack, 0 if torn.
 * One read of the code objects' headers and then of every walked frame
 * again (a batched read): each frame but the leaf must still be a live
 * frame, running (f_executing / f_state), with the same code and the same
 * f_back. Frames that run, linked by f_back, are a thread's stack, and the
 * leaf, read first, was its top then, called by the first of them (it may
 * have returned or yielded since: requiring it to run still would lose
 * most samples of short calls and generators); a walk whose callers were
 * read after the leaf returned and its callers' frames were reused by
 * other calls (a code object's frame is reused by its next call) tells.
 * Frames that were replaced by calls of the same code on the same callers,
 * in between, are not told: the stack read is then one of the same
 * functions. The callers' code objects are held by their frames from the
 * walk to their second read, so the headers read between are theirs
 * (read_with_codes). The leaf's is known to be only while the leaf lives
 * (a live frame object with the same code); a leaf gone since may have
 * taken its code with it (a module's code, freed once run, and another
 * code object made at its address), so its header is then trusted only if
 * it is the one the code cache holds for that address: a header the cache
 * has not seen there makes the walk torn. */
static int objects_whole(sw_pystack *r, uint32_t n)
{
    const sw_py_layout *l = &r->l;
    if (l->frame_state == SW_NO_OFFSET || !r->again || r->steps > r->lim.max_depth)
        return 1;   /* (a truncated walk is not checked) */
    uint32_t k = (uint32_t)r->steps;
    if (k < 1 || n != k)
        return 1;
    for (uint32_t i = 0; i < k; i++)
        r->reqs[i] = (sw_mem_req){r->frame_addrs[i], r->again + (size_t)i * l->frame_size, l->frame_size, 0};
    if (!read_with_codes(r, k, code_reads(r, n)))
        return 0;
    for (uint32_t i = 1; i < k; i++) {   /* (the leaf may have returned or yielded since) */
        const unsigned char *f = r->again + (size_t)i * l->frame_size;
        uint8_t state = f[l->frame_state];
        uint64_t back = u64_at(f, l->frame_previous);
        if (!frame_object_ok(l, f) || state > 7 || !(l->frame_running & (1u << state)) ||
            back != (i + 1 < k ? r->frame_addrs[i + 1] : 0) || u64_at(f, l->frame_code) != r->code_addrs[i])
            return 0;
    }
    if (frame_object_ok(l, r->again) && u64_at(r->again, l->frame_code) == r->code_addrs[0])
        return 1;   /* the leaf lives on, with its code */
    const unsigned char *hdr = code_read(r, r->code_addrs[0]);
    return hdr && sw_codecache_known(r->codes, l, r->code_addrs[0], hdr);
}

/* The code objects to read up front at the thread's next parked walk
 * (into now, in address order; returns how many): this walk's (its first
 * PARK_CODES), and as many of the m of the last ones (was) as there is
 * room for: a stack whose deep end comes and goes (deep_known.py: d25 ..
 * d29 and leaf) meets codes of the walk before last, and the read the
 * thread makes itself (walk_read_by_thread) falls short on a code object
 * not read up front (3.11, which has no counter to trust them by: 296 of
 * 2,000 reads short, the last walk's codes alone). */
static uint32_t codes_to_keep(sw_pystack *r, uint32_t all, const uint64_t *was, uint32_t m, uint64_t *now)
{
    const uint32_t mine = all < PARK_CODES ? all : PARK_CODES;
    uint32_t room = PARK_CODES - mine, k = 0, i = 0, j = 0;
    while (i < mine || j < m) {   /* (both in address order) */
        const uint64_t a = i < mine ? r->code_reqs[i].addr : UINT64_MAX, b = j < m ? was[j] : UINT64_MAX;
        if (a <= b) {
            now[k++] = a;
            i++;
            j += a == b;
        } else {
            if (room && r->park_code_state[j] != PARK_CODE_UNREADABLE) {   /* (one whose header could not be read is gone) */
                now[k++] = b;
                room--;
            }
            j++;
        }
    }
    return k;
}

/* A parked walk's code objects' headers (for resolve_codes, as the
 * checks after an unparked walk read them): none for those trusted by the
 * counter (trusted_by_counter, all_trusted: the counter was read in the
 * walk's first read, after its frames; and while the thread is parked its
 * frames hold their code objects, so one made since an entry's stamp
 * would have moved it), the others taken from that read (read_tstate)
 * when it had them all, else read now; and all remembered for the
 * thread's next parked walk. */
static void park_codes(sw_pystack *r, uint64_t tstate, uint32_t n)
{
    const uint32_t all = code_reads(r, n), m = r->park_codes_read, cs = r->l.code_size;
    const uint32_t slot = guess_slot(r, tstate);
    uint64_t *was = r->g_codes + (size_t)slot * PARK_CODES, now[PARK_CODES];
    const uint32_t keep = codes_to_keep(r, all, was, m, now);
    const uint32_t u = all_trusted(r, n) ? 0 : trusted_by_counter(r, all);
    uint32_t i = 0, j = 0;
    for (; j < u; j++) {   /* (both in address order) */
        while (i < m && was[i] < r->code_reqs[j].addr)
            i++;
        if (i == m || was[i] != r->code_reqs[j].addr || r->park_code_state[i] != PARK_CODE_READ)
            break;
        memcpy(r->code_reqs[j].buf, r->park_code_hdrs + (size_t)i * cs, cs);
        r->code_reqs[j].ok = 1;
    }
    if (j == u) {
        r->codes_read = u;
        r->names_read = 0;   /* (confirm_codes reads their file names) */
        r->name_ok = NULL;
        r->codes_checked = 1;
    } else
        read_with_codes(r, 0, u);
    r->g_ncodes[slot] = keep;
    memcpy(was, now, keep * sizeof *was);
}

/* The walk of a thread stopped at one instant (walk_parked, below) from
 * its state ts as read with the guesses g (read_tstate). Returns as
 * walk_frames, or -1. */
static long parked_walk_of(sw_pystack *r, uint64_t tstate, const unsigned char *ts, guess *g, window *w,
                           int *truncated)
{
    const sw_py_layout *l = &r->l;
    uint64_t frame = 0;
    if (u64_at(ts, l->tstate_interp) != r->interp || leaf_frame(r, tstate, ts, g, &frame) != 0)
        return -1;
    /* (the counter, read after the frames guessed: park_codes) */
    r->counter_now = r->park_counter = g->counter_ok ? g->counter : 0;
    r->walk_early = 0;
    if (!frame)
        return 0;
    if (l->frames_kind != SW_FRAMES_INTERP)
        read_leaf(r, tstate, frame, w);
    else if (!guessed_window(r, tstate, ts, frame, g, w))
        copy_window(r, tstate, ts, frame, w);
    else
        r->walk_early = 1;   /* (until the walk reads a frame on its own) */
    long n = walk_frames(r, frame, w, truncated);
    if (n >= 0 && w->bytes && w->leaf_bytes && w->leaf_bytes[l->frame_owner] == (unsigned char)l->owner_thread)
        n = WALK_TORN;   /* a leaf of the thread's own outside its stack's top (see above) */
    if (n >= 0) {
        spec_keep(r, tstate);
        park_codes(r, tstate, (uint32_t)n);
    }
    return n;
}

/* Returned by walk_read_by_thread when its one read did not hold the whole
 * walk: the walk is made again with the thread parked. */
#define WALK_SHORT (-3)

/* Whether thread tid is to make its parked walk's read itself: in this
 * process, read with process_vm_readv, 3.11+ (before, a walk reads frame
 * objects one by one: one read never held one), and the thread under no
 * seccomp filter, asked of the kernel before every read (its /proc
 * status, 5-11 us of the sampler's time): a filter can end the process
 * for that call (an allow list whose default kills), and a program may
 * install one at any time, the profiler running (a sandbox set up as it
 * starts, under `run --sample`); asked once in 1,024 reads, such a thread
 * was killed at its next sample. A filter is never removed: a thread seen
 * under one is not asked again (a table by thread id); one whose status
 * could not be read is parked that once, not marked. What is left: a
 * filter installed between the question and the signal's arrival (~20
 * us, the signal's flight). And its reads held their walks (a moving average, as
 * tears_count's, shorter, of the reads that fell short, at most
 * READ_SHORT_MAX): a short
 * read costs the thread a signal more, its park after it, where a read
 * that holds saves it little on a quiet machine (fib on 3.12: 3.5 us in
 * the handler against 4.3 us parked, the signal ~15-25 us) and much on a
 * busy one (10 us against 40 us, and at most ~0.1 ms against 4-8 ms: a
 * parked thread waits for the sampler, which may lose its CPU). A thread
 * whose stack changes between samples (pyflakes: half the reads short on
 * 3.12, mostly its _PyCFrame another than its last walk's, at another
 * depth of the C stack; gen_shapes.py: most, its code objects not its last
 * walk's) is parked at once, each walk so forgetting some of its rate,
 * until it is under the bound again and a read is tried: one every ~40
 * walks where every read falls short (a rate that only a read that held
 * lowered kept a thread whose first reads met a stack of its start-up
 * parked for ~300 walks: half of deep_known's under a loaded make test). */
#define READ_SHIFT 3                   /* (each read weighs 1/8: a thread whose reads fall short twice in
                                          a row is parked at once) */
#define READ_SHORT_MAX (TEARS_ONE / 8)
#define READ_FORGET_SHIFT 6             /* (each walk parked at once forgets 1/64 of it) */
static int read_due(sw_pystack *r, uint32_t tid)
{
    if (!r->in_process || !r->plan || r->mem.fd >= 0 || r->mem.core || r->l.frames_kind != SW_FRAMES_INTERP)
        return 0;
    const uint32_t slot = tid % READERS;
    if (r->reader_tid[slot] != tid) {
        r->reader_tid[slot] = tid;
        r->reader_short[slot] = 0;
        r->reader_filtered[slot] = 0;
    }
    if (r->reader_filtered[slot])
        return 0;
    if (r->reader_short[slot] > READ_SHORT_MAX) {
        r->reader_short[slot] -= r->reader_short[slot] >> READ_FORGET_SHIFT;
        return 0;
    }
    const int filtered = sw_nstack_seccomp((int)tid);
    if (filtered < 0)
        return 0;   /* (not told this time: parked, and asked again at its next read) */
    r->reader_filtered[slot] = (unsigned char)filtered;
    return !filtered;
}

/* A moving average of events (a fraction of TEARS_ONE): one more, hit or
 * not, weighing 1/2^shift (a thread's tear rate, its short reads). */
static void rate_add(uint32_t *rate, unsigned shift, int hit)
{
    *rate = *rate - (*rate >> shift) + (hit ? TEARS_ONE >> shift : 0);
}

/* Counts a read by thread tid in its short rate (read_due). */
static void read_count(sw_pystack *r, uint32_t tid, int short_read)
{
    rate_add(&r->reader_short[tid % READERS], READ_SHIFT, short_read);
}

/* The parked walk's read made by the thread itself in the signal handler
 * (sw_nstack_read): the requests read_tstate would make while it is parked
 * (its state, the guessed window and frames, its last parked walk's code
 * objects' headers), in one system call the thread makes at the instant it
 * takes the signal, and on it goes, where a park holds it until the
 * sampler has walked (the park's wait, the sampler's read and walk and the
 * release: 5-9 us of the thread's time a park on 3.12, against the one
 * call). The walk is then made from what was read, every further read
 * refused (sw_mem.refusing): if it needed one (a guess missed, a code
 * object not confirmed), nothing of it is kept (its counts restored) and
 * WALK_SHORT is returned, for a park. *rc: sw_nstack_read's, if it failed
 * (the thread did not answer); *guessed: 1 if the read had a window to
 * guess (the thread was walked before). Returns as walk_frames, or -1. */
static long walk_read_by_thread(sw_pystack *r, uint64_t tstate, uint32_t tid, window *w, int *truncated, int *rc,
                                int *guessed)
{
    unsigned char ts[SW_LAYOUT_MAX_READ];
    uint32_t at[PARK_CODES];
    guess g;
    sw_mem_iov iov;
    *rc = SW_OK;
    const uint32_t k = tstate_reqs(r, tstate, ts, &g, 1, at);
    *guessed = g.win_req != 0;
    if (sw_mem_plan_make(&r->mem, r->spec_reqs, k, r->plan, &iov) != SW_OK)
        return WALK_SHORT;
    const long got = sw_nstack_read((int)tid, &iov, PARK_WAIT_NS);
    if (got < 0) {
        *rc = (int)got;
        return -1;
    }
    /* (a call that read nothing failed as a whole: the park reads again) */
    if (got == 0 || sw_mem_plan_done(&r->mem, r->spec_reqs, k, r->plan, got) < 0) {
        r->st.read_short++;
        return WALK_SHORT;
    }
    if (tstate_read(r, &g, at) != SW_OK)
        return -1;
    const sw_pystack_stats st = r->st;
    const uint64_t refused = r->mem.refused;
    r->mem.refusing = 1;
    long n = parked_walk_of(r, tstate, ts, &g, w, truncated);
    r->mem.refusing = 0;
    if (r->mem.refused != refused) {
        r->st = st;
        r->st.read_short++;
        return WALK_SHORT;
    }
    r->st.read_by_thread++;
    return n;
}

/* In-process: the walk of the thread (kernel id tid, state at tstate)
 * redone with it parked in the signal handler (nativestack.h), after a
 * walk found torn, or made so ahead of any walk (park_ahead_due): its stack cannot change until it is released, so this
 * walk is of one instant and is not read again after; every read is still
 * validated as in any walk, its frames must fit (frames_fit), and its
 * leaf, if a frame of the thread's own (not a generator's), must lie in
 * the copied top of its current stack chunk. The signal stops the thread
 * at any instruction, and the interpreter does not publish its frames in
 * one move: 3.11/3.12 enter the interpreter function by pointing the
 * thread state at a new _PyCFrame on the C stack first and setting the
 * frame in it, and the new frame's link, a few stores later (3.13 links
 * first, then publishes), so a thread parked in between names as its
 * current frame whatever that stack memory last held, mostly a frame of
 * an earlier such call at the same place: dead, or the new frame with its
 * old link. A dead one lies at or above the top (told here), one of
 * another size than the slot's new frame does not fit (told by
 * frames_fit); the new frame with the link its slot's last frame had is
 * the stack of the same call site again, and is not told. (Other
 * threads cannot change this thread's frames, nor free the code objects
 * they hold, while it is parked.) Its code objects' headers are read while it
 * is parked (its frames hold them) and resolved after the release (into
 * the code cache, which allocates): between park and release the sampler
 * only reads memory, neither allocating nor taking a lock the parked
 * thread could hold. Returns as walk_frames, or -1 if the thread did not
 * park in time (counted in park_failed; one that blocks the signal is
 * muted, then read as from outside, and so is one whose parked walks fail
 * PARK_FAILS_MUTE times in a row). The thread makes the walk's read itself
 * where it can (walk_read_by_thread), and is parked only when that read
 * did not hold the walk. Every park waits up to PARK_WAIT_NS: a
 * shorter first wait, then an unparked walk of a thread that had not
 * parked by then, failed 3-10% of pyflakes' samples with a core busy
 * (the thread runs on while not yet answering: its walk tears). */
static long walk_parked(sw_pystack *r, uint64_t tstate, uint32_t tid, window *w, int *truncated)
{
    uint64_t t0 = sw_clock_ns(CLOCK_MONOTONIC);
    long n = WALK_SHORT;
    int rc = SW_ESTATE;
    if (r->lim.park_always != 2 && read_due(r, tid)) {
        int guessed = 0;
        n = walk_read_by_thread(r, tstate, tid, w, truncated, &rc, &guessed);
        if (rc == SW_OK && guessed)   /* (a thread's first read, with nothing to guess from, is not counted) */
            read_count(r, tid, n == WALK_SHORT);
    }
    if (n == WALK_SHORT && r->lim.park_always != 2)
        rc = sw_nstack_park((int)tid, PARK_WAIT_NS);
    if (rc != SW_OK) {
        if (rc == SW_ESTATE && r->lim.park_always != 2 && sw_nstack_blocked((int)tid))
            mute(r, tid);
        if (rc == SW_ESTATE && !sw_nstack_handler_current())
            r->lim.park = 0;   /* the program put a handler of its own there: no more parks */
        r->st.park_failed++;
        return -1;
    }
    if (n == WALK_SHORT) {
        /* While it is parked, as few system calls as can be: its state
         * read with what its last walk lets guess (3.11+: mostly the whole
         * walk) and its last parked walk's code objects' headers. */
        unsigned char ts[SW_LAYOUT_MAX_READ];
        guess g;
        n = read_tstate(r, tstate, ts, &g, 1) == SW_OK ? parked_walk_of(r, tstate, ts, &g, w, truncated) : -1;
        if (!sw_nstack_release())
            n = -1;   /* it went on before the release (parked too long): the walk may be torn */
    }
    r->st.parked++;
    r->st.parked_ns += sw_clock_ns(CLOCK_MONOTONIC) - t0;
    /* A thread whose stack fails even parked, again and again (3.9-3.11:
     * a generator a C thread iterates, whose frame has no caller), would
     * be signalled every round: it is muted, then read as from outside. */
    if (n >= 0 || r->park_fail_tid != tid) {
        r->park_fail_tid = n < 0 ? tid : 0;
        r->park_fails = n < 0;
    } else if (++r->park_fails >= PARK_FAILS_MUTE) {
        mute(r, tid);
        r->park_fail_tid = r->park_fails = 0;
    }
    return n;
}

/* In-process: one more walk of the thread, unparked, from its state read
 * afresh, checked strictly as the first one was (still_whole,
 * objects_whole), after its park failed: it did not park within
 * PARK_WAIT_NS (a thread that has not taken the signal in 10 ms is mostly
 * waiting for a CPU, and then its stack does not change), or its parked
 * walk met a state it cannot read whole (3.11+: a generator between its
 * yield and its caller's return to the current frame). Returns as
 * walk_frames, or WALK_TORN. */
static long walk_after_park(sw_pystack *r, uint64_t tstate, window *w, int *truncated)
{
    const sw_py_layout *l = &r->l;
    unsigned char ts[SW_LAYOUT_MAX_READ];
    uint64_t frame;
    if (sw_mem_read(&r->mem, tstate, ts, l->tstate_size) != SW_OK || u64_at(ts, l->tstate_interp) != r->interp ||
        leaf_frame(r, tstate, ts, NULL, &frame) != 0)
        return -1;
    if (!frame)
        return 0;
    r->walk_early = 0;   /* (the counter of an earlier read trusts nothing of this walk's) */
    if (l->frames_kind != SW_FRAMES_INTERP)
        read_leaf(r, tstate, frame, w);
    else
        copy_window(r, tstate, ts, frame, w);
    long n = walk_frames(r, frame, w, truncated);
    if (n >= 0)
        spec_keep(r, tstate);
    if (n >= 0 && l->frames_kind == SW_FRAMES_INTERP &&
        (!still_whole(r, tstate, frame, w, (uint32_t)n, 1) || !callees_held(r, w) || returned_leaf(r, (uint32_t)n)))
        n = WALK_TORN;
    if (n >= 0 && l->frames_kind == SW_FRAMES_OBJECTS && !objects_whole(r, (uint32_t)n))
        n = WALK_TORN;
    r->st.after_park += n >= 0;
    return n;
}

/* The slot of a thread's tear rate (g_tears_of), emptied if it was another's. */
static uint32_t tears_slot(sw_pystack *r, uint64_t tstate)
{
    const uint32_t slot = spec_slot(tstate);
    if (r->g_tears_of[slot] != tstate) {
        r->g_tears_of[slot] = tstate;
        r->g_tears[slot] = r->g_ahead_walks[slot] = r->g_ahead_hold[slot] = r->g_ahead_backoff[slot] = 0;
    }
    return slot;
}

/* Parking ahead (issue 20). Which walks tear decides which instants are
 * sampled: a walk tears mostly when a short leaf call returns while it
 * is read, and its redo, parked, is of a later instant, after the leaf
 * returned, so keeping the whole unparked walks and redoing the torn ones
 * under-counts short leaves (bench/workloads/short_leaf.py's tiny(): ~2%
 * of the samples against ~11% with every walk parked ahead, on a quiet
 * machine). A thread parked before any walk is sampled at the instant it
 * takes the signal, whatever its stack: unbiased. So a thread whose first
 * unparked walks tear often (a moving average of them, per thread, above
 * TEARS_PARK_AHEAD) is parked ahead of its walks, but for every
 * TEARS_PROBE_EVERY-th, which is walked unparked first, to keep the
 * average up to date, and parked after, whole or torn (PROBE_WALK): the
 * probe only measures (kept when whole, as before, the probes' samples
 * were the selection above again: on 3.9, whose unparked walks tear
 * often, tiny() had 7.8-8.3% of the samples by default against 10.6-10.7%
 * every walk parked ahead); a program whose walks do not tear pays no park
 * ahead. On a busy machine walks tear less (the thread mostly waits for a
 * CPU while read); a park ahead not answered in time (the thread off a
 * CPU for the whole wait: its walk after, walk_after_park, mostly fails,
 * and the sampler waited 10 ms) stops parking ahead for AHEAD_HOLD_FIRST
 * of its walks, twice as many after each such park that follows (up to
 * AHEAD_HOLD_MAX), for the reader's life: a torn walk shows that its
 * thread runs on a CPU, so a park after it is mostly answered, while a
 * park ahead may find it waiting for one (an earlier rule, after two torn
 * walks in a row, failed samples so: docs/architecture.md "Parking a torn
 * walk"). Returns 1 if
 * the thread (holding the GIL) is to be parked ahead of this walk,
 * PROBE_WALK if after it. */
#define PROBE_WALK 2
static int park_ahead_due(sw_pystack *r, uint64_t tstate)
{
    if (r->lim.park_always == 1 || r->lim.park_always == 2)
        return 1;
    if (r->lim.park_always != 0)
        return 0;   /* (3: never, the benches' baseline) */
    const uint32_t slot = tears_slot(r, tstate);
    if (r->g_ahead_hold[slot]) {
        r->g_ahead_hold[slot]--;
        return 0;
    }
    if (r->g_tears[slot] <= TEARS_PARK_AHEAD)
        return 0;
    return ++r->g_ahead_walks[slot] % TEARS_PROBE_EVERY != 0 ? 1 : PROBE_WALK;
}

/* After a park ahead of the thread's walk not answered in time: parks
 * ahead held (see park_ahead_due). The hold is not shortened again by
 * parks answered after it: at a load of 22,
 * test_shares_match_ground_truth's thread (its walks all torn under
 * pytest) failed 29-37 of ~450 samples, each a park ahead not answered,
 * when an answered one reset it. */
static void park_ahead_unanswered(sw_pystack *r, uint64_t tstate)
{
    const uint32_t slot = tears_slot(r, tstate);
    uint32_t *backoff = &r->g_ahead_backoff[slot];
    *backoff = !*backoff ? AHEAD_HOLD_FIRST : *backoff >= AHEAD_HOLD_MAX / 2 ? AHEAD_HOLD_MAX : 2 * *backoff;
    r->g_ahead_hold[slot] = *backoff;
}

/* Counts a first unparked walk of the thread holding the GIL in its tear
 * rate (torn: 1 if it was found torn, or failed, and is to be redone). */
static void tears_count(sw_pystack *r, uint64_t tstate, int torn)
{
    rate_add(&r->g_tears[tears_slot(r, tstate)], TEARS_SHIFT, torn);
}

/* Samples the thread whose state was read into ts. */
static void sample_thread(sw_pystack *r, uint64_t tstate, const unsigned char *ts, const guess *g,
                          int64_t t_ns, uint64_t weight_ns, sw_sample_sink sink, void *ud, int *delivered)
{
    const sw_py_layout *l = &r->l;
    sw_sample s;
    memset(&s, 0, sizeof s);
    s.thread_id = u64_at(ts, l->tstate_thread_id);
    s.native_tid = l->tstate_native_thread_id != SW_NO_OFFSET ? u64_at(ts, l->tstate_native_thread_id) : 0;
    s.t_ns = t_ns;
    s.weight_ns = weight_ns;
    s.frames = r->frames;
    /* Every thread is probed, those without a Python frame too, so that
     * each one's CPU time is measured from one round to the next: in
     * native mode first (the capture needs its kernel thread id), else
     * right after its walk, so that the walk starts from the thread state
     * just read (PROBE_LATE). */
    const unsigned char *ts0 = ts;
    const guess *g0 = g;
    r->counter_now = 0;
    r->walk_early = 0;
    int probed = r->syms != NULL;
    if (probed)
        probe_thread(r, tstate, ts, g, &s);
    /* A thread that does not hold the GIL cannot change its Python stack:
     * where idle threads' samples are left out it is probed first, and an
     * idle one is not walked (a program's sleeping threads cost a probe
     * each, not a walk). */
    int early = !probed && r->lim.skip_idle && r->states && !(r->gil_holder && r->gil_holder == tstate);
    if (early) {
        probe_thread(r, tstate, ts, g, &s);
        probed = 1;
        if (s.state == SW_STATE_IDLE) {
            s.flags |= SW_SAMPLE_NOT_WALKED;
            sink(ud, &s);
            return;
        }
    }
#define PROBE_LATE()                               \
    do {                                           \
        if (!probed)                               \
            probe_thread(r, tstate, ts0, g0, &s);  \
        probed = 1;                                \
    } while (0)
    /* Native mode: the thread is parked in the signal handler with its
     * native stack from here until released, right after its Python frames
     * are walked, so both are of one instant (nativestack.h). */
    int nn = -1, ntrunc = 0;
    unsigned char ts2[SW_LAYOUT_MAX_READ];
    if (r->unwinder && s.native_tid) {
        /* Another process: the thread stopped by ptrace until released. */
        nn = sw_unwind_capture(r->unwinder, (int)s.native_tid, r->pcs, r->pc_flags, SW_NSTACK_MAX, &ntrunc);
    } else if (r->syms && s.native_tid && !muted(r, (uint32_t)s.native_tid)) {
        nn = sw_nstack_capture((int)s.native_tid, r->pcs, &ntrunc);
        if (nn == SW_ESTATE && sw_nstack_blocked((int)s.native_tid))
            mute(r, (uint32_t)s.native_tid);   /* (one merely waiting for a CPU is asked again) */
    }
    if (nn >= 0 && !r->frozen_now) {
        /* The thread state as of the stop (or capture), the guess made from
         * the earlier one dropped. The sample is of the instant the thread
         * stopped, which can be well after the round began (a thread
         * waiting for a CPU on a busy machine answers the signal when it
         * next runs): dated then, not at the round's start. */
        if (sw_mem_read(&r->mem, tstate, ts2, l->tstate_size) == SW_OK && u64_at(ts2, l->tstate_interp) == r->interp) {
            ts = ts2;
            g = NULL;
        }
        s.t_ns = (int64_t)sw_clock_ns(CLOCK_MONOTONIC);
    }
#define RELEASE_NATIVE()                        \
    do {                                        \
        if (nn >= 0 && r->unwinder)             \
            sw_unwind_release(r->unwinder);     \
        else if (nn >= 0)                       \
            sw_nstack_release();                \
    } while (0)
    /* Without the native capture, the thread runs on while it is read: its
     * frames are read right after its state (after a probe first, the state
     * is read afresh: the probe took a few system calls, and before 3.11 a
     * leaf frame taken from before it was often dead already), and the walk
     * is checked after (still_whole, objects_whole): one that joined frames
     * of two instants is torn, redone up to TORN_RETRIES (OBJECT_RETRIES)
     * times, then failed. */
    int fresh = nn < 0 && !r->frozen_now;
    /* In-process, a walk found torn (or failed) is not retried but redone
     * at once with the thread parked (walk_parked): the checks after a walk
     * are then strict, at the cost of a park, not of a failed sample.
     * (Walks redone unparked first, twice, to save parks were tried and
     * removed: docs/architecture.md "Torn stacks".) A
     * thread muted (it blocks the signal, or its parked walks kept failing)
     * is read as from outside, but checked strictly (below). */
    int park = r->lim.park && fresh;
    /* In this process the checks are strict even where the thread cannot
     * be parked (muted, or parks not installed): its torn walks are then
     * retried, then failed, never stored. Checked loosely, as from outside,
     * a muted thread's walks let stacks it never had through: on a busy
     * machine a park times out now and then and the thread is found with
     * the signal blocked (slot_reuse.py blocks no signal: most likely the
     * thread had just entered the handler, whose mask blocks it; now one
     * must have the signal pending too: sw_nstack_blocked), and it is
     * muted for rounds (mute()), whose walks gave slot_reuse.py's `same`
     * variant h2 called by f2: 13 samples in one such stretch, 3.11
     * (docs/architecture.md "Torn stacks"). */
    int strict = fresh && r->in_process;
    int was_muted = 0;   /* (its parks stopped for a while: failures counted in muted_failed too) */
    if (park && any_muted(r)) {
        uint32_t tid = s.native_tid ? (uint32_t)s.native_tid : kernel_tid(r, tstate, ts, g);
        park = tid && !muted(r, tid);
        was_muted = !park;
    }
    /* The thread holding the GIL is parked before any walk when its walks
     * have been tearing often (park_ahead_due), or always in the test mode
     * (limits.park_always). (Parking a thread ahead of its walk once its
     * unparked walks had torn twice in a row, to save the wasted walk, was
     * tried and removed: on a busy machine a thread parked ahead was often
     * off a CPU for the whole wait, 200 us then, and its sample failed,
     * where an unparked walk would have been whole. Now a park ahead waits
     * as long as any, its failure is followed by one checked unparked
     * walk, walk_after_park, and it stops parks ahead of that thread for a
     * while: docs/architecture.md "Parking a torn walk".) */
    int ahead = park && r->gil_holder == tstate ? park_ahead_due(r, tstate) : 0;
    const int probe = ahead == PROBE_WALK;
    ahead = ahead == 1;
    window w;
    memset(&w, 0, sizeof w);
    int truncated = 0;
    long n = WALK_TORN;
    if (ahead) {
        PROBE_LATE();   /* (it gives the thread's kernel id) */
        ahead = s.native_tid != 0;
    }
    if (ahead) {
        const uint64_t park_failed = r->st.park_failed;
        n = walk_parked(r, tstate, (uint32_t)s.native_tid, &w, &truncated);
        r->st.parked_ahead++;
        if (r->lim.park_always == 0 && r->st.park_failed != park_failed)
            park_ahead_unanswered(r, tstate);
    }
    if (!ahead) {
        if (fresh && probed && !early && sw_mem_read(&r->mem, tstate, ts2, l->tstate_size) == SW_OK &&
            u64_at(ts2, l->tstate_interp) == r->interp) {
            ts = ts2;
            g = NULL;
        }
        uint64_t frame;
        const int leaf = leaf_frame(r, tstate, ts, g, &frame);
        if (leaf != 0 && leaf != WALK_TORN) {
            RELEASE_NATIVE();
            PROBE_LATE();
            r->st.failed++;
            s.flags |= SW_SAMPLE_FAILED;
            sink(ud, &s);
            return;
        }
        if (!frame && leaf == 0) {
            RELEASE_NATIVE();
            PROBE_LATE();
            r->st.empty++;
            return;
        }
        /* 3.11+: the top of the stack is copied at once, a near snapshot.
         * Before, frames are heap objects read one by one while the thread runs
         * on: freed frames are recognised (frame_object_ok), but a frame freed
         * and reused already can still mix two stacks. Checking that the top
         * frame did not change would not tell (frames are reused last-in
         * first-out, so a new frame often has the old one's address) and would
         * drop most samples of call-heavy code, so such rare mixes are
         * accepted; a walk that meets a dead frame is redone from the new top,
         * up to OBJECT_RETRIES times (dropping such samples would hide
         * call-heavy code: tests/py/profiler/test_profiler.py checks it is not). */
        /* (the counter of code objects made, read in the same read as ts
         * and after its frames: trusted_by_counter) */
        r->counter_now = g && g->counter_ok ? g->counter : 0;
        int unheld = 0;   /* (walks whose callers did not hold their callees) */
        for (int torn = 0; leaf == 0; torn++) {   /* (a leaf torn: n is WALK_TORN) */
            r->walk_early = 0;
            if (l->frames_kind != SW_FRAMES_INTERP) {
                if (!g || !guessed_leaf(r, frame, &w))
                    read_leaf(r, tstate, frame, &w);
            } else if (torn > 0 || !guessed_window(r, tstate, ts, frame, g, &w))
                copy_window(r, tstate, ts, frame, &w);
            else
                r->walk_early = 1;
            n = walk_frames(r, frame, &w, &truncated);
            if (n >= 0)
                spec_keep(r, tstate);
            if (n >= 0 && fresh && l->frames_kind == SW_FRAMES_INTERP &&
                !still_whole(r, tstate, frame, &w, (uint32_t)n, strict))
                n = WALK_TORN;
            /* (Only for a thread that may run Python: the GIL's holder at
             * the round's start, or anyone when that is unknown. A thread
             * waiting without the GIL cannot change its stack, and its
             * callers need not hold their callees: a pool thread in
             * Event.wait called as a bound method was parked at every round,
             * its wait interrupted, 3,500 times in a 1 s run.) Asked of a
             * thread that cannot be parked (muted) too: its walk is then
             * retried once, then failed (a call from C, whose caller never
             * holds the callee, fails every such walk: counted, not stored;
             * see callees_held). */
            if (n >= 0 && (park || strict) && l->frames_kind == SW_FRAMES_INTERP &&
                (!r->gil_known || r->gil_holder == tstate) && (!callees_held(r, &w) || returned_leaf(r, (uint32_t)n))) {
                n = WALK_TORN;
                unheld++;
            }
            if (n >= 0 && l->frames_kind == SW_FRAMES_OBJECTS && strict && !objects_whole(r, (uint32_t)n))
                n = WALK_TORN;
            for (int retry = 0; !park && n < 0 && l->frames_kind == SW_FRAMES_OBJECTS && retry < OBJECT_RETRIES;
                 retry++) {
                /* A frame died, or a generator left, under the reader: try
                 * again from the new top. */
                r->st.torn += n == WALK_TORN;
                if (sw_mem_read(&r->mem, tstate + l->tstate_frame, &frame, sizeof frame) != SW_OK || !frame)
                    break;
                r->st.retried++;
                read_leaf(r, tstate, frame, &w);
                n = walk_frames(r, frame, &w, &truncated);
                if (n >= 0)
                    spec_keep(r, tstate);
                if (n >= 0 && strict && !objects_whole(r, (uint32_t)n))
                    n = WALK_TORN;
            }
            if (park || n != WALK_TORN || l->frames_kind != SW_FRAMES_INTERP)
                break;
            /* 3.11+: torn (a generator left under the reader): the whole read
             * again, from the thread state. */
            r->st.torn++;
            if (torn == TORN_RETRIES || unheld > 1 || sw_mem_read(&r->mem, tstate, ts2, l->tstate_size) != SW_OK ||
                u64_at(ts2, l->tstate_interp) != r->interp || leaf_frame(r, tstate, ts2, NULL, &frame) != 0)
                break;
            ts = ts2;
            r->st.retried++;
            if (!frame) {
                n = 0;   /* no Python frame any more */
                break;
            }
        }
    }
    /* Native mode, or the process stopped (limits.blocking): the thread
     * stopped, its frames hold their code objects, whose headers are read
     * now, before it runs on (an entry of the code cache is never trusted
     * on its age for a frame: the code object at its address may be
     * another since). */
    if ((nn >= 0 || r->frozen_now) && n > 0 && !r->codes_checked)
        read_with_codes(r, 0, code_reads(r, (uint32_t)n));
    RELEASE_NATIVE();
    PROBE_LATE();
#undef RELEASE_NATIVE
#undef PROBE_LATE
    if (park && !ahead && r->gil_holder == tstate)
        tears_count(r, tstate, n < 0);
    if ((n < 0 || probe) && park && !ahead) {
        /* (the probe above has set the thread's kernel id, if it has one) */
        r->st.torn += n == WALK_TORN;
        n = s.native_tid ? walk_parked(r, tstate, (uint32_t)s.native_tid, &w, &truncated) : -1;
    }
    if (n < 0 && park && s.native_tid)
        n = walk_after_park(r, tstate, &w, &truncated);
    if (n >= 0 && r->lim.fail_every && ++r->walks % r->lim.fail_every == 0)
        n = WALK_TORN;   /* (tests) a failure forced */
    int unfit = 0;
    if (n < 0 || resolve_codes(r, (uint32_t)n) != 0 || (unfit = !frames_fit(r, (uint32_t)n))) {
        r->st.unfit += (uint64_t)unfit;
        /* Told to the sink too: it may give the time to the thread's next
         * sample rather than lose it (failures are likelier in code whose
         * stack changes fast, so losing them would hide such code). */
        r->st.failed++;
        r->st.muted_failed += (uint64_t)was_muted;
        s.depth = 0;
        s.flags |= SW_SAMPLE_FAILED;
        sink(ud, &s);
        return;
    }
    if (n == 0) {
        r->st.empty++;
        return;
    }
    if (r->lines) {
        for (long i = 0; i < n; i++)
            r->lines[i] = sw_codecache_line(r->codes, r->frames[i], &r->mem, l, r->instrs[i]);
        s.lines = r->lines;
    }
    s.frame_addrs = r->kept_addrs;
    if (r->syms) {
        long merged = nn > 0 ? merge_native(r, (uint32_t)nn, ntrunc, (uint32_t)n) : -1;
        if (merged < 0) {
            r->st.native_failed++;
        } else {
            r->st.native++;
            n = merged;
            s.frames = r->merged;
            s.lines = r->lines ? r->merged_lines : NULL;
            s.frame_addrs = NULL;
            s.native_pcs = r->merged_pcs;
        }
    }
    s.depth = (uint32_t)n;
    s.flags |= truncated ? SW_SAMPLE_TRUNCATED : 0;
    r->st.truncated += (uint64_t)truncated;
    r->st.samples++;
    (*delivered)++;
    sink(ud, &s);
}

#define RELISTS_MAX 8   /* a round's walks of the thread list begun again (sample_round) */

/* Whether thread state tstate was sampled this round (r->listed). */
static int listed_before(const sw_pystack *r, uint64_t tstate)
{
    for (size_t at = 0; at + sizeof tstate <= r->listed.len; at += sizeof tstate) {
        uint64_t v;
        memcpy(&v, r->listed.data + at, sizeof v);
        if (v == tstate)
            return 1;
    }
    return 0;
}

static int sample_round(sw_pystack *r, int64_t t_ns, uint64_t weight_ns, sw_sample_sink sink, void *ud)
{
    const sw_py_layout *l = &r->l;
    unsigned char ts[SW_LAYOUT_MAX_READ];
    int delivered = 0;
    r->st.rounds++;
    if (sw_codecache_trim(r->codes))
        r->memo_n = r->reads_of_n = r->known_of_n = 0;
    /* The first thread state and the GIL's locked flag and last holder,
     * in one system call. */
    uint64_t tstate = 0, gil = gil_address(r);
    unsigned char gbuf[SW_LAYOUT_MAX_READ];
    uint32_t glen = gil ? (l->gil_locked + 4 > l->gil_last_holder + 8 ? l->gil_locked + 4 : l->gil_last_holder + 8) : 0;
    /* ... and, speculatively, the first thread state of the last round,
     * mostly the first one still, with what is guessed of its walk (guess). */
    guess g;
    memset(&g, 0, sizeof g);
    sw_mem_req *req = r->spec_reqs;
    req[0] = (sw_mem_req){r->interp + l->interp_threads_head, &tstate, sizeof tstate, 0};
    req[1] = (sw_mem_req){gil, gbuf, glen, 0};
    uint32_t nreq = gil ? 2 : 1, head_req = 0;
    r->spec_nreq = r->spec_first = r->spec_walked = 0;
    if (r->head_guess) {
        head_req = nreq;
        req[nreq++] = (sw_mem_req){r->head_guess, ts, l->tstate_size, 0};
        guess_reqs(r, r->head_guess, &g, &nreq);
    }
    sw_mem_readv(&r->mem, req, nreq);
    guess_read(r, &g);
    r->gil_holder = 0;
    r->gil_known = gil && req[1].ok;
    if (gil && req[1].ok) {
        int32_t locked;
        memcpy(&locked, gbuf + l->gil_locked, sizeof locked);
        if (locked == 1)
            r->gil_holder = u64_at(gbuf, l->gil_last_holder);
    } else if (r->states && l->gil_size != SW_NO_OFFSET) {
        r->st.gil_unknown++;
    }
    if (!req[0].ok) {
        r->st.failed++;
        return SW_EIO;
    }
    if (!r->trampoline && l->interp_trampoline != SW_NO_OFFSET &&
        sw_mem_read(&r->mem, r->interp + l->interp_trampoline, &r->trampoline, sizeof r->trampoline) != SW_OK)
        r->trampoline = 0;
    int have = head_req && tstate == r->head_guess && req[head_req].ok;
    if (!have) {
        memset(&g, 0, sizeof g);
        r->pre_ok = 0;   /* (read for another thread state) */
    }
    r->head_guess = tstate;
    int listed = 1;   /* every thread of the list probed (or those up to max_threads) */
    uint32_t visited = 0;
    uint64_t steps = 0;   /* (thread states read: a list read again could meet a loop of those sampled) */
    int relisted = 0;     /* (how many times this round) */
    uint64_t came_from = 0;   /* the thread state whose link led here; 0: the list's head */
    r->listed.len = 0;
    r->listed.failed = 0;   /* (set: out of memory, the threads sampled are not all known) */
    while (tstate) {
        if (visited == r->lim.max_threads) {
            r->st.threads_skipped++;
            break;
        }
        if (++steps > (uint64_t)r->lim.max_threads * (RELISTS_MAX + 1)) {
            r->st.failed++;   /* (links read at different instants that loop) */
            listed = 0;
            break;
        }
        /* A thread state that cannot be read, or that no longer belongs to
         * this interpreter, ends the walk. Mostly it is a thread that ended
         * under the reader: its state freed, the allocator's words over its
         * link to the next (a stale copy of it, read as whole and frameless,
         * points nowhere), so the threads after it would go without a sample
         * this round, and their next samples' weight would not cover it
         * (tests/py/tracer/test_trace_samples.py: 3-8 rounds a run of a
         * program whose threads come and go). So the list is read again
         * from its head, skipping the threads sampled, up to RELISTS_MAX
         * times a round (threads that end together: the list read again
         * meets the next one freed). So is one whose back link is not
         * the state that led to it: freed and made again for a thread
         * started since (new ones go first, their back link empty), its link
         * to the next would lead back to threads sampled this round. (One
         * that led here and then ended leaves a back link to the one before
         * it: read again too, the list is whole after it. A head with a
         * back link has had threads started before it: the list from it on
         * is whole, they have no sample this round.) */
        if ((!have && read_tstate(r, tstate, ts, &g, 0) != SW_OK) || u64_at(ts, l->tstate_interp) != r->interp ||
            (came_from && u64_at(ts, l->tstate_prev) != came_from)) {
            have = 0;
            if (relisted < RELISTS_MAX && !r->listed.failed &&
                sw_mem_read(&r->mem, r->interp + l->interp_threads_head, &tstate, sizeof tstate) == SW_OK) {
                relisted++;
                r->st.relisted++;
                came_from = 0;
                continue;
            }
            r->st.failed++;
            listed = 0;
            break;
        }
        have = 0;
        if (!relisted || !listed_before(r, tstate)) {
            visited++;
            (void)sw_bytes_put(&r->listed, &tstate, sizeof tstate);
            sample_thread(r, tstate, ts, &g, t_ns, weight_ns, sink, ud, &delivered);
        }
        came_from = tstate;
        tstate = u64_at(ts, l->tstate_next);
    }
    /* Threads not probed are forgotten, unless the list's walk ended early:
     * those after its end live on, and one forgotten would count all its
     * CPU time again when next probed (as a new thread). */
    if (r->states && listed)
        sw_threadstate_sweep(r->states, r->st.rounds);
    return delivered;
}

void sw_pystack_native_sources(sw_pystack *r, sw_symbols_source_fn fn, void *ud)
{
    if (r->syms && !r->unwinder)
        sw_symbols_sources_later(r->syms, fn, ud);
}

void sw_pystack_native_lines_ahead(sw_pystack *r, uint64_t addr)
{
    const char *file;
    uint32_t line;
    if (r->syms && !r->unwinder && r->lines && r->lim.native_lines)
        (void)sw_symbols_source(r->syms, addr, &file, &line);
}

int sw_pystack_set_code_counter(sw_pystack *r, uint64_t addr, uint64_t interps)
{
    uint32_t v;
    int64_t n;
    if (r->l.frames_kind != SW_FRAMES_INTERP || r->lim.native ||
        sw_mem_read(&r->mem, addr, &v, sizeof v) != SW_OK ||
        (interps && sw_mem_read(&r->mem, interps, &n, sizeof n) != SW_OK))
        return SW_EARG;
    r->code_counter = addr;
    r->interps_made = interps;
    return SW_OK;
}

/* limits.blocking: the round is read with every thread of the process
 * stopped (freeze.h), so a walk cannot be torn: the checks after a walk
 * are left out, and a round whose stop fails reads nothing (a failed
 * round, never a torn one). */
int sw_pystack_sample_all(sw_pystack *r, int64_t t_ns, uint64_t weight_ns, sw_sample_sink sink, void *ud)
{
    if (!r->lim.blocking)
        return sample_round(r, t_ns, weight_ns, sink, ud);
    if (r->unwinder && r->st.rounds == 0) {
        /* With native frames the first round reads the target's files
         * (their CFI, unwind.h; their symbols and line tables, symbols.h),
         * a second or more on a busy machine: not with the whole process
         * stopped. It stops each thread while it is read instead. */
        sw_unwind_set_held(r->unwinder, 0);
        int rc = sample_round(r, t_ns, weight_ns, sink, ud);
        sw_unwind_set_held(r->unwinder, 1);
        return rc;
    }
    uint64_t b0 = sw_clock_ns(CLOCK_MONOTONIC);
    if (sw_freeze(&r->frozen, r->mem.pid, r->block_err, sizeof r->block_err) != SW_OK) {
        r->st.rounds++;
        r->st.block_failed++;
        r->st.failed++;
        return SW_EIO;
    }
    r->frozen_now = 1;
    if (r->states)
        sw_threadstate_set_stopped(r->states, 1);
    int rc = sample_round(r, t_ns, weight_ns, sink, ud);
    sw_thaw(&r->frozen);
    r->frozen_now = 0;
    r->st.blocked_rounds++;
    r->st.blocked_ns += sw_clock_ns(CLOCK_MONOTONIC) - b0;
    return rc;
}

int sw_pystack_block_check(int pid, char *err, size_t errlen)
{
    /* A main thread that does not stop in time (asleep in the kernel) does
     * not refuse: it can be stopped, later; its rounds fail meanwhile. */
    err[0] = '\0';
    int rc = sw_freeze_check(pid, pid, err, errlen);
    if (rc == SW_EARG && !err[0])   /* (a zombie main thread: err says so) */
        snprintf(err, errlen, "process %d: no such process", pid);
    return rc == SW_OK || rc == SW_ESTATE ? SW_OK : SW_EIO;
}

const char *sw_pystack_native_error(const sw_pystack *r)
{
    sw_unwind_stats us;
    if (!r->unwinder)
        return "";
    sw_unwind_get_stats(r->unwinder, &us);
    return us.stop_failed ? sw_unwind_error(r->unwinder) : "";
}

void sw_pystack_mark_start(sw_pystack *r)
{
    if (r->states)
        sw_threadstate_mark_start(r->states);
}

void sw_pystack_get_stats(const sw_pystack *r, sw_pystack_stats *out)
{
    *out = r->st;
    out->code_hits = sw_codecache_hits(r->codes);
    out->code_misses = sw_codecache_misses(r->codes);
    out->reads = r->mem.reads;
    out->failed_reads = r->mem.failed;
    if (r->unwinder) {
        sw_unwind_stats us;
        sw_unwind_get_stats(r->unwinder, &us);
        out->native_stopped_ns = us.stop_ns;
        out->native_by_fp = us.by_fp;
    }
    snprintf(out->block_error, sizeof out->block_error, "%s", r->block_err);
}
