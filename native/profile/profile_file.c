/*
 * profile_file.c - writing and reading profile files (see profile_file.h and
 * docs/format.md, "Profile files"). Reading is bounded like reader.c:
 * every read is checked against the end of its chunk, and a TREE chunk is
 * parsed and checked whole before any of it is added to the history.
 */
#define _GNU_SOURCE
#include "profile_file.h"

#include "base/crc32.h"
#include "trace/format.h"
#include "base/varint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Chunks of FUNCS/THREADS entries are closed at about this size. */
#define DEF_CHUNK_TARGET (1u << 20)

/* ---- writing ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* Starts a chunk: room for its header. Returns the header's offset. */
static size_t chunk_begin(sw_bytes *b, int type)
{
    size_t at = b->len;
    uint8_t hdr[SW_CHUNK_HEADER_LEN] = {(uint8_t)type};
    sw_bytes_put(b, hdr, sizeof hdr);
    return at;
}

/* Fills in the header of the chunk started at `at`. */
static int chunk_end(sw_bytes *b, size_t at)
{
    if (b->failed)
        return SW_ENOMEM;
    size_t plen = b->len - at - SW_CHUNK_HEADER_LEN;
    if (plen > SW_CHUNK_MAX)
        return SW_EARG;
    put_u32(b->data + at + 4, (uint32_t)plen);
    put_u32(b->data + at + 8, sw_crc32(0, b->data + at + SW_CHUNK_HEADER_LEN, plen));
    return SW_OK;
}

static void put_sint(sw_bytes *b, int64_t v)
{
    sw_bytes_varint(b, sw_zigzag(v));
}

static int write_meta(sw_bytes *b, const sw_prof_info *in, const sw_history *h)
{
    size_t at = chunk_begin(b, SW_PCHUNK_META);
    sw_kv_str(b, "mode", in->mode);
    sw_kv_uint(b, "interval_ns", in->interval_ns);
    sw_kv_uint(b, "cycle_ns", in->cycle_ns);
    sw_kv_uint(b, "maxlen", in->maxlen);
    sw_kv_sint(b, "start_ns", in->start_ns);
    sw_kv_sint(b, "stop_ns", in->stop_ns);
    sw_kv_uint(b, "samples", in->samples);
    sw_kv_uint(b, "dropped", in->dropped);
    sw_kv_uint(b, "cut", in->cut);
    sw_kv_uint(b, "off_cpu", in->off_cpu);
    sw_kv_uint(b, "failed", in->failed);
    sw_kv_uint(b, "missed", in->missed);
    sw_kv_uint(b, "evicted", sw_history_evicted(h));
    sw_kv_uint(b, "evicted_samples", sw_history_evicted_samples(h));
    sw_kv_uint(b, "history_dropped", in->history_dropped);
    return chunk_end(b, at);
}

static int write_funcs(sw_bytes *b, const sw_functab *ft)
{
    uint32_t n = sw_functab_count(ft);
    size_t at = 0;
    int open = 0, rc = SW_OK;
    for (uint32_t id = 0; id < n && rc == SW_OK; id++) {
        if (!open) {
            at = chunk_begin(b, SW_PCHUNK_FUNCS);
            open = 1;
        }
        const sw_func *f = sw_functab_get(ft, id);
        sw_bytes_varint(b, id);
        sw_bytes_varint(b, SW_PFUNC_PYTHON);
        sw_bytes_str(b, f->name);
        sw_bytes_str(b, f->filename);
        put_sint(b, f->line);
        if (b->len - at >= DEF_CHUNK_TARGET) {
            rc = chunk_end(b, at);
            open = 0;
        }
    }
    if (open && rc == SW_OK)
        rc = chunk_end(b, at);
    return rc;
}

static int write_threads(sw_bytes *b, const sw_prof_thread *threads, size_t n)
{
    size_t at = chunk_begin(b, SW_PCHUNK_THREADS);
    for (size_t i = 0; i < n; i++) {
        const sw_prof_thread *t = &threads[i];
        sw_bytes_varint(b, t->thread_id);
        sw_bytes_varint(b, t->native_tid);
        sw_bytes_str(b, t->name);
        sw_bytes_varint(b, t->samples);
        sw_bytes_varint(b, t->off_cpu);
        sw_bytes_varint(b, t->cpu_ns);
    }
    return chunk_end(b, at);
}

static int write_tree(sw_bytes *b, const sw_history_entry *e, const sw_history_tree *ht)
{
    size_t at = chunk_begin(b, SW_PCHUNK_TREE);
    put_sint(b, e->start_ns);
    put_sint(b, e->end_ns);
    sw_bytes_varint(b, ht->thread_id);
    size_t n = sw_calltree_node_count(ht->tree);
    sw_bytes_varint(b, n);
    /* Node ids are given parents first (a node is made after its parent),
     * so ids serve as the file's indexes. */
    for (size_t i = 0; i < n && !b->failed; i++) {
        const sw_calltree_node *nd = sw_calltree_get_node(ht->tree, (uint32_t)i);
        if (i > 0) {
            sw_bytes_varint(b, nd->parent);
            sw_bytes_varint(b, nd->func);
        }
        sw_bytes_varint(b, nd->self);
        sw_bytes_varint(b, nd->self_weight);
    }
    return chunk_end(b, at);
}

int sw_profile_file_build(sw_bytes *out, const sw_prof_info *info, const sw_prof_thread *threads, size_t nthreads,
                      const sw_history *h)
{
    uint8_t hdr[SW_FILE_HEADER_LEN] = {0};
    memcpy(hdr, SW_PROF_MAGIC, SW_MAGIC_LEN);
    hdr[8] = SW_PROF_MAJOR;
    hdr[10] = SW_PROF_MINOR;
    sw_bytes_put(out, hdr, sizeof hdr);
    int rc = write_meta(out, info, h);
    if (rc == SW_OK)
        rc = write_funcs(out, sw_history_functab(h));
    if (rc == SW_OK)
        rc = write_threads(out, threads, nthreads);
    uint64_t trees = 0;
    for (size_t i = 0; rc == SW_OK && i < sw_history_len(h); i++) {
        const sw_history_entry *e = sw_history_get(h, i);
        for (size_t k = 0; rc == SW_OK && k < e->ntrees; k++, trees++)
            rc = write_tree(out, e, &e->trees[k]);
    }
    if (rc == SW_OK) {
        size_t at = chunk_begin(out, SW_PCHUNK_END);
        sw_kv_uint(out, "trees", trees);
        rc = chunk_end(out, at);
    }
    return rc == SW_OK && out->failed ? SW_ENOMEM : rc;
}

/* ---- reading ---- */

struct sw_profile_file {
    sw_prof_info info;
    sw_prof_thread *threads;
    size_t nthreads, threads_cap;
    sw_functab *ft;
    uint32_t *fmap;          /* file function id -> id in ft */
    size_t nfuncs, fmap_cap;
    sw_history *h;
    char damage[256];
    int complete;
    uint64_t trees, trees_expected;
};

typedef struct cursor {
    const uint8_t *p, *end;
} cursor;

static int get_u(cursor *c, uint64_t *v)
{
    return sw_get_varint(&c->p, c->end, v);
}

static int get_s(cursor *c, int64_t *v)
{
    uint64_t u;
    int rc = get_u(c, &u);
    if (rc == SW_OK)
        *v = sw_unzigzag(u);
    return rc;
}

/* A str in place: *s points into the buffer (not NUL-terminated). */
static int get_str(cursor *c, const char **s, size_t *len)
{
    uint64_t n;
    int rc = get_u(c, &n);
    if (rc)
        return rc;
    if (n > (uint64_t)(c->end - c->p))
        return SW_ETRUNC;
    *s = (const char *)c->p;
    *len = (size_t)n;
    c->p += n;
    return SW_OK;
}

static int parse_meta(sw_profile_file *pf, cursor *c, int end_chunk)
{
    while (c->p < c->end) {
        const char *key;
        size_t klen;
        int rc = get_str(c, &key, &klen);
        if (rc || c->p >= c->end)
            return rc ? rc : SW_ETRUNC;
        uint8_t type = *c->p++;
        uint64_t u = 0;
        const char *s = NULL;
        size_t slen = 0;
        switch (type) {
        case SW_VAL_UINT:
        case SW_VAL_SINT: rc = get_u(c, &u); break;
        case SW_VAL_BYTES: rc = get_str(c, &s, &slen); break;
        case SW_VAL_F64:
            if (c->end - c->p < 8)
                return SW_ETRUNC;
            c->p += 8;
            break;
        default: return SW_EFORMAT;
        }
        if (rc)
            return rc;
        char k[32];
        if (klen >= sizeof k)
            continue;   /* no key of ours is that long */
        memcpy(k, key, klen);
        k[klen] = 0;
        sw_prof_info *in = &pf->info;
        int64_t si = type == SW_VAL_SINT ? sw_unzigzag(u) : (int64_t)u;
        if (end_chunk) {
            if (strcmp(k, "trees") == 0)
                pf->trees_expected = u;
            continue;
        }
        if (strcmp(k, "mode") == 0 && type == SW_VAL_BYTES) {
            size_t n = slen < sizeof in->mode - 1 ? slen : sizeof in->mode - 1;
            memcpy(in->mode, s, n);
            in->mode[n] = 0;
        }
        struct { const char *name; uint64_t *field; } uints[] = {
            {"interval_ns", &in->interval_ns}, {"cycle_ns", &in->cycle_ns}, {"maxlen", &in->maxlen},
            {"samples", &in->samples}, {"dropped", &in->dropped}, {"cut", &in->cut}, {"off_cpu", &in->off_cpu},
            {"failed", &in->failed}, {"missed", &in->missed}, {"evicted", &in->evicted},
            {"evicted_samples", &in->evicted_samples}, {"history_dropped", &in->history_dropped}};
        for (size_t i = 0; i < sizeof uints / sizeof uints[0]; i++)
            if (strcmp(k, uints[i].name) == 0 && type == SW_VAL_UINT)
                *uints[i].field = u;
        if (strcmp(k, "start_ns") == 0 && type == SW_VAL_SINT)
            in->start_ns = si;
        if (strcmp(k, "stop_ns") == 0 && type == SW_VAL_SINT)
            in->stop_ns = si;
    }
    return SW_OK;
}

static int parse_funcs(sw_profile_file *pf, cursor *c)
{
    while (c->p < c->end) {
        uint64_t id, kind;
        const char *name, *file;
        size_t nlen, flen;
        int64_t line;
        int rc;
        if ((rc = get_u(c, &id)) || (rc = get_u(c, &kind)) || (rc = get_str(c, &name, &nlen)) ||
            (rc = get_str(c, &file, &flen)) || (rc = get_s(c, &line)))
            return rc;
        if (id != pf->nfuncs || line < INT32_MIN || line > INT32_MAX)
            return SW_EFORMAT;
        uint32_t *nm = sw_array_grow(pf->fmap, &pf->fmap_cap, pf->nfuncs + 1, sizeof *nm, 256);
        if (!nm)
            return SW_ENOMEM;
        pf->fmap = nm;
        if ((rc = sw_functab_intern(pf->ft, name, nlen, file, flen, (int32_t)line, &pf->fmap[pf->nfuncs])))
            return rc;
        pf->nfuncs++;
    }
    return SW_OK;
}

static int parse_threads(sw_profile_file *pf, cursor *c)
{
    while (c->p < c->end) {
        sw_prof_thread t = {0};
        const char *name;
        size_t nlen;
        int rc;
        if ((rc = get_u(c, &t.thread_id)) || (rc = get_u(c, &t.native_tid)) || (rc = get_str(c, &name, &nlen)) ||
            (rc = get_u(c, &t.samples)) || (rc = get_u(c, &t.off_cpu)) || (rc = get_u(c, &t.cpu_ns)))
            return rc;
        sw_prof_thread *nt = sw_array_grow(pf->threads, &pf->threads_cap, pf->nthreads + 1, sizeof *nt, 8);
        if (!nt)
            return SW_ENOMEM;
        pf->threads = nt;
        char *copy = malloc(nlen + 1);
        if (!copy)
            return SW_ENOMEM;
        memcpy(copy, name, nlen);
        copy[nlen] = 0;
        t.name = copy;
        pf->threads[pf->nthreads++] = t;
    }
    return SW_OK;
}

typedef struct tree_nodes {
    uint32_t *parent, *func, *depth;
    uint64_t *self, *weight;
    uint32_t *path;
} tree_nodes;

static void nodes_free(tree_nodes *t)
{
    free(t->parent);
    free(t->func);
    free(t->depth);
    free(t->self);
    free(t->weight);
    free(t->path);
}

/* Parses a whole TREE chunk, checks it, then adds it to the history. */
static int parse_tree(sw_profile_file *pf, cursor *c)
{
    int64_t start, end;
    uint64_t tid, n;
    int rc;
    if ((rc = get_s(c, &start)) || (rc = get_s(c, &end)) || (rc = get_u(c, &tid)) || (rc = get_u(c, &n)))
        return rc;
    /* The root takes at least 2 bytes, every other node at least 4: a
     * count larger than that is a lie (and would size the arrays). */
    size_t left = (size_t)(c->end - c->p);
    if (end < start || n == 0 || left < 2 || n > (uint64_t)(left - 2) / 4 + 1 || n > UINT32_MAX)
        return SW_EFORMAT;
    tree_nodes t = {0};
    t.parent = malloc(n * sizeof *t.parent);
    t.func = malloc(n * sizeof *t.func);
    t.depth = malloc(n * sizeof *t.depth);
    t.self = malloc(n * sizeof *t.self);
    t.weight = malloc(n * sizeof *t.weight);
    t.path = malloc(n * sizeof *t.path);
    if (!t.parent || !t.func || !t.depth || !t.self || !t.weight || !t.path) {
        nodes_free(&t);
        return SW_ENOMEM;
    }
    t.depth[0] = 0;
    t.parent[0] = t.func[0] = SW_NODE_NONE;
    for (uint64_t i = 0; i < n && rc == SW_OK; i++) {
        if (i > 0) {
            uint64_t parent, func;
            if ((rc = get_u(c, &parent)) || (rc = get_u(c, &func)))
                break;
            if (parent >= i || func >= pf->nfuncs) {
                rc = SW_EFORMAT;
                break;
            }
            t.parent[i] = (uint32_t)parent;
            t.func[i] = pf->fmap[func];
            t.depth[i] = t.depth[parent] + 1;
        }
        if ((rc = get_u(c, &t.self[i])) == SW_OK)
            rc = get_u(c, &t.weight[i]);
    }
    if (rc == SW_OK && c->p != c->end)
        rc = SW_EFORMAT;
    sw_history_entry *e = sw_history_newest(pf->h);
    if (rc == SW_OK && !(e && e->start_ns == start && e->end_ns == end)) {
        rc = sw_history_push(pf->h, start, end, &e);
        if (rc == SW_EARG)
            rc = SW_EFORMAT;   /* out of time order */
    }
    sw_calltree *tree = NULL;
    if (rc == SW_OK)
        rc = sw_history_entry_tree(pf->h, e, tid, &tree);
    /* Each node's own samples, as the stack from the root to it. */
    for (uint64_t i = 0; rc == SW_OK && i < n; i++) {
        if (!t.self[i])
            continue;
        uint32_t d = t.depth[i];
        for (uint32_t k = (uint32_t)i; k != 0; k = t.parent[k])
            t.path[--d] = t.func[k];
        rc = sw_calltree_add(tree, t.path, t.depth[i], t.self[i], t.weight[i]);
        e->samples += t.self[i];
    }
    nodes_free(&t);
    if (rc == SW_OK)
        pf->trees++;
    return rc;
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const char *chunk_name(int type)
{
    switch (type) {
    case SW_PCHUNK_META: return "META";
    case SW_PCHUNK_FUNCS: return "FUNCS";
    case SW_PCHUNK_THREADS: return "THREADS";
    case SW_PCHUNK_TREE: return "TREE";
    case SW_PCHUNK_END: return "END";
    default: return "unknown";
    }
}

static void set_damage(sw_profile_file *pf, const char *what, size_t off)
{
    snprintf(pf->damage, sizeof pf->damage, "%s at offset %zu", what, off);
}

static int load(sw_profile_file *pf, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    if (len == 0) {
        snprintf(err, errlen, "empty file (not a stackwatch profile)");
        return SW_EFORMAT;
    }
    if (!sw_profile_file_is_profile(buf, len)) {
        snprintf(err, errlen, "not a stackwatch profile (bad magic number)");
        return SW_EFORMAT;
    }
    if (len < SW_FILE_HEADER_LEN) {
        snprintf(err, errlen, "not a readable stackwatch profile (the file ends inside its header)");
        return SW_EFORMAT;
    }
    unsigned major = buf[8] | (unsigned)buf[9] << 8;
    if (major != SW_PROF_MAJOR) {
        snprintf(err, errlen, "profile format version %u is not supported (this reader reads version %d)", major,
                 SW_PROF_MAJOR);
        return SW_EVERSION;
    }
    size_t off = SW_FILE_HEADER_LEN;
    int saw_meta = 0;
    while (off < len) {
        if (len - off < SW_CHUNK_HEADER_LEN) {
            set_damage(pf, "truncated: the file ends inside a chunk header", off);
            break;
        }
        const uint8_t *h = buf + off;
        int type = h[0];
        size_t plen = rd32(h + 4), poff = off + SW_CHUNK_HEADER_LEN;
        if (plen > SW_CHUNK_MAX || plen > len - poff) {
            set_damage(pf, "truncated: a chunk is longer than the rest of the file", off);
            break;
        }
        if (sw_crc32(0, buf + poff, plen) != rd32(h + 8)) {
            set_damage(pf, "corrupted: checksum mismatch in the chunk", off);
            break;
        }
        cursor c = {buf + poff, buf + poff + plen};
        int rc = SW_OK;
        if (!saw_meta && type != SW_PCHUNK_META) {
            rc = SW_EFORMAT;   /* META comes first */
        } else {
            switch (type) {
            case SW_PCHUNK_META:
                rc = saw_meta ? SW_EFORMAT : parse_meta(pf, &c, 0);
                saw_meta = rc == SW_OK;
                break;
            case SW_PCHUNK_FUNCS: rc = parse_funcs(pf, &c); break;
            case SW_PCHUNK_THREADS: rc = parse_threads(pf, &c); break;
            case SW_PCHUNK_TREE: rc = parse_tree(pf, &c); break;
            case SW_PCHUNK_END:
                rc = parse_meta(pf, &c, 1);
                pf->complete = rc == SW_OK;
                break;
            default:
                /* A newer minor version's chunk (or a damaged type byte,
                 * which the CRC does not cover): skipped, but said. */
                if (!pf->damage[0])
                    snprintf(pf->damage, sizeof pf->damage,
                             "skipped a chunk of unknown type %d at offset %zu (a newer format version, or damage)",
                             type, off);
                break;
            }
        }
        if (rc == SW_ENOMEM) {
            snprintf(err, errlen, "out of memory while reading the profile");
            return rc;
        }
        if (rc) {
            char what[64];
            snprintf(what, sizeof what, "malformed %s chunk", chunk_name(type));
            set_damage(pf, what, off);
            break;
        }
        off = poff + plen;
        if (pf->complete)
            break;   /* nothing follows END */
    }
    if (!saw_meta) {
        snprintf(err, errlen, "not a readable stackwatch profile (no intact header chunk)%s%s",
                 pf->damage[0] ? ": " : "", pf->damage);
        return SW_EFORMAT;
    }
    if (pf->complete && pf->trees != pf->trees_expected && !pf->damage[0])
        snprintf(pf->damage, sizeof pf->damage, "incomplete: %llu of %llu trees read",
                 (unsigned long long)pf->trees, (unsigned long long)pf->trees_expected);
    if (!pf->complete && !pf->damage[0])
        snprintf(pf->damage, sizeof pf->damage, "truncated: the file ends before its END chunk");
    sw_history_set_evicted(pf->h, pf->info.evicted, pf->info.evicted_samples);
    return SW_OK;
}

int sw_profile_file_is_profile(const uint8_t *data, size_t len)
{
    return len >= SW_MAGIC_LEN && memcmp(data, SW_PROF_MAGIC, SW_MAGIC_LEN) == 0;
}

int sw_profile_file_open_mem(const uint8_t *data, size_t len, sw_profile_file **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_profile_file *pf = calloc(1, sizeof *pf);
    if (pf && (pf->ft = sw_functab_new()))
        pf->h = sw_history_new(pf->ft, 0);
    if (!pf || !pf->h) {
        sw_profile_file_free(pf);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    int rc = load(pf, data, len, err, errlen);
    if (rc) {
        sw_profile_file_free(pf);
        return rc;
    }
    *out = pf;
    return SW_OK;
}

int sw_profile_file_open_file(const char *path, sw_profile_file **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_bytes b = {0};
    int rc = sw_bytes_read_file(&b, path, err, errlen);
    if (rc) {
        sw_bytes_free(&b);
        return rc;
    }
    rc = sw_profile_file_open_mem(b.data, b.len, out, err, errlen);
    sw_bytes_free(&b);
    return rc;
}

void sw_profile_file_free(sw_profile_file *pf)
{
    if (!pf)
        return;
    for (size_t i = 0; i < pf->nthreads; i++)
        free((char *)pf->threads[i].name);
    free(pf->threads);
    free(pf->fmap);
    sw_history_free(pf->h);
    sw_functab_free(pf->ft);
    free(pf);
}

const sw_prof_info *sw_profile_file_info(const sw_profile_file *pf)
{
    return &pf->info;
}

size_t sw_profile_file_thread_count(const sw_profile_file *pf)
{
    return pf->nthreads;
}

const sw_prof_thread *sw_profile_file_thread(const sw_profile_file *pf, size_t i)
{
    return i < pf->nthreads ? &pf->threads[i] : NULL;
}

sw_history *sw_profile_file_history(const sw_profile_file *pf)
{
    return pf->h;
}

const char *sw_profile_file_damage(const sw_profile_file *pf)
{
    return pf->damage;
}

int sw_profile_file_complete(const sw_profile_file *pf)
{
    return pf->complete;
}
