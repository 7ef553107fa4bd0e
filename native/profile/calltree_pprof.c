/*
 * calltree_pprof.c - call trees as a pprof Profile message (see calltree_pprof.h).
 * Field numbers are those of profile.proto (github.com/google/pprof,
 * proto/profile.proto); each constant names its message and field.
 *
 * The message is built in parts: samples, locations and functions first
 * (interning their strings as they go), then the string table, then the
 * scalar fields. Protobuf readers accept fields in any order.
 */
#include "calltree_pprof.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Profile */
#define F_PROFILE_SAMPLE_TYPE 1
#define F_PROFILE_SAMPLE 2
#define F_PROFILE_MAPPING 3
#define F_PROFILE_LOCATION 4
#define F_PROFILE_FUNCTION 5
#define F_PROFILE_STRING_TABLE 6
#define F_PROFILE_TIME_NANOS 9
#define F_PROFILE_DURATION_NANOS 10
#define F_PROFILE_PERIOD_TYPE 11
#define F_PROFILE_PERIOD 12
#define F_PROFILE_COMMENT 13
/* ValueType */
#define F_VT_TYPE 1
#define F_VT_UNIT 2
/* Sample */
#define F_SAMPLE_LOCATION_ID 1
#define F_SAMPLE_VALUE 2
#define F_SAMPLE_LABEL 3
/* Label */
#define F_LABEL_KEY 1
#define F_LABEL_STR 2
/* Mapping */
#define F_MAPPING_ID 1
#define F_MAPPING_HAS_FUNCTIONS 7
#define F_MAPPING_HAS_FILENAMES 8
/* Location */
#define F_LOC_ID 1
#define F_LOC_MAPPING_ID 2
#define F_LOC_LINE 4
/* Line */
#define F_LINE_FUNCTION_ID 1
#define F_LINE_LINE 2
/* Function */
#define F_FUNC_ID 1
#define F_FUNC_NAME 2
#define F_FUNC_FILENAME 4
#define F_FUNC_START_LINE 5

#define WT_VARINT 0
#define WT_LEN 2

/* The one mapping: every location belongs to it. It says that the
 * locations are symbolized already, so pprof looks for no binary. */
#define MAPPING_ID 1

static void put_tag(sw_bytes *b, unsigned field, unsigned wt)
{
    sw_bytes_varint(b, ((uint64_t)field << 3) | wt);
}

static void put_varint_field(sw_bytes *b, unsigned field, uint64_t v)
{
    put_tag(b, field, WT_VARINT);
    sw_bytes_varint(b, v);
}

/* A length-delimited field holding the bytes of `m` (a sub-message or a
 * packed list). */
static void put_msg_field(sw_bytes *b, unsigned field, const sw_bytes *m)
{
    put_tag(b, field, WT_LEN);
    sw_bytes_varint(b, m->len);
    sw_bytes_put(b, m->data, m->len);
}

/* Writes s as a string field, each byte that starts no well-formed UTF-8
 * sequence replaced by U+FFFD. */
static void put_string_field(sw_bytes *b, unsigned field, const char *str)
{
    static const unsigned char repl[3] = {0xef, 0xbf, 0xbd};
    const unsigned char *s = (const unsigned char *)str;
    size_t out = 0;
    for (size_t i = 0; s[i];) {
        size_t k = sw_utf8_len(s + i);
        out += k ? k : sizeof repl;
        i += k ? k : 1;
    }
    put_tag(b, field, WT_LEN);
    sw_bytes_varint(b, out);
    for (size_t i = 0; s[i];) {
        size_t k = sw_utf8_len(s + i);
        if (k) {
            sw_bytes_put(b, s + i, k);
            i += k;
        } else {
            sw_bytes_put(b, repl, sizeof repl);
            i++;
        }
    }
}

/* ---- string table ---- */

typedef struct strtab {
    const char **strs;       /* index -> string (borrowed) */
    size_t n, cap;
    sw_hashtab index;        /* hash of a string -> its index */
    int failed;
} strtab;

/* The index of s in the table, adding it if new. After a failure (out of
 * memory, or more than 2^31 strings) returns 0 and sets st->failed. */
static uint64_t strtab_index(strtab *st, const char *s)
{
    if (!s)
        s = "";
    if (st->failed)
        return 0;
    uint64_t h = sw_hash_bytes(s, strlen(s), 0);
    uint32_t pos;
    for (uint32_t i = sw_hashtab_first(&st->index, h, &pos); i != SW_HT_NONE; i = sw_hashtab_next(&st->index, h, &pos))
        if (strcmp(st->strs[i], s) == 0)
            return i;
    const char **strs = sw_array_grow(st->strs, &st->cap, st->n + 1, sizeof *strs, 64);
    if (!strs || st->n >= 0x7fffffffu || sw_hashtab_add(&st->index, h, (uint32_t)st->n) != SW_OK) {
        if (strs)
            st->strs = strs;
        st->failed = 1;
        return 0;
    }
    st->strs = strs;
    st->strs[st->n] = s;
    return st->n++;
}

static void strtab_free(strtab *st)
{
    free(st->strs);
    sw_hashtab_free(&st->index);
}

/* ---- the profile ---- */

typedef struct builder {
    strtab st;
    sw_bytes body;           /* samples, mapping, locations, functions */
    FILE *f;                 /* where body goes once it holds BODY_FLUSH bytes; NULL: kept whole */
    int io_failed;
    sw_bytes msg, sub;       /* a message being built, and one inside it */
    sw_bytes ids, vals;      /* packed lists of a sample */
} builder;

/* A streamed message's body is written out in pieces of about this size:
 * the samples of a big tree are never held whole. */
#define BODY_FLUSH (1u << 20)

static void flush_body(builder *b)
{
    if (b->body.len && fwrite(b->body.data, 1, b->body.len, b->f) != b->body.len)
        b->io_failed = 1;
    b->body.len = 0;
}

static void put_value_type(builder *b, unsigned field, const char *type, const char *unit)
{
    b->msg.len = 0;
    put_varint_field(&b->msg, F_VT_TYPE, strtab_index(&b->st, type));
    put_varint_field(&b->msg, F_VT_UNIT, strtab_index(&b->st, unit));
    put_msg_field(&b->body, field, &b->msg);
}

/* One Sample: the stack ending at node `id` (none for the root), with the
 * packed label message `label` (empty for none). */
static void put_sample(builder *b, const sw_calltree *t, uint32_t id, uint64_t count, uint64_t weight,
                       const sw_bytes *label)
{
    b->ids.len = 0;
    for (const sw_calltree_node *n = sw_calltree_get_node(t, id); n && n->func != SW_NODE_NONE;
         n = sw_calltree_get_node(t, n->parent))
        sw_bytes_varint(&b->ids, (uint64_t)n->func + 1);
    b->vals.len = 0;
    sw_bytes_varint(&b->vals, count);
    sw_bytes_varint(&b->vals, weight);
    b->msg.len = 0;
    if (b->ids.len)
        put_msg_field(&b->msg, F_SAMPLE_LOCATION_ID, &b->ids);
    put_msg_field(&b->msg, F_SAMPLE_VALUE, &b->vals);
    if (label->len)
        put_msg_field(&b->msg, F_SAMPLE_LABEL, label);
    put_msg_field(&b->body, F_PROFILE_SAMPLE, &b->msg);
}

static void put_tree_samples(builder *b, const sw_pprof_tree *pt, uint8_t *used, uint32_t nfuncs)
{
    sw_bytes label = {0};
    if (pt->thread) {
        put_varint_field(&label, F_LABEL_KEY, strtab_index(&b->st, "thread"));
        put_varint_field(&label, F_LABEL_STR, strtab_index(&b->st, pt->thread));
    }
    const sw_calltree *t = pt->tree;
    const sw_calltree_node *root = sw_calltree_get_node(t, SW_CALLTREE_ROOT);
    if (root->self || root->self_weight)
        put_sample(b, t, SW_CALLTREE_ROOT, root->self, root->self_weight, &label);
    for (size_t i = 1; i < sw_calltree_node_count(t); i++) {
        const sw_calltree_node *n = sw_calltree_get_node(t, (uint32_t)i);
        if (n->func < nfuncs)
            used[n->func] = 1;
        if (n->self || n->self_weight)
            put_sample(b, t, (uint32_t)i, n->self, n->self_weight, &label);
        if (b->f && b->body.len >= BODY_FLUSH)
            flush_body(b);
    }
    if (label.failed)
        b->body.failed = 1;
    sw_bytes_free(&label);
}

static void put_function(builder *b, uint32_t id, const sw_func *fn)
{
    b->msg.len = 0;
    put_varint_field(&b->msg, F_LOC_ID, (uint64_t)id + 1);
    put_varint_field(&b->msg, F_LOC_MAPPING_ID, MAPPING_ID);
    b->sub.len = 0;
    put_varint_field(&b->sub, F_LINE_FUNCTION_ID, (uint64_t)id + 1);
    put_varint_field(&b->sub, F_LINE_LINE, (uint64_t)(int64_t)fn->line);
    put_msg_field(&b->msg, F_LOC_LINE, &b->sub);
    put_msg_field(&b->body, F_PROFILE_LOCATION, &b->msg);

    b->msg.len = 0;
    put_varint_field(&b->msg, F_FUNC_ID, (uint64_t)id + 1);
    put_varint_field(&b->msg, F_FUNC_NAME, strtab_index(&b->st, fn->name));
    /* No system_name: pprof takes a name equal to its system name for an
     * undemangled C++ symbol and strips "<...>" and "(...)" from it, which
     * would turn Python's "<module>" or "<lambda>" into "". */
    put_varint_field(&b->msg, F_FUNC_FILENAME, strtab_index(&b->st, fn->filename));
    put_varint_field(&b->msg, F_FUNC_START_LINE, (uint64_t)(int64_t)fn->line);
    put_msg_field(&b->body, F_PROFILE_FUNCTION, &b->msg);
}

static void builder_free(builder *b)
{
    strtab_free(&b->st);
    sw_bytes_free(&b->body);
    sw_bytes_free(&b->msg);
    sw_bytes_free(&b->sub);
    sw_bytes_free(&b->ids);
    sw_bytes_free(&b->vals);
}

/* The message into out or, with f, written to f: the body in pieces as it
 * grows, then what out holds (the string table and the scalars). */
static int pprof_write(sw_bytes *out, FILE *f, const sw_pprof_tree *trees, size_t n, const sw_pprof_opts *opts)
{
    static const sw_pprof_opts none = {0, 0, 0, NULL, NULL, NULL};
    if (!opts)
        opts = &none;
    if (n && !trees)
        return SW_EARG;
    const sw_functab *ft = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!trees[i].tree || (i && sw_calltree_functab(trees[i].tree) != ft))
            return SW_EARG;
        ft = sw_calltree_functab(trees[i].tree);
    }
    uint32_t nfuncs = ft ? sw_functab_count(ft) : 0;
    uint8_t *used = calloc(nfuncs ? nfuncs : 1, 1);
    if (!used) {
        out->failed = 1;
        return SW_ENOMEM;
    }
    builder b;
    memset(&b, 0, sizeof b);
    b.f = f;
    strtab_index(&b.st, "");   /* string_table[0] must be "" */

    put_value_type(&b, F_PROFILE_SAMPLE_TYPE, opts->count_type ? opts->count_type : "samples", "count");
    const char *weight = opts->weight ? opts->weight : "wall";
    put_value_type(&b, F_PROFILE_SAMPLE_TYPE, weight, "nanoseconds");
    for (size_t i = 0; i < n; i++)
        put_tree_samples(&b, &trees[i], used, nfuncs);

    b.msg.len = 0;
    put_varint_field(&b.msg, F_MAPPING_ID, MAPPING_ID);
    put_varint_field(&b.msg, F_MAPPING_HAS_FUNCTIONS, 1);
    put_varint_field(&b.msg, F_MAPPING_HAS_FILENAMES, 1);
    put_msg_field(&b.body, F_PROFILE_MAPPING, &b.msg);
    for (uint32_t id = 0; id < nfuncs; id++) {
        const sw_func *fn = sw_functab_get(ft, id);
        if (used[id] && fn)
            put_function(&b, id, fn);
    }
    free(used);

    put_value_type(&b, F_PROFILE_PERIOD_TYPE, weight, "nanoseconds");
    uint64_t comment = opts->comment ? strtab_index(&b.st, opts->comment) : 0;

    if (f)
        flush_body(&b);
    else
        sw_bytes_put(out, b.body.data, b.body.len);
    for (size_t i = 0; i < b.st.n; i++)
        put_string_field(out, F_PROFILE_STRING_TABLE, b.st.strs[i]);
    if (opts->time_nanos)
        put_varint_field(out, F_PROFILE_TIME_NANOS, (uint64_t)opts->time_nanos);
    if (opts->duration_nanos)
        put_varint_field(out, F_PROFILE_DURATION_NANOS, (uint64_t)opts->duration_nanos);
    if (opts->period_ns)
        put_varint_field(out, F_PROFILE_PERIOD, opts->period_ns);
    if (comment)
        put_varint_field(out, F_PROFILE_COMMENT, comment);

    int failed = b.st.failed || b.body.failed || b.msg.failed || b.sub.failed || b.ids.failed || b.vals.failed;
    int io_failed = b.io_failed;
    builder_free(&b);
    if (failed)
        out->failed = 1;
    if (out->failed)
        return SW_ENOMEM;
    return io_failed ? SW_EIO : SW_OK;
}

int sw_pprof_write(sw_bytes *out, const sw_pprof_tree *trees, size_t n, const sw_pprof_opts *opts)
{
    return pprof_write(out, NULL, trees, n, opts);
}

int sw_pprof_write_file(FILE *f, const sw_pprof_tree *trees, size_t n, const sw_pprof_opts *opts)
{
    sw_bytes tail = {0};
    int rc = pprof_write(&tail, f, trees, n, opts);
    if (rc == SW_OK && tail.len && fwrite(tail.data, 1, tail.len, f) != tail.len)
        rc = SW_EIO;
    sw_bytes_free(&tail);
    if (rc == SW_OK && (fflush(f) != 0 || ferror(f)))
        rc = SW_EIO;
    return rc;
}
