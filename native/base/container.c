/*
 * container.c - the file header, chunk framing, key/value lists and the
 * chunk iterator with its damage records and resynchronisation (see
 * container.h and docs/format.md, "The container").
 */
#define _GNU_SOURCE
#include "container.h"

#include "crc32.h"
#include "cursor.h"
#include "varint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- writing ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void sw_file_header_put(uint8_t out[SW_FILE_HEADER_LEN], const char *magic, unsigned major, unsigned minor)
{
    memset(out, 0, SW_FILE_HEADER_LEN);
    memcpy(out, magic, SW_MAGIC_LEN);
    out[8] = (uint8_t)major;
    out[9] = (uint8_t)(major >> 8);
    out[10] = (uint8_t)minor;
    out[11] = (uint8_t)(minor >> 8);
}

static void chunk_header(uint8_t out[SW_CHUNK_HEADER_LEN], unsigned type, size_t len, uint32_t crc)
{
    out[0] = (uint8_t)type;
    out[1] = out[2] = out[3] = 0;
    put_u32(out + 4, (uint32_t)len);
    put_u32(out + 8, crc);
}

int sw_chunk_header_put(uint8_t out[SW_CHUNK_HEADER_LEN], unsigned type, const struct iovec *parts, int nparts)
{
    size_t len = 0;
    for (int i = 0; i < nparts; i++) {
        if (parts[i].iov_len > SW_CHUNK_MAX - len)
            return SW_EARG;
        len += parts[i].iov_len;
    }
    uint32_t crc = 0;
    for (int i = 0; i < nparts; i++)
        crc = sw_crc32(crc, parts[i].iov_base, parts[i].iov_len);
    chunk_header(out, type, len, crc);
    return SW_OK;
}

size_t sw_chunk_begin(sw_bytes *b, unsigned type)
{
    size_t at = b->len;
    uint8_t hdr[SW_CHUNK_HEADER_LEN] = {(uint8_t)type};
    sw_bytes_put(b, hdr, sizeof hdr);
    return at;
}

int sw_chunk_end(sw_bytes *b, size_t at)
{
    if (b->failed)
        return SW_ENOMEM;
    size_t plen = b->len - at - SW_CHUNK_HEADER_LEN;
    if (plen > SW_CHUNK_MAX)
        return SW_EARG;
    uint8_t *h = b->data + at;
    chunk_header(h, h[0], plen, sw_crc32(0, h + SW_CHUNK_HEADER_LEN, plen));
    return SW_OK;
}

/* Appends the key and the value type of an entry. */
static void kv_key(sw_bytes *b, const char *key, unsigned type)
{
    sw_bytes_str(b, key);
    sw_bytes_u8(b, (uint8_t)type);
}

int sw_kv_uint(sw_bytes *b, const char *key, uint64_t v)
{
    kv_key(b, key, SW_VAL_UINT);
    sw_bytes_varint(b, v);
    return b->failed ? SW_ENOMEM : SW_OK;
}

int sw_kv_sint(sw_bytes *b, const char *key, int64_t v)
{
    kv_key(b, key, SW_VAL_SINT);
    sw_bytes_varint(b, sw_zigzag(v));
    return b->failed ? SW_ENOMEM : SW_OK;
}

int sw_kv_str(sw_bytes *b, const char *key, const char *v)
{
    kv_key(b, key, SW_VAL_BYTES);
    sw_bytes_str(b, v);
    return b->failed ? SW_ENOMEM : SW_OK;
}

int sw_kv_f64(sw_bytes *b, const char *key, double v)
{
    kv_key(b, key, SW_VAL_F64);
    sw_bytes_f64(b, v);
    return b->failed ? SW_ENOMEM : SW_OK;
}

int sw_kv_next(const uint8_t **p, const uint8_t *end, sw_kv *out)
{
    sw_cursor c = {*p, end};
    if (c.p >= c.end)
        return 0;
    memset(out, 0, sizeof *out);
    uint8_t type;
    int rc = sw_cur_str(&c, &out->key, &out->key_len);
    if (rc == SW_OK)
        rc = sw_cur_u8(&c, &type);
    if (rc)
        return rc;
    out->type = type;
    switch (type) {
    case SW_VAL_UINT:
        rc = sw_cur_varint(&c, &out->u);
        out->i = (int64_t)out->u;
        out->f = (double)out->u;
        break;
    case SW_VAL_SINT:
        rc = sw_cur_varint(&c, &out->u);
        out->i = sw_unzigzag(out->u);
        out->f = (double)out->i;
        break;
    case SW_VAL_BYTES: rc = sw_cur_str(&c, &out->s, &out->slen); break;
    case SW_VAL_F64: rc = sw_cur_f64(&c, &out->f); break;
    default: rc = SW_EFORMAT;
    }
    if (rc)
        return rc;
    *p = c.p;
    return 1;
}

/* ---- byte sources ---- */

void sw_source_mem(sw_source *s, const uint8_t *data, size_t len)
{
    s->mem = data;
    s->fd = -1;
    s->size = len;
}

int sw_source_fd(sw_source *s, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return SW_EIO;
    s->mem = NULL;
    s->fd = fd;
    s->size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    return SW_OK;
}

/* A file source's window: big enough that sequential reading of small
 * chunks takes one pread per window, small enough to bound memory. */
#define WINDOW (1u << 20)

static int pread_all(int fd, uint8_t *dst, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t k = pread(fd, dst, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return SW_EIO;   /* an error, or the file shrank */
        dst += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return SW_OK;
}

int sw_source_read(const sw_source *s, uint64_t off, size_t n, sw_bytes *buf, const uint8_t **out)
{
    *out = NULL;
    if (off > s->size || n > s->size - off)
        return SW_EFORMAT;
    if (s->mem) {
        *out = s->mem + off;
        return SW_OK;
    }
    buf->len = 0;
    if (sw_bytes_reserve(buf, n ? n : 1) != SW_OK)
        return SW_ENOMEM;
    int rc = pread_all(s->fd, buf->data, n, off);
    if (rc == SW_OK) {
        buf->len = n;
        *out = buf->data;
    }
    return rc;
}

/* n bytes of the file at off (off + n <= size): a pointer valid until the
 * next view, or NULL with *rc set (SW_EIO, SW_ENOMEM). For a file source,
 * ranges up to WINDOW come from the window (reloaded at off when they are
 * not in it), longer ones are read into the payload buffer. */
static const uint8_t *view(sw_chunks *it, uint64_t off, size_t n, int *rc)
{
    if (it->src.mem)
        return it->src.mem + off;
    if (off >= it->win_off && off - it->win_off + n <= it->win_len)
        return it->win + (off - it->win_off);
    if (n <= WINDOW) {
        if (!it->win && !(it->win = malloc(WINDOW))) {
            *rc = SW_ENOMEM;
            return NULL;
        }
        uint64_t left = it->src.size - off;
        size_t len = left < WINDOW ? (size_t)left : WINDOW;
        it->win_len = 0;
        if ((*rc = pread_all(it->src.fd, it->win, len, off)) != SW_OK)
            return NULL;
        it->win_off = off;
        it->win_len = len;
        return it->win;
    }
    if (n > it->buf_cap) {
        uint8_t *b = realloc(it->buf, n);
        if (!b) {
            *rc = SW_ENOMEM;
            return NULL;
        }
        it->buf = b;
        it->buf_cap = n;
    }
    if ((*rc = pread_all(it->src.fd, it->buf, n, off)) != SW_OK)
        return NULL;
    return it->buf;
}

/* ---- damage records ---- */

void sw_damage_add(sw_damage *list, size_t *n, uint64_t *total, const sw_damage *d)
{
    if (*n < SW_DAMAGE_KEEP)
        list[(*n)++] = *d;
    (*total)++;
}

static void add_damage(sw_chunks *it, unsigned kind, uint64_t off, uint64_t len, uint64_t chunks, int to_end,
                       const char *what)
{
    sw_damage d;
    memset(&d, 0, sizeof d);
    d.off = off;
    d.len = len;
    d.chunks = chunks;
    d.kind = kind;
    d.to_end = to_end;
    snprintf(d.what, sizeof d.what, "%s", what);
    if (!it->damage) {
        it->damage = calloc(SW_DAMAGE_KEEP, sizeof *it->damage);
        if (!it->damage)
            it->ndamage = SW_DAMAGE_KEEP;   /* out of memory: counted only */
    }
    if (it->damage)
        sw_damage_add(it->damage, &it->ndamage, &it->damage_total, &d);
    else
        it->damage_total++;
    it->damaged_bytes += len;
}

void sw_chunks_malformed(sw_chunks *it, const sw_chunk *c, const char *what)
{
    add_damage(it, SW_DAMAGE_MALFORMED, c->off, SW_CHUNK_HEADER_LEN + (uint64_t)c->len, 1, 0, what);
}

void sw_damage_describe(const sw_damage *d, size_t n, uint64_t total, char *out, size_t outlen)
{
    if (!outlen)
        return;
    out[0] = 0;
    const size_t tail = 48;   /* room kept for "; ... and K more" */
    size_t at = 0, shown = 0;
    if (total > 1 && outlen > tail)
        at = (size_t)snprintf(out, outlen - tail, "%" PRIu64 " damaged ranges: ", total);
    for (size_t i = 0; i < n; i++) {
        char one[256];
        int k = snprintf(one, sizeof one, "%s%.*s at offset %" PRIu64, i ? "; " : "", (int)sizeof d[i].what,
                         d[i].what, d[i].off);
        if (k < 0 || k > 160)
            k = 160;   /* (cannot happen: what is at most 111 bytes) */
        if (!d[i].to_end && d[i].kind != SW_DAMAGE_MALFORMED && d[i].kind != SW_DAMAGE_TYPE) {
            if (d[i].chunks)
                k += snprintf(one + k, sizeof one - (size_t)k, " (%" PRIu64 " bytes, %" PRIu64 " chunk%s, skipped)",
                              d[i].len, d[i].chunks, d[i].chunks == 1 ? "" : "s");
            else
                k += snprintf(one + k, sizeof one - (size_t)k, " (%" PRIu64 " bytes skipped)", d[i].len);
        }
        size_t need = at + (size_t)k + (i + 1 < total ? tail : 0);
        if (need >= outlen)
            break;
        memcpy(out + at, one, (size_t)k + 1);
        at += (size_t)k;
        shown++;
    }
    if (shown < total && at < outlen)
        snprintf(out + at, outlen - at, "%s... and %" PRIu64 " more", shown ? "; " : "", total - shown);
}

/* ---- the iterator ---- */

int sw_chunks_open(sw_chunks *it, const sw_container_kind *kind, const sw_source *src, char *err, size_t errlen)
{
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->src = *src;
    it->off = SW_FILE_HEADER_LEN;
    /* Resynchronisation checks candidate payloads against their CRC; a
     * file made to hold many plausible candidates could make that
     * quadratic, so it gets a budget linear in the file's size. */
    it->crc_budget = 8 * it->src.size + 4 * (uint64_t)SW_CHUNK_MAX;
    if (it->src.size == 0) {
        snprintf(err, errlen, "empty file (no magic number of a stackwatch %s)", kind->what);
        return SW_EFORMAT;
    }
    int rc = SW_OK;
    uint64_t n = it->src.size < SW_FILE_HEADER_LEN ? it->src.size : SW_FILE_HEADER_LEN;
    const uint8_t *h = view(it, 0, (size_t)n, &rc);
    if (!h) {
        snprintf(err, errlen, rc == SW_ENOMEM ? "out of memory" : "cannot read: %s", strerror(errno));
        return rc;
    }
    if (n < SW_MAGIC_LEN || memcmp(h, kind->magic, SW_MAGIC_LEN) != 0) {
        snprintf(err, errlen, "not a stackwatch %s (bad magic number)", kind->what);
        return SW_EFORMAT;
    }
    if (n < SW_FILE_HEADER_LEN) {
        snprintf(err, errlen, "not a readable stackwatch %s (the file ends inside its header)", kind->what);
        return SW_EFORMAT;
    }
    it->major = h[8] | (unsigned)h[9] << 8;
    it->minor = h[10] | (unsigned)h[11] << 8;
    if (it->major != kind->major) {
        snprintf(err, errlen, "%s format version %u is not supported (this reader reads version %u)", kind->what,
                 it->major, kind->major);
        return SW_EVERSION;
    }
    return SW_OK;
}

void sw_chunks_close(sw_chunks *it)
{
    free(it->damage);
    free(it->win);
    free(it->buf);
    it->damage = NULL;
    it->win = it->buf = NULL;
    it->ndamage = 0;
}

/* The cheap tests of a candidate header: type 1 to 63, flags and reserved
 * 0, a length's top byte that SW_CHUNK_MAX allows. */
static int plausible(const uint8_t *h)
{
    return (unsigned)(h[0] - 1) < 63 && (h[1] | h[2] | h[3]) == 0 && h[7] <= (SW_CHUNK_MAX >> 24);
}

/* 1 if an intact chunk starts at off: a header as every version 1 writer
 * writes them (type 1 to 63, flags and reserved 0) with a payload of 1 to
 * SW_CHUNK_MAX bytes that fits in the file and matches the checksum; 0 if
 * not; a negative code if the file cannot be read. Only a chunk that
 * carries something can be found this way (an empty payload's checksum is
 * 0, which random bytes match too easily). */
static int candidate(sw_chunks *it, uint64_t off, const uint8_t *h)
{
    uint64_t len = get_u32(h + 4);
    if (!plausible(h) || len == 0 || len > SW_CHUNK_MAX || len > it->src.size - off - SW_CHUNK_HEADER_LEN)
        return 0;
    if (it->crc_budget < len) {
        it->gave_up = 1;
        return 0;
    }
    it->crc_budget -= len;
    uint32_t crc = get_u32(h + 8);
    int rc = SW_OK;
    const uint8_t *p = view(it, off + SW_CHUNK_HEADER_LEN, (size_t)len, &rc);
    if (!p)
        return rc;
    return sw_crc32(0, p, (size_t)len) == crc;
}

/* The offset of the first intact chunk at or after `from` (see
 * candidate()), or the file's size if there is none. Negative: the file
 * cannot be read. */
static int64_t resync(sw_chunks *it, uint64_t from)
{
    uint64_t size = it->src.size, q = from;
    while (q + SW_CHUNK_HEADER_LEN <= size) {
        /* A window of headers at a time (memory: all the rest). */
        int rc = SW_OK;
        uint64_t base = q, span = size - q;
        if (!it->src.mem && span > WINDOW)
            span = WINDOW;
        const uint8_t *w = view(it, base, (size_t)span, &rc);
        if (!w)
            return rc;
        uint64_t last = base + span - SW_CHUNK_HEADER_LEN;
        for (; q <= last; q++) {
            const uint8_t *hp = w + (q - base);
            if (!plausible(hp))
                continue;
            uint8_t h[SW_CHUNK_HEADER_LEN];
            memcpy(h, hp, sizeof h);
            int ok = candidate(it, q, h);
            if (ok < 0)
                return ok;
            if (ok)
                return (int64_t)q;
            if (!it->src.mem) {
                q++;
                break;   /* candidate() may have moved the window: view again */
            }
        }
    }
    return (int64_t)size;
}

/* How many chunks lie in [from, to) when their lengths chain from `from`
 * exactly to `to`, else 0. */
static uint64_t chained(sw_chunks *it, uint64_t from, uint64_t to)
{
    uint64_t n = 0;
    while (from + SW_CHUNK_HEADER_LEN <= to) {
        int rc = SW_OK;
        const uint8_t *h = view(it, from, SW_CHUNK_HEADER_LEN, &rc);
        if (!h)
            return 0;
        from += SW_CHUNK_HEADER_LEN + (uint64_t)get_u32(h + 4);
        n++;
    }
    return from == to ? n : 0;
}

/* Records the damaged range starting at the chunk header at `off` and
 * moves past it to the next intact chunk (or the end). */
static int skip_damage(sw_chunks *it, uint64_t off, unsigned kind, const char *what, const char *what_at_end)
{
    it->gave_up = 0;
    int64_t q = resync(it, off + 1);
    if (q < 0)
        return (int)q;
    uint64_t size = it->src.size, next = (uint64_t)q;
    int to_end = next >= size;
    uint64_t chunks = to_end ? 0 : chained(it, off, next);
    char text[112];
    snprintf(text, sizeof text, "%s%s", to_end && what_at_end ? what_at_end : what,
             it->gave_up ? " (the search for the next intact chunk was cut short)" : "");
    add_damage(it, to_end && what_at_end ? SW_DAMAGE_CUT : kind, off, next - off, chunks, to_end, text);
    it->off = next;
    return SW_OK;
}

int sw_chunks_next(sw_chunks *it, sw_chunk *c)
{
    const sw_container_kind *k = it->kind;
    for (;;) {
        uint64_t off = it->off, size = it->src.size;
        if (off >= size)
            return 0;
        if (size - off < SW_CHUNK_HEADER_LEN) {
            add_damage(it, SW_DAMAGE_CUT, off, size - off, 0, 1, "truncated: the file ends inside a chunk header");
            it->off = size;
            return 0;
        }
        int rc = SW_OK;
        const uint8_t *hp = view(it, off, SW_CHUNK_HEADER_LEN, &rc);
        if (!hp)
            return rc;
        uint8_t h[SW_CHUNK_HEADER_LEN];
        memcpy(h, hp, sizeof h);
        unsigned type = h[0];
        uint64_t len = get_u32(h + 4);
        if (len > SW_CHUNK_MAX || len > size - off - SW_CHUNK_HEADER_LEN) {
            /* A chunk cut short by the end of the file (a writer that was
             * killed), or a damaged length if an intact chunk follows. */
            if ((rc = skip_damage(it, off, SW_DAMAGE_LENGTH, "corrupted: a chunk header with an impossible length",
                                  "truncated: a chunk is longer than the rest of the file")))
                return rc;
            continue;
        }
        const uint8_t *p = view(it, off + SW_CHUNK_HEADER_LEN, (size_t)len, &rc);
        if (!p)
            return rc;
        if (sw_crc32(0, p, (size_t)len) != get_u32(h + 8)) {
            if ((rc = skip_damage(it, off, SW_DAMAGE_CRC, "corrupted: checksum mismatch in the chunk", NULL)))
                return rc;
            continue;
        }
        it->off = off + SW_CHUNK_HEADER_LEN + len;
        if (type >= 64 || !(k->known_types >> type & 1)) {
            if (it->minor > k->minor) {
                /* A newer minor version's chunk: skipped, counted. */
                if (!it->unknown++)
                    it->unknown_type = type;
            } else {
                char what[112];
                snprintf(what, sizeof what,
                         "corrupted: a chunk of type %u, which %s format %u.%u does not have (a damaged type byte)",
                         type, k->what, it->major, it->minor);
                add_damage(it, SW_DAMAGE_TYPE, off, SW_CHUNK_HEADER_LEN + len, 1, 0, what);
            }
            continue;
        }
        /* A file source's payload must survive until the next call: the
         * window may hold it (views of headers do not move the window
         * while they are inside it, and the next header view comes in the
         * next call). */
        c->type = type;
        c->off = off;
        c->len = (uint32_t)len;
        c->payload = p;
        it->chunks++;
        return 1;
    }
}
