/*
 * test_merge.c - several traces exported as one timeline (trace/merge.h):
 * a parent and a child whose META says the parent's thread started it
 * inside a slice. The merged Chrome JSON is valid, holds every slice of
 * both and one flow ("s" in the parent's thread, "f" in the child's);
 * the merged Perfetto output is valid with each process on packet
 * sequences and tracks of its own (the checker refuses a sequence whose
 * state is not cleared first, or an event on an undescribed track);
 * --min-duration applies to every part; write errors are reported.
 */
#define _GNU_SOURCE
#include "check.h"
#include "exportcheck.h"
#include "trace/merge.h"
#include "tracegen.h"

/* A trace of one thread (tid) whose first frame stays open, from tg_open
 * (pid 4242, mono0 5 s); a child's META adds who started it. */
static sw_trace *make(tg *g, uint64_t tid, uint64_t seed, int child)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    if (tg_open(g, path, 4096, 0, 0, 1e9) || tg_codes(g, 15, 4))
        return NULL;
    if (child) {
        sw_bytes kv = {0};
        sw_kv_uint(&kv, "parent_pid", 4242);
        sw_kv_str(&kv, "spawn", "spawn");
        sw_kv_uint(&kv, "spawn_tid", 3001);
        sw_kv_uint(&kv, "spawn_mono_ns", 5000000000ull + 5000);  /* inside the parent's first frame */
        int rc = sw_writer_meta(g->w, &kv);
        sw_bytes_free(&kv);
        if (rc)
            return NULL;
    }
    tg_thread *a = tg_add_thread(g, tid, 1, "main", seed);
    if (!a)
        return NULL;
    tg_enter(a, SW_OP_CALL, 1);
    a->floor = 1;
    tg_run(a, 2000, 8);
    if (tg_close(g, 1e9))
        return NULL;
    sw_trace *t = NULL;
    char err[256];
    sw_trace_open_file(path, &t, err, sizeof err);
    unlink(path);
    return t;
}

static size_t count(const char *s, size_t n, const char *what)
{
    size_t k = 0;
    for (const char *p = s; (p = memmem(p, n - (size_t)(p - s), what, strlen(what))); p++)
        k++;
    return k;
}

static char *merged(sw_trace *const *ts, sw_export_fn fmt, int64_t min_ns, size_t *n, int *rc)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    if (!f)
        return NULL;
    sw_export_opts o = {min_ns, NULL, NULL, NULL, NULL, 0};
    char err[128] = "";
    *rc = sw_export_merged(ts, 2, fmt, f, &o, err, sizeof err);
    fclose(f);
    return buf;
}

TEST(parent_and_child_on_one_timeline)
{
    tg gp, gc;
    sw_trace *ts[2] = {make(&gp, 3001, 71, 0), make(&gc, 3002, 72, 1)};
    REQUIRE(ts[0] && ts[1]);
    for (int64_t min_ns = 0; min_ns <= 3000; min_ns += 3000) {
        size_t n, slices = 0;
        for (int i = 0; i < 2; i++) {
            int64_t *dur;
            size_t nd;
            REQUIRE(sw_slice_durations(ts[i], 0, &dur, &nd) == SW_OK);
            for (size_t k = 0; k < nd; k++)
                slices += dur[k] >= min_ns;
            free(dur);
        }
        int rc;
        char why[200];
        char *out = merged(ts, sw_exporter_find("chrome")->write, min_ns, &n, &rc);
        REQUIRE(out);
        CHECK_EQ_I64(rc, SW_OK);
        ec_chrome_stats cs;
        if (CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "chrome output: %s", why)) {
            CHECK_EQ_U64(cs.begins, slices);
            CHECK_EQ_U64(cs.metadata, 4);   /* a process and a thread each */
            CHECK_EQ_U64(cs.flow_starts, 1);
            CHECK_EQ_U64(cs.flow_ends, 1);
        }
        CHECK_EQ_U64(count(out, n, "\"ph\":\"s\""), 1);
        CHECK(strstr(out, "\"tid\":3001,\"name\":\"start process\""));   /* the parent's thread */
        CHECK(strstr(out, "\"tid\":3002,\"name\":\"start process\""));   /* the child's */
        free(out);

        out = merged(ts, sw_exporter_find("perfetto")->write, min_ns, &n, &rc);
        REQUIRE(out);
        CHECK_EQ_I64(rc, SW_OK);
        ec_pb_stats ps;
        if (CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "perfetto output: %s", why)) {
            CHECK_EQ_U64(ps.descriptors, 4);
            CHECK_EQ_U64(ps.begins, slices);
            CHECK_EQ_U64(ps.ends, slices);
        }
        free(out);
    }
    /* Write errors. */
    FILE *f = fopen("/dev/full", "w");
    if (f) {
        setvbuf(f, NULL, _IONBF, 0);
        for (int fmt = 0; fmt < 2; fmt++) {
            char err[128] = "";
            int rc = sw_export_merged(ts, 2, fmt ? sw_export_perfetto : sw_export_chrome, f, NULL, err, sizeof err);
            CHECK_MSG(rc == SW_EIO && strcmp(err, "write error") == 0, "rc %d, \"%s\"", rc, err);
        }
        fclose(f);
    }
    for (int i = 0; i < 2; i++)
        sw_trace_free(ts[i]);
    tg_free(&gp);
    tg_free(&gc);
}
