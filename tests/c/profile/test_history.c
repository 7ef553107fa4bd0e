/*
 * test_history.c - call trees over time (native/profile/history.h), the
 * profile's cycles and omitted files (profile.h), and profile files
 * (profile_file.h): round trip, damage (truncation at every length, every
 * byte flipped), bad input, and random mutations with the checksums fixed
 * so that the parsers behind them are reached.
 */
#define _GNU_SOURCE
#include "check.h"
#include "profile/profile.h"
#include "base/crc32.h"
#include "trace/format.h"
#include "profile/history.h"
#include "profile/aggregate.h"
#include "profile/profile_file.h"

static sw_sample_code code_in(uint64_t addr, const char *name, const char *file)
{
    return (sw_sample_code){addr, name, file, (uint32_t)strlen(name), (uint32_t)strlen(file), (int32_t)addr,
                            SW_NO_ID, NULL};
}

static void feed_at(sw_profile *p, uint64_t tid, int64_t t_ns, sw_sample_code **leaf_first, uint32_t depth)
{
    sw_sample s = {tid, 0, t_ns, 7, depth, 0, leaf_first, SW_STATE_RUNNING, SW_NO_CPU, NULL, NULL, NULL};
    sw_profile_sink(p, &s);
}

/* The collapsed stacks of t (a malloc'ed string). */
static char *collapsed(const sw_calltree *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int rc = sw_calltree_write_collapsed(t, f, 0);
    fclose(f);
    if (rc != SW_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The collapsed stacks of t with the lines sorted (their order is the
 * trees' insertion order, which merging may change). */
static char *sorted_collapsed(const sw_calltree *t)
{
    char *text = collapsed(t);
    if (!text)
        return NULL;
    size_t n = 0, len = strlen(text);
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    char **lines = calloc(n + 1, sizeof *lines), *out = malloc(len + 1);
    size_t k = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); lines && l; l = strtok_r(NULL, "\n", &save))
        lines[k++] = l;
    if (!lines || !out) {
        free(lines);
        free(out);
        free(text);
        return NULL;
    }
    qsort(lines, k, sizeof *lines, cmp_line);
    out[0] = 0;
    for (size_t i = 0; i < k; i++) {
        strcat(out, lines[i]);
        strcat(out, "\n");
    }
    free(lines);
    free(text);
    return out;
}

static int same_collapsed(const sw_calltree *a, const sw_calltree *b)
{
    char *x = sorted_collapsed(a), *y = sorted_collapsed(b);
    int same = x && y && strcmp(x, y) == 0;
    if (!same)
        printf("      collapsed differ:\n%s---\n%s", x ? x : "(null)", y ? y : "(null)");
    free(x);
    free(y);
    return same;
}

TEST(history_push_evicts_oldest_and_keeps_time_order)
{
    sw_functab *ft = sw_functab_new();
    sw_history *h = sw_history_new(ft, 3);
    REQUIRE(h != NULL);
    uint32_t f;
    REQUIRE(sw_functab_intern(ft, "f", 1, "a.py", 4, 1, &f) == SW_OK);
    for (int i = 0; i < 5; i++) {
        sw_history_entry *e;
        REQUIRE(sw_history_push(h, i * 10, i * 10 + 10, &e) == SW_OK);
        CHECK_EQ_I64(sw_history_entry_add(h, e, 1, &f, 1, (uint64_t)i + 1, 0), SW_OK);
    }
    CHECK_EQ_U64(sw_history_len(h), 3);
    CHECK_EQ_I64(sw_history_get(h, 0)->start_ns, 20);
    CHECK_EQ_I64(sw_history_newest(h)->start_ns, 40);
    CHECK_EQ_U64(sw_history_evicted(h), 2);
    CHECK_EQ_U64(sw_history_evicted_samples(h), 1 + 2);
    sw_history_entry *e;
    CHECK_EQ_I64(sw_history_push(h, 30, 40, &e), SW_EARG);   /* before the newest start */
    CHECK_EQ_I64(sw_history_push(h, 60, 50, &e), SW_EARG);   /* ends before it starts */
    /* A window selects the entries it overlaps, whole. */
    sw_calltree *t = sw_calltree_new(ft);
    CHECK_EQ_I64(sw_history_window(h, 25, 35, 1, 0, t), SW_OK);
    CHECK_EQ_U64(sw_calltree_total(t), 3 + 4);
    sw_calltree_free(t);
    t = sw_calltree_new(ft);
    CHECK_EQ_I64(sw_history_window(h, 0, 100, 0, 2, t), SW_OK);   /* no such thread */
    CHECK_EQ_U64(sw_calltree_total(t), 0);
    sw_calltree_free(t);
    sw_history_free(h);
    sw_functab_free(ft);
}

TEST(merging_a_tree_with_itself_doubles_every_count)
{
    sw_functab *ft = sw_functab_new(), *other = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    uint32_t a, b, c;
    sw_functab_intern(ft, "a", 1, "x.py", 4, 1, &a);
    sw_functab_intern(ft, "b", 1, "x.py", 4, 5, &b);
    sw_functab_intern(ft, "c", 1, "y.py", 4, 9, &c);
    uint32_t s1[] = {a, b}, s2[] = {a, b, c}, s3[] = {c};
    sw_calltree_add(t, s1, 2, 3, 30);
    sw_calltree_add(t, s2, 3, 2, 20);
    sw_calltree_add(t, s3, 1, 5, 50);
    /* Into a tree over another table, twice. */
    sw_calltree *twice = sw_calltree_new(other);
    CHECK_EQ_I64(sw_calltree_merge(twice, t), SW_OK);
    CHECK_EQ_I64(sw_calltree_merge(twice, t), SW_OK);
    CHECK_EQ_U64(sw_calltree_node_count(twice), sw_calltree_node_count(t));
    for (uint32_t i = 0; i < sw_calltree_node_count(t); i++) {
        const sw_calltree_node *x = sw_calltree_get_node(t, i), *y = sw_calltree_get_node(twice, i);
        CHECK_EQ_U64(y->count, 2 * x->count);
        CHECK_EQ_U64(y->self, 2 * x->self);
        CHECK_EQ_U64(y->weight, 2 * x->weight);
    }
    sw_calltree_free(twice);
    sw_calltree_free(t);
    sw_functab_free(ft);
    sw_functab_free(other);
}

/* A profile fed samples of two threads in cycles 0, 1 and 4 of 100 ns. */
static sw_profile *cycled_profile(size_t maxlen)
{
    sw_profile *p = sw_profile_new();
    if (!p || sw_profile_set_history(p, 100, maxlen, 1000, 0) != SW_OK)
        return p;
    static sw_sample_code main_, a, b;
    main_ = code_in(1, "main", "m.py");
    a = code_in(2, "a", "m.py");
    b = code_in(3, "b", "m.py");
    static sw_sample_code *sa[2], *sb[2];
    sa[0] = &a;
    sa[1] = &main_;
    sb[0] = &b;
    sb[1] = &main_;
    feed_at(p, 1, 10, sa, 2);
    feed_at(p, 1, 50, sa, 2);
    feed_at(p, 2, 60, sb, 1);
    feed_at(p, 1, 150, sb, 2);
    feed_at(p, 1, 420, sb, 2);
    feed_at(p, 2, 430, sa, 2);
    return p;
}

TEST(profile_history_has_one_entry_per_cycle_with_samples)
{
    sw_profile *p = cycled_profile(0);
    REQUIRE(p != NULL);
    sw_history *h = sw_profile_history(p);
    REQUIRE(h != NULL);
    REQUIRE_EQ_U64(sw_history_len(h), 3);
    int64_t starts[] = {1000, 1100, 1400};
    uint64_t samples[] = {3, 1, 2};
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ_I64(sw_history_get(h, i)->start_ns, starts[i]);
        CHECK_EQ_I64(sw_history_get(h, i)->end_ns, starts[i] + 100);
        CHECK_EQ_U64(sw_history_get(h, i)->samples, samples[i]);
    }
    CHECK_EQ_U64(sw_history_get(h, 0)->ntrees, 2);
    /* The whole history merged is the whole run. */
    sw_calltree *all = sw_calltree_new(sw_profile_functab(p)), *whole = sw_profile_merged(p);
    CHECK_EQ_I64(sw_history_window(h, INT64_MIN, INT64_MAX, 1, 0, all), SW_OK);
    CHECK(same_collapsed(all, whole));
    char *x = collapsed(all), *y = collapsed(whole);   /* line for line */
    CHECK(x && y && strcmp(x, y) == 0);
    free(x);
    free(y);
    sw_calltree_free(all);
    /* Per thread too. */
    for (size_t i = 0; i < sw_profile_thread_count(p); i++) {
        const sw_profile_thread *th = sw_profile_thread_get(p, i);
        sw_calltree *one = sw_calltree_new(sw_profile_functab(p));
        CHECK_EQ_I64(sw_history_window(h, INT64_MIN, INT64_MAX, 0, th->thread_id, one), SW_OK);
        CHECK(same_collapsed(one, th->tree));
        sw_calltree_free(one);
    }
    /* The first cycle alone: a under main for thread 1, b for thread 2. */
    sw_calltree *first = sw_calltree_new(sw_profile_functab(p));
    CHECK_EQ_I64(sw_history_window(h, 1000, 1099, 1, 0, first), SW_OK);
    CHECK_EQ_U64(sw_calltree_total(first), 3);
    char *text = collapsed(first);
    CHECK(text && strstr(text, "main (m.py:1);a (m.py:2) 2\n") && strstr(text, "b (m.py:3) 1\n"));
    free(text);
    sw_calltree_free(first);
    sw_calltree_free(whole);
    /* Stopping clips the open cycle. */
    sw_profile_end_history(p, 450);
    CHECK_EQ_I64(sw_history_newest(h)->end_ns, 1450);
    sw_profile_free(p);

    p = cycled_profile(2);
    REQUIRE(p != NULL);
    CHECK_EQ_U64(sw_history_len(sw_profile_history(p)), 2);
    CHECK_EQ_U64(sw_history_evicted(sw_profile_history(p)), 1);
    CHECK_EQ_U64(sw_history_evicted_samples(sw_profile_history(p)), 3);
    sw_profile_free(p);
}

TEST(omitted_files_leave_the_stack_and_children_attach_to_the_parent)
{
    sw_profile *p = sw_profile_new();
    REQUIRE(p != NULL);
    const char *globs[] = {"*/site-packages/*", "*lib?.py"};
    CHECK_EQ_I64(sw_profile_set_omit(p, globs, 2), SW_OK);
    sw_sample_code main_ = code_in(1, "main", "/app/main.py"), lib = code_in(2, "wrap", "/x/site-packages/w.py"),
                   lib2 = code_in(3, "deco", "/x/lib1.py"), work = code_in(4, "work", "/app/main.py");
    sw_sample_code *s1[] = {&work, &lib2, &lib, &main_};
    sw_sample_code *s2[] = {&lib2, &lib};
    feed_at(p, 1, 10, s1, 4);
    feed_at(p, 1, 20, s2, 2);    /* every frame omitted: cut */
    sw_calltree *t = sw_profile_merged(p);
    REQUIRE(t != NULL);
    char *text = collapsed(t);
    CHECK_EQ_STR(text, "main (/app/main.py:1);work (/app/main.py:4) 1\n");
    free(text);
    CHECK_EQ_U64(sw_profile_cut(p), 1);
    CHECK_EQ_U64(sw_profile_samples(p), 1);
    sw_calltree_free(t);
    const char *bad[] = {NULL};
    CHECK_EQ_I64(sw_profile_set_omit(p, bad, 1), SW_EARG);
    sw_profile_free(p);
}

/* A profile file of cycled_profile(0); with_states: the worker thread's
 * states too (1.1: a THREAD_STATES chunk after THREADS). */
static int build_file_states(sw_bytes *out, sw_profile **keep, int with_states)
{
    sw_profile *p = cycled_profile(0);
    if (!p)
        return SW_ENOMEM;
    sw_prof_info info = {.mode = "wall", .interval_ns = 50, .cycle_ns = 100, .start_ns = 1000, .stop_ns = 1450,
                         .samples = sw_profile_samples(p), .cut = 4, .pid = 77, .parent_pid = 7,
                         .process = "SpawnPoolWorker-1"};
    sw_prof_thread th[] = {{1, 11, "MainThread", 4, 0, 0, {0}, 0},
                           {2, 12, "worker \xc3\xa9", 2, 0, 0, {[SW_STATE_RUNNING] = 1, [SW_STATE_IDLE] = 300},
                            with_states}};
    int rc = sw_profile_file_build(out, &info, th, 2, sw_profile_history(p));
    *keep = p;
    return rc;
}

static int build_file(sw_bytes *out, sw_profile **keep)
{
    return build_file_states(out, keep, 0);
}

TEST(thread_states_round_trip)
{
    /* Only the threads that have states are listed; the others read without. */
    sw_bytes b = {0};
    sw_profile *p = NULL;
    REQUIRE(build_file_states(&b, &p, 1) == SW_OK);
    char err[256] = "";
    sw_profile_file *pf = NULL;
    REQUIRE(sw_profile_file_open_mem(b.data, b.len, &pf, err, sizeof err) == SW_OK);
    CHECK_EQ_STR(sw_profile_file_damage(pf), "");
    CHECK_EQ_U64(sw_profile_file_unknown_chunks(pf), 0);
    REQUIRE_EQ_U64(sw_profile_file_thread_count(pf), 2);
    CHECK(!sw_profile_file_thread(pf, 0)->has_states);
    CHECK(sw_profile_file_thread(pf, 1)->has_states);
    CHECK_EQ_U64(sw_profile_file_thread(pf, 1)->states[SW_STATE_RUNNING], 1);
    CHECK_EQ_U64(sw_profile_file_thread(pf, 1)->states[SW_STATE_IDLE], 300);
    CHECK_EQ_U64(sw_profile_file_thread(pf, 1)->states[SW_STATE_GIL_WAIT], 0);
    sw_profile_file_free(pf);
    sw_profile_free(p);
    sw_bytes_free(&b);
}

TEST(profile_file_round_trip)
{
    sw_bytes b = {0};
    sw_profile *p = NULL;
    REQUIRE(build_file(&b, &p) == SW_OK);
    char err[256] = "";
    sw_profile_file *pf = NULL;
    REQUIRE(sw_profile_file_open_mem(b.data, b.len, &pf, err, sizeof err) == SW_OK);
    CHECK_EQ_STR(sw_profile_file_damage(pf), "");
    CHECK(sw_profile_file_complete(pf));
    const sw_prof_info *in = sw_profile_file_info(pf);
    CHECK_EQ_STR(in->mode, "wall");
    CHECK_EQ_U64(in->interval_ns, 50);
    CHECK_EQ_U64(in->cycle_ns, 100);
    CHECK_EQ_I64(in->start_ns, 1000);
    CHECK_EQ_I64(in->stop_ns, 1450);
    CHECK_EQ_U64(in->samples, 6);
    CHECK_EQ_U64(in->cut, 4);
    REQUIRE_EQ_U64(sw_profile_file_thread_count(pf), 2);
    CHECK_EQ_STR(sw_profile_file_thread(pf, 1)->name, "worker \xc3\xa9");
    CHECK_EQ_U64(sw_profile_file_thread(pf, 1)->native_tid, 12);
    CHECK_EQ_U64(in->pid, 77);
    CHECK_EQ_U64(in->parent_pid, 7);
    CHECK_EQ_STR(in->process, "SpawnPoolWorker-1");
    sw_history *h = sw_profile_file_history(pf), *orig = sw_profile_history(p);
    REQUIRE_EQ_U64(sw_history_len(h), sw_history_len(orig));
    for (size_t i = 0; i < sw_history_len(h); i++) {
        sw_history_entry *x = sw_history_get(orig, i), *y = sw_history_get(h, i);
        CHECK_EQ_I64(y->start_ns, x->start_ns);
        CHECK_EQ_I64(y->end_ns, x->end_ns);
        CHECK_EQ_U64(y->samples, x->samples);
        REQUIRE_EQ_U64(y->ntrees, x->ntrees);
        for (size_t k = 0; k < x->ntrees; k++) {
            CHECK_EQ_U64(y->trees[k].thread_id, x->trees[k].thread_id);
            CHECK(same_collapsed(y->trees[k].tree, x->trees[k].tree));
            CHECK_EQ_U64(sw_calltree_get_node(y->trees[k].tree, 0)->weight,
                         sw_calltree_get_node(x->trees[k].tree, 0)->weight);
        }
    }
    sw_profile_file_free(pf);
    sw_profile_free(p);
    sw_bytes_free(&b);
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static size_t entries_of(const uint8_t *data, size_t len, int *ok, char *damage, size_t dlen)
{
    char err[256] = "";
    sw_profile_file *pf = NULL;
    *ok = sw_profile_file_open_mem(data, len, &pf, err, sizeof err) == SW_OK;
    if (!*ok) {
        CHECK_MSG(err[0] != 0, "a failed open without a message");
        snprintf(damage, dlen, "%s", err);
        return 0;
    }
    snprintf(damage, dlen, "%s", sw_profile_file_damage(pf));
    size_t n = sw_history_len(sw_profile_file_history(pf));
    sw_profile_file_free(pf);
    return n;
}

TEST(damaged_profile_files_read_up_to_the_damage)
{
    sw_bytes b = {0};
    sw_profile *p = NULL;
    REQUIRE(build_file(&b, &p) == SW_OK);
    int ok;
    char d[256];
    CHECK_EQ_U64(entries_of(b.data, b.len, &ok, d, sizeof d), 3);
    /* Every truncation: either refused with a message (no intact META) or
     * read with the damage reported, never more entries than written. */
    size_t readable = 0;
    for (size_t len = 0; len < b.len; len++) {
        size_t n = entries_of(b.data, len, &ok, d, sizeof d);
        CHECK(n <= 3);
        if (ok) {
            readable++;
            CHECK_MSG(strstr(d, "truncated") != NULL, "length %zu: damage '%s'", len, d);
        }
    }
    CHECK(readable > 0);
    CHECK_EQ_U64(entries_of(b.data, 0, &ok, d, sizeof d), 0);
    CHECK(!ok && strstr(d, "empty"));
    /* A byte flipped in the last chunk (END): all trees read, damage named. */
    b.data[b.len - 1] ^= 0x40;
    CHECK_EQ_U64(entries_of(b.data, b.len, &ok, d, sizeof d), 3);
    CHECK(ok && strstr(d, "checksum"));
    b.data[b.len - 1] ^= 0x40;
    /* Every byte flipped in turn: no crash, no read past the buffer, and
     * damage reported unless the byte is a chunk's flags or reserved field
     * (which version 1 readers ignore) or the file header's minor/flags. */
    uint8_t *unchecked = calloc(b.len, 1);
    REQUIRE(unchecked != NULL);
    for (size_t off = SW_FILE_HEADER_LEN; off + SW_CHUNK_HEADER_LEN <= b.len;
         off += SW_CHUNK_HEADER_LEN + rd32(b.data + off + 4))
        memset(unchecked + off + 1, 1, 3);
    for (size_t i = 0; i < b.len; i++) {
        b.data[i] ^= 0x5a;
        size_t n = entries_of(b.data, b.len, &ok, d, sizeof d);
        CHECK(n <= 3);
        if (ok && i >= SW_FILE_HEADER_LEN && !unchecked[i])
            CHECK_MSG(d[0] != 0, "byte %zu flipped, no damage reported", i);
        b.data[i] ^= 0x5a;
    }
    free(unchecked);
    /* Not a profile, another major version. */
    char err[256];
    sw_profile_file *pf = NULL;
    CHECK_EQ_I64(sw_profile_file_open_mem((const uint8_t *)"hello world, not a profile", 26, &pf, err, sizeof err),
                 SW_EFORMAT);
    CHECK(strstr(err, "not a stackwatch profile") != NULL);
    b.data[8] = 2;
    CHECK_EQ_I64(sw_profile_file_open_mem(b.data, b.len, &pf, err, sizeof err), SW_EVERSION);
    CHECK(pf == NULL);
    sw_profile_free(p);
    sw_bytes_free(&b);
}

/* Recomputes every chunk's CRC so that a mutation reaches the parsers. */
static void fix_crcs(uint8_t *d, size_t len)
{
    size_t off = SW_FILE_HEADER_LEN;
    while (len - off >= SW_CHUNK_HEADER_LEN && off < len) {
        size_t plen = rd32(d + off + 4);
        if (plen > len - off - SW_CHUNK_HEADER_LEN)
            return;
        uint32_t crc = sw_crc32(0, d + off + SW_CHUNK_HEADER_LEN, plen);
        for (int k = 0; k < 4; k++)
            d[off + 8 + k] = (uint8_t)(crc >> (8 * k));
        off += SW_CHUNK_HEADER_LEN + plen;
    }
}

/* Random mutations with valid checksums: whatever the parsers accept must
 * be a consistent history (each tree's root count is the sum of the own
 * counts of its nodes). */
TEST(mutated_profile_files_with_valid_checksums)
{
    sw_bytes b = {0};
    sw_profile *p = NULL;
    REQUIRE(build_file(&b, &p) == SW_OK);
    uint8_t *m = malloc(b.len);
    REQUIRE(m != NULL);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(m, b.data, b.len);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            size_t at = SW_FILE_HEADER_LEN + (size_t)(x % (b.len - SW_FILE_HEADER_LEN));
            m[at] = (uint8_t)(x >> 32);
        }
        fix_crcs(m, b.len);
        size_t len = iter % 3 == 0 ? (size_t)(x >> 40) % b.len : b.len;
        char err[256];
        sw_profile_file *pf = NULL;
        if (sw_profile_file_open_mem(m, len, &pf, err, sizeof err) != SW_OK)
            continue;
        sw_history *h = sw_profile_file_history(pf);
        for (size_t i = 0; i < sw_history_len(h); i++) {
            sw_history_entry *e = sw_history_get(h, i);
            for (size_t k = 0; k < e->ntrees; k++) {
                const sw_calltree *t = e->trees[k].tree;
                uint64_t self = 0;
                for (uint32_t n = 0; n < sw_calltree_node_count(t); n++)
                    self += sw_calltree_get_node(t, n)->self;
                if (!CHECK_EQ_U64(self, sw_calltree_total(t)))
                    iter = 1 << 30;
            }
        }
        sw_calltree *all = sw_calltree_new(sw_history_functab(h));
        CHECK(all && sw_history_window(h, INT64_MIN, INT64_MAX, 1, 0, all) == SW_OK);
        char *text = all ? collapsed(all) : NULL;
        CHECK(text != NULL);
        free(text);
        sw_calltree_free(all);
        sw_profile_file_free(pf);
    }
    free(m);
    sw_profile_free(p);
    sw_bytes_free(&b);
}

/* Adding through a cursor gives the tree sw_calltree_add gives, node for
 * node, over random stacks that share prefixes (and a switch of tree). */
TEST(adding_through_a_cursor_equals_adding)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *plain = sw_calltree_new(ft), *cursed = sw_calltree_new(ft), *other = sw_calltree_new(ft);
    REQUIRE(plain && cursed && other);
    uint32_t ids[8];
    for (int i = 0; i < 8; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        REQUIRE(sw_functab_intern(ft, name, strlen(name), "c.py", 4, i, &ids[i]) == SW_OK);
    }
    sw_calltree_cursor cur = {0};
    uint32_t stack[64];
    size_t n = 0;
    uint64_t x = 12345;
    for (int s = 0; s < 5000; s++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        /* Mostly keep a prefix of the previous stack, then vary the rest. */
        n = (size_t)(x % 3 == 0 ? x % 64 : (n ? (x >> 8) % n : 0));
        size_t grow = (size_t)((x >> 16) % 6);
        for (size_t k = 0; k < grow && n < 64; k++)
            stack[n++] = ids[(x >> (20 + 3 * k)) % 8];
        CHECK_EQ_I64(sw_calltree_add(plain, stack, n, 1 + s % 3, (uint64_t)s), SW_OK);
        CHECK_EQ_I64(sw_calltree_add_cursor(cursed, &cur, stack, n, 1 + s % 3, (uint64_t)s), SW_OK);
        if (s % 500 == 0)   /* the cursor used on another tree, then back */
            CHECK_EQ_I64(sw_calltree_add_cursor(other, &cur, stack, n, 1, 1), SW_OK);
        if (s % 700 == 0)   /* read between adds: the sums through the nodes made on reading */
            CHECK_EQ_I64((int64_t)sw_calltree_total(cursed), (int64_t)sw_calltree_total(plain));
    }
    /* A merge reads the sums too (the last adds not summed yet). */
    sw_calltree *merged = sw_calltree_new(ft);
    REQUIRE(merged && sw_calltree_merge(merged, cursed) == SW_OK);
    CHECK_EQ_I64((int64_t)sw_calltree_total(merged), (int64_t)sw_calltree_total(plain));
    CHECK_EQ_I64((int64_t)sw_calltree_get_node(merged, 0)->weight, (int64_t)sw_calltree_get_node(plain, 0)->weight);
    sw_calltree_free(merged);
    REQUIRE_EQ_U64(sw_calltree_node_count(cursed), sw_calltree_node_count(plain));
    for (uint32_t i = 0; i < sw_calltree_node_count(plain); i++) {
        const sw_calltree_node *a = sw_calltree_get_node(plain, i), *b = sw_calltree_get_node(cursed, i);
        CHECK(a->func == b->func && a->parent == b->parent && a->count == b->count && a->self == b->self &&
              a->weight == b->weight && a->self_weight == b->self_weight);
    }
    sw_calltree_cursor_free(&cur);
    sw_calltree_free(plain);
    sw_calltree_free(cursed);
    sw_calltree_free(other);
    sw_functab_free(ft);
}

/* ---- Recovery: every intact chunk of a damaged profile file is read ---- */

typedef struct pchunks {
    size_t off[32];
    unsigned type[32];
    size_t n;
} pchunks;

static void pchunks_of(const sw_bytes *b, pchunks *c)
{
    c->n = 0;
    for (size_t off = SW_FILE_HEADER_LEN; off + SW_CHUNK_HEADER_LEN <= b->len && c->n < 32;
         off += SW_CHUNK_HEADER_LEN + rd32(b->data + off + 4)) {
        c->off[c->n] = off;
        c->type[c->n++] = b->data[off];
    }
}

/* One line per tree, in file order: cycle, thread, samples, nodes and
 * (with names) the collapsed stacks. */
static size_t tree_lines(sw_history *h, int names, char lines[][400], size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < sw_history_len(h); i++) {
        const sw_history_entry *e = sw_history_get(h, i);
        for (size_t k = 0; k < e->ntrees && n < max; k++) {
            const sw_calltree *t = e->trees[k].tree;
            char *text = names ? collapsed(t) : NULL;
            snprintf(lines[n++], 400, "%lld-%lld thread %llu: %llu samples, %zu nodes %s", (long long)e->start_ns,
                     (long long)e->end_ns, (unsigned long long)e->trees[k].thread_id,
                     (unsigned long long)sw_calltree_total(t), sw_calltree_node_count(t), text ? text : "");
            free(text);
        }
    }
    return n;
}

/* Opens the damaged file d and checks that it holds exactly the trees of
 * the intact file but tree `lost` (SIZE_MAX: none), compared with names
 * or not. Returns the file (the caller frees it) or NULL. */
static sw_profile_file *expect_trees(const sw_bytes *intact, const uint8_t *d, size_t len, size_t lost, int names,
                                     const char *what)
{
    static char want[16][400], got[16][400];
    char err[256];
    sw_profile_file *whole = NULL, *pf = NULL;
    if (!CHECK_EQ_I64(sw_profile_file_open_mem(intact->data, intact->len, &whole, err, sizeof err), SW_OK))
        return NULL;
    size_t nw = tree_lines(sw_profile_file_history(whole), names, want, 16);
    sw_profile_file_free(whole);
    if (!CHECK_MSG(sw_profile_file_open_mem(d, len, &pf, err, sizeof err) == SW_OK, "%s: %s", what, err))
        return NULL;
    size_t ng = tree_lines(sw_profile_file_history(pf), names, got, 16);
    CHECK_MSG(ng == nw - (lost != SIZE_MAX), "%s: %zu trees of %zu", what, ng, nw);
    for (size_t i = 0, j = 0; i < nw && j < ng; i++) {
        if (i == lost)
            continue;
        CHECK_MSG(strcmp(got[j], want[i]) == 0, "%s: tree %zu: %s, expected %s", what, i, got[j], want[i]);
        j++;
    }
    return pf;
}

/* build_file() and its chunks: META, FUNCS, THREADS, five TREEs, END. */
static int built(sw_bytes *b, sw_profile **p, pchunks *c)
{
    if (build_file(b, p) != SW_OK)
        return 0;
    pchunks_of(b, c);
    return c->n == 9 && c->type[0] == SW_PCHUNK_META && c->type[1] == SW_PCHUNK_FUNCS &&
           c->type[2] == SW_PCHUNK_THREADS && c->type[5] == SW_PCHUNK_TREE && c->type[8] == SW_PCHUNK_END;
}

static int damage_names(const char *damage, const char *what, size_t off)
{
    char needle[48];
    snprintf(needle, sizeof needle, "offset %zu", off);
    const char *p = strstr(damage, needle);
    return strstr(damage, what) && p && (p[strlen(needle)] < '0' || p[strlen(needle)] > '9');
}

TEST(one_bit_in_the_first_middle_or_last_chunk_of_a_profile_loses_that_chunk_only)
{
    sw_bytes b = {0};
    sw_profile *p = NULL;
    pchunks c;
    REQUIRE(built(&b, &p, &c));
    uint8_t *d = malloc(b.len);
    /* The first chunk (META): every tree reads; what META said is unknown. */
    memcpy(d, b.data, b.len);
    d[c.off[0] + SW_CHUNK_HEADER_LEN + 2] ^= 1;
    sw_profile_file *pf = expect_trees(&b, d, b.len, SIZE_MAX, 1, "META");
    if (pf) {
        const char *dmg = sw_profile_file_damage(pf);
        CHECK_MSG(damage_names(dmg, "checksum mismatch", c.off[0]) && strstr(dmg, "META chunk is lost"), "%s", dmg);
        CHECK_EQ_STR(sw_profile_file_info(pf)->mode, "unknown");
        CHECK(sw_profile_file_complete(pf));
        CHECK_EQ_U64(sw_profile_file_thread_count(pf), 2);
        sw_profile_file_free(pf);
    }
    /* A tree in the middle: the others read, the count says one is missing. */
    memcpy(d, b.data, b.len);
    d[c.off[5] + SW_CHUNK_HEADER_LEN + 3] ^= 0x20;
    pf = expect_trees(&b, d, b.len, 2, 1, "middle TREE");
    if (pf) {
        const char *dmg = sw_profile_file_damage(pf);
        char want[160];
        snprintf(want, sizeof want, "corrupted: checksum mismatch in the chunk at offset %zu (%zu bytes, 1 chunk, "
                 "skipped); 4 of 5 trees read", c.off[5], c.off[6] - c.off[5]);
        CHECK_EQ_STR(dmg, want);
        CHECK(sw_profile_file_complete(pf));
        sw_profile_file_free(pf);
    }
    /* The last chunk (END): every tree reads; the file is not complete. */
    memcpy(d, b.data, b.len);
    d[c.off[8] + SW_CHUNK_HEADER_LEN + 1] ^= 0x02;
    pf = expect_trees(&b, d, b.len, SIZE_MAX, 1, "END");
    if (pf) {
        CHECK_MSG(damage_names(sw_profile_file_damage(pf), "checksum mismatch", c.off[8]), "%s",
                  sw_profile_file_damage(pf));
        CHECK(!sw_profile_file_complete(pf));
        sw_profile_file_free(pf);
    }
    /* FUNCS: every tree reads, its counts and shape intact; the functions
     * are named after their ids. */
    memcpy(d, b.data, b.len);
    d[c.off[1] + SW_CHUNK_HEADER_LEN + 4] ^= 0x10;
    pf = expect_trees(&b, d, b.len, SIZE_MAX, 0, "FUNCS");
    if (pf) {
        CHECK_MSG(damage_names(sw_profile_file_damage(pf), "checksum mismatch", c.off[1]) &&
                      strstr(sw_profile_file_damage(pf), "3 function definitions lost"),
                  "%s", sw_profile_file_damage(pf));
        char *text = collapsed(sw_history_get(sw_profile_file_history(pf), 0)->trees[0].tree);
        CHECK_MSG(text && strstr(text, "<function 0: definition lost> (:0);<function 1: definition lost>"), "%s",
                  text);
        free(text);
        sw_profile_file_free(pf);
    }
    free(d);
    sw_profile_free(p);
    sw_bytes_free(&b);
}

TEST(two_damaged_ranges_in_a_profile)
{
    sw_bytes b = {0}, intact = {0};
    sw_profile *p = NULL;
    pchunks c;
    REQUIRE(built(&b, &p, &c));
    sw_bytes_put(&intact, b.data, b.len);
    /* THREADS damaged, and garbage over the header of the fourth tree. */
    b.data[c.off[2] + SW_CHUNK_HEADER_LEN] ^= 0x80;
    memset(b.data + c.off[6], 0xee, 7);
    sw_profile_file *pf = expect_trees(&intact, b.data, b.len, 3, 1, "two ranges");
    if (pf) {
        const char *dmg = sw_profile_file_damage(pf);
        CHECK_MSG(strncmp(dmg, "2 damaged ranges: ", 18) == 0 && damage_names(dmg, "checksum", c.off[2]) &&
                      damage_names(dmg, "impossible length", c.off[6]) && strstr(dmg, "4 of 5 trees read"),
                  "%s", dmg);
        CHECK_EQ_U64(sw_profile_file_thread_count(pf), 0);
        sw_profile_file_free(pf);
    }
    sw_profile_free(p);
    sw_bytes_free(&b);
    sw_bytes_free(&intact);
}

TEST(a_chunk_of_unknown_type_in_a_profile)
{
    sw_bytes b = {0};
    sw_profile *p = NULL;
    pchunks c;
    REQUIRE(built(&b, &p, &c));
    /* A chunk of type 40 inserted before the first tree. */
    for (int newer = 0; newer < 2; newer++) {
        sw_bytes f = {0};
        sw_bytes_put(&f, b.data, c.off[3]);
        size_t at = sw_chunk_begin(&f, 40);
        sw_bytes_put(&f, "from the future", 15);
        REQUIRE(sw_chunk_end(&f, at) == SW_OK);
        sw_bytes_put(&f, b.data + c.off[3], b.len - c.off[3]);
        if (newer)
            f.data[10] = SW_PROF_MINOR + 1;
        sw_profile_file *pf = expect_trees(&b, f.data, f.len, SIZE_MAX, 1, newer ? "newer type" : "unknown type");
        if (pf) {
            if (newer) {
                CHECK_EQ_STR(sw_profile_file_damage(pf), "");
                CHECK_EQ_U64(sw_profile_file_unknown_chunks(pf), 1);
            } else {
                CHECK_MSG(damage_names(sw_profile_file_damage(pf), "a chunk of type 40", at), "%s",
                          sw_profile_file_damage(pf));
                CHECK_EQ_U64(sw_profile_file_unknown_chunks(pf), 0);
            }
            CHECK(sw_profile_file_complete(pf));
            sw_profile_file_free(pf);
        }
        sw_bytes_free(&f);
    }
    sw_profile_free(p);
    sw_bytes_free(&b);
}

TEST(a_profile_file_is_read_a_piece_at_a_time)
{
    /* The same file read from disk (pread) and from memory. */
    sw_bytes b = {0};
    sw_profile *p = NULL;
    REQUIRE(build_file(&b, &p) == SW_OK);
    b.data[b.len - 30] ^= 4;   /* with damage, too */
    char path[256];
    check_tmp_path(path, sizeof path, ".swprof");
    FILE *f = fopen(path, "wb");
    REQUIRE(f && fwrite(b.data, 1, b.len, f) == b.len);
    fclose(f);
    char err[256];
    sw_profile_file *a = NULL, *m = NULL;
    REQUIRE(sw_profile_file_open_file(path, &a, err, sizeof err) == SW_OK);
    REQUIRE(sw_profile_file_open_mem(b.data, b.len, &m, err, sizeof err) == SW_OK);
    unlink(path);
    CHECK_EQ_STR(sw_profile_file_damage(a), sw_profile_file_damage(m));
    static char x[16][400], y[16][400];
    size_t nx = tree_lines(sw_profile_file_history(a), 1, x, 16), ny = tree_lines(sw_profile_file_history(m), 1, y, 16);
    REQUIRE_EQ_U64(nx, ny);
    for (size_t i = 0; i < nx; i++)
        CHECK_EQ_STR(x[i], y[i]);
    sw_profile_file *none = NULL;
    CHECK_EQ_I64(sw_profile_file_open_file("/nonexistent-stackwatch/p.swprof", &none, err, sizeof err), SW_EIO);
    CHECK(none == NULL && strstr(err, "cannot open") != NULL);
    sw_profile_file_free(m);
    sw_profile_file_free(a);
    sw_profile_free(p);
    sw_bytes_free(&b);
}
