/*
 * make_seed.c - writes a few small valid traces, made with the real writer,
 * into a directory: the seed corpus of fuzz_reader.
 *
 *   make_seed DIR
 *
 * The seeds cover: streamed chunks of several threads with a rename and
 * frames left open; ring mode (a sequence gap, chunks starting mid-stack);
 * a trace cut at a chunk boundary (no END); deep nesting (long chunk
 * prefixes); another time shift and clock rate; EXT events of every kind (and a frame clearing, TEARDOWN, across a chunk boundary);
 * sampler samples (format 1.2); tasks (format 1.7: TASK, TASK_FRAMES and
 * TASK_SWITCH, ring mode); an empty trace. And profile files
 * (profilegen.h), a small ELF file (elfgen.h) and a C++ name's tail
 * (fuzzdemangle.h).
 */
#define _GNU_SOURCE
#include "elfgen.h"
#include "profilegen.h"
#include "trace/sample_stream.h"
#include "trace/thread_records.h"
#include "tracegen.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir;

static int path_of(char *buf, size_t len, const char *name)
{
    return snprintf(buf, len, "%s/%s", dir, name) < (int)len ? 0 : -1;
}

static int done(tg *g, const char *name, double refined)
{
    int rc = tg_close(g, refined);
    tg_free(g);
    if (rc) {
        fprintf(stderr, "make_seed: %s: %s\n", name, sw_strerror(rc));
        return 1;
    }
    return 0;
}

static int seed_stream(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "stream.swt");
    if (tg_open(&g, p, 4096, 0, 2, 1e9) || tg_codes(&g, 6, 2))
        return 1;
    tg_thread *a = tg_add_thread(&g, 1001, 140001, "MainThread", 1);
    tg_thread *b = tg_add_thread(&g, 1002, 140002, "", 2);
    if (!a || !b)
        return 1;
    for (int round = 0; round < 3; round++) {
        tg_run(a, 25, 6);
        sw_tbuf_flush(a->b);
        tg_run(b, 15, 4);
        sw_tbuf_flush(b->b);
        if (round == 1)
            sw_writer_thread_name(g.w, 1, "worker-1");
    }
    tg_run(a, 10, 6);  /* left in the buffer and open: flushed at close */
    return done(&g, "stream.swt", 1e9);
}

static int seed_ring(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "ring.swt");
    if (tg_open(&g, p, 4096, 1024, 0, 1e9) || tg_codes(&g, 4, 1))
        return 1;
    tg_thread *a = tg_add_thread(&g, 2001, 0, "ring", 3);
    tg_thread *b = tg_add_thread(&g, 2002, 0, "quiet", 4);
    if (!a || !b)
        return 1;
    for (int i = 0; i < 4; i++) {
        tg_run(a, 200, 12);
        sw_tbuf_flush(a->b);
    }
    tg_run(b, 30, 3);
    return done(&g, "ring.swt", 0);
}

/* Two tasks besides the thread, switching inside each other's frames,
 * across chunk boundaries (TASK_FRAMES chunks) with a ring's gap. */
static int seed_tasks(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "tasks.swt");
    if (tg_open(&g, p, 4096, 8192, 0, 1e9) || tg_codes(&g, 6, 0))
        return 1;
    tg_thread *a = tg_add_thread(&g, 2101, 0, "hub", 6);
    if (!a || sw_writer_define_task(g.w, 1, a->b->index, "greenlet one") ||
        sw_writer_define_task(g.w, 2, a->b->index, "greenlet two"))
        return 1;
    uint64_t task = 0;
    for (int i = 0; i < 600; i++) {
        uint64_t next = (uint64_t)(i % 3);
        a->ticks += 50;
        sw_tbuf_task_switch(a->b, a->ticks, task, next);
        task = next;
        a->ticks += 50;
        if (i % 4 != 3)
            sw_tbuf_enter(a->b, a->ticks, SW_OP_CALL, (uint32_t)(i % 6));
        else
            sw_tbuf_exit(a->b, a->ticks, SW_OP_RETURN);
    }
    return done(&g, "tasks.swt", 0);
}

static int seed_no_end(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "no_end.swt");
    if (tg_open(&g, p, 4096, 0, 1, 2e9) || tg_codes(&g, 5, 0))
        return 1;
    tg_thread *a = tg_add_thread(&g, 3001, 1, "crashing", 5);
    if (!a)
        return 1;
    tg_run(a, 40, 8);
    sw_tbuf_flush(a->b);
    tg_run(a, 40, 8);
    if (done(&g, "no_end.swt", 0))
        return 1;
    /* Cut the END chunk off, as if the process had been killed. */
    size_t len;
    uint8_t *buf = tg_slurp(p, &len);
    if (!buf)
        return 1;
    size_t off = SW_FILE_HEADER_LEN, last = off;
    while (len - off >= SW_CHUNK_HEADER_LEN) {
        size_t plen = (size_t)buf[off + 4] | (size_t)buf[off + 5] << 8 | (size_t)buf[off + 6] << 16 |
                      (size_t)buf[off + 7] << 24;
        last = off;
        off += SW_CHUNK_HEADER_LEN + plen;
    }
    int rc = truncate(p, (off_t)last) ? 1 : 0;
    free(buf);
    return rc;
}

static int seed_deep(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "deep.swt");
    if (tg_open(&g, p, 4096, 0, 0, 1e9) || tg_codes(&g, 3, 0))
        return 1;
    tg_thread *a = tg_add_thread(&g, 4001, 0, "deep", 6);
    if (!a)
        return 1;
    for (int i = 0; i < 40; i++)
        tg_enter(a, SW_OP_CALL, (uint32_t)(i % 3));
    sw_tbuf_flush(a->b);
    tg_run(a, 30, 60);
    return done(&g, "deep.swt", 1e9);
}

static int seed_shift(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "shift.swt");
    if (tg_open(&g, p, 4096, 0, 5, 3e9) || tg_codes(&g, 4, 2))
        return 1;
    for (int k = 0; k < 3; k++) {
        tg_thread *a = tg_add_thread(&g, 5001 + (uint64_t)k, 0, "t", 7 + (uint64_t)k);
        if (!a)
            return 1;
        tg_run(a, 20, 5);
        sw_tbuf_flush(a->b);
    }
    return done(&g, "shift.swt", 2.5e9);
}

static int seed_ext(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "ext.swt");
    if (tg_open(&g, p, 4096, 0, 1, 1e9) || tg_codes(&g, 4, 1))
        return 1;
    tg_thread *a = tg_add_thread(&g, 6001, 0, "events", 11);
    if (!a)
        return 1;
    tg_run(a, 10, 4);
    tg_ext_all(a);
    sw_tbuf_flush(a->b);
    tg_ext(a, SW_EXT_GC_START, 0, 0, 0, 0, 0, NULL, NULL);  /* left open */
    tg_run(a, 10, 4);
    /* A frame's clearing (TEARDOWN) that spans a chunk boundary. */
    tg_thread *b = tg_add_thread(&g, 6002, 0, "teardown", 12);
    if (!b)
        return 1;
    tg_enter(b, SW_OP_CALL, 0);
    tg_enter(b, SW_OP_CALL, 1);
    tg_ext(b, SW_EXT_TEARDOWN, 0, 0, 0, 0, 0, NULL, NULL);
    tg_enter(b, SW_OP_CALL, 2);
    sw_tbuf_flush(b->b);
    tg_exit(b, SW_OP_RETURN);
    tg_ext(b, SW_EXT_TEARDOWN, 0, 0, 0, 0, 0, NULL, NULL);
    tg_exit(b, SW_OP_UNWIND);
    tg_exit(b, SW_OP_RETURN);
    return done(&g, "ext.swt", 1e9);
}

static int seed_samples(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "samples.swt");
    if (tg_open(&g, p, 4096, 0, 0, 1e9) || tg_codes(&g, 3, 0))
        return 1;
    tg_thread *a = tg_add_thread(&g, 8001, 180001, "main", 12);
    if (!a)
        return 1;
    tg_run(a, 20, 4);
    sw_sample_stream *st = sw_sample_stream_new(g.w, 5000000000ull, "/skip/");
    if (!st)
        return 1;
    sw_sample_code c[3] = {
        {.addr = 1, .name = "outer", .filename = "/a.py", .name_len = 5, .filename_len = 5, .firstlineno = 1,
         .sink_id = SW_NO_ID},
        {.addr = 2, .name = "inner", .filename = "/a.py", .name_len = 5, .filename_len = 5, .firstlineno = 9,
         .sink_id = SW_NO_ID},
        {.addr = 3, .name = "own", .filename = "/skip/x.py", .name_len = 3, .filename_len = 10, .firstlineno = 2,
         .sink_id = SW_NO_ID}};
    sw_sample_code *fr[3] = {&c[1], &c[2], &c[0]};
    for (int i = 0; i < 6; i++) {
        sw_sample s = {.thread_id = i % 3 ? 180001 : 777, .native_tid = 8001, .t_ns = 5000000000ll + i * 1000,
                       .weight_ns = 1000, .depth = (uint32_t)(i % 4), .frames = fr, .state = (uint32_t)(i % 4),
                       .cpu_ns = i % 2 ? SW_NO_CPU : 500};
        sw_sample_stream_sink(st, &s);
        if (i == 2)
            sw_sample_stream_flush(st);
    }
    /* Format 1.3: native frames (one of the skipped file, left out alone)
     * and lines. */
    sw_sample_code nc[2] = {
        {.addr = 4, .name = "deflate [native]", .filename = "/lib/libz.so", .name_len = 16, .filename_len = 12,
         .sink_id = SW_NO_ID},
        {.addr = 5, .name = "hook [native]", .filename = "/skip/n.so", .name_len = 13, .filename_len = 10,
         .sink_id = SW_NO_ID}};
    sw_sample_code *nfr[4] = {&nc[0], &c[1], &nc[1], &c[0]};
    int32_t lines[4] = {0, 12, 0, 3};
    for (int i = 0; i < 3; i++) {
        sw_sample s = {.thread_id = 180001, .native_tid = 8001, .t_ns = 5000010000ll + i * 1000, .weight_ns = 1000,
                       .depth = (uint32_t)(4 - i), .frames = nfr + i, .state = 1, .cpu_ns = SW_NO_CPU,
                       .lines = i == 1 ? NULL : lines + i};
        sw_sample_stream_sink(st, &s);
    }
    sw_sample_stream_flush(st);
    sw_sample_stream_free(st);
    tg_run(a, 10, 4);
    return done(&g, "samples.swt", 1e9);
}

/* Format 1.8: system calls and lost kernel records of the thread (and of a
 * tid the trace does not have) in THREAD_RECORDS chunks, some ending after
 * the frame around them. */
static int seed_thread_records(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "thread_records.swt");
    if (tg_open(&g, p, 4096, 0, 0, 1e9) || tg_codes(&g, 3, 0))
        return 1;
    tg_thread *a = tg_add_thread(&g, 8001, 180001, "main", 13);
    if (!a)
        return 1;
    tg_run(a, 40, 4);
    sw_trec_stream *st = sw_trec_stream_new(g.w, 5000000000ull);
    if (!st)
        return 1;
    static const char *const names[] = {"write", "read", "", "futex"};
    for (int i = 0; i < 12; i++) {
        sw_ext v = {.s1 = names[i % 4], .a = (uint64_t)i, .b = (uint64_t)(int64_t)(i % 3 - 1),
                    .c = (uint64_t)(i * 700)};
        sw_trec_stream_add(st, i % 5 ? 8001 : 4242, 5000000000ull + (uint64_t)(i * 1500), SW_EXT_SYSCALL, &v);
        if (i == 6) {
            sw_ext lost = {.a = 9};
            sw_trec_stream_add(st, 8001, 5000009000ull, SW_EXT_KERNEL_LOST, &lost);
            sw_trec_stream_flush(st);
        }
    }
    sw_trec_stream_flush(st);
    sw_trec_stream_free(st);
    tg_run(a, 10, 4);
    return done(&g, "thread_records.swt", 1e9);
}

static int seed_empty(void)
{
    char p[4096];
    tg g;
    path_of(p, sizeof p, "empty.swt");
    if (tg_open(&g, p, 4096, 0, 0, 1e9))
        return 1;
    return done(&g, "empty.swt", 0);
}

/* A seed of n bytes of its own, not a trace. 0 or 1. */
static int seed_bytes(const char *name, const void *bytes, size_t n)
{
    char p[512];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n) {
        if (f)
            fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}

/* The ELF reader's seed (fuzzelf.h). */
static int seed_elf(void)
{
    static unsigned char buf[ELFGEN_MAX];
    return seed_bytes("tiny.elf", buf, elfgen_build(buf));
}

/* The demangler's seed (fuzzdemangle.h: "_Z" goes before it): a C++
 * name with a namespace, a template, a substitution and a clone suffix. */
static int seed_demangle(void)
{
    static const char name[] = "N2ns5inner3sumISt6vectorIiSaIiEEEET_S5_RKS5_.isra.0";
    return seed_bytes("cxx.name", name, sizeof name - 1);
}

/* The Rust demangler's seed (fuzzdemangle.h: "_R" goes before it): a v0
 * name with an impl, generic arguments, a dyn trait with a binding, a
 * closure and back-references. */
static int seed_demangle_rust(void)
{
    static const char name[] = "NvMs3_NtCs1_5alloc7raw_vecINtB5_6RawVecINtNtB7_5boxed3BoxDINtNtNtCs2_4core3ops8function"
                               "5FnMutuEp6OutputTjhEEL_EE8grow_oneNCNvB7_1fs0_0";
    return seed_bytes("rust.name", name, sizeof name - 1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seed DIR\n");
        return 2;
    }
    dir = argv[1];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    int bad = seed_stream() | seed_ring() | seed_tasks() | seed_no_end() | seed_deep() | seed_shift() | seed_ext() |
              seed_samples() | seed_thread_records() | seed_empty() | seed_elf() | seed_demangle() |
              seed_demangle_rust() | profile_seeds(dir);
    if (bad)
        fprintf(stderr, "make_seed: could not write every seed\n");
    return bad;
}
