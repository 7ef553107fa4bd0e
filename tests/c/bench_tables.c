/*
 * bench_tables.c - a micro-benchmark of the hot paths that look things up
 * in hash tables: interning functions, adding stacks to call trees (with
 * and without a cursor), the live profile's aggregation of samples (with
 * history and lines), per-line ids, native symbol lookups and the pprof
 * string table. Not a test (tests/c/run.sh does not run it): built in the
 * plain build as bench_tables, run by hand to compare two versions of the
 * tables; it uses only public APIs, so the same file builds against both.
 *
 *   build/c-plain/tests/c/bench_tables [repeats [case]]
 *
 * Prints one line per case (or the cases whose name contains `case`): the
 * best of `repeats` runs (default 5), in ns of the thread's CPU time per
 * operation.
 */
#define _GNU_SOURCE
#include "profile/aggregate.h"
#include "profile/calltree.h"
#include "profile/lineids.h"
#include "procmem/symbols.h"
#include "base/bytes.h"
#include "tracegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The pprof writer's header moved in the rooms' clean-up; it is declared
 * here so that this file builds against either layout. */
typedef struct bench_pprof_tree {
    const char *thread;
    const sw_calltree *tree;
} bench_pprof_tree;
int sw_pprof_write(sw_bytes *out, const bench_pprof_tree *trees, size_t n, const void *opts);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);   /* CPU time: steadier on a shared machine */
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { return tg_rand(&rng); }

#define NFUNCS 20000
#define DEPTH 40
#define NSTACKS 4096

static char names[NFUNCS][40], files[NFUNCS][64];
static uint32_t stacks[NSTACKS][DEPTH];
static uint32_t depths[NSTACKS];

static void make_inputs(void)
{
    for (int i = 0; i < NFUNCS; i++) {
        snprintf(names[i], sizeof names[i], "Class%d.method_%d", i % 97, i);
        snprintf(files[i], sizeof files[i], "/usr/lib/python3.12/site-packages/pkg%d/module%d.py", i % 13, i);
    }
    /* Stacks that share root-most frames, as a program's do: a few roots,
     * then branching that widens with depth. */
    for (int s = 0; s < NSTACKS; s++) {
        depths[s] = 8 + (uint32_t)(next() % (DEPTH - 8));
        for (uint32_t d = 0; d < depths[s]; d++) {
            uint32_t width = d < 4 ? 2 : d < 12 ? 20 : 400;
            stacks[s][d] = (uint32_t)((d * 131 + next() % width) % NFUNCS);
        }
    }
}

typedef double (*bench_fn)(void);

static const char *only;

static void run(const char *name, bench_fn fn, int repeats)
{
    if (only && !strstr(name, only))
        return;
    double best = 1e300;
    for (int r = 0; r < repeats; r++) {
        double v = fn();
        if (v < best)
            best = v;
    }
    printf("%-44s %8.1f ns/op\n", name, best);
    fflush(stdout);
}

static double bench_intern(void)
{
    sw_functab *ft = sw_functab_new();
    double t0 = now_ns();
    uint32_t id;
    const int ops = 400000;
    for (int k = 0; k < ops; k++) {
        int i = k % NFUNCS;
        sw_functab_intern(ft, names[i], strlen(names[i]), files[i], strlen(files[i]), i, &id);
    }
    double t = now_ns() - t0;
    sw_functab_free(ft);
    return t / ops;
}

static sw_functab *shared_ft(void)
{
    static sw_functab *ft;
    if (!ft) {
        ft = sw_functab_new();
        uint32_t id;
        for (int i = 0; i < NFUNCS; i++)
            sw_functab_intern(ft, names[i], strlen(names[i]), files[i], strlen(files[i]), i, &id);
    }
    return ft;
}

/* Frames looked up: every frame of every stack (no cursor). */
static double bench_tree_add(void)
{
    sw_calltree *t = sw_calltree_new(shared_ft());
    const int ops = 200000;
    uint64_t frames = 0;
    double t0 = now_ns();
    for (int k = 0; k < ops; k++) {
        int s = k % NSTACKS;
        sw_calltree_add(t, stacks[s], depths[s], 1, 1000);
        frames += depths[s];
    }
    double el = now_ns() - t0;
    sw_calltree_free(t);
    return el / (double)frames;
}

/* Consecutive samples of one thread through a cursor (ns per sample). */
static double bench_tree_cursor(void)
{
    sw_calltree *t = sw_calltree_new(shared_ft());
    sw_calltree_cursor c = {0};
    const int ops = 400000;
    double t0 = now_ns();
    for (int k = 0; k < ops; k++) {
        int s = (k / 8) % NSTACKS;   /* runs of similar stacks */
        sw_calltree_add_cursor(t, &c, stacks[s], depths[s] - (uint32_t)(k % 3), 1, 1000);
    }
    double el = now_ns() - t0;
    sw_calltree_cursor_free(&c);
    sw_calltree_free(t);
    return el / ops;
}

/* A tree of every stack once. */
static sw_calltree *all_stacks(void)
{
    sw_calltree *t = sw_calltree_new(shared_ft());
    for (int s = 0; s < NSTACKS; s++)
        sw_calltree_add(t, stacks[s], depths[s], 1, 1000);
    return t;
}

static double bench_merge(void)
{
    sw_calltree *src = all_stacks();
    const int reps = 20;
    double t0 = now_ns();
    for (int r = 0; r < reps; r++) {
        sw_calltree *dst = sw_calltree_new(shared_ft());
        sw_calltree_merge(dst, src);
        sw_calltree_free(dst);
    }
    double el = now_ns() - t0;
    double per = el / reps / (double)sw_calltree_node_count(src);
    sw_calltree_free(src);
    return per;
}

/* The live profile: samples of 4 threads with code objects the sampler's
 * cache hands out (their sink_id caches the function id), history on, with
 * and without lines. */
static sw_sample_code codes[NFUNCS];

static double profile_run(int with_lines)
{
    for (int i = 0; i < NFUNCS; i++)
        codes[i] = (sw_sample_code){0x10000 + (uint64_t)i * 64, names[i], files[i], (uint32_t)strlen(names[i]),
                                    (uint32_t)strlen(files[i]), i + 1, SW_NO_ID, NULL};
    sw_profile *p = sw_profile_new();
    sw_profile_set_history(p, 10000000, 0, 0, 0);
    sw_sample_code *frames[DEPTH];
    int32_t lines[DEPTH];
    const int ops = 200000;
    double t0 = now_ns();
    for (int k = 0; k < ops; k++) {
        int s = (k / 4) % NSTACKS;
        uint32_t d = depths[s];
        for (uint32_t i = 0; i < d; i++) {
            frames[d - 1 - i] = &codes[stacks[s][i]];
            lines[d - 1 - i] = (int32_t)(stacks[s][i] % 50) + 2 + (int32_t)(k % 5);
        }
        sw_sample smp = {(uint64_t)(k % 4) + 1, 0, (int64_t)k * 1000, 1000, d, 0, frames, SW_STATE_RUNNING,
                         SW_NO_CPU, with_lines ? lines : NULL, NULL, NULL};
        sw_profile_sink(p, &smp);
    }
    double el = now_ns() - t0;
    sw_profile_free(p);
    return el / ops;
}

static double bench_profile(void) { return profile_run(0); }
static double bench_profile_lines(void) { return profile_run(1); }

static double bench_lineids(void)
{
    sw_functab *ft = sw_functab_new();
    uint32_t id;
    for (int i = 0; i < 2000; i++)
        sw_functab_intern(ft, names[i], strlen(names[i]), files[i], strlen(files[i]), 1, &id);
    sw_lineids *m = sw_lineids_new();
    const int ops = 1000000;
    double t0 = now_ns();
    for (int k = 0; k < ops; k++)
        sw_lineids_get(m, ft, (uint32_t)(next() % 2000), (int32_t)(2 + next() % 40), &id);
    double el = now_ns() - t0;
    sw_lineids_free(m);
    sw_functab_free(ft);
    return el / ops;
}

static double bench_symbols(void)
{
    sw_symbols *s = sw_symbols_new();
    uint64_t base[4] = {(uint64_t)(uintptr_t)&printf, (uint64_t)(uintptr_t)&qsort, (uint64_t)(uintptr_t)&memcpy,
                        (uint64_t)(uintptr_t)&bench_symbols};
    int is_eval;
    const int ops = 1000000;
    double t0 = now_ns();
    for (int k = 0; k < ops; k++)
        sw_symbols_lookup(s, base[k & 3] + (uint64_t)(next() % 64), &is_eval);
    double el = now_ns() - t0;
    sw_symbols_free(s);
    return el / ops;
}

static double bench_pprof(void)
{
    sw_calltree *t = all_stacks();
    bench_pprof_tree pt = {"main", t};
    const int reps = 10;
    double t0 = now_ns();
    for (int r = 0; r < reps; r++) {
        sw_bytes b = {0};
        sw_pprof_write(&b, &pt, 1, NULL);
        sw_bytes_free(&b);
    }
    double el = now_ns() - t0;
    double per = el / reps / (double)sw_calltree_node_count(t);
    sw_calltree_free(t);
    return per;
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1)
        repeats = 1;
    only = argc > 2 ? argv[2] : NULL;
    make_inputs();
    run("functab intern (hits, per call)", bench_intern, repeats);
    run("calltree add (per frame)", bench_tree_add, repeats);
    run("calltree add through a cursor (per sample)", bench_tree_cursor, repeats);
    run("calltree merge (per node)", bench_merge, repeats);
    run("profile sink, history (per sample)", bench_profile, repeats);
    run("profile sink, history + lines (per sample)", bench_profile_lines, repeats);
    run("lineids get (per call)", bench_lineids, repeats);
    run("symbols lookup (per call)", bench_symbols, repeats);
    run("pprof write (per node)", bench_pprof, repeats);
    return 0;
}
