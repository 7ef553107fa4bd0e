/*
 * exportcheck.h - validators for the exporters' output, shared by the unit
 * tests and the fuzz harness. Header-only; every parser here is bounded by
 * its input length and its nesting depth.
 *
 *  - ec_json_valid(): strict JSON syntax (RFC 8259, without UTF-8 checks).
 *  - ec_chrome(): Chrome trace events, one per line as export_chrome.c
 *    writes them: B/E balanced and never negative per tid, timestamps
 *    non-decreasing per tid (if check_ts).
 *  - ec_perfetto(): the output is a sequence of Trace.packet (field 1,
 *    length-delimited) messages whose fields all parse; slices begin/end
 *    balanced per track, every interned name is defined earlier on its
 *    sequence, every track is described before use, timestamps are
 *    non-decreasing per sequence (if check_ts).
 *
 * Each returns 1 if valid, else 0 with a reason in why[].
 */
#ifndef SW_EXPORTCHECK_H
#define SW_EXPORTCHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- JSON ---------------- */

typedef struct ec_json {
    const char *p, *end;
    int depth;
    char why[128];
} ec_json;

static inline int ec_json_fail(ec_json *j, const char *what)
{
    if (!j->why[0])
        snprintf(j->why, sizeof j->why, "%s at byte %ld", what, (long)(j->end - j->p));
    return 0;
}

static inline void ec_ws(ec_json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static inline int ec_json_value(ec_json *j);

static inline int ec_json_string(ec_json *j)
{
    if (j->p >= j->end || *j->p != '"')
        return ec_json_fail(j, "expected a string");
    j->p++;
    while (j->p < j->end) {
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"')
            return 1;
        if (c < 0x20)
            return ec_json_fail(j, "raw control character in a string");
        if (c == '\\') {
            if (j->p >= j->end)
                break;
            char e = *j->p++;
            if (e == 'u') {
                for (int k = 0; k < 4; k++) {
                    if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p) || !*j->p)
                        return ec_json_fail(j, "bad \\u escape");
                    j->p++;
                }
            } else if (!strchr("\"\\/bfnrt", e) || !e) {
                return ec_json_fail(j, "bad escape");
            }
        }
    }
    return ec_json_fail(j, "unterminated string");
}

static inline int ec_digits(ec_json *j)
{
    const char *s = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    return j->p > s;
}

static inline int ec_json_number(ec_json *j)
{
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (!ec_digits(j))
        return ec_json_fail(j, "bad number");
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!ec_digits(j))
            return ec_json_fail(j, "bad fraction");
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (!ec_digits(j))
            return ec_json_fail(j, "bad exponent");
    }
    return 1;
}

static inline int ec_json_word(ec_json *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return ec_json_fail(j, "unexpected character");
    j->p += n;
    return 1;
}

static inline int ec_json_value(ec_json *j)
{
    ec_ws(j);
    if (j->p >= j->end)
        return ec_json_fail(j, "unexpected end");
    if (++j->depth > 64)
        return ec_json_fail(j, "nested too deeply");
    int ok = 1;
    char c = *j->p;
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        ec_ws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
        } else {
            for (;;) {
                if (c == '{') {
                    ec_ws(j);
                    if (!ec_json_string(j))
                        return 0;
                    ec_ws(j);
                    if (j->p >= j->end || *j->p != ':')
                        return ec_json_fail(j, "expected ':'");
                    j->p++;
                }
                if (!ec_json_value(j))
                    return 0;
                ec_ws(j);
                if (j->p < j->end && *j->p == ',') {
                    j->p++;
                    continue;
                }
                if (j->p < j->end && *j->p == close) {
                    j->p++;
                    break;
                }
                return ec_json_fail(j, "expected ',' or a closing bracket");
            }
        }
    } else if (c == '"') {
        ok = ec_json_string(j);
    } else if (c == 't') {
        ok = ec_json_word(j, "true");
    } else if (c == 'f') {
        ok = ec_json_word(j, "false");
    } else if (c == 'n') {
        ok = ec_json_word(j, "null");
    } else {
        ok = ec_json_number(j);
    }
    j->depth--;
    return ok;
}

static inline int ec_json_valid(const char *s, size_t n, char *why, size_t whylen)
{
    ec_json j = {s, s + n, 0, ""};
    int ok = ec_json_value(&j);
    if (ok) {
        ec_ws(&j);
        if (j.p != j.end)
            ok = ec_json_fail(&j, "trailing characters");
    }
    if (!ok)
        snprintf(why, whylen, "%s", j.why);
    return ok;
}

/* ---------------- Chrome trace events ---------------- */

typedef struct ec_chrome_stats {
    size_t begins, ends, instants, metadata, completes;
    size_t flow_starts, flow_ends;   /* "s" and "f" (a merged export's processes) */
} ec_chrome_stats;

static inline int ec_chrome(const char *s, size_t n, int check_ts, ec_chrome_stats *st, char *why, size_t whylen)
{
    enum { MAXT = 64 };
    struct { unsigned long long tid; long depth; double ts; } th[MAXT];
    int nth = 0;
    memset(st, 0, sizeof *st);
    if (!ec_json_valid(s, n, why, whylen))
        return 0;
    const char *p = s, *end = s + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        char line[512];
        size_t ll = (size_t)(le - p) < sizeof line - 1 ? (size_t)(le - p) : sizeof line - 1;
        memcpy(line, p, ll);
        line[ll] = 0;
        p = nl ? nl + 1 : end;
        if (strncmp(line, "{\"ph\":\"", 7) != 0)
            continue;
        char ph = line[7];
        if (ph == 'M') {
            st->metadata++;
            continue;
        }
        const char *tp = strstr(line, "\"tid\":"), *sp = strstr(line, "\"ts\":");
        if (!tp || !sp) {
            snprintf(why, whylen, "event without tid or ts: %.80s", line);
            return 0;
        }
        unsigned long long tid = strtoull(tp + 6, NULL, 10);
        double ts = strtod(sp + 5, NULL);
        int k = 0;
        while (k < nth && th[k].tid != tid)
            k++;
        if (k == nth) {
            if (nth == MAXT) {
                snprintf(why, whylen, "too many tids");
                return 0;
            }
            th[nth].tid = tid;
            th[nth].depth = 0;
            th[nth].ts = -1;
            nth++;
        }
        if (ph == 'X') {
            /* A complete event (a GC) is written when it ends, with its
             * start time: outside the order of the others. */
            const char *dp = strstr(line, "\"dur\":");
            if (!dp || strtod(dp + 6, NULL) < 0) {
                snprintf(why, whylen, "X event without a duration: %.80s", line);
                return 0;
            }
            st->completes++;
            continue;
        }
        if (check_ts && ts < th[k].ts) {
            snprintf(why, whylen, "tid %llu: ts goes back from %.3f to %.3f", tid, th[k].ts, ts);
            return 0;
        }
        th[k].ts = ts;
        if (ph == 'B') {
            st->begins++;
            th[k].depth++;
        } else if (ph == 'E') {
            st->ends++;
            if (--th[k].depth < 0) {
                snprintf(why, whylen, "tid %llu: E without B", tid);
                return 0;
            }
        } else if (ph == 'i') {
            st->instants++;
        } else if ((ph == 's' || ph == 'f') && th[k].depth > 0) {   /* bound to the open slice */
            if (ph == 's')
                st->flow_starts++;
            else
                st->flow_ends++;
        } else {
            snprintf(why, whylen, "unexpected phase %c", ph);
            return 0;
        }
    }
    for (int k = 0; k < nth; k++)
        if (th[k].depth != 0) {
            snprintf(why, whylen, "tid %llu: %ld slices left open", th[k].tid, th[k].depth);
            return 0;
        }
    if (st->begins != st->ends) {
        snprintf(why, whylen, "%zu B but %zu E", st->begins, st->ends);
        return 0;
    }
    return 1;
}

/* ---------------- Perfetto protobuf ---------------- */

typedef struct ec_pb_stats {
    size_t packets, descriptors, begins, ends, instants, interned_names;
} ec_pb_stats;

typedef struct ec_seq {
    uint64_t id;
    uint64_t last_ts;
    int started;
    uint8_t *iids;             /* iids[i]: name iid i interned since the clear */
    size_t niids;
} ec_seq;

typedef struct ec_track {
    uint64_t uuid;
    long depth;
} ec_track;

typedef struct ec_pb {
    ec_pb_stats *st;
    int check_ts;
    ec_seq seq[64];
    int nseq;
    ec_track tracks[128];
    int ntracks;
    char *why;
    size_t whylen;
} ec_pb;

typedef struct ec_field {
    uint32_t num;
    int wt;
    uint64_t v;                /* wire type 0 */
    const uint8_t *p;          /* wire type 2 */
    size_t len;
} ec_field;

static inline int ec_pb_fail(ec_pb *c, const char *msg, uint64_t a)
{
    snprintf(c->why, c->whylen, "%s (%llu)", msg, (unsigned long long)a);
    return 0;
}

static inline int ec_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pp >= end)
            return 0;
        uint8_t b = *(*pp)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* Reads the next field of a message; 0 at the end, -1 if malformed. */
static inline int ec_next(const uint8_t **pp, const uint8_t *end, ec_field *f)
{
    if (*pp >= end)
        return 0;
    uint64_t tag;
    if (!ec_varint(pp, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return -1;
    f->num = (uint32_t)(tag >> 3);
    f->wt = (int)(tag & 7);
    switch (f->wt) {
    case 0:
        return ec_varint(pp, end, &f->v) ? 1 : -1;
    case 1:
        if (end - *pp < 8)
            return -1;
        *pp += 8;
        return 1;
    case 5:
        if (end - *pp < 4)
            return -1;
        *pp += 4;
        return 1;
    case 2: {
        uint64_t n;
        if (!ec_varint(pp, end, &n) || n > (uint64_t)(end - *pp))
            return -1;
        f->p = *pp;
        f->len = (size_t)n;
        *pp += n;
        return 1;
    }
    default:
        return -1;
    }
}

/* Checks that a message's fields all parse; returns the number of fields or
 * -1. */
static inline int ec_msg_ok(const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    ec_field f;
    int r, count = 0;
    while ((r = ec_next(&p, end, &f)) > 0)
        count++;
    return r < 0 ? -1 : count;
}

static inline ec_seq *ec_seq_get(ec_pb *c, uint64_t id)
{
    for (int i = 0; i < c->nseq; i++)
        if (c->seq[i].id == id)
            return &c->seq[i];
    if (c->nseq == 64)
        return NULL;
    ec_seq *s = &c->seq[c->nseq++];
    memset(s, 0, sizeof *s);
    s->id = id;
    return s;
}

static inline ec_track *ec_track_get(ec_pb *c, uint64_t uuid)
{
    for (int i = 0; i < c->ntracks; i++)
        if (c->tracks[i].uuid == uuid)
            return &c->tracks[i];
    return NULL;
}

static inline int ec_interned(ec_pb *c, ec_seq *s, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    ec_field f;
    int r;
    while ((r = ec_next(&p, end, &f)) > 0) {
        if (f.wt != 2)
            return ec_pb_fail(c, "InternedData: a field that is not a message", f.num);
        if (ec_msg_ok(f.p, f.len) < 0)
            return ec_pb_fail(c, "InternedData: malformed entry", f.num);
        if (f.num != 2)  /* event_names; source_locations (4) only parsed */
            continue;
        const uint8_t *q = f.p, *qe = f.p + f.len;
        ec_field g;
        uint64_t iid = 0;
        int has_name = 0;
        while (ec_next(&q, qe, &g) > 0) {
            if (g.num == 1 && g.wt == 0)
                iid = g.v;
            if (g.num == 2 && g.wt == 2)
                has_name = 1;
        }
        if (!iid || !has_name)
            return ec_pb_fail(c, "EventName without iid or name", iid);
        if (iid >= (1u << 24))
            return ec_pb_fail(c, "EventName iid too large", iid);
        if (iid >= s->niids) {
            size_t nn = (size_t)iid * 2 + 1;
            uint8_t *ni = realloc(s->iids, nn);
            if (!ni)
                return ec_pb_fail(c, "out of memory", 0);
            memset(ni + s->niids, 0, nn - s->niids);
            s->iids = ni;
            s->niids = nn;
        }
        s->iids[iid] = 1;
        c->st->interned_names++;
    }
    return r < 0 ? ec_pb_fail(c, "InternedData: malformed", 0) : 1;
}

static inline int ec_descriptor(ec_pb *c, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    ec_field f;
    int r;
    uint64_t uuid = 0, parent = 0;
    int has_uuid = 0, kind = 0, has_parent = 0;
    while ((r = ec_next(&p, end, &f)) > 0) {
        if (f.num == 1 && f.wt == 0) {
            uuid = f.v;
            has_uuid = 1;
        } else if (f.num == 5 && f.wt == 0) {
            parent = f.v;
            has_parent = 1;
        } else if (f.num == 2 && f.wt == 2 && !kind) {
            kind = 2;  /* a named track under another (a thread's GC track) */
        } else if ((f.num == 3 || f.num == 4) && f.wt == 2) {
            if (ec_msg_ok(f.p, f.len) < 0)
                return ec_pb_fail(c, "TrackDescriptor: malformed process/thread", f.num);
            kind = (int)f.num;
        }
    }
    if (r < 0 || !has_uuid || !kind)
        return ec_pb_fail(c, "TrackDescriptor: malformed or without uuid/process/thread", uuid);
    if (kind == 2 && !has_parent)
        return ec_pb_fail(c, "named track without a parent", uuid);
    if ((kind == 4 || kind == 2) && !ec_track_get(c, parent))
        return ec_pb_fail(c, "thread track whose parent was not described", parent);
    if (ec_track_get(c, uuid))
        return ec_pb_fail(c, "track described twice", uuid);
    if (c->ntracks == 128)
        return ec_pb_fail(c, "too many tracks", 0);
    c->tracks[c->ntracks++] = (ec_track){uuid, 0};
    c->st->descriptors++;
    return 1;
}

static inline int ec_packet(ec_pb *c, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    ec_field f;
    int r;
    uint64_t ts = 0, seq_id = 0, flags = 0;
    int has_ts = 0, has_seq = 0;
    const uint8_t *te = NULL, *in = NULL, *td = NULL;
    size_t te_len = 0, in_len = 0, td_len = 0;
    while ((r = ec_next(&p, end, &f)) > 0) {
        switch (f.num) {
        case 8: ts = f.v; has_ts = f.wt == 0; break;
        case 10: seq_id = f.v; has_seq = f.wt == 0; break;
        case 13: flags = f.v; break;
        case 11: te = f.p; te_len = f.len; if (f.wt != 2) return ec_pb_fail(c, "track_event wire type", f.wt); break;
        case 12: in = f.p; in_len = f.len; if (f.wt != 2) return ec_pb_fail(c, "interned_data wire type", f.wt); break;
        case 60: td = f.p; td_len = f.len; if (f.wt != 2) return ec_pb_fail(c, "track_descriptor wire type", f.wt); break;
        default: return ec_pb_fail(c, "unexpected TracePacket field", f.num);
        }
    }
    if (r < 0)
        return ec_pb_fail(c, "malformed TracePacket", c->st->packets);
    if (td)
        return ec_descriptor(c, td, td_len);
    if (!te)
        return ec_pb_fail(c, "packet with neither a descriptor nor an event", c->st->packets);
    if (!has_ts || !has_seq || !seq_id)
        return ec_pb_fail(c, "track event without timestamp or sequence id", c->st->packets);
    ec_seq *s = ec_seq_get(c, seq_id);
    if (!s)
        return ec_pb_fail(c, "too many sequences", seq_id);
    if (!s->started) {
        if (flags != 1)
            return ec_pb_fail(c, "first packet of a sequence does not clear its state", flags);
        s->started = 1;
    } else {
        if (flags == 1)
            memset(s->iids, 0, s->niids);
        else if (flags != 2)
            return ec_pb_fail(c, "sequence flags", flags);
        if (c->check_ts && ts < s->last_ts)
            return ec_pb_fail(c, "timestamp goes back on a sequence", ts);
    }
    s->last_ts = ts;
    if (in && !ec_interned(c, s, in, in_len))
        return 0;
    /* The TrackEvent. */
    const uint8_t *q = te, *qe = te + te_len;
    uint64_t type = 0, track = 0, name_iid = 0;
    int has_name = 0, has_track = 0;
    while ((r = ec_next(&q, qe, &f)) > 0) {
        if (f.num == 9 && f.wt == 0) type = f.v;
        else if (f.num == 11 && f.wt == 0) { track = f.v; has_track = 1; }
        else if (f.num == 10 && f.wt == 0) name_iid = f.v;
        else if (f.num == 23 && f.wt == 2) has_name = 1;
    }
    if (r < 0 || !has_track)
        return ec_pb_fail(c, "malformed TrackEvent or no track_uuid", c->st->packets);
    ec_track *t = ec_track_get(c, track);
    if (!t)
        return ec_pb_fail(c, "event on a track never described", track);
    if (name_iid && (name_iid >= s->niids || !s->iids[name_iid]))
        return ec_pb_fail(c, "name iid used before it was interned on its sequence", name_iid);
    if (type == 1) {
        if (!name_iid && !has_name)
            return ec_pb_fail(c, "slice begin without a name", c->st->packets);
        t->depth++;
        c->st->begins++;
    } else if (type == 2) {
        if (--t->depth < 0)
            return ec_pb_fail(c, "slice end without a begin on track", track);
        c->st->ends++;
    } else if (type == 3) {
        c->st->instants++;
    } else {
        return ec_pb_fail(c, "unknown TrackEvent type", type);
    }
    return 1;
}

static inline int ec_perfetto(const uint8_t *p, size_t n, int check_ts, ec_pb_stats *st, char *why, size_t whylen)
{
    ec_pb c;
    memset(&c, 0, sizeof c);
    memset(st, 0, sizeof *st);
    c.st = st;
    c.check_ts = check_ts;
    c.why = why;
    c.whylen = whylen;
    why[0] = 0;
    const uint8_t *end = p + n;
    int ok = 1;
    while (ok && p < end) {
        uint64_t tag = 0, len = 0;
        if (!ec_varint(&p, end, &tag) || tag != ((1u << 3) | 2)) {
            ok = ec_pb_fail(&c, "top-level field is not Trace.packet (1, length-delimited)", tag);
            break;
        }
        if (!ec_varint(&p, end, &len) || len > (uint64_t)(end - p)) {
            ok = ec_pb_fail(&c, "packet length runs past the end", len);
            break;
        }
        st->packets++;
        ok = ec_packet(&c, p, (size_t)len);
        p += len;
    }
    for (int i = 0; ok && i < c.ntracks; i++)
        if (c.tracks[i].depth)
            ok = ec_pb_fail(&c, "slices left open on track", c.tracks[i].uuid);
    if (ok && st->begins != st->ends)
        ok = ec_pb_fail(&c, "begins != ends", st->begins);
    for (int i = 0; i < c.nseq; i++)
        free(c.seq[i].iids);
    return ok;
}

/* Runs fn(trace, file) into a memory stream; returns the bytes (malloc'd,
 * NUL-terminated) or NULL if the exporter failed (its code in *rc). */
#include "trace/trace.h"
static inline char *ec_export_mem(int (*fn)(sw_trace *, FILE *, const sw_export_opts *, char *, size_t),
                           sw_trace *t, int64_t min_ns, size_t *len, int *rc, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t n = 0;
    *len = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) {
        *rc = -100;
        return NULL;
    }
    sw_export_opts o = {min_ns, NULL, NULL};
    err[0] = 0;
    *rc = fn(t, f, &o, err, errlen);
    fclose(f);
    *len = n;
    return buf;
}

#endif /* SW_EXPORTCHECK_H */
