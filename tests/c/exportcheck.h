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
 *    length-delimited) messages whose fields all parse, read as Perfetto's
 *    trace_processor reads them: per sequence, SEQ_INCREMENTAL_STATE_CLEARED
 *    resets the interned data and TracePacketDefaults, an event packet
 *    needs that state (SEQ_NEEDS_INCREMENTAL_STATE) and finds it valid,
 *    a sequence-scoped clock (ids 64-127) is defined by a ClockSnapshot
 *    that ties it to CLOCK_BOOTTIME, an incremental clock's timestamps are
 *    int64 deltas from the sequence's previous one; slices begin/end
 *    balanced per track (an event without track_uuid on its sequence's
 *    default track), every interned name, category and source location
 *    defined earlier on its sequence, every track described before use,
 *    resolved timestamps non-decreasing per sequence (if check_ts).
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
    size_t incremental;        /* event packets timed by an incremental clock */
    size_t default_track;      /* events on their sequence's default track */
    size_t sequences;          /* packet sequences */
    size_t ftrace;             /* FtraceEventBundle packets (the scheduler's events) */
} ec_pb_stats;

/* A set of iids interned on a sequence. */
typedef struct ec_iids {
    uint8_t *has;
    size_t n;
} ec_iids;

typedef struct ec_seq {
    uint64_t id;
    int64_t last_ts;
    int started, valid, has_ts;
    ec_iids names, cats, locs;
    int has_def_track;         /* TracePacketDefaults */
    uint64_t def_track;
    uint32_t def_clock;
    uint32_t clock_id;         /* its sequence-scoped clock, 0 if none */
    int clock_incremental;
    int64_t clock_unit, clock_last, clock_offset;
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

static inline void ec_iids_clear(ec_iids *x)
{
    if (x->n)
        memset(x->has, 0, x->n);
}

static inline int ec_iids_has(const ec_iids *x, uint64_t iid)
{
    return iid < x->n && x->has[iid];
}

static inline int ec_iids_add(ec_pb *c, ec_iids *x, uint64_t iid)
{
    if (!iid)
        return ec_pb_fail(c, "interned entry without an iid", 0);
    if (iid >= (1u << 24))
        return ec_pb_fail(c, "iid too large", iid);
    if (iid >= x->n) {
        size_t nn = (size_t)iid * 2 + 1;
        uint8_t *ni = realloc(x->has, nn);
        if (!ni)
            return ec_pb_fail(c, "out of memory", 0);
        memset(ni + x->n, 0, nn - x->n);
        x->has = ni;
        x->n = nn;
    }
    x->has[iid] = 1;
    return 1;
}

/* InternedData: event_categories (1), event_names (2) and source_locations
 * (4) each need an iid (field 1); names and categories a name (field 2). */
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
        if (f.num != 1 && f.num != 2 && f.num != 4)
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
        if (f.num != 4 && !has_name)
            return ec_pb_fail(c, "EventName or EventCategory without a name", iid);
        if (!ec_iids_add(c, f.num == 1 ? &s->cats : f.num == 2 ? &s->names : &s->locs, iid))
            return 0;
        if (f.num == 2)
            c->st->interned_names++;
    }
    return r < 0 ? ec_pb_fail(c, "InternedData: malformed", 0) : 1;
}

/* TracePacketDefaults: timestamp_clock_id (58), track_event_defaults (11)
 * with track_uuid (11). */
static inline int ec_defaults(ec_pb *c, ec_seq *s, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    ec_field f;
    int r;
    s->has_def_track = 0;
    s->def_clock = 0;
    while ((r = ec_next(&p, end, &f)) > 0) {
        if (f.num == 58 && f.wt == 0) {
            s->def_clock = (uint32_t)f.v;
        } else if (f.num == 11 && f.wt == 2) {
            const uint8_t *q = f.p, *qe = f.p + f.len;
            ec_field g;
            int rr;
            while ((rr = ec_next(&q, qe, &g)) > 0)
                if (g.num == 11 && g.wt == 0) {
                    s->def_track = g.v;
                    s->has_def_track = 1;
                }
            if (rr < 0)
                return ec_pb_fail(c, "TrackEventDefaults: malformed", 0);
        }
    }
    return r < 0 ? ec_pb_fail(c, "TracePacketDefaults: malformed", 0) : 1;
}

/* ClockSnapshot: its clocks (1: clock_id 1, timestamp 2, is_incremental 3,
 * unit_multiplier_ns 4) must name CLOCK_BOOTTIME (6) and at most one
 * sequence-scoped clock, which becomes the sequence's. */
static inline int ec_clock_snapshot(ec_pb *c, ec_seq *s, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    ec_field f;
    int r, has_boot = 0, has_seq = 0, seq_inc = 0;
    int64_t boot = 0, seq_ts = 0, seq_unit = 1;
    uint32_t seq_id = 0;
    while ((r = ec_next(&p, end, &f)) > 0) {
        if (f.num != 1 || f.wt != 2)
            continue;
        const uint8_t *q = f.p, *qe = f.p + f.len;
        ec_field g;
        int rr, inc = 0;
        uint64_t id = 0, ts = 0, unit = 1;
        while ((rr = ec_next(&q, qe, &g)) > 0) {
            if (g.wt != 0)
                continue;
            if (g.num == 1) id = g.v;
            else if (g.num == 2) ts = g.v;
            else if (g.num == 3) inc = g.v != 0;
            else if (g.num == 4) unit = g.v ? g.v : 1;
        }
        if (rr < 0)
            return ec_pb_fail(c, "ClockSnapshot.Clock: malformed", 0);
        if (id >= 64 && id < 128) {
            if (has_seq)
                return ec_pb_fail(c, "two sequence clocks in one snapshot", id);
            has_seq = 1;
            seq_id = (uint32_t)id;
            seq_ts = (int64_t)ts;
            seq_unit = (int64_t)unit;
            seq_inc = inc;
        } else if (inc) {
            return ec_pb_fail(c, "a global clock cannot be incremental", id);
        } else if (id == 6) {
            has_boot = 1;
            boot = (int64_t)ts;
        }
    }
    if (r < 0)
        return ec_pb_fail(c, "ClockSnapshot: malformed", 0);
    if (!has_boot)
        return ec_pb_fail(c, "a clock snapshot that does not name CLOCK_BOOTTIME", 0);
    if (has_seq) {
        if (s->clock_id && s->clock_id != seq_id)
            return ec_pb_fail(c, "a second sequence clock on one sequence", seq_id);
        if (s->clock_id && s->clock_incremental != seq_inc)
            return ec_pb_fail(c, "a sequence clock redefined with other properties", seq_id);
        s->clock_id = seq_id;
        s->clock_incremental = seq_inc;
        s->clock_unit = seq_unit;
        s->clock_last = seq_ts * seq_unit;
        s->clock_offset = boot - seq_ts * seq_unit;
    }
    return 1;
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
    uint64_t ts = 0, seq_id = 0, flags = 0, clock = 0;
    int has_ts = 0, has_seq = 0, ftrace = 0;
    const uint8_t *te = NULL, *in = NULL, *td = NULL, *def = NULL, *cs = NULL;
    size_t te_len = 0, in_len = 0, td_len = 0, def_len = 0, cs_len = 0;
    while ((r = ec_next(&p, end, &f)) > 0) {
        int want = f.num == 8 || f.num == 10 || f.num == 13 || f.num == 58 ? 0 : 2;
        if (f.num == 1 && f.wt == 2) {   /* ftrace_events: a bundle of the scheduler's events, alone */
            if (ec_msg_ok(f.p, f.len) < 0)
                return ec_pb_fail(c, "malformed FtraceEventBundle", c->st->packets);
            c->st->ftrace++;
            ftrace = 1;
            continue;
        }
        if (f.wt != want)
            return ec_pb_fail(c, "TracePacket field of an unexpected wire type", f.num);
        switch (f.num) {
        case 8: ts = f.v; has_ts = 1; break;
        case 10: seq_id = f.v; has_seq = 1; break;
        case 13: flags = f.v; break;
        case 58: clock = f.v; break;
        case 6: cs = f.p; cs_len = f.len; break;
        case 11: te = f.p; te_len = f.len; break;
        case 12: in = f.p; in_len = f.len; break;
        case 59: def = f.p; def_len = f.len; break;
        case 60: td = f.p; td_len = f.len; break;
        default: return ec_pb_fail(c, "unexpected TracePacket field", f.num);
        }
    }
    if (r < 0)
        return ec_pb_fail(c, "malformed TracePacket", c->st->packets);
    if (ftrace)
        return te || td || cs || in || def ? ec_pb_fail(c, "ftrace events with other fields in one packet", 0) : 1;
    if (td)
        return ec_descriptor(c, td, td_len);
    if (!has_seq || !seq_id)
        return ec_pb_fail(c, "a packet of a sequence without a sequence id", c->st->packets);
    ec_seq *s = ec_seq_get(c, seq_id);
    if (!s)
        return ec_pb_fail(c, "too many sequences", seq_id);
    if (!s->started && !(flags & 1))
        return ec_pb_fail(c, "first packet of a sequence does not clear its state", flags);
    s->started = 1;
    if (flags & ~(uint64_t)3)
        return ec_pb_fail(c, "sequence flags", flags);
    if (flags & 1) {
        s->valid = 1;
        ec_iids_clear(&s->names);
        ec_iids_clear(&s->cats);
        ec_iids_clear(&s->locs);
        s->has_def_track = 0;
        s->def_clock = 0;
    }
    if (def && !ec_defaults(c, s, def, def_len))
        return 0;
    if (in && !ec_interned(c, s, in, in_len))
        return 0;
    if (cs)
        return te ? ec_pb_fail(c, "a clock snapshot and an event in one packet", 0) : ec_clock_snapshot(c, s, cs, cs_len);
    if (!te)
        return ec_pb_fail(c, "packet with neither a descriptor, a clock snapshot nor an event", c->st->packets);
    if (!(flags & 2))
        return ec_pb_fail(c, "an event packet that does not need the incremental state", flags);
    if (!s->valid)
        return ec_pb_fail(c, "an event packet on a sequence whose state is not valid", seq_id);
    if (!has_ts)
        return ec_pb_fail(c, "track event without a timestamp", c->st->packets);
    /* Its time, resolved to CLOCK_BOOTTIME. */
    if (!clock)
        clock = s->def_clock;
    int64_t t;
    if (clock >= 64 && clock < 128) {
        if (clock != s->clock_id)
            return ec_pb_fail(c, "a timestamp on a sequence clock no snapshot defined", clock);
        int64_t raw = (int64_t)ts;   /* an incremental clock's delta is an int64 */
        if (s->clock_incremental) {
            s->clock_last += raw * s->clock_unit;
            c->st->incremental++;
        } else {
            s->clock_last = raw * s->clock_unit;
        }
        t = s->clock_last + s->clock_offset;
    } else if (clock == 0 || clock == 6) {
        t = (int64_t)ts;
    } else {
        return ec_pb_fail(c, "a timestamp on an unexpected clock", clock);
    }
    if (c->check_ts && s->has_ts && t < s->last_ts)
        return ec_pb_fail(c, "timestamp goes back on a sequence", (uint64_t)t);
    s->last_ts = t;
    s->has_ts = 1;
    /* The TrackEvent. */
    const uint8_t *q = te, *qe = te + te_len;
    uint64_t type = 0, track = 0, name_iid = 0;
    int has_name = 0, has_track = 0;
    while ((r = ec_next(&q, qe, &f)) > 0) {
        if (f.num == 9 && f.wt == 0) type = f.v;
        else if (f.num == 11 && f.wt == 0) { track = f.v; has_track = 1; }
        else if (f.num == 10 && f.wt == 0) name_iid = f.v;
        else if (f.num == 23 && f.wt == 2) has_name = 1;
        else if (f.num == 3 && f.wt == 0 && !ec_iids_has(&s->cats, f.v))
            return ec_pb_fail(c, "category iid used before it was interned on its sequence", f.v);
        else if (f.num == 34 && f.wt == 0 && !ec_iids_has(&s->locs, f.v))
            return ec_pb_fail(c, "source location iid used before it was interned on its sequence", f.v);
    }
    if (r < 0)
        return ec_pb_fail(c, "malformed TrackEvent", c->st->packets);
    if (!has_track) {
        if (!s->has_def_track)
            return ec_pb_fail(c, "a TrackEvent without track_uuid nor a default track", c->st->packets);
        track = s->def_track;
        c->st->default_track++;
    }
    ec_track *tr = ec_track_get(c, track);
    if (!tr)
        return ec_pb_fail(c, "event on a track never described", track);
    if (name_iid && !ec_iids_has(&s->names, name_iid))
        return ec_pb_fail(c, "name iid used before it was interned on its sequence", name_iid);
    if (type == 1) {
        if (!name_iid && !has_name)
            return ec_pb_fail(c, "slice begin without a name", c->st->packets);
        tr->depth++;
        c->st->begins++;
    } else if (type == 2) {
        if (--tr->depth < 0)
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
    st->sequences = (size_t)c.nseq;
    for (int i = 0; i < c.nseq; i++) {
        free(c.seq[i].names.has);
        free(c.seq[i].cats.has);
        free(c.seq[i].locs.has);
    }
    return ok;
}

/* How many times needle occurs in the n bytes at s (an export's output,
 * which may hold NUL bytes). */
static inline size_t ec_count(const char *s, size_t n, const char *needle)
{
    size_t c = 0, k = strlen(needle);
    for (const char *q = s; (q = memmem(q, n - (size_t)(q - s), needle, k)) != NULL; q++)
        c++;
    return c;
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
    sw_export_opts o = {min_ns, NULL, NULL, NULL, NULL, 0};
    err[0] = 0;
    *rc = fn(t, f, &o, err, errlen);
    fclose(f);
    *len = n;
    return buf;
}

#endif /* SW_EXPORTCHECK_H */
