/*
 * chunk_index.c - opening a trace file (see chunk_index.h, reader.h,
 * docs/format.md): the load that reads every chunk once, keeps the
 * definitions and indexes what is read again later; the trace's damage,
 * META/END values, threads, tasks and codes, and its time base.
 * The chunks come from the container's iterator (base/container.h), which
 * skips and records damaged ranges; every read of a payload goes through a
 * bounded cursor (base/cursor.h), so nothing in the input can make the
 * reader read outside the payload it holds.
 *
 * A file is streamed: the load keeps the definitions and an index of the
 * EVENTS and side streams' chunks (offset, length, sequence number, start
 * time), and each replay or side stream cursor reads the chunks it needs
 * with pread(2) into buffers of its own, so memory stays bounded by the
 * largest chunk (64 MiB), whatever the size of the file.
 */
#define _GNU_SOURCE
#include "chunk_index.h"

#include "base/base.h"
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads a str into a fresh NUL-terminated copy. */
int sw_index_get_str(sw_cursor *c, char **out, size_t *outlen)
{
    const char *s;
    size_t n;
    int rc = sw_cur_str(c, &s, &n);
    if (rc)
        return rc;
    if (!(*out = sw_dup_n(s, n)))
        return SW_ENOMEM;
    if (outlen)
        *outlen = n;
    return SW_OK;
}

/* Appends the entries of a META or END payload to the trace's list. */
static int parse_kv(sw_trace *t, sw_cursor *c)
{
    sw_kv kv;
    int rc;
    while ((rc = sw_kv_next(&c->p, c->end, &kv)) == 1) {
        sw_meta_entry e = {NULL, (int)kv.type, kv.u, kv.i, kv.f, NULL, kv.slen};
        char *key = sw_dup_n(kv.key, kv.key_len);
        char *str = kv.type == SW_VAL_BYTES ? sw_dup_n(kv.s, kv.slen) : NULL;
        sw_meta_entry *m = sw_array_grow(t->meta, &t->meta_cap, t->nmeta + 1, sizeof *m, 32);
        if (!key || (kv.type == SW_VAL_BYTES && !str) || !m) {
            free(key);
            free(str);
            return SW_ENOMEM;
        }
        e.key = key;
        e.s = str;
        t->meta = m;
        t->meta[t->nmeta++] = e;
    }
    return rc;
}

thread_rec *sw_index_thread(sw_trace *t, uint64_t index)
{
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].info.index == index && !t->threads[i].info.task)
            return &t->threads[i];
    if (index > UINT32_MAX)
        return NULL;
    thread_rec *grown = sw_array_grow(t->threads, &t->threads_cap, t->nthreads + 1, sizeof *grown, 8);
    if (!grown)
        return NULL;
    t->threads = grown;
    thread_rec *r = &t->threads[t->nthreads++];
    memset(r, 0, sizeof *r);
    r->info.index = (uint32_t)index;
    r->info.name = "";
    return r;
}

static int parse_threads(sw_trace *t, sw_cursor *c)
{
    while (c->p < c->end) {
        uint64_t index, tid, ident;
        char *name = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &index)) || (rc = sw_cur_varint(c, &tid)) || (rc = sw_cur_varint(c, &ident)) ||
            (rc = sw_index_get_str(c, &name, NULL)))
            return rc;
        if (index > UINT32_MAX) {  /* not an index the writer can give */
            free(name);
            return SW_EFORMAT;
        }
        thread_rec *r = sw_index_thread(t, index);
        if (!r) {
            free(name);
            return SW_ENOMEM;
        }
        if (tid)
            r->info.native_tid = tid;
        if (ident)
            r->info.ident = ident;
        if (name[0] || !r->name) {
            free(r->name);
            r->name = name;
            r->info.name = name;
        } else {
            free(name);
        }
    }
    return SW_OK;
}

/* TASK entries (format 1.7): varint task (above 0), varint thread index,
 * str name. A later entry of the same task renames it. */
/* TASK entries (interned: TASK_INTERNED's, format 1.18, the name a
 * STRINGS entry's id, looked up when every chunk is read). */
static int parse_tasks(sw_trace *t, sw_cursor *c, int interned)
{
    while (c->p < c->end) {
        uint64_t task, thread, sid = 0;
        char *name = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &task)) || (rc = sw_cur_varint(c, &thread)) ||
            (rc = interned ? sw_cur_varint(c, &sid) : sw_index_get_str(c, &name, NULL)))
            return rc;
        if (!task || thread > UINT32_MAX || sid >= (1u << 28)) {
            free(name);
            return SW_EFORMAT;
        }
        thread_rec *r = NULL;
        for (size_t i = 0; i < t->nthreads && !r; i++)
            if (t->threads[i].info.task == task)
                r = &t->threads[i];
        if (!r) {
            thread_rec *grown = sw_array_grow(t->threads, &t->threads_cap, t->nthreads + 1, sizeof *grown, 8);
            if (!grown) {
                free(name);
                return SW_ENOMEM;
            }
            t->threads = grown;
            r = &t->threads[t->nthreads++];
            memset(r, 0, sizeof *r);
            r->info.index = UINT32_MAX - t->ntasks++;
            r->info.task = task;
        }
        r->info.thread = (uint32_t)thread;
        free(r->name);
        r->name = name;
        r->info.name = name;
        r->name_sid = interned ? sid + 1 : 0;
    }
    return SW_OK;
}

/* The names of the tasks defined by TASK_INTERNED entries, from the
 * STRINGS entries ("?" for an id without one: its chunk lost). */
static int name_tasks(sw_trace *t)
{
    for (size_t i = 0; i < t->nthreads; i++) {
        thread_rec *r = &t->threads[i];
        if (!r->name_sid)
            continue;
        uint64_t id = r->name_sid - 1;
        const char *s = id < t->strings.n && t->strings.s[id] ? t->strings.s[id] : "?";
        char *name = sw_dup_n(s, strlen(s));
        if (!name)
            return SW_ENOMEM;
        free(r->name);
        r->name = name;
        r->info.name = name;
        r->name_sid = 0;
    }
    return SW_OK;
}

static void free_code(sw_code_info *ci)
{
    if (!ci)
        return;
    free((char *)ci->name);
    free((char *)ci->qualname);
    free((char *)ci->filename);
    free(ci);
}

/* Makes room for slot `id` in a table of pointers (new slots NULL); returns
 * the (possibly moved) table, or NULL when out of memory (then unchanged). */
void *sw_index_grow_slots(void *slots, uint32_t *limit, uint64_t id, size_t slot)
{
    size_t cap = *limit;
    char *p = sw_array_grow(slots, &cap, (size_t)id + 1, slot, 64);
    if (p && cap > *limit) {
        memset(p + (size_t)*limit * slot, 0, (cap - *limit) * slot);
        *limit = (uint32_t)cap;
    }
    return p;
}

/* STRINGS entries (format 1.16): varint id, str text. Ids are dense from
 * 0 and an entry takes at least 2 bytes: the table is bounded by the
 * input. A later entry of an id replaces it. */
static int parse_strings(sw_trace *t, sw_cursor *c)
{
    while (c->p < c->end) {
        uint64_t id;
        char *text = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &id)) || (rc = sw_index_get_str(c, &text, NULL)))
            return rc;
        if (id >= (1u << 28) || id > t->len / 2) {
            free(text);
            return SW_EFORMAT;
        }
        char **ss = sw_index_grow_slots(t->strings.s, &t->strings.n, id, sizeof *ss);
        if (!ss) {
            free(text);
            return SW_ENOMEM;
        }
        t->strings.s = ss;
        free(ss[id]);
        ss[id] = text;
    }
    return SW_OK;
}

static int parse_codes(sw_trace *t, sw_cursor *c)
{
    while (c->p < c->end) {
        uint64_t id, line;
        uint8_t kind;
        char *name = NULL, *qual = NULL, *file = NULL;
        int rc;
        if ((rc = sw_cur_varint(c, &id)) || (rc = sw_cur_u8(c, &kind)) || (rc = sw_index_get_str(c, &name, NULL)) ||
            (rc = sw_index_get_str(c, &qual, NULL)) || (rc = sw_index_get_str(c, &file, NULL)) ||
            (rc = sw_cur_varint(c, &line)))
            goto fail;
        /* Ids are dense from 0 and every entry takes at least 6 bytes, so a
         * file that defines id N is longer than 6 * N: this bounds the table
         * (and what analysis and exports allocate per id) by the input. */
        rc = SW_EFORMAT;
        if (id >= (1u << 28) || id > t->len / 6)
            goto fail;
        rc = SW_ENOMEM;
        sw_code_info **cs = sw_index_grow_slots(t->codes, &t->code_limit, id, sizeof *cs);
        if (!cs)
            goto fail;
        t->codes = cs;
        sw_code_info *ci = calloc(1, sizeof *ci);
        if (!ci)
            goto fail;
        ci->id = (uint32_t)id;
        ci->kind = kind;
        ci->name = name;
        ci->qualname = qual;
        ci->filename = file;
        ci->firstlineno = line > UINT32_MAX ? UINT32_MAX : (uint32_t)line;
        free_code(t->codes[id]);
        t->codes[id] = ci;
        continue;
    fail:
        free(name);
        free(qual);
        free(file);
        return rc;
    }
    return SW_OK;
}

/* The payload of an indexed chunk, as a cursor: in the memory source, or
 * read into buf. */
int sw_index_payload(const sw_trace *t, const chunk_ref *ch, sw_bytes *buf, sw_cursor *c)
{
    const uint8_t *p;
    int rc = sw_source_read(&t->src, ch->off, ch->len, buf, &p);
    if (rc == SW_OK)
        *c = sw_cursor_of(p, ch->len);
    return rc;
}

/* The position of the thread whose native tid is tid, or SIZE_MAX. */
size_t sw_index_thread_of_tid(const sw_trace *t, uint64_t tid)
{
    for (size_t j = 0; tid && j < t->nthreads; j++)
        if (t->threads[j].info.native_tid == tid)
            return j;
    return SIZE_MAX;
}

int sw_index_events_head(sw_cursor *c, events_head *h)
{
    int rc;
    if ((rc = sw_cur_varint(c, &h->index)) || (rc = sw_cur_varint(c, &h->seq)) || (rc = sw_cur_varint(c, &h->t0)) ||
        (rc = sw_cur_varint(c, &h->dropped)) || (rc = sw_cur_varint(c, &h->depth)))
        return rc;
    if (h->depth > (uint64_t)(c->end - c->p))
        return SW_ETRUNC;
    h->prefix = c->p;
    for (uint64_t k = 0; k < h->depth; k++) {
        uint64_t id;
        if ((rc = sw_cur_varint(c, &id)))
            return rc;
    }
    if ((rc = sw_cur_varint(c, &h->n)))
        return rc;
    h->body = c->p;
    return SW_OK;
}

/* A TASK_FRAMES chunk (format 1.7): indexed by its thread and the
 * sequence number of the EVENTS chunk it belongs to; read by a replay
 * that starts at that chunk. */
static int add_task_frames_chunk(sw_trace *t, sw_cursor *c, uint64_t off, uint32_t len)
{
    uint64_t index, seq;
    int rc;
    if ((rc = sw_cur_varint(c, &index)) || (rc = sw_cur_varint(c, &seq)))
        return rc;
    if (index > UINT32_MAX)
        return SW_EFORMAT;
    thread_rec *r = sw_index_thread(t, index);
    if (!r)
        return SW_ENOMEM;
    chunk_ref *g = sw_array_grow(r->task_frames, &r->task_frames_cap, r->ntask_frames + 1, sizeof *g, 8);
    if (!g)
        return SW_ENOMEM;
    r->task_frames = g;
    r->task_frames[r->ntask_frames++] = (chunk_ref){off, len, seq, 0};
    return SW_OK;
}

static int add_events_chunk(sw_trace *t, const uint8_t *p, uint64_t off, uint32_t len)
{
    sw_cursor c = sw_cursor_of(p, len);
    events_head h;
    int rc = sw_index_events_head(&c, &h);
    if (rc)
        return rc;
    if (h.index > UINT32_MAX)  /* not an index the writer can give */
        return SW_EFORMAT;
    thread_rec *r = sw_index_thread(t, h.index);
    if (!r)
        return SW_ENOMEM;
    chunk_ref *cs = sw_array_grow(r->chunks, &r->cap, r->nchunks + 1, sizeof *cs, 16);
    if (!cs)
        return SW_ENOMEM;
    r->chunks = cs;
    r->chunks[r->nchunks++] = (chunk_ref){off, len, h.seq, h.t0};
    r->info.chunks++;
    r->info.events += h.n;
    r->info.dropped += h.dropped;
    return SW_OK;
}

static const char *chunk_name(unsigned type)
{
    switch (type) {
    case SW_CHUNK_META: return "META";
    case SW_CHUNK_CODE: return "CODE";
    case SW_CHUNK_THREAD: return "THREAD";
    case SW_CHUNK_EVENTS: return "EVENTS";
    case SW_CHUNK_END: return "END";
    case SW_CHUNK_SAMPLE_FRAMES: return "SAMPLE_FRAMES";
    case SW_CHUNK_SAMPLES: return "SAMPLES";
    case SW_CHUNK_TASK: return "TASK";
    case SW_CHUNK_TASK_INTERNED: return "TASK_INTERNED";
    case SW_CHUNK_TASK_FRAMES: return "TASK_FRAMES";
    case SW_CHUNK_THREAD_RECORDS: return "THREAD_RECORDS";
    case SW_CHUNK_STRINGS: return "STRINGS";
    default: return NULL;
    }
}

/* Traces in the container: their magic, version and chunk types. */
static const sw_container_kind trace_kind = {
    SW_MAGIC, "trace", SW_FORMAT_MAJOR, SW_FORMAT_MINOR,
    1u << SW_CHUNK_META | 1u << SW_CHUNK_CODE | 1u << SW_CHUNK_THREAD | 1u << SW_CHUNK_EVENTS |
        1u << SW_CHUNK_END | 1u << SW_CHUNK_SAMPLE_FRAMES | 1u << SW_CHUNK_SAMPLES | 1u << SW_CHUNK_TASK |
        1u << SW_CHUNK_TASK_FRAMES | 1u << SW_CHUNK_THREAD_RECORDS | 1u << SW_CHUNK_STRINGS |
        1u << SW_CHUNK_TASK_INTERNED,
    chunk_name};

static int cmp_chunk(const void *a, const void *b)
{
    const chunk_ref *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* What the time base lacks, said after the damage (see load()). */
static void timebase_note(const sw_trace *t, char *note, size_t len);

/* Rewrites the damage text from the list. */
static void describe(sw_trace *t)
{
    sw_damage_describe(t->dmg, t->ndmg, t->dmg_total, t->damage, sizeof t->damage);
    char note[160];
    timebase_note(t, note, sizeof note);
    size_t n = strlen(t->damage);
    if (note[0] && n + 2 < sizeof t->damage)
        n += (size_t)snprintf(t->damage + n, sizeof t->damage - n, "; %s", note);
    if (t->lost_events && n + 2 < sizeof t->damage)
        snprintf(t->damage + n, sizeof t->damage - n, "; %s%llu events lost", t->lost_at_least ? "at least " : "",
                 (unsigned long long)t->lost_events);
}

/* Adds a damaged range found after the load (a replay's malformed events
 * chunk), in file order, once. */
void sw_index_add_damage(sw_trace *t, const sw_damage *d)
{
    if (!t->dmg && !(t->dmg = calloc(SW_DAMAGE_KEEP, sizeof *t->dmg)))
        return;
    size_t i = 0;
    while (i < t->ndmg && t->dmg[i].off < d->off)
        i++;
    if ((i < t->ndmg && t->dmg[i].off == d->off) || t->ndmg == SW_DAMAGE_KEEP)
        return;   /* known already (another replay), or no room to tell */
    memmove(&t->dmg[i + 1], &t->dmg[i], (t->ndmg - i) * sizeof *t->dmg);
    t->dmg[i] = *d;
    t->ndmg++;
    t->dmg_total++;
    describe(t);
}

/* Reads one intact chunk; a nonzero code for a chunk it cannot use. */
static int read_chunk(sw_trace *t, const sw_chunk *ch)
{
    sw_cursor c = sw_cursor_of(ch->payload, ch->len);
    uint64_t poff = ch->off + SW_CHUNK_HEADER_LEN;
    int rc;
    switch (ch->type) {
    case SW_CHUNK_META:
        /* A writer of format 1.5 writes its META chunks again before END:
         * a copy of a chunk already read adds nothing. */
        for (size_t i = 0; i < t->nmetas; i++)
            if (t->metas[i].len == ch->len && memcmp(t->metas[i].data, ch->payload, ch->len) == 0)
                return SW_OK;
        meta_copy *m = sw_array_grow(t->metas, &t->metas_cap, t->nmetas + 1, sizeof *m, 4);
        if (!m)
            return SW_ENOMEM;
        t->metas = m;
        uint8_t *copy = malloc(ch->len ? ch->len : 1);
        if (!copy)
            return SW_ENOMEM;
        memcpy(copy, ch->payload, ch->len);
        t->metas[t->nmetas++] = (meta_copy){copy, ch->len};
        return parse_kv(t, &c);
    case SW_CHUNK_CODE: return parse_codes(t, &c);
    case SW_CHUNK_THREAD: return parse_threads(t, &c);
    case SW_CHUNK_TASK: return parse_tasks(t, &c, 0);
    case SW_CHUNK_TASK_INTERNED: return parse_tasks(t, &c, 1);
    case SW_CHUNK_STRINGS: return parse_strings(t, &c);
    case SW_CHUNK_TASK_FRAMES: return add_task_frames_chunk(t, &c, poff, ch->len);
    case SW_CHUNK_EVENTS: return add_events_chunk(t, ch->payload, poff, ch->len);
    case SW_CHUNK_END:
        if ((rc = parse_kv(t, &c)) == SW_OK)
            t->complete = 1;
        return rc;
    case SW_CHUNK_SAMPLE_FRAMES: return sw_side_sample_frames(t, &c);
    default: return sw_side_add_chunk(t, ch->type, ch->payload, poff, ch->len);   /* a side stream's, or none */
    }
}

static int load(sw_trace *t, char *err, size_t errlen)
{
    sw_chunks it;
    t->len = t->src.size;
    int rc = sw_chunks_open(&it, &trace_kind, &t->src, err, errlen);
    sw_chunk ch;
    while (rc == SW_OK && (rc = sw_chunks_next(&it, &ch)) == 1) {
        int had_bad_kind = t->bad_frame_kind;
        rc = read_chunk(t, &ch);
        if (rc && rc != SW_ENOMEM) {
            char what[112];
            if (t->bad_frame_kind && !had_bad_kind)
                snprintf(what, sizeof what,
                         "sample frame of unknown kind %d (written by a newer stackwatch?) in the SAMPLE_FRAMES chunk",
                         t->bad_frame_kind - 1);
            else
                snprintf(what, sizeof what, "malformed %s chunk", chunk_name(ch.type));
            sw_chunks_malformed(&it, &ch, what);
        }
        rc = rc == SW_ENOMEM ? rc : SW_OK;
    }
    uint64_t intact = it.chunks;
    t->unknown_chunks = it.unknown;
    t->dmg = it.damage;   /* the list is the trace's now */
    t->ndmg = it.ndamage;
    t->dmg_total = it.damage_total;
    it.damage = NULL;
    sw_chunks_close(&it);
    if (rc == SW_OK)
        rc = name_tasks(t);
    if (rc == SW_ENOMEM) {
        snprintf(err, errlen, "out of memory while reading the trace");
        return rc;
    }
    if (rc == SW_EIO && !err[0]) {
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
        return rc;
    }
    if (rc)
        return rc;   /* the header: err says why */
    if (!intact) {
        describe(t);
        snprintf(err, errlen, "not a readable stackwatch trace (no intact header chunk, nor any other)%s%s",
                 t->damage[0] ? ": " : "", t->damage);
        return SW_EFORMAT;
    }
    const sw_meta_entry *e;
    t->ns_per_tick = 1.0;
    if ((e = sw_trace_meta_find(t, "time_shift")))
        t->shift = e->u > 30 ? 30 : (unsigned)e->u;
    /* A refined rate from END wins over the first estimate in META. */
    e = sw_trace_meta_find(t, "clock_hz_refined");
    if (!e)
        e = sw_trace_meta_find(t, "clock_hz");
    if (e && e->f > 1e3)
        t->ns_per_tick = 1e9 / e->f;
    /* Tasks after the threads, each after its own thread: the consumers
     * list them in this order. */
    if (t->ntasks) {
        thread_rec *sorted = malloc(t->nthreads * sizeof *sorted);
        if (!sorted) {
            snprintf(err, errlen, "out of memory while reading the trace");
            return SW_ENOMEM;
        }
        size_t n = 0;
        for (size_t i = 0; i < t->nthreads; i++)
            if (!t->threads[i].info.task)
                sorted[n++] = t->threads[i];
        size_t nthr = n;
        for (size_t k = 0; k < nthr; k++)
            for (size_t i = 0; i < t->nthreads; i++)
                if (t->threads[i].info.task && t->threads[i].info.thread == sorted[k].info.index)
                    sorted[n++] = t->threads[i];
        for (size_t i = 0; i < t->nthreads; i++) {   /* tasks of a thread never seen */
            thread_rec *r = &t->threads[i];
            int known = 0;
            for (size_t k = 0; k < nthr && !known; k++)
                known = sorted[k].info.index == r->info.thread;
            if (r->info.task && !known)
                sorted[n++] = *r;
        }
        free(t->threads);
        t->threads = sorted;
        t->threads_cap = t->nthreads;
        for (size_t i = 0; i < t->nthreads; i++) {
            thread_rec *r = &t->threads[i];
            r->owner = SIZE_MAX;
            for (size_t k = 0; r->info.task && k < nthr; k++)
                if (t->threads[k].info.index == r->info.thread)
                    r->owner = k;
        }
    }
    if ((rc = sw_side_streams_index(t)) != SW_OK) {
        snprintf(err, errlen, rc == SW_ENOMEM ? "out of memory while reading the trace" : "cannot read: %s",
                 strerror(errno));
        return rc;
    }
    uint64_t first = UINT64_MAX;   /* the earliest chunk start, in units */
    for (size_t i = 0; i < t->nthreads; i++) {
        thread_rec *r = &t->threads[i];
        if (r->nchunks > 1)  /* qsort(NULL, 0, ...) is undefined */
            qsort(r->chunks, r->nchunks, sizeof *r->chunks, cmp_chunk);
        for (size_t k = 0; k < r->nchunks; k++)
            if (r->chunks[k].t0 < first)
                first = r->chunks[k].t0;
        char key[48];
        snprintf(key, sizeof key, "dropped.%u", r->info.index);
        if ((e = sw_trace_meta_find(t, key)))
            r->info.dropped += e->u;
        snprintf(key, sizeof key, "chunks.%u", r->info.index);
        if ((e = sw_trace_meta_find(t, key)))
            r->written = e->u;
    }
    if ((e = sw_trace_meta_find(t, "tick0")))
        t->tick0 = e->u;
    else if (t->dmg_total && first != UINT64_MAX && first <= UINT64_MAX >> t->shift)
        t->tick0 = first << t->shift;   /* META lost: times count from the first event */
    t->end_ns = -1;
    if ((e = sw_trace_meta_find(t, "end_ticks")))
        t->end_ns = sw_trace_units_to_ns(t, e->u >> t->shift);
    /* END counts the events sealed and those dropped: without drops, the
     * sealed ones are what the file held. A drop may be of a sealed event
     * (a ring's discard, a failed write) or of one never sealed, so with
     * drops the difference is a lower bound of what the file held. */
    const sw_meta_entry *sealed = sw_trace_meta_find(t, "events"), *dropped = sw_trace_meta_find(t, "dropped");
    if (t->dmg_total && t->complete && sealed && dropped && sealed->u >= dropped->u) {
        uint64_t read = 0;
        for (size_t i = 0; i < t->nthreads; i++)
            read += t->threads[i].info.task ? 0 : t->threads[i].info.events;
        if (read < sealed->u - dropped->u) {
            t->lost_events = sealed->u - dropped->u - read;
            t->lost_at_least = dropped->u != 0;
        }
    }
    describe(t);
    return SW_OK;
}

/* With damage, the keys of the time base that no intact META or END chunk
 * gave, and what times are then; "" when nothing is missing (or the file
 * is intact: a file written without them has no such keys). */
static void timebase_note(const sw_trace *t, char *note, size_t len)
{
    static const char *const keys[] = {"time_shift", "tick0", "clock_hz"};
    size_t n = 0;
    note[0] = 0;
    for (int i = 0; t->dmg_total && i < 3 && n < len; i++) {
        int have = sw_trace_meta_find(t, keys[i]) || (i == 2 && sw_trace_meta_find(t, "clock_hz_refined"));
        if (!have)
            n += (size_t)snprintf(note + n, len - n, "%s%s", n ? ", " : "the time base lost ", keys[i]);
    }
    if (n && n < len)
        snprintf(note + n, len - n, " with its META chunk: event times are estimates");
}

int sw_trace_open_mem(const uint8_t *data, size_t len, sw_trace **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_trace *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    t->fd = -1;
    t->mem = malloc(len ? len : 1);
    if (!t->mem) {
        free(t);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    if (len)
        memcpy(t->mem, data, len);
    sw_source_mem(&t->src, t->mem, len);
    err[0] = 0;
    int rc = load(t, err, errlen);
    if (rc) {
        sw_trace_free(t);
        return rc;
    }
    *out = t;
    return SW_OK;
}

int sw_trace_open_file(const char *path, sw_trace **out, char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return SW_EIO;
    }
    sw_trace *t = calloc(1, sizeof *t);
    if (!t) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    t->fd = fd;
    err[0] = 0;
    int rc = sw_source_fd(&t->src, fd);
    if (rc)
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
    else
        rc = load(t, err, errlen);
    if (rc) {
        sw_trace_free(t);
        return rc;
    }
    *out = t;
    return SW_OK;
}

void sw_trace_free(sw_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nmeta; i++) {
        free((char *)t->meta[i].key);
        free((char *)t->meta[i].s);
    }
    free(t->meta);
    for (size_t i = 0; i < t->nmetas; i++)
        free(t->metas[i].data);
    free(t->metas);
    for (size_t i = 0; i < t->nthreads; i++) {
        free(t->threads[i].name);
        free(t->threads[i].chunks);
        free(t->threads[i].task_frames);
    }
    free(t->threads);
    for (uint32_t i = 0; i < t->code_limit; i++)
        free_code(t->codes[i]);
    free(t->codes);
    for (uint32_t i = 0; i < t->strings.n; i++)
        free(t->strings.s[i]);
    free(t->strings.s);
    sw_side_streams_free(t);
    free(t->dmg);
    free(t->mem);
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}

const char *sw_trace_damage(const sw_trace *t) { return t->damage; }
size_t sw_trace_damage_count(const sw_trace *t) { return t->ndmg; }
const sw_damage *sw_trace_damage_range(const sw_trace *t, size_t i) { return i < t->ndmg ? &t->dmg[i] : NULL; }
uint64_t sw_trace_damage_total(const sw_trace *t) { return t->dmg_total; }
uint64_t sw_trace_unknown_chunks(const sw_trace *t) { return t->unknown_chunks; }
int sw_trace_complete(const sw_trace *t) { return t->complete; }
size_t sw_trace_meta_count(const sw_trace *t) { return t->nmeta; }
const sw_meta_entry *sw_trace_meta(const sw_trace *t, size_t i) { return i < t->nmeta ? &t->meta[i] : NULL; }

const sw_meta_entry *sw_trace_meta_find(const sw_trace *t, const char *key)
{
    /* Later entries win (an END value updates a META one). */
    for (size_t i = t->nmeta; i-- > 0;)
        if (strcmp(t->meta[i].key, key) == 0)
            return &t->meta[i];
    return NULL;
}

size_t sw_trace_thread_count(const sw_trace *t) { return t->nthreads; }
const sw_thread_info *sw_trace_thread(const sw_trace *t, size_t i) { return i < t->nthreads ? &t->threads[i].info : NULL; }
uint32_t sw_trace_code_limit(const sw_trace *t) { return t->code_limit; }
const sw_code_info *sw_trace_code(const sw_trace *t, uint32_t id) { return id < t->code_limit ? t->codes[id] : NULL; }

int64_t sw_trace_units_to_ns(const sw_trace *t, uint64_t units)
{
    uint64_t ticks = units << t->shift;
    double d = (double)(int64_t)(ticks - t->tick0) * t->ns_per_tick;
    /* Times are bounded to +-2^61 ns (73 years): the conversion of d is
     * then defined, and differences of times cannot overflow an int64. */
    const double lim = 2305843009213693952.0;
    if (!(d < lim))
        d = lim;
    else if (d < -lim)
        d = -lim;
    return (int64_t)d;
}

int64_t sw_trace_end_ns(const sw_trace *t) { return t->end_ns; }