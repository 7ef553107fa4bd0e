/*
 * export_ctf.c - CTF 1.8 writer (export_ctf.h): the TSDL metadata, with an
 * event class per row of the table of record kinds (records.h), then each
 * thread's events into its own stream file, packed little-endian and
 * byte-aligned, one packet per PACKET_BYTES of events: memory stays
 * bounded by a packet whatever the trace's size.
 */
#include "export_ctf.h"

#include "base/base.h"
#include "format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Event content of a packet before it is written. */
#define PACKET_BYTES (256 * 1024)
/* The packet header and context (see the metadata): magic, stream_id,
 * stream_instance_id, timestamp_begin, timestamp_end, content_size,
 * packet_size, packet_seq_num, events_discarded. */
#define PACKET_HEAD 64
#define CTF_MAGIC 0xC1FC1FC1u
#define PROCNAME_LEN 16

/* Event class ids: the fixed ones, then one per row of records.h. */
enum { ID_ENTRY, ID_EXIT, ID_SAMPLE, ID_DROPPED, ID_EXT0 };

typedef struct ctf {
    sw_trace *t;
    const char *dir;
    FILE *stream;            /* the current thread's stream file, or NULL */
    char path[4096];         /* its name, for messages */
    size_t thread;
    uint32_t vpid, vtid;
    char procname[PROCNAME_LEN];
    sw_bytes packet;         /* events of the packet being built */
    uint32_t *name_len;      /* by code id: strlen + 1 of its qualname, then of
                                its file name (0: not yet known) */
    uint32_t codes;
    uint64_t first_ts, last_ts, seq;
    int err;                 /* SW_ENOMEM or SW_EIO once something failed */
    char *errmsg;
    size_t errlen;
} ctf;

/* n more bytes at the end of b, to fill in; NULL when out of memory (b
 * is then marked failed). Inline: every field of every event comes here. */
static inline uint8_t *room(sw_bytes *b, size_t n)
{
    if (b->cap - b->len < n && sw_bytes_reserve(b, n) != 0)
        return NULL;
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}

/* An unsigned integer of `bytes` bytes, little-endian. */
static inline void put_le(sw_bytes *b, uint64_t v, int bytes)
{
    uint8_t *p = room(b, (size_t)bytes);
    for (int i = 0; p && i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put_u16(sw_bytes *b, uint16_t v) { put_le(b, v, 2); }
static inline void put_u32(sw_bytes *b, uint32_t v) { put_le(b, v, 4); }
static inline void put_u64(sw_bytes *b, uint64_t v) { put_le(b, v, 8); }

/* A CTF string of n bytes (its NUL included). */
static inline void put_strn(sw_bytes *b, const char *s, size_t n)
{
    uint8_t *p = room(b, n);
    if (p)
        memcpy(p, s, n);
}

static void put_str(sw_bytes *b, const char *s)
{
    s = s ? s : "";
    put_strn(b, s, strlen(s) + 1);
}

/* ------------------------------------------------------------------ */
/* Metadata                                                           */
/* ------------------------------------------------------------------ */

/* The TSDL type of a record field, written as the field (or two). */
static void meta_field(FILE *out, const sw_record_field *f)
{
    switch (f->type) {
    case SW_FT_CODE:
        fputs("\t\tstring _function;\n\t\tstring _file;\n", out);
        break;
    case SW_FT_STR:
        fprintf(out, "\t\tstring _%s;\n", f->name);
        break;
    case SW_FT_SIGNED:
        fprintf(out, "\t\tint64_t _%s;\n", f->name);
        break;
    default:
        fprintf(out, "\t\tuint64_t _%s;\n", f->name);
        break;
    }
}

/* The event classes before those of the record kinds, by id. */
static const struct {
    const char *name, *fields;
} fixed_events[ID_EXT0] = {
    [ID_ENTRY] = {"lttng_ust_cyg_profile:func_entry",
                  "\t\tuint64_hex_t _addr;\n\t\tstring _name;\n\t\tstring _file;\n\t\tuint32_t _line;\n"
                  "\t\tenum : uint8_t { python = 0, c = 1, resumed = 2 } _kind;\n"},
    [ID_EXIT] = {"lttng_ust_cyg_profile:func_exit", "\t\tuint64_hex_t _addr;\n"},
    [ID_SAMPLE] = {"stackwatch:sample", "\t\tstring _stack;\n\t\tstring _lines;\n\t\tstring _state;\n"
                                        "\t\tuint64_t _weight_ns;\n\t\tuint8_t _native;\n"},
    [ID_DROPPED] = {"stackwatch:dropped", "\t\tuint64_t _count;\n"},
};

static void meta_event(FILE *out, const char *name, unsigned id, const char *fields)
{
    fprintf(out, "event {\n\tname = \"%s\";\n\tid = %u;\n\tstream_id = 0;\n\tfields := struct {\n%s", name, id,
            fields);
}

/* A string of the metadata: its quotes and backslashes escaped. */
static void meta_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', out);
        if (*p >= 0x20)
            fputc(*p, out);
    }
    fputc('"', out);
}

static void write_metadata(ctf *c, FILE *out, uint64_t real0_ns, uint64_t mono0_ns, const char *command)
{
    fputs("/* CTF 1.8 */\n\n"
          "/* Written by stackwatch (export_ctf.c). */\n\n"
          "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n"
          "typealias integer { size = 16; align = 8; signed = false; } := uint16_t;\n"
          "typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n"
          "typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n"
          "typealias integer { size = 64; align = 8; signed = false; base = 16; } := uint64_hex_t;\n"
          "typealias integer { size = 32; align = 8; signed = true; } := int32_t;\n"
          "typealias integer { size = 64; align = 8; signed = true; } := int64_t;\n\n"
          "trace {\n\tmajor = 1;\n\tminor = 8;\n\tbyte_order = le;\n"
          "\tpacket.header := struct {\n\t\tuint32_t magic;\n\t\tuint32_t stream_id;\n"
          "\t\tuint64_t stream_instance_id;\n\t};\n};\n\n",
          out);
    /* Trace Compass takes a trace whose domain is "ust" and whose tracer is
     * lttng-ust for an LTTng-UST trace (its call-stack analysis); the
     * producer says who wrote it. */
    fprintf(out, "env {\n\tdomain = \"ust\";\n\ttracer_name = \"lttng-ust\";\n\ttracer_major = 2;\n"
                 "\ttracer_minor = 13;\n\tproducer = \"stackwatch\";\n\tvpid = %" PRIu32 ";\n"
                 "\tstackwatch_mono0_ns = %" PRIu64 ";\n\tprocname = ",
            c->vpid, mono0_ns);
    meta_str(out, command);
    fputs(";\n};\n\n", out);
    fprintf(out, "clock {\n\tname = \"monotonic\";\n"
                 "\tdescription = \"stackwatch trace clock: ns since the trace's calibration point, "
                 "offset to the wall clock\";\n"
                 "\tfreq = 1000000000;\n\tprecision = 1;\n\toffset_s = %" PRIu64 ";\n\toffset = %" PRIu64
                 ";\n\tabsolute = TRUE;\n};\n\n",
            real0_ns / 1000000000u, real0_ns % 1000000000u);
    fputs("typealias integer { size = 64; align = 8; signed = false; map = clock.monotonic.value; } "
          ":= uint64_clock_monotonic_t;\n\n"
          "stream {\n\tid = 0;\n"
          "\tpacket.context := struct {\n\t\tuint64_clock_monotonic_t timestamp_begin;\n"
          "\t\tuint64_clock_monotonic_t timestamp_end;\n\t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n"
          "\t\tuint64_t packet_seq_num;\n\t\tuint64_t events_discarded;\n\t};\n"
          "\tevent.header := struct {\n\t\tuint16_t id;\n\t\tuint64_clock_monotonic_t timestamp;\n\t};\n"
          "\tevent.context := struct {\n\t\tint32_t _vpid;\n\t\tint32_t _vtid;\n"
          "\t\tinteger { size = 8; align = 8; signed = false; encoding = UTF8; base = 10; } _procname[16];\n"
          "\t};\n};\n\n",
          out);
    for (size_t i = 0; i < sizeof fixed_events / sizeof fixed_events[0]; i++) {
        meta_event(out, fixed_events[i].name, (unsigned)i, fixed_events[i].fields);
        fputs("\t};\n};\n\n", out);
    }
    for (size_t i = 0; i < sw_record_kind_count; i++) {
        const sw_record_kind *k = &sw_record_kinds[i];
        char name[128];
        snprintf(name, sizeof name, "stackwatch:%s", k->name);
        meta_event(out, name, (unsigned)(ID_EXT0 + i), "\t\tuint8_t _malformed;\n");
        for (unsigned j = 0; j < k->nfields; j++)
            meta_field(out, &k->fields[j]);
        fputs("\t};\n};\n\n", out);
    }
}

/* ------------------------------------------------------------------ */
/* Streams                                                            */
/* ------------------------------------------------------------------ */

static int fail(ctf *c, int code, const char *what)
{
    if (!c->err) {
        c->err = code;
        if (code == SW_ENOMEM)
            snprintf(c->errmsg, c->errlen, "out of memory");
        else
            snprintf(c->errmsg, c->errlen, "%s: %s", what, strerror(errno ? errno : EIO));
    }
    return 1;
}

/* Writes the packet built so far, with its header and context. */
static int flush_packet(ctf *c)
{
    if (!c->packet.len || c->err)
        return c->err ? 1 : 0;
    if (c->packet.failed)
        return fail(c, SW_ENOMEM, NULL);
    sw_bytes h = {0};
    uint64_t bits = (uint64_t)(PACKET_HEAD + c->packet.len) * 8;
    put_u32(&h, CTF_MAGIC);
    put_u32(&h, 0);
    put_u64(&h, c->thread);
    put_u64(&h, c->first_ts);
    put_u64(&h, c->last_ts);
    put_u64(&h, bits);
    put_u64(&h, bits);
    put_u64(&h, c->seq++);
    put_u64(&h, 0);
    int bad = h.failed;
    errno = 0;
    if (!bad && (fwrite(h.data, 1, h.len, c->stream) != h.len ||
                 fwrite(c->packet.data, 1, c->packet.len, c->stream) != c->packet.len)) {
        sw_bytes_free(&h);
        return fail(c, SW_EIO, c->path);
    }
    sw_bytes_free(&h);
    if (bad)
        return fail(c, SW_ENOMEM, NULL);
    c->packet.len = 0;
    return 0;
}

static int close_stream(ctf *c)
{
    if (!c->stream)
        return c->err ? 1 : 0;
    flush_packet(c);
    errno = 0;
    if (fclose(c->stream) != 0)
        fail(c, SW_EIO, c->path);
    c->stream = NULL;
    return c->err ? 1 : 0;
}

/* Makes `thread`'s stream the current one (a file of its own). */
static int open_stream(ctf *c, size_t thread)
{
    if (close_stream(c))
        return 1;
    const sw_thread_info *ti = sw_trace_thread(c->t, thread);
    c->thread = thread;
    c->vtid = (uint32_t)(ti->native_tid ? ti->native_tid : ti->index);
    c->seq = 0;
    c->last_ts = 0;
    snprintf(c->path, sizeof c->path, "%s/stream_%zu", c->dir, thread);
    errno = 0;
    c->stream = fopen(c->path, "wb");
    return c->stream ? 0 : fail(c, SW_EIO, c->path);
}

/* An event's header and context, at t_ns (kept non-decreasing within the
 * stream, as CTF requires); a packet that is full is written first. */
static void begin_event(ctf *c, unsigned id, int64_t t_ns)
{
    if (c->packet.len >= PACKET_BYTES)
        flush_packet(c);
    if (!c->packet.cap)   /* the packet's buffer, at its size from the start */
        sw_bytes_reserve(&c->packet, PACKET_BYTES + 4096);
    uint64_t ts = t_ns < 0 ? 0 : (uint64_t)t_ns;
    if (ts < c->last_ts)
        ts = c->last_ts;
    if (!c->packet.len)
        c->first_ts = ts;
    c->last_ts = ts;
    put_u16(&c->packet, (uint16_t)id);
    put_u64(&c->packet, ts);
    put_u32(&c->packet, c->vpid);
    put_u32(&c->packet, c->vtid);
    put_strn(&c->packet, c->procname, PROCNAME_LEN);
}

static void entry_event(ctf *c, const sw_event *ev)
{
    const sw_code_info *ci = sw_trace_code(c->t, ev->code);
    begin_event(c, ID_ENTRY, ev->t_ns);
    put_u64(&c->packet, ev->code);
    const char *name = ci ? ci->qualname : "?", *file = ci ? ci->filename : "?";
    name = name ? name : "";
    file = file ? file : "";
    uint32_t *len = ci && ev->code < c->codes ? &c->name_len[2 * (size_t)ev->code] : NULL;
    if (len && !len[0]) {   /* the names' lengths, once per code */
        len[0] = (uint32_t)strlen(name) + 1;
        len[1] = (uint32_t)strlen(file) + 1;
    }
    put_strn(&c->packet, name, len ? len[0] : strlen(name) + 1);
    put_strn(&c->packet, file, len ? len[1] : strlen(file) + 1);
    put_u32(&c->packet, ci ? ci->firstlineno : 0);
    put_le(&c->packet, ev->kind == SW_OP_C_CALL ? 1 : ev->kind == SW_OP_RESUME ? 2 : 0, 1);
}

static void ext_event(ctf *c, const sw_event *ev)
{
    const sw_ext *x = ev->ext;
    const sw_record_kind *k = sw_record_kind_of(x->kind);
    if (!k)
        return;
    begin_event(c, (unsigned)(ID_EXT0 + (size_t)(k - sw_record_kinds)), ev->t_ns);
    sw_bytes_u8(&c->packet, x->malformed ? 1 : 0);
    for (unsigned i = 0; i < k->nfields; i++) {
        const sw_record_field *f = &k->fields[i];
        if (f->type == SW_FT_CODE) {
            const sw_code_info *ci = x->malformed ? NULL : sw_trace_code(c->t, x->code);
            put_str(&c->packet, ci ? ci->qualname : "?");
            put_str(&c->packet, ci ? ci->filename : "?");
        } else if (f->type == SW_FT_STR) {
            put_str(&c->packet, x->malformed ? "" : sw_ext_string(x, f->slot));
        } else {
            put_u64(&c->packet, x->malformed ? 0 : sw_ext_number(x, f->slot));
        }
    }
}

/* A sample: its stack's names outermost first joined by ';' (native
 * frames "symbol [native]"), the lines they ran (when recorded), the
 * thread's state and the time it stands for. */
static void sample_event(ctf *c, const sw_trace_sample *s)
{
    begin_event(c, ID_SAMPLE, s->t_ns);
    const sw_frame_info *leaf = s->depth ? sw_trace_frame(c->t, s->frames[s->depth - 1]) : NULL;
    for (uint32_t k = 0; k < s->depth; k++) {
        const sw_frame_info *f = sw_trace_frame(c->t, s->frames[k]);
        if (k)
            sw_bytes_u8(&c->packet, ';');
        const char *name = f ? f->name : "?";
        sw_bytes_put(&c->packet, name, strlen(name));
        if (f && f->kind == SW_FRAME_NATIVE)
            sw_bytes_put(&c->packet, SW_NATIVE_SUFFIX, SW_NATIVE_SUFFIX_LEN);
    }
    sw_bytes_u8(&c->packet, 0);
    for (uint32_t k = 0; s->lines && k < s->depth; k++) {
        char num[16];
        int n = snprintf(num, sizeof num, k ? ";%u" : "%u", (unsigned)s->lines[k]);
        sw_bytes_put(&c->packet, num, (size_t)n);
    }
    sw_bytes_u8(&c->packet, 0);
    put_str(&c->packet, sw_thread_state_name(s->state));
    put_u64(&c->packet, s->weight_ns);
    sw_bytes_u8(&c->packet, leaf && leaf->kind == SW_FRAME_NATIVE);
}

static int ctf_event(void *ud, size_t thread, const sw_event *ev)
{
    ctf *c = ud;
    if ((!c->stream || thread != c->thread) && open_stream(c, thread))
        return 1;
    switch (ev->kind) {
    case SW_OP_CALL:
    case SW_OP_RESUME:
    case SW_OP_C_CALL:
        entry_event(c, ev);
        break;
    case SW_OP_RETURN:
    case SW_OP_YIELD:
    case SW_OP_UNWIND:
    case SW_OP_C_RETURN:
        begin_event(c, ID_EXIT, ev->t_ns);
        put_u64(&c->packet, ev->code);
        break;
    case SW_EV_DROPPED:
        begin_event(c, ID_DROPPED, ev->t_ns);
        put_u64(&c->packet, ev->code);
        break;
    case SW_EV_EXT:
        if (ev->ext)
            ext_event(c, ev);
        break;
    case SW_EV_SAMPLE:
        if (ev->sample)
            sample_event(c, ev->sample);
        break;
    default:
        break;
    }
    if (c->packet.failed)
        return fail(c, SW_ENOMEM, NULL);
    return c->err ? 1 : 0;
}

int sw_export_ctf(sw_trace *t, FILE *out, const sw_export_opts *o, char *err, size_t errlen)
{
    if (!o || !o->dir) {
        snprintf(err, errlen, "the CTF export writes a directory (none given)");
        return SW_EARG;
    }
    if (o->part) {
        snprintf(err, errlen, "the CTF export of several processes is not supported yet: export one trace");
        return SW_EARG;
    }
    ctf c = {0};
    c.t = t;
    c.dir = o->dir;
    c.errmsg = err;
    c.errlen = errlen;
    const sw_meta_entry *e;
    uint64_t real0 = 0, mono0 = 0;
    if ((e = sw_trace_meta_find(t, "pid")))
        c.vpid = (uint32_t)e->u;
    if ((e = sw_trace_meta_find(t, "real0_ns")))
        real0 = e->u;
    if ((e = sw_trace_meta_find(t, "mono0_ns")))
        mono0 = e->u;
    const char *command = (e = sw_trace_meta_find(t, "command")) && e->s ? e->s : "python";
    /* procname: the command's first word's last component, as the kernel's
     * comm (15 bytes and a NUL). */
    const char *word = command;
    size_t len = strcspn(word, " ");
    for (size_t i = 0; i < len; i++)
        if (command[i] == '/')
            word = command + i + 1;
    len = strcspn(word, " ");
    memcpy(c.procname, word, len < PROCNAME_LEN - 1 ? len : PROCNAME_LEN - 1);
    c.codes = sw_trace_code_limit(t);
    c.name_len = calloc((size_t)c.codes * 2 + 1, sizeof *c.name_len);
    if (!c.name_len) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    write_metadata(&c, out, real0, mono0, command);
    int rc = sw_export_walk(t, o, ctf_event, &c);
    close_stream(&c);
    sw_bytes_free(&c.packet);
    free(c.name_len);
    if (c.err)
        return c.err;
    if (rc == SW_ENOMEM) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    if (rc || fflush(out) != 0 || ferror(out)) {
        snprintf(err, errlen, rc == SW_ECANCELED ? "cancelled" : "write error");
        return rc == SW_ECANCELED ? SW_ECANCELED : SW_EIO;
    }
    return SW_OK;
}
