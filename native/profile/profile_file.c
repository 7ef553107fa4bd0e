/*
 * profile_file.c - writing and reading profile files (see profile_file.h and
 * docs/format.md, "Profile files"). The container (file header, chunks,
 * key/value lists, damage and resynchronisation) is base/container.h's;
 * every read of a payload goes through a bounded cursor, and a TREE chunk
 * is parsed and checked whole before any of it is added to the history.
 * Files are read piece by piece (pread): the reader holds one chunk at a
 * time, never the whole file.
 */
#define _GNU_SOURCE
#include "profile_file.h"

#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Chunks of FUNCS/THREADS entries are closed at about this size. */
#define DEF_CHUNK_TARGET (1u << 20)

/* ---- writing ---- */

static void put_sint(sw_bytes *b, int64_t v)
{
    sw_bytes_varint(b, sw_zigzag(v));
}

static int write_meta(sw_bytes *b, const sw_prof_info *in, const sw_history *h)
{
    size_t at = sw_chunk_begin(b, SW_PCHUNK_META);
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
    if (in->pid) {
        sw_kv_uint(b, "pid", in->pid);
        sw_kv_uint(b, "parent_pid", in->parent_pid);
        sw_kv_str(b, "process", in->process);
    }
    return sw_chunk_end(b, at);
}

static int write_funcs(sw_bytes *b, const sw_functab *ft)
{
    uint32_t n = sw_functab_count(ft);
    size_t at = 0;
    int open = 0, rc = SW_OK;
    for (uint32_t id = 0; id < n && rc == SW_OK; id++) {
        if (!open) {
            at = sw_chunk_begin(b, SW_PCHUNK_FUNCS);
            open = 1;
        }
        const sw_func *f = sw_functab_get(ft, id);
        sw_bytes_varint(b, id);
        sw_bytes_varint(b, SW_PFUNC_PYTHON);
        sw_bytes_str(b, f->name);
        sw_bytes_str(b, f->filename);
        put_sint(b, f->line);
        if (b->len - at >= DEF_CHUNK_TARGET) {
            rc = sw_chunk_end(b, at);
            open = 0;
        }
    }
    if (open && rc == SW_OK)
        rc = sw_chunk_end(b, at);
    return rc;
}

static int write_threads(sw_bytes *b, const sw_prof_thread *threads, size_t n)
{
    size_t at = sw_chunk_begin(b, SW_PCHUNK_THREADS);
    for (size_t i = 0; i < n; i++) {
        const sw_prof_thread *t = &threads[i];
        sw_bytes_varint(b, t->thread_id);
        sw_bytes_varint(b, t->native_tid);
        sw_bytes_str(b, t->name);
        sw_bytes_varint(b, t->samples);
        sw_bytes_varint(b, t->off_cpu);
        sw_bytes_varint(b, t->cpu_ns);
    }
    return sw_chunk_end(b, at);
}

/* THREAD_STATES entries list a thread's samples in this order of states. */
static const unsigned file_state_order[4] = {SW_STATE_RUNNING, SW_STATE_GIL_WAIT, SW_STATE_IDLE, SW_STATE_UNKNOWN};

static int write_thread_states(sw_bytes *b, const sw_prof_thread *threads, size_t n)
{
    size_t at = sw_chunk_begin(b, SW_PCHUNK_THREAD_STATES);
    for (size_t i = 0; i < n; i++) {
        if (!threads[i].has_states)
            continue;
        sw_bytes_varint(b, threads[i].thread_id);
        for (int k = 0; k < 4; k++)
            sw_bytes_varint(b, threads[i].states[file_state_order[k]]);
    }
    return sw_chunk_end(b, at);
}

static int write_tree(sw_bytes *b, const sw_history_entry *e, const sw_history_tree *ht)
{
    size_t at = sw_chunk_begin(b, SW_PCHUNK_TREE);
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
    return sw_chunk_end(b, at);
}

int sw_profile_file_build(sw_bytes *out, const sw_prof_info *info, const sw_prof_thread *threads, size_t nthreads,
                      const sw_history *h)
{
    uint8_t hdr[SW_FILE_HEADER_LEN];
    sw_file_header_put(hdr, SW_PROF_MAGIC, SW_PROF_MAJOR, SW_PROF_MINOR);
    sw_bytes_put(out, hdr, sizeof hdr);
    int rc = write_meta(out, info, h);
    if (rc == SW_OK)
        rc = write_funcs(out, sw_history_functab(h));
    if (rc == SW_OK)
        rc = write_threads(out, threads, nthreads);
    int any_states = 0;
    for (size_t i = 0; i < nthreads; i++)
        any_states |= threads[i].has_states;
    if (rc == SW_OK && any_states)
        rc = write_thread_states(out, threads, nthreads);
    uint64_t trees = 0;
    for (size_t i = 0; rc == SW_OK && i < sw_history_len(h); i++) {
        const sw_history_entry *e = sw_history_get(h, i);
        for (size_t k = 0; rc == SW_OK && k < e->ntrees; k++, trees++)
            rc = write_tree(out, e, &e->trees[k]);
    }
    if (rc == SW_OK) {
        size_t at = sw_chunk_begin(out, SW_PCHUNK_END);
        sw_kv_uint(out, "trees", trees);
        rc = sw_chunk_end(out, at);
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
    uint64_t placeholders;   /* functions whose definitions were lost */
    sw_history *h;
    char damage[768];
    int complete;
    uint64_t trees, trees_expected;
    uint64_t unknown_chunks;
};

static int parse_meta(sw_profile_file *pf, sw_cursor *c, int end_chunk)
{
    sw_kv kv;
    int rc;
    while ((rc = sw_kv_next(&c->p, c->end, &kv)) == 1) {
        char k[32];
        if (kv.key_len >= sizeof k)
            continue;   /* no key of ours is that long */
        memcpy(k, kv.key, kv.key_len);
        k[kv.key_len] = 0;
        sw_prof_info *in = &pf->info;
        if (end_chunk) {
            if (strcmp(k, "trees") == 0)
                pf->trees_expected = kv.u;
            continue;
        }
        if (strcmp(k, "mode") == 0 && kv.type == SW_VAL_BYTES) {
            size_t n = kv.slen < sizeof in->mode - 1 ? kv.slen : sizeof in->mode - 1;
            memcpy(in->mode, kv.s, n);
            in->mode[n] = 0;
        }
        if (strcmp(k, "process") == 0 && kv.type == SW_VAL_BYTES) {
            /* Cut at a character's start: the name stays valid UTF-8. */
            size_t n = kv.slen < sizeof in->process - 1 ? kv.slen : sizeof in->process - 1;
            while (n < kv.slen && n > 0 && ((unsigned char)kv.s[n] & 0xC0) == 0x80)
                n--;
            memcpy(in->process, kv.s, n);
            in->process[n] = 0;
        }
        struct { const char *name; uint64_t *field; } uints[] = {
            {"interval_ns", &in->interval_ns}, {"cycle_ns", &in->cycle_ns}, {"maxlen", &in->maxlen},
            {"samples", &in->samples}, {"dropped", &in->dropped}, {"cut", &in->cut}, {"off_cpu", &in->off_cpu},
            {"failed", &in->failed}, {"missed", &in->missed}, {"evicted", &in->evicted},
            {"evicted_samples", &in->evicted_samples}, {"history_dropped", &in->history_dropped},
            {"pid", &in->pid}, {"parent_pid", &in->parent_pid}};
        for (size_t i = 0; i < sizeof uints / sizeof uints[0]; i++)
            if (strcmp(k, uints[i].name) == 0 && kv.type == SW_VAL_UINT)
                *uints[i].field = kv.u;
        if (strcmp(k, "start_ns") == 0 && kv.type == SW_VAL_SINT)
            in->start_ns = kv.i;
        if (strcmp(k, "stop_ns") == 0 && kv.type == SW_VAL_SINT)
            in->stop_ns = kv.i;
    }
    return rc;
}

/* Every FUNCS entry takes at least 5 bytes: a damaged range of n bytes can
 * have held at most n / 5 definitions. */
#define MIN_FUNC_BYTES 5

/* Gives the file ids nfuncs..upto (a run whose definitions were lost in a
 * damaged range) functions of their own, named after their ids, so that
 * the trees that use them still read. Refused (SW_EFORMAT) beyond what the
 * damaged bytes could have held. */
static int lost_funcs(sw_profile_file *pf, const sw_chunks *it, uint64_t upto)
{
    if (upto - pf->nfuncs + 1 > it->damaged_bytes / MIN_FUNC_BYTES - pf->placeholders || upto > UINT32_MAX)
        return SW_EFORMAT;
    while (pf->nfuncs <= upto) {
        uint32_t *nm = sw_array_grow(pf->fmap, &pf->fmap_cap, pf->nfuncs + 1, sizeof *nm, 256);
        if (!nm)
            return SW_ENOMEM;
        pf->fmap = nm;
        char name[64];
        int n = snprintf(name, sizeof name, "<function %zu: definition lost>", pf->nfuncs);
        int rc = sw_functab_intern(pf->ft, name, (size_t)n, "", 0, 0, &pf->fmap[pf->nfuncs]);
        if (rc)
            return rc;
        pf->nfuncs++;
        pf->placeholders++;
    }
    return SW_OK;
}

static int parse_funcs(sw_profile_file *pf, sw_cursor *c, const sw_chunks *it)
{
    while (c->p < c->end) {
        uint64_t id, kind;
        const char *name, *file;
        size_t nlen, flen;
        int64_t line;
        int rc;
        if ((rc = sw_cur_varint(c, &id)) || (rc = sw_cur_varint(c, &kind)) || (rc = sw_cur_str(c, &name, &nlen)) ||
            (rc = sw_cur_str(c, &file, &flen)) || (rc = sw_cur_zigzag(c, &line)))
            return rc;
        if (id > pf->nfuncs && (rc = lost_funcs(pf, it, id - 1)))
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

static int parse_threads(sw_profile_file *pf, sw_cursor *c)
{
    while (c->p < c->end) {
        sw_prof_thread t = {0};
        const char *name;
        size_t nlen;
        int rc;
        if ((rc = sw_cur_varint(c, &t.thread_id)) || (rc = sw_cur_varint(c, &t.native_tid)) || (rc = sw_cur_str(c, &name, &nlen)) ||
            (rc = sw_cur_varint(c, &t.samples)) || (rc = sw_cur_varint(c, &t.off_cpu)) || (rc = sw_cur_varint(c, &t.cpu_ns)))
            return rc;
        sw_prof_thread *nt = sw_array_grow(pf->threads, &pf->threads_cap, pf->nthreads + 1, sizeof *nt, 8);
        if (!nt)
            return SW_ENOMEM;
        pf->threads = nt;
        char *copy = sw_dup_n(name, nlen);
        if (!copy)
            return SW_ENOMEM;
        t.name = copy;
        pf->threads[pf->nthreads++] = t;
    }
    return SW_OK;
}

/* THREAD_STATES: the states of threads THREADS listed (others ignored). */
static int parse_thread_states(sw_profile_file *pf, sw_cursor *c)
{
    while (c->p < c->end) {
        uint64_t tid, st[4];
        int rc = sw_cur_varint(c, &tid);
        for (int k = 0; k < 4 && rc == SW_OK; k++)
            rc = sw_cur_varint(c, &st[k]);
        if (rc)
            return rc;
        for (size_t i = 0; i < pf->nthreads; i++) {
            if (pf->threads[i].thread_id == tid) {
                for (int k = 0; k < 4; k++)
                    pf->threads[i].states[file_state_order[k]] = st[k];
                pf->threads[i].has_states = 1;
            }
        }
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

/* Parses a whole TREE chunk, checks it, then adds it to the history. A
 * function id past the definitions read is one whose definition was lost
 * in a damaged range (lost_funcs). */
static int parse_tree(sw_profile_file *pf, sw_cursor *c, const sw_chunks *it)
{
    int64_t start, end;
    uint64_t tid, n;
    int rc;
    if ((rc = sw_cur_zigzag(c, &start)) || (rc = sw_cur_zigzag(c, &end)) || (rc = sw_cur_varint(c, &tid)) || (rc = sw_cur_varint(c, &n)))
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
            if ((rc = sw_cur_varint(c, &parent)) || (rc = sw_cur_varint(c, &func)))
                break;
            if (parent >= i || (func >= pf->nfuncs && (rc = lost_funcs(pf, it, func)))) {
                rc = rc ? rc : SW_EFORMAT;
                break;
            }
            t.parent[i] = (uint32_t)parent;
            t.func[i] = pf->fmap[func];
            t.depth[i] = t.depth[parent] + 1;
        }
        if ((rc = sw_cur_varint(c, &t.self[i])) == SW_OK)
            rc = sw_cur_varint(c, &t.weight[i]);
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

static const char *chunk_name(unsigned type)
{
    switch (type) {
    case SW_PCHUNK_META: return "META";
    case SW_PCHUNK_FUNCS: return "FUNCS";
    case SW_PCHUNK_THREADS: return "THREADS";
    case SW_PCHUNK_TREE: return "TREE";
    case SW_PCHUNK_END: return "END";
    case SW_PCHUNK_THREAD_STATES: return "THREAD_STATES";
    default: return NULL;
    }
}

/* Profile files in the container: their magic, version and chunk types. */
static const sw_container_kind profile_kind = {
    SW_PROF_MAGIC, "profile", SW_PROF_MAJOR, SW_PROF_MINOR,
    1u << SW_PCHUNK_META | 1u << SW_PCHUNK_FUNCS | 1u << SW_PCHUNK_THREADS | 1u << SW_PCHUNK_TREE |
        1u << SW_PCHUNK_END | 1u << SW_PCHUNK_THREAD_STATES,
    chunk_name};

/* Reads one intact chunk; a nonzero code for a chunk it cannot use. */
static int read_chunk(sw_profile_file *pf, const sw_chunks *it, const sw_chunk *ch, int *saw_any)
{
    sw_cursor c = sw_cursor_of(ch->payload, ch->len);
    int rc = SW_OK, first = !*saw_any;
    *saw_any = 1;
    switch (ch->type) {
    case SW_PCHUNK_META: return first ? parse_meta(pf, &c, 0) : SW_EFORMAT;   /* META comes first */
    case SW_PCHUNK_FUNCS: return parse_funcs(pf, &c, it);
    case SW_PCHUNK_THREADS: return parse_threads(pf, &c);
    case SW_PCHUNK_THREAD_STATES: return parse_thread_states(pf, &c);
    case SW_PCHUNK_TREE: return parse_tree(pf, &c, it);
    case SW_PCHUNK_END:
        if ((rc = parse_meta(pf, &c, 1)) == SW_OK)
            pf->complete = 1;
        return rc;
    default: return SW_OK;   /* the iterator hands out known types only */
    }
}

/* Appends "; <text>" (or the text alone) to the damage line. */
static void add_note(sw_profile_file *pf, const char *text)
{
    size_t n = strlen(pf->damage);
    if (n + 3 < sizeof pf->damage)
        snprintf(pf->damage + n, sizeof pf->damage - n, "%s%s", n ? "; " : "", text);
}

static int load(sw_profile_file *pf, const sw_source *src, char *err, size_t errlen)
{
    sw_chunks it;
    int rc = sw_chunks_open(&it, &profile_kind, src, err, errlen), saw_any = 0, meta_lost = 1;
    sw_chunk ch;
    while (rc == SW_OK && !pf->complete && (rc = sw_chunks_next(&it, &ch)) == 1) {
        rc = read_chunk(pf, &it, &ch, &saw_any);
        if (ch.type == SW_PCHUNK_META && rc == SW_OK)
            meta_lost = 0;
        if (rc && rc != SW_ENOMEM) {
            char what[64];
            snprintf(what, sizeof what, "malformed %s chunk", chunk_name(ch.type));
            sw_chunks_malformed(&it, &ch, what);
        }
        rc = rc == SW_ENOMEM ? rc : SW_OK;
        /* Nothing follows END. */
    }
    if (rc == SW_ENOMEM)
        snprintf(err, errlen, "out of memory while reading the profile");
    else if (rc == SW_EIO && !err[0])
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
    if (rc == SW_OK && !it.chunks) {
        sw_damage_describe(it.damage, it.ndamage, it.damage_total, pf->damage, sizeof pf->damage);
        snprintf(err, errlen, "not a readable stackwatch profile (no intact header chunk, nor any other)%s%s",
                 pf->damage[0] ? ": " : "", pf->damage);
        rc = SW_EFORMAT;
    }
    if (rc) {
        sw_chunks_close(&it);
        return rc;
    }
    sw_damage_describe(it.damage, it.ndamage, it.damage_total, pf->damage, sizeof pf->damage);
    pf->unknown_chunks = it.unknown;
    int cut_at_end = it.ndamage && it.damage[it.ndamage - 1].to_end;
    char note[96];
    if (meta_lost) {
        snprintf(pf->info.mode, sizeof pf->info.mode, "unknown");
        if (it.damage_total)
            add_note(pf, "the META chunk is lost: mode, interval and totals unknown");
    }
    if (pf->placeholders) {
        snprintf(note, sizeof note, "%" PRIu64 " function definitions lost", pf->placeholders);
        add_note(pf, note);
    }
    if (pf->complete && pf->trees != pf->trees_expected) {
        snprintf(note, sizeof note, "%s%" PRIu64 " of %" PRIu64 " trees read", pf->damage[0] ? "" : "incomplete: ",
                 pf->trees, pf->trees_expected);
        add_note(pf, note);
    }
    if (!pf->complete && !cut_at_end)
        add_note(pf, "truncated: the file ends before its END chunk");
    sw_chunks_close(&it);
    sw_history_set_evicted(pf->h, pf->info.evicted, pf->info.evicted_samples);
    return SW_OK;
}

int sw_profile_file_is_profile(const uint8_t *data, size_t len)
{
    return len >= SW_MAGIC_LEN && memcmp(data, SW_PROF_MAGIC, SW_MAGIC_LEN) == 0;
}

/* A profile file reading its bytes from src. */
static int open_source(const sw_source *src, sw_profile_file **out, char *err, size_t errlen)
{
    *out = NULL;
    err[0] = 0;
    sw_profile_file *pf = calloc(1, sizeof *pf);
    if (pf && (pf->ft = sw_functab_new()))
        pf->h = sw_history_new(pf->ft, 0);
    if (!pf || !pf->h) {
        sw_profile_file_free(pf);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    int rc = load(pf, src, err, errlen);
    if (rc) {
        sw_profile_file_free(pf);
        return rc;
    }
    *out = pf;
    return SW_OK;
}

int sw_profile_file_open_mem(const uint8_t *data, size_t len, sw_profile_file **out, char *err, size_t errlen)
{
    sw_source src;
    sw_source_mem(&src, data, len);
    return open_source(&src, out, err, errlen);
}

int sw_profile_file_open_file(const char *path, sw_profile_file **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    sw_source src;
    if (fd < 0 || sw_source_fd(&src, fd) != SW_OK) {
        snprintf(err, errlen, "cannot %s: %s", fd < 0 ? "open" : "read", strerror(errno));
        if (fd >= 0)
            close(fd);
        return SW_EIO;
    }
    int rc = open_source(&src, out, err, errlen);
    close(fd);
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

uint64_t sw_profile_file_unknown_chunks(const sw_profile_file *pf)
{
    return pf->unknown_chunks;
}
