/*
 * test_pprof.c - call trees as a pprof Profile (native/profile/pprof.h),
 * checked by decoding the message with a small bounded protobuf reader
 * written from profile.proto: the string table, sample types, functions,
 * locations, samples (stacks leaf first, values, thread labels) and the
 * scalar fields; totals and per-stack values equal what was added.
 */
#define _GNU_SOURCE
#include "check.h"
#include "profile/profile.h"
#include "exportcheck.h"
#include "profile/profile.h"

/* ---- a decoder of what sw_pprof_write writes ---- */

#define PP_MAX 8192
#define PP_DEPTH 64

typedef struct pp_sample {
    uint64_t locs[PP_DEPTH];
    size_t nlocs;
    uint64_t vals[4];
    size_t nvals;
    uint64_t label_key, label_str;
    size_t nlabels;
} pp_sample;

typedef struct pp_func { uint64_t id, name, system_name, filename, start_line; } pp_func;
typedef struct pp_loc { uint64_t id, mapping_id, function_id, line; size_t nlines; } pp_loc;

typedef struct pp_profile {
    char *strs[PP_MAX];
    size_t nstrs;
    uint64_t sample_type[4][2];
    size_t nsample_types;
    pp_sample *samples;
    size_t nsamples;
    pp_func funcs[PP_MAX];
    size_t nfuncs;
    pp_loc locs[PP_MAX];
    size_t nlocs;
    size_t nmappings;
    uint64_t mapping_id;
    uint64_t period_type[2];
    uint64_t period, time_nanos, duration_nanos, comment;
    size_t ncomments;
} pp_profile;

/* Appends the values of a repeated varint field (packed or not). */
static int pp_varints(const ec_field *f, uint64_t *out, size_t *n, size_t cap)
{
    if (f->wt == 0) {
        if (*n >= cap)
            return 0;
        out[(*n)++] = f->v;
        return 1;
    }
    if (f->wt != 2)
        return 0;
    const uint8_t *p = f->p, *end = f->p + f->len;
    while (p < end) {
        if (*n >= cap || !ec_varint(&p, end, &out[*n]))
            return 0;
        (*n)++;
    }
    return 1;
}

/* Reads the varint fields 1..nfields of a message into v[] (0 if absent);
 * a length-delimited field 4 is handed to sub (Location.line). */
static int pp_simple(const uint8_t *p, size_t len, uint64_t *v, size_t nfields, const uint8_t **sub, size_t *sublen,
                     size_t *nsub)
{
    const uint8_t *end = p + len;
    ec_field f;
    int r;
    memset(v, 0, nfields * sizeof *v);
    while ((r = ec_next(&p, end, &f)) > 0) {
        if (f.wt == 0 && f.num >= 1 && f.num <= nfields) {
            v[f.num - 1] = f.v;
        } else if (f.wt == 2 && sub && f.num == 4) {
            *sub = f.p;
            *sublen = f.len;
            (*nsub)++;
        } else {
            return 0;
        }
    }
    return r == 0;
}

static int pp_decode_sample(pp_sample *s, const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    ec_field f;
    int r;
    memset(s, 0, sizeof *s);
    while ((r = ec_next(&p, end, &f)) > 0) {
        if (f.num == 1) {
            if (!pp_varints(&f, s->locs, &s->nlocs, PP_DEPTH))
                return 0;
        } else if (f.num == 2) {
            if (!pp_varints(&f, s->vals, &s->nvals, 4))
                return 0;
        } else if (f.num == 3 && f.wt == 2) {
            uint64_t v[4];
            if (!pp_simple(f.p, f.len, v, 4, NULL, NULL, NULL))
                return 0;
            s->label_key = v[0];
            s->label_str = v[1];
            s->nlabels++;
        } else {
            return 0;
        }
    }
    return r == 0;
}

/* Decodes a Profile; 0 with a reason in why if it is not what we write. */
static int pp_decode(pp_profile *pp, const uint8_t *p, size_t len, char *why, size_t whylen)
{
    memset(pp, 0, sizeof *pp);
    pp->samples = calloc(PP_MAX, sizeof *pp->samples);
    if (!pp->samples)
        return 0;
    const uint8_t *end = p + len;
    ec_field f;
    int r;
#define PP_FAIL(...) do { snprintf(why, whylen, __VA_ARGS__); return 0; } while (0)
    while ((r = ec_next(&p, end, &f)) > 0) {
        uint64_t v[5];
        switch (f.num) {
        case 1:
        case 11:
            if (f.wt != 2 || !pp_simple(f.p, f.len, v, 2, NULL, NULL, NULL))
                PP_FAIL("bad ValueType (field %u)", f.num);
            if (f.num == 11) {
                memcpy(pp->period_type, v, sizeof pp->period_type);
            } else {
                if (pp->nsample_types == 4)
                    PP_FAIL("too many sample types");
                memcpy(pp->sample_type[pp->nsample_types++], v, 2 * sizeof v[0]);
            }
            break;
        case 2:
            if (f.wt != 2 || pp->nsamples == PP_MAX || !pp_decode_sample(&pp->samples[pp->nsamples++], f.p, f.len))
                PP_FAIL("bad Sample #%zu", pp->nsamples);
            break;
        case 3:
            if (f.wt != 2)
                PP_FAIL("bad Mapping");
            {
                /* Mapping: id (1) and the has_* booleans (7-10) */
                const uint8_t *q = f.p, *qe = f.p + f.len;
                ec_field g;
                int rr;
                while ((rr = ec_next(&q, qe, &g)) > 0) {
                    if (g.wt != 0)
                        PP_FAIL("Mapping field %u is not a varint", g.num);
                    if (g.num == 1)
                        pp->mapping_id = g.v;
                }
                if (rr < 0)
                    PP_FAIL("malformed Mapping");
            }
            pp->nmappings++;
            break;
        case 4: {
            const uint8_t *line = NULL;
            size_t linelen = 0, nlines = 0;
            if (f.wt != 2 || pp->nlocs == PP_MAX || !pp_simple(f.p, f.len, v, 3, &line, &linelen, &nlines))
                PP_FAIL("bad Location");
            pp_loc *l = &pp->locs[pp->nlocs++];
            l->id = v[0];
            l->mapping_id = v[1];
            l->nlines = nlines;
            if (nlines) {
                if (!pp_simple(line, linelen, v, 2, NULL, NULL, NULL))
                    PP_FAIL("bad Line");
                l->function_id = v[0];
                l->line = v[1];
            }
            break;
        }
        case 5:
            if (f.wt != 2 || pp->nfuncs == PP_MAX || !pp_simple(f.p, f.len, v, 5, NULL, NULL, NULL))
                PP_FAIL("bad Function");
            pp->funcs[pp->nfuncs++] = (pp_func){v[0], v[1], v[2], v[3], v[4]};
            break;
        case 6:
            if (f.wt != 2 || pp->nstrs == PP_MAX)
                PP_FAIL("bad string");
            if (memchr(f.p, 0, f.len))
                PP_FAIL("string with a NUL");
            if (!(pp->strs[pp->nstrs] = malloc(f.len + 1)))
                PP_FAIL("out of memory");
            memcpy(pp->strs[pp->nstrs], f.p, f.len);
            pp->strs[pp->nstrs++][f.len] = 0;
            break;
        case 9: pp->time_nanos = f.v; break;
        case 10: pp->duration_nanos = f.v; break;
        case 12: pp->period = f.v; break;
        case 13:
            pp->comment = f.v;
            pp->ncomments++;
            break;
        default:
            PP_FAIL("unexpected Profile field %u", f.num);
        }
        if ((f.num >= 9 && f.num <= 13 && f.num != 11) && f.wt != 0)
            PP_FAIL("Profile field %u is not a varint", f.num);
    }
    if (r < 0)
        PP_FAIL("malformed Profile");
    /* References: every index and id resolves. */
    if (pp->nstrs == 0 || pp->strs[0][0])
        PP_FAIL("string_table[0] is not \"\"");
    for (size_t i = 0; i < pp->nfuncs; i++) {
        const pp_func *fn = &pp->funcs[i];
        if (!fn->id || fn->name >= pp->nstrs || fn->system_name >= pp->nstrs || fn->filename >= pp->nstrs)
            PP_FAIL("Function %zu: no id or a string index out of range", i);
        for (size_t k = 0; k < i; k++)
            if (pp->funcs[k].id == fn->id)
                PP_FAIL("Function id %llu twice", (unsigned long long)fn->id);
    }
    for (size_t i = 0; i < pp->nlocs; i++) {
        const pp_loc *l = &pp->locs[i];
        if (!l->id || l->nlines != 1)
            PP_FAIL("Location %zu: no id or not one line", i);
        if (l->mapping_id != pp->mapping_id || pp->nmappings != 1)
            PP_FAIL("Location %zu: mapping %llu", i, (unsigned long long)l->mapping_id);
        for (size_t k = 0; k < i; k++)
            if (pp->locs[k].id == l->id)
                PP_FAIL("Location id %llu twice", (unsigned long long)l->id);
        size_t k = 0;
        while (k < pp->nfuncs && pp->funcs[k].id != l->function_id)
            k++;
        if (k == pp->nfuncs)
            PP_FAIL("Location %zu: function %llu undefined", i, (unsigned long long)l->function_id);
    }
    for (size_t i = 0; i < pp->nsamples; i++) {
        const pp_sample *s = &pp->samples[i];
        if (s->nvals != pp->nsample_types)
            PP_FAIL("Sample %zu has %zu values for %zu types", i, s->nvals, pp->nsample_types);
        if (s->nlabels && (s->label_key >= pp->nstrs || s->label_str >= pp->nstrs))
            PP_FAIL("Sample %zu: label out of range", i);
        for (size_t d = 0; d < s->nlocs; d++) {
            size_t k = 0;
            while (k < pp->nlocs && pp->locs[k].id != s->locs[d])
                k++;
            if (k == pp->nlocs)
                PP_FAIL("Sample %zu: location %llu undefined", i, (unsigned long long)s->locs[d]);
        }
    }
    if (pp->period_type[0] >= pp->nstrs || pp->period_type[1] >= pp->nstrs || pp->comment >= pp->nstrs)
        PP_FAIL("string index out of range");
    for (size_t i = 0; i < pp->nsample_types; i++)
        if (pp->sample_type[i][0] >= pp->nstrs || pp->sample_type[i][1] >= pp->nstrs)
            PP_FAIL("sample type out of range");
#undef PP_FAIL
    return 1;
}

static void pp_free(pp_profile *pp)
{
    for (size_t i = 0; i < pp->nstrs; i++)
        free(pp->strs[i]);
    free(pp->samples);
}

static const pp_func *pp_func_of_loc(const pp_profile *pp, uint64_t loc)
{
    for (size_t i = 0; i < pp->nlocs; i++) {
        if (pp->locs[i].id != loc)
            continue;
        for (size_t k = 0; k < pp->nfuncs; k++)
            if (pp->funcs[k].id == pp->locs[i].function_id)
                return &pp->funcs[k];
    }
    return NULL;
}

/* The sample's stack as "root;...;leaf" function names, and its thread. */
static void pp_stack(const pp_profile *pp, const pp_sample *s, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t d = s->nlocs; d-- > 0;) {
        const pp_func *fn = pp_func_of_loc(pp, s->locs[d]);
        used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s", d + 1 == s->nlocs ? "" : ";",
                                 fn ? pp->strs[fn->name] : "?");
    }
    if (s->nlabels && used < len)
        snprintf(buf + used, len - used, " @%s=%s", pp->strs[s->label_key], pp->strs[s->label_str]);
}

/* The sample whose stack (and label) text is `want`, or NULL. */
static const pp_sample *pp_find(const pp_profile *pp, const char *want)
{
    char buf[512];
    for (size_t i = 0; i < pp->nsamples; i++) {
        pp_stack(pp, &pp->samples[i], buf, sizeof buf);
        if (strcmp(buf, want) == 0)
            return &pp->samples[i];
    }
    return NULL;
}

/* ---- tests ---- */

static uint32_t fn(sw_functab *ft, const char *name, const char *file, int32_t line)
{
    uint32_t id = 0;
    CHECK_EQ_I64(sw_functab_intern(ft, name, strlen(name), file, strlen(file), line, &id), SW_OK);
    return id;
}

/* The message written to a stream as it is built, which must be the
 * message built whole, byte for byte. */
static void check_streamed_equal(const sw_bytes *whole, const sw_pprof_tree *trees, size_t n, const sw_pprof_opts *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f != NULL);
    CHECK_EQ_I64(sw_pprof_write_file(f, trees, n, o), SW_OK);
    fclose(f);
    CHECK_EQ_U64(len, whole->len);
    CHECK(len == whole->len && memcmp(buf, whole->data, len) == 0);
    free(buf);
}

static int write_and_decode(pp_profile *pp, const sw_pprof_tree *trees, size_t n, const sw_pprof_opts *o)
{
    sw_bytes out = {0};
    int rc = sw_pprof_write(&out, trees, n, o);
    CHECK_EQ_I64(rc, SW_OK);
    check_streamed_equal(&out, trees, n, o);
    char why[200] = "";
    int ok = rc == SW_OK && pp_decode(pp, out.data, out.len, why, sizeof why);
    CHECK_MSG(ok, "decode: %s", why);
    sw_bytes_free(&out);
    return ok;
}

TEST(profile_of_two_threads)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *a = sw_calltree_new(ft), *b = sw_calltree_new(ft);
    REQUIRE(a && b);
    uint32_t m = fn(ft, "main", "m.py", 1), w = fn(ft, "work", "w.py", 20), l = fn(ft, "leaf", "w.py", 30);
    uint32_t o = fn(ft, "other", "m.py", 40);
    fn(ft, "never_sampled", "x.py", 9);
    uint32_t s1[] = {m, w, l}, s2[] = {m, o}, s3[] = {m, w};
    CHECK_EQ_I64(sw_calltree_add(a, s1, 3, 5, 5000), SW_OK);
    CHECK_EQ_I64(sw_calltree_add(a, s2, 2, 2, 2500), SW_OK);
    CHECK_EQ_I64(sw_calltree_add(a, s1, 3, 1, 900), SW_OK);
    CHECK_EQ_I64(sw_calltree_add(b, s3, 2, 3, 3100), SW_OK);
    sw_pprof_tree trees[] = {{"MainThread (1)", a}, {"worker (2)", b}};
    sw_pprof_opts opts = {1000000, 1700000000123456789ll, 2500000000ll, "a title", NULL, NULL};
    pp_profile pp;
    REQUIRE(write_and_decode(&pp, trees, 2, &opts));

    REQUIRE_EQ_U64(pp.nsample_types, 2);
    CHECK_EQ_STR(pp.strs[pp.sample_type[0][0]], "samples");
    CHECK_EQ_STR(pp.strs[pp.sample_type[0][1]], "count");
    CHECK_EQ_STR(pp.strs[pp.sample_type[1][0]], "wall");
    CHECK_EQ_STR(pp.strs[pp.sample_type[1][1]], "nanoseconds");
    CHECK_EQ_STR(pp.strs[pp.period_type[0]], "wall");
    CHECK_EQ_STR(pp.strs[pp.period_type[1]], "nanoseconds");
    CHECK_EQ_U64(pp.period, 1000000);
    CHECK_EQ_U64(pp.time_nanos, 1700000000123456789ull);
    CHECK_EQ_U64(pp.duration_nanos, 2500000000ull);
    CHECK_EQ_U64(pp.ncomments, 1);
    CHECK_EQ_STR(pp.strs[pp.comment], "a title");

    /* One sample per distinct stack and thread, values summed. */
    CHECK_EQ_U64(pp.nsamples, 3);
    const pp_sample *x = pp_find(&pp, "main;work;leaf @thread=MainThread (1)");
    REQUIRE(x != NULL);
    CHECK_EQ_U64(x->vals[0], 6);
    CHECK_EQ_U64(x->vals[1], 5900);
    x = pp_find(&pp, "main;other @thread=MainThread (1)");
    REQUIRE(x != NULL);
    CHECK_EQ_U64(x->vals[0], 2);
    CHECK_EQ_U64(x->vals[1], 2500);
    x = pp_find(&pp, "main;work @thread=worker (2)");
    REQUIRE(x != NULL);
    CHECK_EQ_U64(x->vals[0], 3);
    CHECK_EQ_U64(x->vals[1], 3100);
    uint64_t n = 0, ns = 0;
    for (size_t i = 0; i < pp.nsamples; i++)
        n += pp.samples[i].vals[0], ns += pp.samples[i].vals[1];
    CHECK_EQ_U64(n, sw_calltree_total(a) + sw_calltree_total(b));
    CHECK_EQ_U64(ns, sw_calltree_get_node(a, 0)->weight + sw_calltree_get_node(b, 0)->weight);

    /* Functions: only those sampled, with names, files and first lines;
     * each one's location has its line. */
    CHECK_EQ_U64(pp.nfuncs, 4);
    CHECK_EQ_U64(pp.nlocs, 4);
    for (size_t i = 0; i < pp.nfuncs; i++) {
        const pp_func *f = &pp.funcs[i];
        const sw_func *want = sw_functab_get(ft, (uint32_t)(f->id - 1));
        REQUIRE(want != NULL);
        CHECK_EQ_STR(pp.strs[f->name], want->name);
        CHECK_EQ_U64(f->system_name, 0);   /* unset: see calltree_pprof.c */
        CHECK_EQ_STR(pp.strs[f->filename], want->filename);
        CHECK_EQ_I64((int64_t)f->start_line, want->line);
        CHECK(strcmp(want->name, "never_sampled") != 0);
    }
    for (size_t i = 0; i < pp.nlocs; i++)
        CHECK_EQ_I64((int64_t)pp.locs[i].line, sw_functab_get(ft, (uint32_t)(pp.locs[i].function_id - 1))->line);
    /* Strings are interned once each. */
    for (size_t i = 0; i < pp.nstrs; i++)
        for (size_t k = 0; k < i; k++)
            CHECK_MSG(strcmp(pp.strs[i], pp.strs[k]) != 0, "string '%s' twice", pp.strs[i]);

    pp_free(&pp);
    sw_calltree_free(a);
    sw_calltree_free(b);
    sw_functab_free(ft);
}

TEST(random_stacks_round_trip_exactly)
{
    /* Ground truth: the count and weight added for every (thread, stack),
     * kept in a plain table, against what the decoded samples say. */
    enum { THREADS = 3, FUNCS = 12, STACKS = 2000, MAXD = 9 };
    sw_functab *ft = sw_functab_new();
    REQUIRE(ft != NULL);
    uint32_t ids[FUNCS];
    for (int i = 0; i < FUNCS; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        ids[i] = fn(ft, name, i % 2 ? "odd.py" : "even.py", i * 10);
    }
    sw_calltree *trees[THREADS];
    sw_pprof_tree pt[THREADS];
    static const char *names[THREADS] = {"t0", "t1", "t2"};
    for (int i = 0; i < THREADS; i++) {
        trees[i] = sw_calltree_new(ft);
        REQUIRE(trees[i] != NULL);
        pt[i] = (sw_pprof_tree){names[i], trees[i]};
    }
    static struct { int thread; char stack[128]; uint64_t count, weight; } truth[STACKS];
    size_t ntruth = 0;
    uint64_t seed = 12345;
    for (int s = 0; s < STACKS; s++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int th = (int)((seed >> 33) % THREADS), depth = 1 + (int)((seed >> 40) % MAXD);
        uint32_t stack[MAXD];
        char text[128] = "";
        size_t used = 0;
        for (int d = 0; d < depth; d++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int k = (int)((seed >> 33) % 3) + (d % 4) * 3;   /* few choices per level: stacks repeat */
            stack[d] = ids[k];
            used += (size_t)snprintf(text + used, sizeof text - used, "%sf%d", d ? ";" : "", k);
        }
        uint64_t count = 1 + (seed >> 60), weight = 1000 + (seed >> 44);
        CHECK_EQ_I64(sw_calltree_add(trees[th], stack, (size_t)depth, count, weight), SW_OK);
        size_t i = 0;
        while (i < ntruth && !(truth[i].thread == th && strcmp(truth[i].stack, text) == 0))
            i++;
        if (i == ntruth) {
            truth[i].thread = th;
            snprintf(truth[i].stack, sizeof truth[i].stack, "%s", text);
            truth[i].count = truth[i].weight = 0;
            ntruth++;
        }
        truth[i].count += count;
        truth[i].weight += weight;
    }
    pp_profile pp;
    REQUIRE(write_and_decode(&pp, pt, THREADS, NULL));
    CHECK_EQ_U64(pp.nsamples, ntruth);
    for (size_t i = 0; i < ntruth; i++) {
        char want[160];
        snprintf(want, sizeof want, "%s @thread=%s", truth[i].stack, names[truth[i].thread]);
        const pp_sample *x = pp_find(&pp, want);
        CHECK_MSG(x != NULL, "no sample %s", want);
        if (x) {
            CHECK_EQ_U64(x->vals[0], truth[i].count);
            CHECK_EQ_U64(x->vals[1], truth[i].weight);
        }
    }
    /* No opts: no period, time, duration or comment. */
    CHECK_EQ_U64(pp.period, 0);
    CHECK_EQ_U64(pp.time_nanos, 0);
    CHECK_EQ_U64(pp.duration_nanos, 0);
    CHECK_EQ_U64(pp.ncomments, 0);
    pp_free(&pp);
    for (int i = 0; i < THREADS; i++)
        sw_calltree_free(trees[i]);
    sw_functab_free(ft);
}

TEST(unnamed_tree_root_samples_and_deep_stacks)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    REQUIRE(t != NULL);
    uint32_t deep[40];
    for (int i = 0; i < 40; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        deep[i] = fn(ft, name, "deep.py", i + 1);
    }
    CHECK_EQ_I64(sw_calltree_add(t, deep, 40, 2, 20), SW_OK);
    CHECK_EQ_I64(sw_calltree_add(t, NULL, 0, 3, 30), SW_OK);   /* no frame: a sample without locations */
    sw_pprof_tree pt = {NULL, t};
    pp_profile pp;
    REQUIRE(write_and_decode(&pp, &pt, 1, NULL));
    REQUIRE_EQ_U64(pp.nsamples, 2);
    uint64_t n = 0, ns = 0;
    for (size_t i = 0; i < pp.nsamples; i++) {
        const pp_sample *s = &pp.samples[i];
        CHECK_EQ_U64(s->nlabels, 0);
        n += s->vals[0], ns += s->vals[1];
        if (s->nlocs) {
            REQUIRE_EQ_U64(s->nlocs, 40);
            CHECK_EQ_STR(pp.strs[pp_func_of_loc(&pp, s->locs[0])->name], "r39");   /* leaf first */
            CHECK_EQ_STR(pp.strs[pp_func_of_loc(&pp, s->locs[39])->name], "r0");
        } else {
            CHECK_EQ_U64(s->vals[0], 3);
        }
    }
    CHECK_EQ_U64(n, 5);
    CHECK_EQ_U64(ns, 50);
    pp_free(&pp);
    sw_calltree_free(t);
    sw_functab_free(ft);
}

TEST(a_streamed_message_over_many_pieces_is_the_whole_one)
{
    /* 60,000 samples of 20 frames: about 3 MB, written in 1 MiB pieces. */
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = ft ? sw_calltree_new(ft) : NULL;
    REQUIRE(t != NULL);
    uint32_t ids[64], stack[20];
    for (int i = 0; i < 64; i++) {
        char name[16];
        snprintf(name, sizeof name, "g%d", i);
        ids[i] = fn(ft, name, "s.py", i);
    }
    uint64_t seed = 99;
    for (int s = 0; s < 60000; s++) {
        for (int d = 0; d < 20; d++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            stack[d] = ids[(seed >> 33) % 64];
        }
        REQUIRE(sw_calltree_add(t, stack, 20, 1, 1000) == SW_OK);
    }
    sw_pprof_tree pt = {"main", t};
    sw_bytes out = {0};
    CHECK_EQ_I64(sw_pprof_write(&out, &pt, 1, NULL), SW_OK);
    CHECK(out.len > 2u << 20);
    check_streamed_equal(&out, &pt, 1, NULL);
    sw_bytes_free(&out);
    sw_calltree_free(t);
    sw_functab_free(ft);
}

TEST(empty_profile_is_valid)
{
    pp_profile pp;
    REQUIRE(write_and_decode(&pp, NULL, 0, NULL));
    CHECK_EQ_U64(pp.nsamples, 0);
    CHECK_EQ_U64(pp.nfuncs, 0);
    CHECK_EQ_U64(pp.nsample_types, 2);
    pp_free(&pp);
    /* An empty tree too. */
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    REQUIRE(t != NULL);
    sw_pprof_tree pt = {"idle", t};
    REQUIRE(write_and_decode(&pp, &pt, 1, NULL));
    CHECK_EQ_U64(pp.nsamples, 0);
    pp_free(&pp);
    sw_calltree_free(t);
    sw_functab_free(ft);
}

TEST(invalid_utf8_becomes_replacement_characters)
{
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    REQUIRE(t != NULL);
    /* a lone continuation byte, an overlong '/', a surrogate, a cut
     * sequence at the end; then valid 2-, 3- and 4-byte sequences */
    uint32_t bad = fn(ft, "a\x80" "b\xc0\xaf" "c\xed\xa0\x80" "d\xe2\x82", "ok\xc3\xa4\xe2\x82\xac\xf0\x9f\x98\x80.py", 1);
    CHECK_EQ_I64(sw_calltree_add(t, &bad, 1, 1, 1), SW_OK);
    sw_pprof_tree pt = {"th\xff", t};
    pp_profile pp;
    REQUIRE(write_and_decode(&pp, &pt, 1, NULL));
    REQUIRE_EQ_U64(pp.nfuncs, 1);
    CHECK_EQ_STR(pp.strs[pp.funcs[0].name],
                 "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                 "d\xef\xbf\xbd\xef\xbf\xbd");
    CHECK_EQ_STR(pp.strs[pp.funcs[0].filename], "ok\xc3\xa4\xe2\x82\xac\xf0\x9f\x98\x80.py");
    REQUIRE_EQ_U64(pp.nsamples, 1);
    CHECK_EQ_STR(pp.strs[pp.samples[0].label_str], "th\xef\xbf\xbd");
    pp_free(&pp);
    sw_calltree_free(t);
    sw_functab_free(ft);
}

TEST(trees_over_different_tables_are_refused)
{
    sw_functab *f1 = sw_functab_new(), *f2 = sw_functab_new();
    sw_calltree *a = sw_calltree_new(f1), *b = sw_calltree_new(f2);
    REQUIRE(a && b);
    sw_pprof_tree pt[] = {{"a", a}, {"b", b}};
    sw_bytes out = {0};
    CHECK_EQ_I64(sw_pprof_write(&out, pt, 2, NULL), SW_EARG);
    CHECK_EQ_U64(out.len, 0);
    sw_pprof_tree none[] = {{"x", NULL}};
    CHECK_EQ_I64(sw_pprof_write(&out, none, 1, NULL), SW_EARG);
    CHECK_EQ_I64(sw_pprof_write(&out, NULL, 1, NULL), SW_EARG);
    CHECK_EQ_U64(out.len, 0);
    sw_bytes_free(&out);
    sw_calltree_free(a);
    sw_calltree_free(b);
    sw_functab_free(f1);
    sw_functab_free(f2);
}

TEST(many_strings_grow_the_table)
{
    /* More distinct names and files than the string table's first size. */
    sw_functab *ft = sw_functab_new();
    sw_calltree *t = sw_calltree_new(ft);
    REQUIRE(t != NULL);
    for (int i = 0; i < 3000; i++) {
        char name[32], file[32];
        snprintf(name, sizeof name, "func_%d", i);
        snprintf(file, sizeof file, "file_%d.py", i / 2);
        uint32_t id = fn(ft, name, file, i);
        CHECK_EQ_I64(sw_calltree_add(t, &id, 1, 1, (uint64_t)i), SW_OK);
    }
    sw_pprof_tree pt = {"main", t};
    pp_profile pp;
    REQUIRE(write_and_decode(&pp, &pt, 1, NULL));
    CHECK_EQ_U64(pp.nsamples, 3000);
    CHECK_EQ_U64(pp.nfuncs, 3000);
    /* "", 4 type/unit words, "thread", "main", 3000 names, 1500 files */
    CHECK_EQ_U64(pp.nstrs, 1 + 4 + 1 + 1 + 3000 + 1500);
    for (size_t i = 0; i < pp.nfuncs; i++) {
        const sw_func *want = sw_functab_get(ft, (uint32_t)(pp.funcs[i].id - 1));
        CHECK_EQ_STR(pp.strs[pp.funcs[i].name], want->name);
        CHECK_EQ_STR(pp.strs[pp.funcs[i].filename], want->filename);
    }
    pp_free(&pp);
    sw_calltree_free(t);
    sw_functab_free(ft);
}
