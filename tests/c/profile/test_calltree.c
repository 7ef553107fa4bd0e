/*
 * test_calltree.c - the statistical profiler's call tree and its outputs
 * (native/profile/calltree.h) and the sample aggregator (aggregate.h): counts
 * and weights, merge across function tables, walk order, collapsed stacks,
 * speedscope JSON, the flame graph page's flat nodes, the wrapper filters,
 * failed samples' weight.
 */
#define _GNU_SOURCE
#include "check.h"
#include "profile/profile.h"
#include "exportcheck.h"
#include "profile/aggregate.h"

static uint32_t fn(sw_functab *ft, const char *name, int32_t line)
{
    uint32_t id = SW_NO_ID;
    CHECK_EQ_I64(sw_functab_intern(ft, name, strlen(name), "f.py", 4, line, &id), SW_OK);
    return id;
}

/* The node reached from the root by the path of function ids. */
static const sw_calltree_node *at(const sw_calltree *t, const uint32_t *path, size_t n)
{
    uint32_t cur = SW_CALLTREE_ROOT;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = sw_calltree_get_node(t, cur)->first_child;
        while (c != SW_NODE_NONE && sw_calltree_get_node(t, c)->func != path[i])
            c = sw_calltree_get_node(t, c)->next_sibling;
        if (c == SW_NODE_NONE)
            return NULL;
        cur = c;
    }
    return sw_calltree_get_node(t, cur);
}

static char *to_mem(int (*write)(void *, FILE *), void *arg, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    *rc = write(arg, f);
    fclose(f);
    return buf;
}

static int write_collapsed(void *t, FILE *f)
{
    return sw_calltree_write_collapsed(t, f, 0);
}

TEST(functab_interns_by_name_file_and_line)
{
    sw_functab *ft = sw_functab_new();
    REQUIRE(ft != NULL);
    uint32_t a = fn(ft, "f", 1), b = fn(ft, "f", 2), c = fn(ft, "g", 1);
    CHECK(a != b && a != c && b != c);
    CHECK_EQ_U64(fn(ft, "f", 1), a);
    for (int i = 0; i < 5000; i++) {   /* growth keeps ids stable */
        char name[32];
        snprintf(name, sizeof name, "n%d", i);
        fn(ft, name, i);
    }
    CHECK_EQ_U64(fn(ft, "g", 1), c);
    CHECK_EQ_U64(sw_functab_count(ft), 5003);
    CHECK_EQ_STR(sw_functab_get(ft, b)->name, "f");
    CHECK_EQ_I64(sw_functab_get(ft, b)->line, 2);
    CHECK(sw_functab_get(ft, 999999) == NULL);
    sw_functab_free(ft);
}

TEST(functab_set_source_renames_a_function)
{
    sw_functab *ft = sw_functab_new();
    REQUIRE(ft != NULL);
    uint32_t lib, other, id;
    REQUIRE(sw_functab_intern(ft, "fib [native]", 12, "/lib/x.so", 9, 0, &lib) == SW_OK);
    REQUIRE(sw_functab_intern(ft, "fib [native]", 12, "y.c", 3, 7, &other) == SW_OK);
    CHECK(sw_functab_set_source(ft, lib, "x.c", 3, 62) == SW_OK);
    CHECK_EQ_STR(sw_functab_get(ft, lib)->filename, "x.c");
    CHECK_EQ_I64(sw_functab_get(ft, lib)->line, 62);
    /* found under its new name, not made again */
    CHECK(sw_functab_intern(ft, "fib [native]", 12, "x.c", 3, 62, &id) == SW_OK && id == lib);
    CHECK(sw_functab_set_source(ft, lib, "x.c", 3, 62) == SW_OK);
    /* another function's name already, or no such id: unchanged */
    CHECK(sw_functab_set_source(ft, lib, "y.c", 3, 7) == SW_EARG);
    CHECK(sw_functab_set_source(ft, 99, "z.c", 3, 1) == SW_EARG);
    CHECK_EQ_STR(sw_functab_get(ft, lib)->filename, "x.c");
    CHECK_EQ_U64(sw_functab_count(ft), 2);
    sw_functab_free(ft);
}

TEST(counts_weights_and_walk_order)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    REQUIRE(t != NULL);
    uint32_t m = fn(ft, "main", 1), w = fn(ft, "work", 2), l = fn(ft, "leaf", 3), o = fn(ft, "other", 4);
    uint32_t s1[] = {m, w, l}, s2[] = {m, o}, s3[] = {m, w};
    CHECK_EQ_I64(sw_calltree_add(t, s1, 3, 5, 500), SW_OK);
    CHECK_EQ_I64(sw_calltree_add(t, s2, 2, 2, 200), SW_OK);
    CHECK_EQ_I64(sw_calltree_add(t, s3, 2, 3, 300), SW_OK);
    CHECK_EQ_I64(sw_calltree_add(t, NULL, 0, 1, 10), SW_OK);   /* no frames: root only */
    CHECK_EQ_U64(sw_calltree_total(t), 11);
    const sw_calltree_node *root = sw_calltree_get_node(t, SW_CALLTREE_ROOT);
    CHECK_EQ_U64(root->self, 1);
    CHECK_EQ_U64(root->weight, 1010);
    const sw_calltree_node *nw = at(t, s3, 2), *nl = at(t, s1, 3);
    REQUIRE(nw && nl);
    CHECK_EQ_U64(nw->count, 8);
    CHECK_EQ_U64(nw->self, 3);
    CHECK_EQ_U64(nw->weight, 800);
    CHECK_EQ_U64(nw->self_weight, 300);
    CHECK_EQ_U64(nl->depth, 3);
    CHECK_EQ_U64(sw_calltree_node_count(t), 5);
    sw_calltree_free(t);
    sw_functab_free(ft);
}

struct visit { uint32_t order[16]; int n; int stop_at; };

static int visit(void *ud, const sw_calltree *t, uint32_t id, const sw_calltree_node *n)
{
    struct visit *v = ud;
    (void)t;
    (void)n;
    v->order[v->n++] = id;
    return v->n == v->stop_at ? 7 : 0;
}

TEST(walk_is_preorder_in_insertion_order)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    uint32_t a = fn(ft, "a", 1), b = fn(ft, "b", 2), c = fn(ft, "c", 3);
    uint32_t s1[] = {a, b}, s2[] = {c}, s3[] = {a, c};
    sw_calltree_add(t, s1, 2, 1, 1);   /* nodes: 1=a 2=a.b */
    sw_calltree_add(t, s2, 1, 1, 1);   /* 3=c */
    sw_calltree_add(t, s3, 2, 1, 1);   /* 4=a.c */
    struct visit v = {{0}, 0, 0};
    CHECK_EQ_I64(sw_calltree_walk(t, visit, &v), 0);
    uint32_t want[] = {0, 1, 2, 4, 3};
    REQUIRE(v.n == 5);
    CHECK_EQ_MEM(v.order, want, sizeof want);
    struct visit w = {{0}, 0, 3};
    CHECK_EQ_I64(sw_calltree_walk(t, visit, &w), 7);
    CHECK_EQ_I64(w.n, 3);
    sw_calltree_free(t);
    sw_functab_free(ft);
}

TEST(merge_across_function_tables)
{
    sw_functab *fa = sw_functab_new(), *fb = sw_functab_new();
    sw_calltree *a = sw_calltree_new(fa), *b = sw_calltree_new(fb);
    fn(fb, "padding", 9);   /* so that ids differ between the tables */
    uint32_t am = fn(fa, "main", 1), aw = fn(fa, "work", 2);
    uint32_t bm = fn(fb, "main", 1), bw = fn(fb, "work", 2), bx = fn(fb, "extra", 3);
    uint32_t s1[] = {am, aw}, s2[] = {bm, bw}, s3[] = {bm, bx};
    sw_calltree_add(a, s1, 2, 2, 20);
    sw_calltree_add(b, s2, 2, 3, 30);
    sw_calltree_add(b, s3, 2, 1, 10);
    CHECK_EQ_I64(sw_calltree_merge(a, b), SW_OK);
    CHECK_EQ_I64(sw_calltree_merge(a, a), SW_EARG);
    CHECK_EQ_U64(sw_calltree_total(a), 6);
    const sw_calltree_node *nw = at(a, s1, 2);
    REQUIRE(nw != NULL);
    CHECK_EQ_U64(nw->count, 5);
    CHECK_EQ_U64(nw->weight, 50);
    uint32_t ax = fn(fa, "extra", 3), s4[] = {am, ax};
    const sw_calltree_node *nx = at(a, s4, 2);
    REQUIRE(nx != NULL);
    CHECK_EQ_U64(nx->self, 1);
    sw_calltree_free(a);
    sw_calltree_free(b);
    sw_functab_free(fa);
    sw_functab_free(fb);
}

TEST(merge_under_a_node)
{
    /* b's stacks become callees of a's node "proc": the node and the root
     * count b's samples, a's own stacks stay as they were. */
    sw_functab *fa = sw_functab_new(), *fb = sw_functab_new();
    sw_calltree *a = sw_calltree_new(fa), *b = sw_calltree_new(fb);
    uint32_t am = fn(fa, "main", 1), proc = fn(fa, "pid 7 worker", 0);
    uint32_t bm = fn(fb, "main", 1), bw = fn(fb, "work", 2);
    uint32_t s1[] = {am}, s2[] = {bm, bw};
    sw_calltree_add(a, s1, 1, 2, 20);
    sw_calltree_add(b, s2, 2, 3, 30);
    sw_calltree_add(b, NULL, 0, 1, 10);   /* a sample with no frames: the process's own */
    uint32_t node;
    REQUIRE(sw_calltree_child(a, SW_CALLTREE_ROOT, proc, &node) == SW_OK);
    CHECK_EQ_I64(sw_calltree_merge_under(a, b, node), SW_OK);
    CHECK_EQ_I64(sw_calltree_merge_under(a, b, 99), SW_EARG);
    CHECK_EQ_U64(sw_calltree_total(a), 6);
    CHECK_EQ_U64(sw_calltree_get_node(a, SW_CALLTREE_ROOT)->weight, 60);
    const sw_calltree_node *np = sw_calltree_get_node(a, node);
    CHECK_EQ_U64(np->count, 4);
    CHECK_EQ_U64(np->self, 1);
    CHECK_EQ_U64(np->weight, 40);
    uint32_t s3[] = {proc, fn(fa, "main", 1), fn(fa, "work", 2)};
    const sw_calltree_node *nw = at(a, s3, 3);
    REQUIRE(nw != NULL);
    CHECK_EQ_U64(nw->count, 3);
    CHECK_EQ_U64(nw->depth, 3);
    CHECK_EQ_U64(at(a, s1, 1)->count, 2);
    sw_calltree_free(a);
    sw_calltree_free(b);
    sw_functab_free(fa);
    sw_functab_free(fb);
}

TEST(collapsed_lines_and_totals)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    uint32_t m = fn(ft, "main", 1), odd = fn(ft, "we;ird\nname", 7);
    uint32_t s1[] = {m}, s2[] = {m, odd};
    sw_calltree_add(t, s1, 1, 4, 0);
    sw_calltree_add(t, s2, 2, 6, 0);
    int rc;
    char *out = to_mem(write_collapsed, t, &rc);
    CHECK_EQ_I64(rc, SW_OK);
    CHECK_EQ_STR(out, "main (f.py:1) 4\nmain (f.py:1);we:ird name (f.py:7) 6\n");
    free(out);
    sw_calltree_free(t);
    sw_functab_free(ft);
}

struct flat_args { const sw_calltree *t; const uint32_t *frame; uint32_t nframes; };

static int write_flat(void *arg, FILE *f)
{
    struct flat_args *a = arg;
    return sw_calltree_write_flat(a->t, f, a->frame, a->nframes);
}

TEST(flat_nodes_in_preorder_with_the_pages_frames)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    uint32_t m = fn(ft, "main", 1), a = fn(ft, "a", 2), b = fn(ft, "b", 3);
    uint32_t s1[] = {m, b}, s2[] = {m, a}, s3[] = {m, b, a};
    sw_calltree_add(t, s1, 2, 1, 10);   /* b before a among main's children */
    sw_calltree_add(t, s2, 2, 2, 20);
    sw_calltree_add(t, s3, 3, 3, 30);
    /* The page numbers frames by first sight: main 0, b 1, a 2. */
    uint32_t frame[3];
    frame[m] = 0, frame[b] = 1, frame[a] = 2;
    struct flat_args args = {t, frame, 3};
    int rc;
    char *out = to_mem(write_flat, &args, &rc);
    CHECK_EQ_I64(rc, SW_OK);
    CHECK_EQ_STR(out, "-1,-1,6,0,60,0,"      /* root */
                      "0,0,6,0,60,0,"        /* main */
                      "1,1,4,1,40,10,"       /* main;b */
                      "2,2,3,3,30,30,"       /* main;b;a, in pre-order before main;a */
                      "1,2,2,2,20,20");      /* main;a */
    free(out);
    args.nframes = 2;                        /* a function without a frame */
    out = to_mem(write_flat, &args, &rc);
    CHECK_EQ_I64(rc, SW_EARG);
    free(out);
    sw_calltree_free(t);
    sw_functab_free(ft);
}

struct ss { const sw_speedscope_profile *p; size_t n; int counts; };

static int write_ss(void *arg, FILE *f)
{
    struct ss *s = arg;
    return sw_speedscope_write(f, "t\"itle", s->p, s->n, s->counts ? "none" : "nanoseconds", s->counts, "test");
}

TEST(speedscope_is_valid_json_with_weights)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *t1 = sw_calltree_new(ft), *t2 = sw_calltree_new(ft);
    uint32_t m = fn(ft, "main", 1), u = fn(ft, "caf\xc3\xa9 \xff bad", 2);   /* valid and invalid UTF-8 */
    uint32_t s1[] = {m, u}, s2[] = {m};
    sw_calltree_add(t1, s1, 2, 3, 3000);
    sw_calltree_add(t1, s2, 1, 1, 1000);
    sw_calltree_add(t2, s2, 1, 2, 2000);
    sw_speedscope_profile p[] = {{"one", t1}, {"two", t2}};
    struct ss arg = {p, 2, 0};
    int rc;
    char *out = to_mem(write_ss, &arg, &rc);
    CHECK_EQ_I64(rc, SW_OK);
    char why[256];
    CHECK_MSG(ec_json_valid(out, strlen(out), why, sizeof why), "%s", why);
    CHECK(strstr(out, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\"") != NULL);
    CHECK(strstr(out, "caf\xc3\xa9 \\ufffd bad") != NULL);
    CHECK(strstr(out, "\"endValue\":4000,\"samples\":[[0],[0,1]],\"weights\":[1000,3000]") != NULL);
    CHECK(strstr(out, "\"endValue\":2000,\"samples\":[[0]],\"weights\":[2000]") != NULL);
    CHECK(strstr(out, "\"activeProfileIndex\":0,") != NULL);   /* no main thread: the busiest */
    free(out);
    arg.counts = 1;
    out = to_mem(write_ss, &arg, &rc);
    CHECK(strstr(out, "\"weights\":[1,3]") != NULL);
    free(out);
    /* It opens on the main thread, wherever it is and however idle; without
     * one, on the busiest. */
    sw_speedscope_profile q[] = {{"two", t2}, {"Thread 7 (MainThread)", t1}};
    struct ss qarg = {q, 2, 0};
    out = to_mem(write_ss, &qarg, &rc);
    CHECK(strstr(out, "\"activeProfileIndex\":1,") != NULL);
    free(out);
    sw_speedscope_profile r[] = {{"idle", t2}, {"busy", t1}};
    struct ss rarg = {r, 2, 1};
    out = to_mem(write_ss, &rarg, &rc);
    CHECK(strstr(out, "\"activeProfileIndex\":1,") != NULL);
    free(out);
    sw_speedscope_profile r2[] = {{"idle", t2}, {"MainThread (3)", t2}, {"busy", t1}};
    struct ss r2arg = {r2, 3, 0};
    out = to_mem(write_ss, &r2arg, &rc);
    CHECK(strstr(out, "\"activeProfileIndex\":1,") != NULL);
    free(out);
    /* Trees over different function tables cannot share a frame list. */
    sw_functab *other = sw_functab_new();
    sw_calltree *t3 = sw_calltree_new(other);
    sw_speedscope_profile bad[] = {{"one", t1}, {"three", t3}};
    struct ss barg = {bad, 2, 0};
    out = to_mem(write_ss, &barg, &rc);
    CHECK_EQ_I64(rc, SW_EARG);
    free(out);
    sw_calltree_free(t3);
    sw_functab_free(other);
    sw_calltree_free(t1);
    sw_calltree_free(t2);
    sw_functab_free(ft);
}

/* ---- the aggregator ---- */

static sw_sample_code code(uint64_t addr, const char *name)
{
    return (sw_sample_code){addr, name, "f.py", (uint32_t)strlen(name), 4, (int32_t)addr, SW_NO_ID, NULL};
}

static void feed(sw_profile *p, uint64_t tid, sw_sample_code **leaf_first, uint32_t depth, uint32_t flags,
                 uint64_t weight)
{
    sw_sample s = {tid, 0, 1000, weight, depth, flags, leaf_first, SW_STATE_UNKNOWN, SW_NO_CPU, NULL, NULL, NULL};
    sw_profile_sink(p, &s);
}

static void feed_state(sw_profile *p, uint64_t tid, sw_sample_code **leaf_first, uint32_t depth, uint32_t flags,
                       uint64_t weight, uint32_t state, uint64_t cpu)
{
    sw_sample s = {tid, 0, 1000, weight, depth, flags, leaf_first, state, cpu, NULL, NULL, NULL};
    sw_profile_sink(p, &s);
}

TEST(profile_threads_truncation_and_pending_weight)
{
    sw_profile *p = sw_profile_new();
    REQUIRE(p != NULL);
    sw_sample_code main_ = code(100, "main"), work = code(200, "work");
    sw_sample_code *stack[] = {&work, &main_};   /* leaf first */
    feed(p, 1, stack, 2, 0, 10);
    feed(p, 2, stack + 1, 1, 0, 10);
    feed(p, 1, NULL, 0, SW_SAMPLE_FAILED, 10);   /* its time goes to the next sample */
    feed(p, 1, stack, 2, 0, 10);
    feed(p, 1, stack, 1, SW_SAMPLE_TRUNCATED, 10);
    feed(p, 3, NULL, 0, SW_SAMPLE_FAILED, 10);   /* unknown thread: nothing to carry */
    CHECK_EQ_U64(sw_profile_samples(p), 4);
    CHECK_EQ_U64(sw_profile_thread_count(p), 2);
    const sw_profile_thread *t1 = sw_profile_thread_get(p, 0);
    CHECK_EQ_U64(t1->thread_id, 1);
    CHECK_EQ_U64(t1->samples, 3);
    const sw_calltree *t = t1->tree;
    const sw_functab *ft = sw_profile_functab(p);
    CHECK_EQ_U64(sw_calltree_get_node(t, SW_CALLTREE_ROOT)->weight, 40);
    /* main -> work holds 2 samples and 30 ns; <truncated> -> work 1 sample */
    uint32_t c = sw_calltree_get_node(t, SW_CALLTREE_ROOT)->first_child;
    REQUIRE(c != SW_NODE_NONE);
    CHECK_EQ_STR(sw_functab_get(ft, sw_calltree_get_node(t, c)->func)->name, "main");
    uint32_t w = sw_calltree_get_node(t, c)->first_child;
    REQUIRE(w != SW_NODE_NONE);
    CHECK_EQ_U64(sw_calltree_get_node(t, w)->count, 2);
    CHECK_EQ_U64(sw_calltree_get_node(t, w)->weight, 30);
    uint32_t tr = sw_calltree_get_node(t, c)->next_sibling;
    REQUIRE(tr != SW_NODE_NONE);
    CHECK_EQ_STR(sw_functab_get(ft, sw_calltree_get_node(t, tr)->func)->name, "<truncated>");
    sw_calltree *all = sw_profile_merged(p);
    REQUIRE(all != NULL);
    CHECK_EQ_U64(sw_calltree_total(all), 4);
    sw_calltree_free(all);
    sw_profile_free(p);
}

TEST(profile_filters)
{
    sw_profile *p = sw_profile_new();
    sw_sample_code boot = code(1, "boot"), cli = code(2, "cli"), runpy = code(3, "runpy"), mod = code(4, "<module>"),
                 user = code(5, "user"), wrap = code(6, "wrap"), own = code(7, "own");
    uint64_t follow[] = {3}, ignore[] = {7}, elide[] = {6};
    CHECK_EQ_I64(sw_profile_set_filters(p, 2, follow, 1, ignore, 1, elide, 1), SW_OK);
    sw_sample_code *s1[] = {&user, &wrap, &mod, &runpy, &cli, &boot};   /* leaf first */
    sw_sample_code *s2[] = {&own, &cli, &boot};
    sw_sample_code *s3[] = {&cli, &boot};
    sw_sample_code *s4[] = {&user};                                      /* another thread: no anchor */
    sw_sample_code *s5[] = {&user, &own, &mod, &cli, &boot};             /* ignored, after the cut */
    sw_sample_code *s6[] = {&user, &mod, &own, &cli, &boot};             /* ignored code cut away: kept */
    feed(p, 1, s1, 6, 0, 1);
    feed(p, 1, s2, 3, 0, 1);
    feed(p, 1, s3, 2, 0, 1);
    feed(p, 2, s4, 1, 0, 1);
    feed(p, 1, s5, 5, 0, 1);
    CHECK_EQ_U64(sw_profile_samples(p), 2);
    CHECK_EQ_U64(sw_profile_cut(p), 3);
    uint64_t ignore_cli[] = {2};
    CHECK_EQ_I64(sw_profile_set_filters(p, 7, NULL, 0, ignore_cli, 1, NULL, 0), SW_OK);
    feed(p, 1, s6, 5, 0, 1);
    CHECK_EQ_U64(sw_profile_samples(p), 3);
    CHECK_EQ_I64(sw_profile_set_filters(p, 2, follow, 1, ignore, 1, elide, 1), SW_OK);
    int rc;
    sw_calltree *all = sw_profile_merged(p);
    char *out = to_mem(write_collapsed, all, &rc);
    CHECK_EQ_STR(out, "<module> (f.py:4);user (f.py:5) 2\nuser (f.py:5) 1\n");
    free(out);
    sw_calltree_free(all);
    uint64_t many[SW_PROFILE_MAX_FILTER + 1] = {0};
    CHECK_EQ_I64(sw_profile_set_filters(p, 0, many, SW_PROFILE_MAX_FILTER + 1, NULL, 0, NULL, 0), SW_EARG);
    sw_profile_free(p);
}

/* Wall mode keeps every sample and counts states; CPU mode keeps running
 * (and unknown) ones weighted by CPU time, counts the others as off-CPU,
 * and carries their CPU time (and failed samples') to the next kept one. */
TEST(profile_modes_and_states)
{
    sw_sample_code main_ = code(100, "main"), work = code(200, "work");
    sw_sample_code *stack[] = {&work, &main_};
    for (int mode = SW_PROFILE_WALL; mode <= SW_PROFILE_CPU; mode++) {
        sw_profile *p = sw_profile_new();
        REQUIRE(p != NULL);
        CHECK_EQ_I64(sw_profile_mode(p), SW_PROFILE_WALL);
        CHECK_EQ_I64(sw_profile_set_mode(p, mode), SW_OK);
        CHECK_EQ_I64(sw_profile_set_mode(p, 7), SW_EARG);
        CHECK_EQ_I64(sw_profile_mode(p), mode);
        feed_state(p, 1, stack, 2, SW_SAMPLE_GIL_HELD, 1000, SW_STATE_RUNNING, 900);
        feed_state(p, 1, stack, 2, 0, 1000, SW_STATE_GIL_WAIT, 30);
        feed_state(p, 1, stack, 2, 0, 1000, SW_STATE_IDLE, 20);
        feed_state(p, 1, NULL, 0, SW_SAMPLE_FAILED, 1000, SW_STATE_RUNNING, 400);
        feed_state(p, 1, stack, 1, 0, 1000, SW_STATE_RUNNING, 500);   /* leaf "work" alone */
        feed_state(p, 1, stack, 2, 0, 1000, SW_STATE_UNKNOWN, SW_NO_CPU);
        feed_state(p, 2, stack, 2, 0, 1000, SW_STATE_IDLE, 0);          /* a thread only ever idle */
        const sw_profile_thread *t1 = sw_profile_thread_get(p, 0), *t2 = sw_profile_thread_get(p, 1);
        REQUIRE(t1 != NULL && t2 != NULL);
        CHECK_EQ_U64(t1->states[SW_STATE_RUNNING], 2);
        CHECK_EQ_U64(t1->states[SW_STATE_GIL_WAIT], 1);
        CHECK_EQ_U64(t1->states[SW_STATE_IDLE], 1);
        CHECK_EQ_U64(t1->states[SW_STATE_UNKNOWN], 1);
        CHECK_EQ_U64(t1->gil_held, 1);
        CHECK_EQ_U64(t1->cpu_ns, 900 + 30 + 20 + 500);
        CHECK_EQ_U64(t2->states[SW_STATE_IDLE], 1);
        const sw_calltree_node *root1 = sw_calltree_get_node(t1->tree, SW_CALLTREE_ROOT);
        if (mode == SW_PROFILE_WALL) {
            CHECK_EQ_U64(sw_profile_samples(p), 6);
            CHECK_EQ_U64(sw_profile_off_cpu(p), 0);
            CHECK_EQ_U64(t1->samples, 5);
            CHECK_EQ_U64(t1->off_cpu, 0);
            CHECK_EQ_U64(t2->samples, 1);
            CHECK_EQ_U64(root1->weight, 6000);   /* five samples and the failed one's wall time */
        } else {
            CHECK_EQ_U64(sw_profile_samples(p), 3);
            CHECK_EQ_U64(sw_profile_off_cpu(p), 3);
            CHECK_EQ_U64(t1->samples, 3);
            CHECK_EQ_U64(t1->off_cpu, 2);
            CHECK_EQ_U64(t2->samples, 0);
            CHECK_EQ_U64(t2->off_cpu, 1);
            CHECK_EQ_U64(root1->count, 3);
            /* 900; then 500 + the off-CPU 30 + 20 + the failed 400; then the
             * unknown one's wall time (its CPU time is unknown) */
            CHECK_EQ_U64(root1->weight, 900 + 950 + 1000);
            CHECK_EQ_U64(sw_calltree_node_count(t2->tree), 1);   /* its tree is empty */
        }
        sw_profile_free(p);
    }
}

/* sw_profile_set_keep: skip_idle leaves out idle threads' samples (not a
 * thread waiting for the GIL), gil_only those of threads not holding the
 * GIL; both are counted in left_out and in their thread's states, and
 * their time goes to no sample. */
TEST(profile_keep_idle_and_gil)
{
    sw_sample_code main_ = code(100, "main"), work = code(200, "work");
    sw_sample_code *stack[] = {&work, &main_};
    for (int gil_only = 0; gil_only <= 1; gil_only++) {
        sw_profile *p = sw_profile_new();
        REQUIRE(p != NULL);
        sw_profile_set_keep(p, 1, gil_only);
        feed_state(p, 1, stack, 2, SW_SAMPLE_GIL_HELD, 1000, SW_STATE_RUNNING, 900);
        feed_state(p, 1, stack, 2, 0, 1000, SW_STATE_GIL_WAIT, 30);
        feed_state(p, 1, stack, 2, 0, 1000, SW_STATE_IDLE, 20);
        feed_state(p, 2, stack, 2, 0, 1000, SW_STATE_IDLE, 0);          /* a thread only ever idle */
        feed_state(p, 1, stack, 1, SW_SAMPLE_GIL_HELD, 1000, SW_STATE_RUNNING, 500);
        const sw_profile_thread *t1 = sw_profile_thread_get(p, 0), *t2 = sw_profile_thread_get(p, 1);
        REQUIRE(t1 != NULL && t2 != NULL);
        CHECK_EQ_U64(t1->states[SW_STATE_IDLE], 1);
        CHECK_EQ_U64(t1->states[SW_STATE_GIL_WAIT], 1);
        CHECK_EQ_U64(t2->states[SW_STATE_IDLE], 1);
        CHECK_EQ_U64(t2->samples, 0);
        CHECK_EQ_U64(sw_profile_left_out(p), gil_only ? 3 : 2);
        CHECK_EQ_U64(sw_profile_samples(p), gil_only ? 2 : 3);
        CHECK_EQ_U64(t1->samples, gil_only ? 2 : 3);
        const sw_calltree_node *root1 = sw_calltree_get_node(t1->tree, SW_CALLTREE_ROOT);
        CHECK_EQ_U64(root1->weight, gil_only ? 2000 : 3000);   /* the left-out time is in no sample */
        sw_profile_free(p);
    }
}
