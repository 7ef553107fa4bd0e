/*
 * test_records_extra.c - a new row of the table of EXT record kinds
 * (native/trace/records.h) reaches every consumer with no other edit. This
 * test is built with the rows of trace/records_extra_rows.h added, and
 * linked with the trace room built with them too (tests/c/meson.build):
 * an instant kind with a field of every type and an OPEN..CLOSE pair are
 * written by the table's encoder, decoded by the reader, counted by the
 * summary of stats, and shown by both exports (names, categories, args,
 * the pair's slice on a track of its own), beside the kinds of the
 * shipped table, whose GC slices are unchanged; the CTF export has an
 * event class for each, which babeltrace2 (when installed; under CI=true
 * its absence fails) prints with the fields.
 */
#define _GNU_SOURCE
#include "trace/analysis.h"
#include "check.h"
#include "trace/trace.h"
#include "exportcheck.h"
#include "tracegen.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The CTF export of t into a fresh directory: its metadata's text (to
 * free), and the directory's name in dir. */
static char *ctf_export(sw_trace *t, char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/sw-ctf-XXXXXX");
    if (!mkdtemp(dir))
        return NULL;
    char path[300];
    snprintf(path, sizeof path, "%s/ust", dir);
    if (mkdir(path, 0777) != 0)
        return NULL;
    snprintf(path, sizeof path, "%s/" SW_CTF_FIRST_FILE, dir);
    FILE *f = fopen(path, "w+");
    if (!f)
        return NULL;
    sw_export_opts o = {0, NULL, NULL, dir, NULL, 0};
    char err[256] = "";
    int rc = sw_export_ctf(t, f, &o, err, sizeof err);
    CHECK_MSG(rc == SW_OK, "ctf: %s", err);
    long n = ftell(f);
    char *text = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (text) {
        rewind(f);
        text[fread(text, 1, (size_t)n, f)] = 0;
    }
    fclose(f);
    return text;
}

/* babeltrace2's text of the CTF directory dir (to free), or NULL when
 * babeltrace2 is not installed (a failure under CI=true). */
static char *babeltrace_text(const char *dir)
{
    char cmd[400], *ci = getenv("CI");
    if (system("command -v babeltrace2 >/dev/null 2>&1") != 0) {
        CHECK_MSG(!ci || (strcmp(ci, "true") && strcmp(ci, "1")), "babeltrace2 is not installed (CI is set)");
        printf("      (babeltrace2 is not installed: the CTF export is not read back)\n");
        return NULL;
    }
    snprintf(cmd, sizeof cmd, "babeltrace2 %s 2>&1", dir);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, n = 0;
    char *text = p ? malloc(cap) : NULL;
    CHECK_MSG(text, "cannot run babeltrace2");
    if (!text) {
        if (p)
            pclose(p);
        return NULL;
    }
    n = fread(text, 1, cap - 1, p);
    text[n] = 0;
    CHECK_MSG(pclose(p) == 0, "babeltrace2 failed: %s", text);
    return text;
}

typedef struct seen {
    sw_ext x[8];
    char s1[8][SW_EXT_STR_MAX + 1], s2[8][SW_EXT_STR_MAX + 1];
    size_t n;
} seen;

static int keep_ext(void *ud, const sw_event *ev)
{
    seen *s = ud;
    if (ev->kind != SW_EV_EXT || s->n == 8)
        return 0;
    s->x[s->n] = *ev->ext;
    snprintf(s->s1[s->n], sizeof s->s1[0], "%s", ev->ext->s1);
    snprintf(s->s2[s->n], sizeof s->s2[0], "%s", ev->ext->s2);
    s->n++;
    return 0;
}

TEST(the_rows_are_in_the_table)
{
    const sw_record_kind *k = sw_record_kind_of(SW_EXT_TASK_NOTE);
    REQUIRE(k);
    CHECK_EQ_STR(k->name, "task_note");
    CHECK_EQ_U64(k->nfields, 6);
    CHECK_EQ_U64(SW_EXT_KIND_LIMIT, 43);
    CHECK(sw_record_kind_of(0) == NULL && sw_record_kind_of(SW_EXT_KIND_LIMIT) == NULL);   /* (no row; past the rows: 39 is TASK_STACK since 1.20) */
    CHECK(sw_record_kind_of(SW_EXT_WAIT_END)->pair == SW_EXT_WAIT_BEGIN);
}

TEST(a_new_kind_is_written_read_counted_and_exported)
{
    tg g;
    const char *p = check_tmp_file(".swt");
    REQUIRE(tg_open(&g, p, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 4, 1) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 9001, 0, "main", 3);
    REQUIRE(a);
    tg_enter(a, SW_OP_CALL, 0);
    tg_ext(a, SW_EXT_TASK_NOTE, 3, 7, (uint64_t)-5, 99, 0, "t1", "n");
    tg_ext(a, SW_EXT_WAIT_BEGIN, 0, 0, 0, 0, 0, "L", NULL);
    tg_ext(a, SW_EXT_GC_START, 0, 0, 2, 0, 0, NULL, NULL);
    tg_ext(a, SW_EXT_WAIT_END, 0, 0, 3, 0, 0, "L", NULL);
    tg_ext(a, SW_EXT_GC_DONE, 0, 0, 2, 17, 1, NULL, NULL);
    tg_ext(a, SW_EXT_WAIT_BEGIN, 0, 0, 0, 0, 0, "M", NULL);   /* left open: unfinished */
    tg_exit(a, SW_OP_RETURN);
    REQUIRE(tg_close(&g, 1e9) == SW_OK);
    sw_trace *t = tg_open_trace(p);
    REQUIRE(t);

    /* The reader decodes every field into its slot. */
    seen s = {0};
    REQUIRE(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, keep_ext, &s) == SW_OK);
    REQUIRE(s.n == 6);
    CHECK_EQ_U64(s.x[0].kind, SW_EXT_TASK_NOTE);
    CHECK_EQ_U64(s.x[0].malformed, 0);
    CHECK_EQ_U64(s.x[0].code, 3);
    CHECK_EQ_U64(s.x[0].line, 7);
    CHECK_EQ_U64(s.x[0].a, (uint64_t)-5);
    CHECK_EQ_U64(s.x[0].b, 99);
    CHECK_EQ_STR(s.s1[0], "t1");
    CHECK_EQ_STR(s.s2[0], "n");
    CHECK_EQ_U64(s.x[3].kind, SW_EXT_WAIT_END);
    CHECK_EQ_U64(s.x[3].a, 3);
    CHECK_EQ_STR(s.s1[3], "L");

    /* Stats count it. */
    sw_ext_summary xs;
    REQUIRE(sw_ext_summary_compute(t, &xs) == SW_OK);
    CHECK_EQ_U64(xs.count[SW_EXT_TASK_NOTE], 1);
    CHECK_EQ_U64(xs.count[SW_EXT_WAIT_BEGIN], 2);
    CHECK_EQ_U64(xs.count[SW_EXT_WAIT_END], 1);
    CHECK_EQ_U64(xs.gc_pairs, 1);
    CHECK_EQ_U64(xs.malformed, 0);

    /* Chrome: the instant with its args in the row's order, the pair as a
     * complete event (and the open one unfinished), GC as before. */
    char err[256], why[160];
    size_t n;
    int rc;
    char *out = ec_export_mem(sw_export_chrome, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_chrome_stats cs;
    CHECK_MSG(ec_chrome(out, n, 1, &cs, why, sizeof why), "%s", why);
    CHECK_EQ_U64(cs.instants, 1);
    CHECK_EQ_U64(cs.completes, 3);
    CHECK(strstr(out, "\"name\":\"switch to t1\",\"cat\":\"task\",\"args\":{\"function\":\"<lambda>3\","
                      "\"file\":\"/src/pkg/mod3.py\",\"line\":7,\"task\":\"t1\",\"drift\":-5,\"waker\":99,"
                      "\"note\":\"n\"}}") != NULL);
    CHECK(strstr(out, "\"name\":\"wait (L)\",\"cat\":\"wait\",\"args\":{\"lock\":\"L\",\"spins\":3}}") != NULL);
    CHECK(strstr(out, "\"name\":\"wait (M) unfinished\",\"cat\":\"wait\",\"args\":{\"lock\":\"M\"}}") != NULL);
    CHECK(strstr(out, "\"name\":\"GC (generation 2)\",\"cat\":\"gc\",\"args\":{\"generation\":2,"
                      "\"collected\":17,\"uncollectable\":1}}") != NULL);
    free(out);

    /* Perfetto: the instant, and the pair's slices on a "wait" track of
     * their own beside the "GC" track. */
    out = ec_export_mem(sw_export_perfetto, t, 0, &n, &rc, err, sizeof err);
    REQUIRE(rc == SW_OK);
    ec_pb_stats ps;
    CHECK_MSG(ec_perfetto((const uint8_t *)out, n, 1, &ps, why, sizeof why), "%s", why);
    CHECK_EQ_U64(ps.instants, 1);
    CHECK_EQ_U64(ps.begins, 1 + 2 + 1);         /* the call, two waits, one GC */
    CHECK_EQ_U64(ps.descriptors, 1 + 1 + 2);    /* process, thread, GC and wait tracks */
    CHECK(memmem(out, n, "switch to t1", 12) != NULL);
    CHECK(memmem(out, n, "wait (L)", 8) != NULL);
    CHECK(memmem(out, n, "spins", 5) != NULL);
    CHECK(memmem(out, n, "drift", 5) != NULL);
    free(out);

    /* CTF: an event class per row, with the row's fields typed. */
    char dir[64];
    char *meta = ctf_export(t, dir, sizeof dir);
    REQUIRE(meta);
    CHECK(strstr(meta, "name = \"stackwatch:task_note\";") != NULL);
    CHECK(strstr(meta, "string _function;\n\t\tstring _file;\n\t\tuint64_t _line;\n\t\tstring _task;\n"
                       "\t\tint64_t _drift;\n\t\tuint64_t _waker;\n\t\tstring _note;\n") != NULL);
    CHECK(strstr(meta, "name = \"stackwatch:wait_end\";") != NULL);
    free(meta);
    char *text = babeltrace_text(dir);
    if (text) {
        CHECK_MSG(strstr(text, "stackwatch:task_note: ") != NULL, "%s", text);
        CHECK_MSG(strstr(text, "function = \"<lambda>3\", file = \"/src/pkg/mod3.py\", line = 7, task = \"t1\", "
                               "drift = -5, waker = 99, note = \"n\" }") != NULL, "%s", text);
        CHECK_MSG(strstr(text, "stackwatch:wait_end: ") != NULL, "%s", text);
        CHECK_MSG(strstr(text, "lock = \"L\", spins = 3 }") != NULL, "%s", text);
        free(text);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    CHECK(system(cmd) == 0);
    sw_trace_free(t);
    tg_free(&g);
    unlink(p);
}
