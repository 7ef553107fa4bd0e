/*
 * codecache.c - code objects by address (see codecache.h): individually
 * allocated entries (they never move), listed in an array that a
 * base/hashtab.h table indexes by address.
 */
#include "codecache.h"
#include "linetable.h"
#include "pystr.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    sw_sample_code info;
    uint64_t name_ptr, qualname_ptr, filename_ptr;   /* as read from the code object */
    uint64_t checked_round;  /* sampling round it was last confirmed in */
    uint32_t stamp;          /* sw_codecache_stamp's, 0 if none */
    uint32_t frame_words;    /* its frames' size (sw_codecache_frame_words), 0 if not told */
    uint32_t filename_span;  /* bytes of the filename's str object, characters included (0: not compact) */
    int settled;             /* its code object seen alive and unchanged after its strings were read */
    char *strings;           /* name NUL filename NUL */
    uint64_t linetable_ptr;  /* co_lnotab / co_linetable as read (0 without lines) */
    sw_linetable lines;      /* decoded on first use (lines_state 1) */
    int lines_state;         /* 0: not read yet, 1: decoded, -1: could not be read */
    unsigned char *ops;      /* 3.11/3.12: its instructions, read on first use (ops_state 1) ... */
    uint32_t ops_len;        /* ... so many bytes */
    int ops_state;           /* 0: not read yet, 1: read, -1: could not be read */
} entry;

/* Instructions read for sw_codecache_returns_at: at most this many bytes. */
#define OPS_MAX_BYTES (64u * 1024u)

struct sw_codecache {
    entry **v;               /* the entries, in order of creation */
    size_t n, cap;
    sw_hashtab index;        /* hash of a code object's address -> its position in v */
    uint32_t max;
    uint64_t hits, misses;
};

sw_codecache *sw_codecache_new(uint32_t max_entries)
{
    sw_codecache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->max = max_entries ? max_entries : 1;
    if (sw_hashtab_reserve(&c->index, 512) != SW_OK) {
        free(c);
        return NULL;
    }
    return c;
}

static void clear(sw_codecache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        sw_linetable_free(&c->v[i]->lines);
        free(c->v[i]->strings);
        free(c->v[i]->ops);
        free(c->v[i]);
    }
    c->n = 0;
    sw_hashtab_clear(&c->index);
}

void sw_codecache_free(sw_codecache *c)
{
    if (!c)
        return;
    clear(c);
    free(c->v);
    sw_hashtab_free(&c->index);
    free(c);
}

int sw_codecache_trim(sw_codecache *c)
{
    if (c->n <= c->max)
        return 0;
    clear(c);
    return 1;
}

static uint64_t ptr_at(const unsigned char *hdr, uint32_t off)
{
    uint64_t v;
    memcpy(&v, hdr + off, sizeof v);
    return v;
}

/* (Re)reads the strings of e from the pointers just read. */
static int fill(entry *e, sw_mem *m, const sw_py_layout *l, uint64_t name, uint64_t qualname, uint64_t filename,
                int32_t line, uint64_t linetable, uint32_t frame_words)
{
    char nbuf[SW_STR_BUF], fbuf[SW_STR_BUF];
    long nl = sw_pystr_read(m, l, qualname, nbuf);
    if (nl < 0 && qualname != name)
        nl = sw_pystr_read(m, l, name, nbuf);
    uint32_t span = 0;
    long fl = nl < 0 ? -1 : sw_pystr_read_span(m, l, filename, fbuf, &span);
    if (nl < 0 || fl < 0)
        return SW_EIO;
    char *s = malloc((size_t)nl + (size_t)fl + 2);
    if (!s)
        return SW_ENOMEM;
    memcpy(s, nbuf, (size_t)nl + 1);
    memcpy(s + nl + 1, fbuf, (size_t)fl + 1);
    free(e->strings);
    e->strings = s;
    e->info.name = s;
    e->info.name_len = (uint32_t)nl;
    e->info.filename = s + nl + 1;
    e->info.filename_len = (uint32_t)fl;
    e->info.firstlineno = line;
    e->info.sink_id = SW_NO_ID;
    e->name_ptr = name;
    e->qualname_ptr = qualname;
    e->filename_ptr = filename;
    e->linetable_ptr = linetable;
    e->frame_words = frame_words;
    e->filename_span = span;
    e->settled = 0;   /* (until sw_codecache_settle) */
    e->stamp = 0;
    sw_linetable_free(&e->lines);
    e->lines_state = 0;
    free(e->ops);
    e->ops = NULL;
    e->ops_len = 0;
    e->ops_state = 0;
    return SW_OK;
}

static entry *find(const sw_codecache *c, uint64_t addr)
{
    uint64_t h = sw_hash_u64(addr);
    uint32_t pos;
    for (uint32_t i = sw_hashtab_first(&c->index, h, &pos); i != SW_HT_NONE; i = sw_hashtab_next(&c->index, h, &pos))
        if (c->v[i]->info.addr == addr)
            return c->v[i];
    return NULL;
}

sw_sample_code *sw_codecache_find(sw_codecache *c, uint64_t addr)
{
    entry *e = find(c, addr);
    return e ? &e->info : NULL;
}

void sw_codecache_distrust(sw_codecache *c, uint64_t addr)
{
    entry *e = find(c, addr);
    if (e)
        e->name_ptr = e->qualname_ptr = e->filename_ptr = 0;   /* no header confirms it: read again */
    if (e)
        e->stamp = e->settled = 0;   /* (nor the counter, nor its age) */
}

sw_sample_code *sw_codecache_fresh(sw_codecache *c, uint64_t addr, uint64_t round, uint32_t ttl)
{
    entry *e = find(c, addr);
    return e && sw_codecache_is_fresh(c, &e->info, round, ttl) ? &e->info : NULL;
}

int sw_codecache_is_fresh(sw_codecache *c, sw_sample_code *info, uint64_t round, uint32_t ttl)
{
    const entry *e = (const entry *)info;   /* (info is an entry's first member) */
    if (!e->settled || round - e->checked_round > ttl)
        return 0;
    c->hits++;
    return 1;
}

void sw_codecache_stamp(sw_sample_code *info, uint32_t stamp)
{
    ((entry *)info)->stamp = stamp;   /* (info is an entry's first member) */
}

uint32_t sw_codecache_frame_words(const sw_sample_code *info)
{
    return ((const entry *)info)->frame_words;
}

sw_sample_code *sw_codecache_stamped(sw_codecache *c, uint64_t addr, uint32_t stamp)
{
    entry *e = stamp ? find(c, addr) : NULL;
    if (!e || !e->settled || e->stamp != stamp)
        return NULL;
    c->hits++;
    return &e->info;
}

/* What an entry is confirmed against: a code object's header as read. */
typedef struct header {
    uint64_t name, qualname, filename, linetable;
    int32_t line;
    uint32_t frame_words;
} header;

#define MAX_FRAME_WORDS (1u << 24)   /* bound of a plausible frame size */

/* hdr's fields; 0 if hdr is not a code object's. */
static int read_header(const sw_py_layout *l, const unsigned char *hdr, header *h)
{
    if (l->code_type && ptr_at(hdr, l->ob_type) != l->code_type)
        return 0;
    h->frame_words = 0;
    if (l->code_nlocalsplus != SW_NO_OFFSET) {
        int32_t nlocalsplus, stacksize;
        memcpy(&nlocalsplus, hdr + l->code_nlocalsplus, sizeof nlocalsplus);
        memcpy(&stacksize, hdr + l->code_stacksize, sizeof stacksize);
        if (nlocalsplus < 0 || stacksize < 0 || (uint64_t)nlocalsplus + (uint64_t)stacksize >= MAX_FRAME_WORDS)
            return 0;
        h->frame_words = l->frame_specials + (uint32_t)nlocalsplus + (uint32_t)stacksize;
    }
    h->name = ptr_at(hdr, l->code_name);
    h->qualname = ptr_at(hdr, l->code_qualname);
    h->filename = ptr_at(hdr, l->code_filename);
    memcpy(&h->line, hdr + l->code_firstlineno, sizeof h->line);
    h->linetable = l->linetable_kind ? ptr_at(hdr, l->code_linetable) : 0;
    return 1;
}

static int confirms(const entry *e, const header *h)
{
    return e->name_ptr == h->name && e->qualname_ptr == h->qualname && e->filename_ptr == h->filename &&
           e->info.firstlineno == h->line && e->linetable_ptr == h->linetable && e->frame_words == h->frame_words;
}

int sw_codecache_known(const sw_codecache *c, const sw_py_layout *l, uint64_t addr, const unsigned char *hdr)
{
    header h;
    const entry *e = find(c, addr);
    return e && e->settled && read_header(l, hdr, &h) && confirms(e, &h);
}

int sw_codecache_settled(const sw_sample_code *info)
{
    return ((const entry *)info)->settled;
}

/* Highest reference count taken for a live object's (3.12+'s immortal
 * ones: 2^32 - 1). A freed object's first word is the allocator's: 0 or
 * a pointer (pymalloc's free list), or (glibc) a pointer, its type word
 * then the heap's key. */
#define MAX_REFCNT (1ull << 40)

int sw_codecache_settle(sw_codecache *c, const sw_py_layout *l, sw_sample_code *info, const unsigned char *hdr)
{
    entry *e = (entry *)info;   /* (info is an entry's first member) */
    header h;
    uint64_t refs = ptr_at(hdr, l->ob_refcnt);
    if (refs == 0 || refs >= MAX_REFCNT || !read_header(l, hdr, &h) || !confirms(e, &h)) {
        sw_codecache_distrust(c, info->addr);
        return 0;
    }
    e->settled = 1;
    return 1;
}

uint64_t sw_codecache_filename_at(const sw_sample_code *info, uint32_t *span)
{
    const entry *e = (const entry *)info;
    *span = e->filename_span;
    return e->filename_span ? e->filename_ptr : 0;
}

int sw_codecache_check_filename(sw_codecache *c, sw_mem *m, const sw_py_layout *l, sw_sample_code *info,
                                const unsigned char *obj, size_t got)
{
    entry *e = (entry *)info;
    if (e->filename_span && sw_pystr_same(l, e->filename_ptr, obj, got, info->filename, info->filename_len))
        return 1;
    /* Another str at the pointer, the code object's too (its header is
     * as before, pointer for pointer): a code object freed and another
     * made at its address, its strings where the old one's were. */
    c->misses++;
    e->stamp = 0;
    if (fill(e, m, l, e->name_ptr, e->qualname_ptr, e->filename_ptr, info->firstlineno, e->linetable_ptr,
             e->frame_words) != SW_OK) {
        sw_codecache_distrust(c, info->addr);
        return -1;
    }
    return 0;
}

sw_sample_code *sw_codecache_get(sw_codecache *c, sw_mem *m, const sw_py_layout *l, uint64_t addr,
                               const unsigned char *hdr, uint64_t round)
{
    return sw_codecache_get_known(c, m, l, NULL, addr, hdr, round);
}

sw_sample_code *sw_codecache_get_known(sw_codecache *c, sw_mem *m, const sw_py_layout *l, sw_sample_code *known,
                                     uint64_t addr, const unsigned char *hdr, uint64_t round)
{
    header h;
    if (!read_header(l, hdr, &h))
        return NULL;
    uint64_t name = h.name, qualname = h.qualname, filename = h.filename, linetable = h.linetable;
    int32_t line = h.line;
    uint32_t frame_words = h.frame_words;
    entry *e = known ? (entry *)known : find(c, addr);
    if (e) {
        if (confirms(e, &h)) {
            c->hits++;
            e->checked_round = round;
            return &e->info;
        }
        /* Another code object now lives at this address (its stamp is
         * not the entry's, even if its strings cannot be read). */
        c->misses++;
        e->stamp = 0;
        if (fill(e, m, l, name, qualname, filename, line, linetable, frame_words) != SW_OK)
            return NULL;
        e->checked_round = round;
        return &e->info;
    }
    c->misses++;
    entry **v = sw_array_grow(c->v, &c->cap, c->n + 1, sizeof *v, 256);
    if (!v || c->n >= SW_HT_NONE)
        return NULL;
    c->v = v;
    e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->info.addr = addr;
    e->checked_round = round;
    if (fill(e, m, l, name, qualname, filename, line, linetable, frame_words) != SW_OK ||
        sw_hashtab_add(&c->index, sw_hash_u64(addr), (uint32_t)c->n) != SW_OK) {
        sw_linetable_free(&e->lines);
        free(e->strings);
        free(e->ops);
        free(e);
        return NULL;
    }
    c->v[c->n++] = e;
    return &e->info;
}

/* Reads and decodes e's line table: one read of the bytes object's header,
 * one of its data (at most SW_LINETABLE_MAX_BYTES). */
static void load_lines(entry *e, sw_mem *m, const sw_py_layout *l)
{
    unsigned char hdr[64];
    int64_t size;
    e->lines_state = -1;
    if (!e->linetable_ptr || sw_mem_read(m, e->linetable_ptr, hdr, l->bytes_size + sizeof size) != SW_OK)
        return;
    memcpy(&size, hdr + l->bytes_size, sizeof size);
    if (size < 0 || size > (int64_t)SW_LINETABLE_MAX_BYTES)
        return;
    unsigned char *buf = malloc(size ? (size_t)size : 1);
    if (!buf)
        return;
    if (sw_mem_read(m, e->linetable_ptr + l->bytes_data, buf, (size_t)size) == SW_OK &&
        sw_linetable_decode((int)l->linetable_kind, buf, (size_t)size, e->info.firstlineno, &e->lines) == SW_OK)
        e->lines_state = 1;
    free(buf);
}

void sw_codecache_read_lines(sw_sample_code *info, sw_mem *m, const sw_py_layout *l)
{
    entry *e = (entry *)info;
    if (l->linetable_kind && e->lines_state == 0)
        load_lines(e, m, l);
}

int32_t sw_codecache_line(sw_codecache *c, sw_sample_code *info, sw_mem *m, const sw_py_layout *l, uint64_t instr)
{
    (void)c;
    entry *e = (entry *)info;    /* info is an entry's first member */
    if (!l->linetable_kind)
        return 0;
    if (e->lines_state == 0)
        load_lines(e, m, l);
    if (e->lines_state != 1)
        return 0;
    int64_t offset;
    if (l->frame_lasti != SW_NO_OFFSET) {
        offset = (int64_t)(int32_t)(uint32_t)instr * (int64_t)l->lasti_unit;
    } else {
        uint64_t base = info->addr + l->code_code;
        if (instr < base || instr - base > UINT32_MAX)
            return instr + 2 == base ? info->firstlineno : 0;   /* 3.11/3.12: before the first instruction */
        offset = (int64_t)(instr - base);
    }
    if (offset < 0)
        return info->firstlineno;   /* not started yet */
    if (offset > UINT32_MAX)
        return 0;
    int32_t line = sw_linetable_line(&e->lines, (uint32_t)offset);
    return line > 0 ? line : 0;
}

/* Reads e's instructions: its size in code units (ob_size, where a
 * tuple's is: PyVarObject's), then at most OPS_MAX_BYTES of them. */
static void load_ops(entry *e, sw_mem *m, const sw_py_layout *l)
{
    int64_t units;
    e->ops_state = -1;
    if (l->tuple_size == SW_NO_OFFSET || sw_mem_read(m, e->info.addr + l->tuple_size, &units, sizeof units) != SW_OK ||
        units <= 0 || units > (int64_t)(OPS_MAX_BYTES / 2))
        return;
    unsigned char *buf = malloc((size_t)units * 2);
    if (!buf)
        return;
    if (sw_mem_read(m, e->info.addr + l->code_code, buf, (size_t)units * 2) != SW_OK) {
        free(buf);
        return;
    }
    e->ops = buf;
    e->ops_len = (uint32_t)units * 2;
    e->ops_state = 1;
}

int sw_codecache_returns_at(sw_codecache *c, sw_sample_code *info, sw_mem *m, const sw_py_layout *l, uint64_t instr)
{
    (void)c;
    entry *e = (entry *)info;
    if (l->op_return_value == SW_NO_OFFSET || l->frame_lasti != SW_NO_OFFSET)
        return 0;
    uint64_t base = info->addr + l->code_code;
    if (instr < base || instr - base >= OPS_MAX_BYTES || (instr - base) % 2)
        return 0;
    if (e->ops_state == 0)
        load_ops(e, m, l);
    if (e->ops_state != 1 || instr - base >= e->ops_len)
        return 0;
    uint32_t op = e->ops[instr - base];
    return op == l->op_return_value || op == l->op_return_const || op == l->op_return_value_instrumented ||
           op == l->op_return_const_instrumented;
}

uint64_t sw_codecache_hits(const sw_codecache *c)
{
    return c->hits;
}

uint64_t sw_codecache_misses(const sw_codecache *c)
{
    return c->misses;
}
