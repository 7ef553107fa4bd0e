/*
 * export_ctf.c - CTF 1.8 writer (export_ctf.h): two traces laid out as an
 * LTTng session's, `ust/` (TSDL metadata with an event class per row of
 * the table of record kinds, records.h, then each thread's events in its
 * own stream file) and, when the trace holds kernel events, `kernel/`
 * (those events under the names LTTng's kernel tracer gives them, one
 * stream per thread whose packets say the CPU). Packed little-endian and
 * byte-aligned, one packet per PACKET_BYTES of events: memory stays
 * bounded by a packet whatever the trace's size.
 */
#include "export_ctf.h"

#include "base/base.h"
#include "format.h"
#include "wake_flows.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Event content of a packet before it is written. */
#define PACKET_BYTES (256 * 1024)
/* The packet header and context (see the metadata): magic, stream_id,
 * stream_instance_id, timestamp_begin, timestamp_end, content_size,
 * packet_size, packet_seq_num, events_discarded, cpu_id. */
#define PACKET_HEAD 68
#define CTF_MAGIC 0xC1FC1FC1u
#define PROCNAME_LEN 16          /* the kernel's comm (lttng-modules' procname) */
#define UST_PROCNAME_LEN 17      /* lttng-ust's procname context */
#define CPU_UNKNOWN UINT32_MAX

/* Event class ids of the ust trace: the fixed ones, then one per row of
 * records.h. */
enum { ID_ENTRY, ID_EXIT, ID_SAMPLE, ID_EXT0 };
/* Event class ids of the kernel trace: the fixed ones, then an entry and
 * an exit per system call name met (KID_SYSCALL0 + 2 * its position). */
enum {
    KID_SCHED_SWITCH, KID_SCHED_WAKEUP, KID_PAGE_FAULT, KID_ENTRY_UNKNOWN, KID_EXIT_UNKNOWN, KID_STATEDUMP,
    KID_SYSCALL0
};

/* One stream file being written and its packet. */
typedef struct ctf_stream {
    FILE *f;                 /* or NULL */
    char path[4096];         /* its name, for messages */
    sw_bytes packet;         /* events of the packet being built */
    uint64_t first_ts, last_ts, seq;
    int kernel;              /* the kernel trace's */
    uint32_t cpu;            /* kernel: the CPU of the packet being built */
} ctf_stream;

typedef struct ctf {
    sw_trace *t;
    const char *dir;
    ctf_stream ust, kern;    /* the current thread's streams */
    size_t thread;
    uint32_t vpid, vtid, ppid;   /* ppid: META parent_pid, or 0 */
    char procname[PROCNAME_LEN];
    uint32_t *name_len;      /* by code id: strlen + 1 of its qualname, then of
                                its file name (0: not yet known) */
    uint32_t codes;
    /* The kernel trace: whether its folder is made, the system call names
     * met (event classes KID_SYSCALL0 + 2 i and + 1), and the system call
     * whose exit is due (at the walk's SW_WALK_SLICE_END). */
    int kernel_dir;
    char **syscalls;
    size_t nsyscalls, syscalls_cap;
    int sys_open;
    unsigned sys_exit;
    uint64_t sys_nr;
    int64_t sys_ret;
    uint64_t real0, mono0;   /* META real0_ns, mono0_ns */
    const char *command, *hostname;
    char clock_uuid[37];     /* the clock's uuid: the host's boot id (clock_uuid()) */
    sw_wake_flows *wakes;    /* which wakeups are shown (wake_flows.h) */
    /* By position in sw_record_kinds: the position of the kind whose
     * event class its events take (ext_classes). */
    uint8_t ext_class[SW_EXT_KIND_LIMIT];
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

static int fail(ctf *c, int code, const char *what);

/* A code's name as the export writes it (entry events, functions.nm): its
 * qualified name, "?" when the trace has none (a lost CODE chunk). */
static const char *code_name(const sw_code_info *ci)
{
    return ci && ci->qualname && ci->qualname[0] ? ci->qualname : "?";
}

/* ------------------------------------------------------------------ */
/* Metadata                                                           */
/* ------------------------------------------------------------------ */

/* The clock's uuid into out[37]: META boot_id when it is one (the host's
 * /proc/sys/kernel/random/boot_id, which LTTng's tracers give their
 * clocks, so that Trace Compass takes this export and an LTTng session of
 * the same boot for one host), else one made from the host name (traces
 * before boot_id was recorded). */
static void clock_uuid(const sw_trace *t, const char *hostname, char out[37])
{
    const sw_meta_entry *e = sw_trace_meta_find(t, "boot_id");
    const char *b = e && e->s ? e->s : "";
    int ok = strlen(b) == 36;
    for (int i = 0; ok && i < 36; i++)
        ok = (i == 8 || i == 13 || i == 18 || i == 23) ? b[i] == '-'
                                                       : (b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f');
    if (ok) {
        memcpy(out, b, 37);
        return;
    }
    uint64_t h1 = sw_hash_bytes(hostname, strlen(hostname), 1), h2 = sw_hash_bytes(hostname, strlen(hostname), h1);
    snprintf(out, 37, "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64, h1 >> 32,
             (h1 >> 16) & 0xffff, h1 & 0xffff, h2 >> 48, h2 & 0xffffffffffffu);
}

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

#define TSDL_COMM "integer { size = 8; align = 8; signed = false; encoding = UTF8; base = 10; }"
#define TSDL_UST_CHAR "integer { size = 8; align = 8; signed = true; encoding = UTF8; base = 10; }"

/* A time of the wall clock (ns since the epoch) as LTTng's env writes
 * trace_creation_datetime: 20261127T095546+0000 (UTC). */
static void meta_datetime(FILE *out, uint64_t real_ns)
{
    time_t secs = (time_t)(real_ns / 1000000000u);
    struct tm tm;
    char text[32];
    if (!gmtime_r(&secs, &tm) || !strftime(text, sizeof text, "%Y%m%dT%H%M%S+0000", &tm))
        text[0] = 0;
    fprintf(out, "\"%s\"", text);
}

/* What both traces' metadata open with: the types, the trace's packet
 * header, its env (Trace Compass takes a trace whose domain is "ust" and
 * whose tracer is lttng-ust for an LTTng-UST trace, its call-stack
 * analysis; domain "kernel" with lttng-modules for a kernel trace, its
 * kernel analyses; the keys of an LTTng 2.13 session's env, checked
 * against a real one in test_lttng.py), the one clock (its uuid is Trace
 * Compass's host id: the same in both puts them on one host, as LTTng's
 * boot id does) and the stream class with its contexts
 * (LTTng's names and types: vpid, vtid, procname[17] in ust; pid, tid,
 * procname[16] in kernel) and the packets' cpu_id. */
static void write_head(const ctf *c, FILE *out, int kernel)
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
    fprintf(out, "env {\n\tdomain = \"%s\";\n\ttracer_name = \"%s\";\n\ttracer_major = 2;\n"
                 "\ttracer_minor = 13;\n", kernel ? "kernel" : "ust", kernel ? "lttng-modules" : "lttng-ust");
    if (!kernel)   /* (one process's buffers, as `lttng enable-channel --buffers-pid` gives) */
        fprintf(out, "\ttracer_buffering_scheme = \"pid\";\n\ttracer_buffering_id = %" PRIu32 ";\n", c->vpid);
    fprintf(out, "\tarchitecture_bit_width = %u;\n\ttrace_name = \"stackwatch-%" PRIu32 "\";\n"
                 "\tproducer = \"stackwatch\";\n\tvpid = %" PRIu32 ";\n"
                 "\tstackwatch_mono0_ns = %" PRIu64 ";\n\ttrace_creation_datetime = ",
            (unsigned)(sizeof(void *) * 8), c->vpid, c->vpid, c->mono0);
    meta_datetime(out, c->real0);
    fputs(";\n\thostname = ", out);
    meta_str(out, c->hostname);
    fputs(";\n\tprocname = ", out);
    meta_str(out, c->command);
    fputs(";\n};\n\n", out);
    fprintf(out, "clock {\n\tname = \"monotonic\";\n\tuuid = \"%s\";\n"
                 "\tdescription = \"stackwatch trace clock: ns since the trace's calibration point, "
                 "offset to the wall clock\";\n"
                 "\tfreq = 1000000000;\n\tprecision = 1;\n\toffset_s = %" PRIu64 ";\n\toffset = %" PRIu64
                 ";\n\tabsolute = TRUE;\n};\n\n",
            c->clock_uuid, c->real0 / 1000000000u, c->real0 % 1000000000u);
    fprintf(out, "typealias integer { size = 64; align = 8; signed = false; map = clock.monotonic.value; } "
                 ":= uint64_clock_monotonic_t;\n\n"
                 "stream {\n\tid = 0;\n"
                 "\tpacket.context := struct {\n\t\tuint64_clock_monotonic_t timestamp_begin;\n"
                 "\t\tuint64_clock_monotonic_t timestamp_end;\n\t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n"
                 "\t\tuint64_t packet_seq_num;\n\t\tuint64_t events_discarded;\n\t\tuint32_t cpu_id;\n\t};\n"
                 "\tevent.header := struct {\n\t\tuint16_t id;\n\t\tuint64_clock_monotonic_t timestamp;\n\t};\n"
                 "\tevent.context := struct {\n\t\tint32_t _%s;\n\t\tint32_t _%s;\n"
                 "\t\t%s _procname[%d];\n\t};\n};\n\n",
            kernel ? "pid" : "vpid", kernel ? "tid" : "vtid", kernel ? TSDL_COMM : TSDL_UST_CHAR,
            kernel ? PROCNAME_LEN : UST_PROCNAME_LEN);
}

/* Whether kinds a and b have the same fields (names and types, in order). */
static int same_fields(const sw_record_kind *a, const sw_record_kind *b)
{
    if (a->nfields != b->nfields)
        return 0;
    for (unsigned i = 0; i < a->nfields; i++)
        if (a->fields[i].type != b->fields[i].type || strcmp(a->fields[i].name, b->fields[i].name))
            return 0;
    return 1;
}

/* One event class per name: a kind an older format wrote (records.h
 * source OLDER: the task events before 1.16, whose channel was inline)
 * takes the class of the kind that replaced it, of the same name and
 * fields, so a trace of either version shows one `stackwatch:task_block`;
 * any other kind has its own (an older one whose fields differ is named
 * with its number too, in write_metadata). */
static void ext_classes(ctf *c)
{
    for (size_t i = 0; i < sw_record_kind_count; i++) {
        const sw_record_kind *k = &sw_record_kinds[i];
        c->ext_class[i] = (uint8_t)i;
        if (strcmp(k->source, "older"))
            continue;
        for (size_t j = 0; j < sw_record_kind_count; j++) {
            const sw_record_kind *r = &sw_record_kinds[j];
            if (strcmp(r->source, "older") && !strcmp(r->name, k->name) && same_fields(k, r))
                c->ext_class[i] = (uint8_t)j;
        }
    }
}

static void write_metadata(const ctf *c, FILE *out)
{
    write_head(c, out, 0);
    for (size_t i = 0; i < sizeof fixed_events / sizeof fixed_events[0]; i++) {
        meta_event(out, fixed_events[i].name, (unsigned)i, fixed_events[i].fields);
        fputs("\t};\n};\n\n", out);
    }
    for (size_t i = 0; i < sw_record_kind_count; i++) {
        const sw_record_kind *k = &sw_record_kinds[i];
        if (c->ext_class[i] != i)
            continue;   /* its events are of another kind's class */
        char name[128];
        if (strcmp(k->source, "older"))
            snprintf(name, sizeof name, "stackwatch:%s", k->name);
        else   /* a kind of an older format with no class to share: its own name */
            snprintf(name, sizeof name, "stackwatch:%s_%u", k->name, (unsigned)k->number);
        meta_event(out, name, (unsigned)(ID_EXT0 + i), "\t\tuint8_t _malformed;\n");
        for (unsigned j = 0; j < k->nfields; j++)
            meta_field(out, &k->fields[j]);
        fputs("\t};\n};\n\n", out);
    }
}

/* The kernel trace's event classes, by id (before the system calls'):
 * LTTng's kernel tracer's names and fields. What the trace does not know
 * is 0 or "" (docs/format.md). */
static const struct {
    const char *name, *fields;
} kernel_events[KID_SYSCALL0] = {
    [KID_SCHED_SWITCH] = {"sched_switch", "\t\t" TSDL_COMM " _prev_comm[16];\n\t\tint32_t _prev_tid;\n"
                                          "\t\tint32_t _prev_prio;\n\t\tint64_t _prev_state;\n"
                                          "\t\t" TSDL_COMM " _next_comm[16];\n\t\tint32_t _next_tid;\n"
                                          "\t\tint32_t _next_prio;\n"},
    [KID_SCHED_WAKEUP] = {"sched_wakeup", "\t\t" TSDL_COMM " _comm[16];\n\t\tint32_t _tid;\n\t\tint32_t _prio;\n"
                                          "\t\tint32_t _target_cpu;\n"},
    [KID_PAGE_FAULT] = {"x86_exceptions_page_fault_user", "\t\tuint64_hex_t _address;\n"},
    [KID_ENTRY_UNKNOWN] = {"syscall_entry_unknown", "\t\tint32_t _id;\n"},
    [KID_EXIT_UNKNOWN] = {"syscall_exit_unknown", "\t\tint32_t _id;\n\t\tint64_t _ret;\n"},
    /* (the fields Trace Compass's StateDumpHandler reads, integers) */
    [KID_STATEDUMP] = {"lttng_statedump_process_state", "\t\tint32_t _tid;\n\t\tint32_t _pid;\n\t\tint32_t _ppid;\n"
                                                        "\t\t" TSDL_COMM " _name[16];\n\t\tint32_t _status;\n"
                                                        "\t\tint32_t _cpu;\n"},
};

/* lttng_statedump_process_state's status: waiting, running (lttng-modules'
 * enum lttng_process_status). */
#define STATEDUMP_WAIT 5
#define STATEDUMP_RUN 6

/* A text file of the directory, DIR/name, written by write(c, out). */
static void write_file(ctf *c, const char *name, void (*write)(ctf *, FILE *))
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    errno = 0;
    FILE *out = fopen(path, "w");
    if (!out) {
        fail(c, SW_EIO, path);
        return;
    }
    write(c, out);
    errno = 0;
    if (ferror(out) | (fclose(out) != 0))
        fail(c, SW_EIO, path);
}

/* kernel/metadata, once the walk has met every system call name. */
static void write_kernel_metadata(ctf *c, FILE *out)
{
    write_head(c, out, 1);
    for (size_t i = 0; i < KID_SYSCALL0; i++) {
        meta_event(out, kernel_events[i].name, (unsigned)i, kernel_events[i].fields);
        fputs("\t};\n};\n\n", out);
    }
    for (size_t i = 0; i < c->nsyscalls; i++) {
        char name[300];
        snprintf(name, sizeof name, "syscall_entry_%s", c->syscalls[i]);
        meta_event(out, name, (unsigned)(KID_SYSCALL0 + 2 * i), "");
        fputs("\t};\n};\n\n", out);
        snprintf(name, sizeof name, "syscall_exit_%s", c->syscalls[i]);
        meta_event(out, name, (unsigned)(KID_SYSCALL0 + 2 * i + 1), "\t\tint64_t _ret;\n");
        fputs("\t};\n};\n\n", out);
    }
}

/* functions.nm: each code id (the entry and exit events' addr) and its
 * name, in `nm`'s format ("address T name", the address in lower-case
 * hex), the name mapping file Trace Compass's symbol configuration takes
 * to name the call-stack view's frames, which it otherwise shows by
 * address. Every id up to the last known one has its line, "?" when
 * unknown: Trace Compass names an address missing from the file after the
 * nearest one below it (FunctionNameMapper, MappingFile); one past the last
 * it shows in hex. A control character of a name (a line break would start
 * a line of its own) is written as '?'. */
static void write_name_map(ctf *c, FILE *out)
{
    uint32_t end = c->codes;
    while (end && !sw_trace_code(c->t, end - 1))
        end--;
    for (uint32_t id = 0; id < end; id++) {
        fprintf(out, "%016" PRIx32 " T ", id);
        for (const unsigned char *p = (const unsigned char *)code_name(sw_trace_code(c->t, id)); *p; p++)
            fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, out);
        fputc('\n', out);
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

/* Writes the packet of s built so far, with its header and context. */
static int flush_packet(ctf *c, ctf_stream *s)
{
    if (!s->packet.len || c->err)
        return c->err ? 1 : 0;
    if (s->packet.failed)
        return fail(c, SW_ENOMEM, NULL);
    sw_bytes h = {0};
    uint64_t bits = (uint64_t)(PACKET_HEAD + s->packet.len) * 8;
    put_u32(&h, CTF_MAGIC);
    put_u32(&h, 0);
    put_u64(&h, c->thread);
    put_u64(&h, s->first_ts);
    put_u64(&h, s->last_ts);
    put_u64(&h, bits);
    put_u64(&h, bits);
    put_u64(&h, s->seq++);
    put_u64(&h, 0);
    put_u32(&h, s->cpu == CPU_UNKNOWN ? 0 : s->cpu);
    int bad = h.failed;
    errno = 0;
    if (!bad && (fwrite(h.data, 1, h.len, s->f) != h.len ||
                 fwrite(s->packet.data, 1, s->packet.len, s->f) != s->packet.len)) {
        sw_bytes_free(&h);
        return fail(c, SW_EIO, s->path);
    }
    sw_bytes_free(&h);
    if (bad)
        return fail(c, SW_ENOMEM, NULL);
    s->packet.len = 0;
    return 0;
}

static int close_file(ctf *c, ctf_stream *s)
{
    if (!s->f)
        return c->err ? 1 : 0;
    flush_packet(c, s);
    errno = 0;
    if (fclose(s->f) != 0)
        fail(c, SW_EIO, s->path);
    s->f = NULL;
    s->cpu = CPU_UNKNOWN;   /* (the next thread's CPU is its own) */
    return c->err ? 1 : 0;
}

/* Opens s as the current thread's file in DIR/sub. */
static int open_file(ctf *c, ctf_stream *s, const char *sub)
{
    s->seq = 0;
    s->last_ts = 0;
    snprintf(s->path, sizeof s->path, "%s/%s/stream_%zu", c->dir, sub, c->thread);
    errno = 0;
    s->f = fopen(s->path, "wb");
    return s->f ? 0 : fail(c, SW_EIO, s->path);
}

static void syscall_exit(ctf *c, int64_t t_ns);

static int close_streams(ctf *c)
{
    if (c->sys_open)   /* (the walk ends every system call; this is a guard) */
        syscall_exit(c, (int64_t)c->kern.last_ts);
    close_file(c, &c->kern);
    return close_file(c, &c->ust);
}

/* Makes `thread` the current one (a ust stream file of its own; its
 * kernel stream is opened at its first kernel event). */
static int open_stream(ctf *c, size_t thread)
{
    if (close_streams(c))
        return 1;
    const sw_thread_info *ti = sw_trace_thread(c->t, thread);
    c->thread = thread;
    c->vtid = (uint32_t)(ti->native_tid ? ti->native_tid : ti->index);
    return open_file(c, &c->ust, "ust");
}

/* An event's header and context in stream s, at t_ns (kept non-decreasing
 * within the stream, as CTF requires); a packet that is full is written
 * first. */
static void begin_in(ctf *c, ctf_stream *s, unsigned id, int64_t t_ns)
{
    if (s->packet.len >= PACKET_BYTES)
        flush_packet(c, s);
    if (!s->packet.cap)   /* the packet's buffer, at its size from the start */
        sw_bytes_reserve(&s->packet, PACKET_BYTES + 4096);
    uint64_t ts = t_ns < 0 ? 0 : (uint64_t)t_ns;
    if (ts < s->last_ts)
        ts = s->last_ts;
    if (!s->packet.len)
        s->first_ts = ts;
    s->last_ts = ts;
    put_u16(&s->packet, (uint16_t)id);
    put_u64(&s->packet, ts);
    put_u32(&s->packet, c->vpid);
    put_u32(&s->packet, c->vtid);
    put_strn(&s->packet, c->procname, PROCNAME_LEN);
    if (!s->kernel)
        sw_bytes_u8(&s->packet, 0);   /* (UST_PROCNAME_LEN) */
}

static void begin_event(ctf *c, unsigned id, int64_t t_ns)
{
    begin_in(c, &c->ust, id, t_ns);
}

/* A 16-byte comm field. */
static void put_comm(sw_bytes *b, const char *s)
{
    char comm[PROCNAME_LEN] = {0};
    size_t n = strlen(s);
    memcpy(comm, s, n < PROCNAME_LEN - 1 ? n : PROCNAME_LEN - 1);
    put_strn(b, comm, PROCNAME_LEN);
}

/* The thread's kernel events from here on run on cpu (CPU_UNKNOWN: not
 * said): a new packet when it is not the packet's, unless the packet's is
 * not known yet and ran_there (the thread ran on cpu until now: the events
 * before the thread's first switch out or fault ran there, as no switch
 * came between). Trace Compass gives a system call to the thread its
 * packet's CPU runs then (SysEntryHandler), so a packet's CPU must be
 * right. */
static void kernel_cpu(ctf *c, uint32_t cpu, int ran_there)
{
    ctf_stream *s = &c->kern;
    if (cpu == CPU_UNKNOWN || cpu == s->cpu)
        return;
    if (s->cpu != CPU_UNKNOWN || !ran_there)
        flush_packet(c, s);
    s->cpu = cpu;
}

/* A kernel event's header: the thread's kernel stream opened (and the
 * kernel folder made) the first time, its packet's CPU as kernel_cpu()
 * says. NULL once something failed. */
static sw_bytes *begin_kernel(ctf *c, unsigned id, int64_t t_ns, uint32_t cpu, int ran_there)
{
    ctf_stream *s = &c->kern;
    if (!s->f) {
        if (!c->kernel_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/kernel", c->dir);
            errno = 0;
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                fail(c, SW_EIO, path);
                return NULL;
            }
            c->kernel_dir = 1;
        }
        if (open_file(c, s, "kernel"))
            return NULL;
        kernel_cpu(c, cpu, ran_there);
        /* The thread first, as LTTng's state dump gives each at a session's
         * start: its process (Trace Compass's Control Flow view puts it
         * under it), name and state (running, or waiting when this is its
         * switch in). */
        begin_in(c, s, KID_STATEDUMP, t_ns);
        put_u32(&s->packet, c->vtid);
        put_u32(&s->packet, c->vpid);
        put_u32(&s->packet, c->ppid);
        put_comm(&s->packet, c->procname);
        put_u32(&s->packet, id == KID_SCHED_SWITCH && !ran_there ? STATEDUMP_WAIT : STATEDUMP_RUN);
        put_u32(&s->packet, s->cpu == CPU_UNKNOWN ? 0 : s->cpu);
    }
    kernel_cpu(c, cpu, ran_there);
    begin_in(c, s, id, t_ns);
    return &s->packet;
}

/* The event class of system call `name`'s entry (its exit: + 1), added
 * the first time; 0 when out of memory. */
static unsigned syscall_class(ctf *c, const char *name)
{
    for (size_t i = 0; i < c->nsyscalls; i++)
        if (strcmp(c->syscalls[i], name) == 0)
            return (unsigned)(KID_SYSCALL0 + 2 * i);
    char **g = sw_array_grow(c->syscalls, &c->syscalls_cap, c->nsyscalls + 1, sizeof *g, 64);
    if (!g)
        return 0;
    c->syscalls = g;
    size_t n = strlen(name) + 1;
    if (!(g[c->nsyscalls] = malloc(n)))
        return 0;
    memcpy(g[c->nsyscalls], name, n);
    return (unsigned)(KID_SYSCALL0 + 2 * c->nsyscalls++);
}

/* 1 if name can be a part of an event class's name (a C identifier's
 * characters, as the kernel's system call names). */
static int plain_name(const char *name)
{
    if (!name || !*name)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

static void syscall_exit(ctf *c, int64_t t_ns)
{
    c->sys_open = 0;
    sw_bytes *b = begin_kernel(c, c->sys_exit, t_ns, CPU_UNKNOWN, 0);
    if (!b)
        return;
    if (c->sys_exit == KID_EXIT_UNKNOWN)
        put_u32(b, (uint32_t)c->sys_nr);
    put_u64(b, (uint64_t)c->sys_ret);
}

/* A kernel record (well formed) as the event LTTng's kernel tracer would
 * write; 0, or 1 when it is not one (it stays a stackwatch: event). */
static int kernel_event(ctf *c, const sw_event *ev)
{
    const sw_ext *x = ev->ext;
    sw_bytes *b;
    switch (x->kind) {
    case SW_EXT_SYSCALL: {
        if (c->sys_open)
            syscall_exit(c, ev->t_ns);
        unsigned id = plain_name(x->s1) ? syscall_class(c, x->s1) : KID_ENTRY_UNKNOWN;
        if (!id) {
            fail(c, SW_ENOMEM, NULL);
            return 0;
        }
        if (!(b = begin_kernel(c, id, ev->t_ns, CPU_UNKNOWN, 0)))
            return 0;
        if (id == KID_ENTRY_UNKNOWN)
            put_u32(b, (uint32_t)x->a);
        c->sys_open = 1;
        c->sys_exit = id + 1;
        c->sys_nr = x->a;
        c->sys_ret = (int64_t)x->b;
        return 0;
    }
    case SW_EXT_OFF_CPU:   /* the thread leaves CPU a for task c, named s2 (format 1.15; else 0, "") */
        if (!(b = begin_kernel(c, KID_SCHED_SWITCH, ev->t_ns, (uint32_t)x->a, 1)))
            return 0;
        put_comm(b, c->procname);
        put_u32(b, c->vtid);
        put_u32(b, 0);
        put_u64(b, x->b);
        put_comm(b, x->s2 ? x->s2 : "");
        put_u32(b, (uint32_t)x->c);
        put_u32(b, 0);
        return 0;
    case SW_EXT_ON_CPU:   /* the thread runs on CPU a after task line, named s1 (format 1.17; else 0, "") */
        if (sw_wake_flows_switch_joined(c->wakes, c->thread, ev->t_ns, x)) {
            kernel_cpu(c, (uint32_t)x->a, 0);   /* (its events from here on run there) */
            return 0;   /* another thread's switch out to this one wrote the whole switch */
        }
        if (!(b = begin_kernel(c, KID_SCHED_SWITCH, ev->t_ns, (uint32_t)x->a, 0)))
            return 0;
        put_comm(b, x->s1 ? x->s1 : "");
        put_u32(b, x->s1 && x->s1[0] ? (uint32_t)x->line : 0);
        put_u32(b, 0);
        put_u64(b, 0);
        put_comm(b, c->procname);
        put_u32(b, c->vtid);
        put_u32(b, 0);
        return 0;
    case SW_EXT_WAKEUP:   /* this thread woke thread a (named s1), to run on CPU b */
        if (!sw_wake_flows_shows(c->wakes, x))
            return 0;   /* a thread the export leaves out */
        if (!(b = begin_kernel(c, KID_SCHED_WAKEUP, ev->t_ns, CPU_UNKNOWN, 0)))
            return 0;
        put_comm(b, x->s1 ? x->s1 : "");
        put_u32(b, (uint32_t)x->a);
        put_u32(b, 0);
        put_u32(b, (uint32_t)x->b);
        return 0;
    case SW_EXT_PAGE_FAULT:
        if (!(b = begin_kernel(c, KID_PAGE_FAULT, ev->t_ns, (uint32_t)x->b, 1)))
            return 0;
        put_u64(b, x->a);
        return 0;
    default:
        return 1;
    }
}

static void entry_event(ctf *c, const sw_event *ev)
{
    const sw_code_info *ci = sw_trace_code(c->t, ev->code);
    begin_event(c, ID_ENTRY, ev->t_ns);
    put_u64(&c->ust.packet, ev->code);
    const char *name = code_name(ci), *file = ci ? ci->filename : "?";
    file = file ? file : "";
    uint32_t *len = ci && ev->code < c->codes ? &c->name_len[2 * (size_t)ev->code] : NULL;
    if (len && !len[0]) {   /* the names' lengths, once per code */
        len[0] = (uint32_t)strlen(name) + 1;
        len[1] = (uint32_t)strlen(file) + 1;
    }
    put_strn(&c->ust.packet, name, len ? len[0] : strlen(name) + 1);
    put_strn(&c->ust.packet, file, len ? len[1] : strlen(file) + 1);
    put_u32(&c->ust.packet, ci ? ci->firstlineno : 0);
    put_le(&c->ust.packet, ev->kind == SW_OP_C_CALL ? 1 : ev->kind == SW_OP_RESUME ? 2 : 0, 1);
}

static void ext_event(ctf *c, const sw_event *ev)
{
    const sw_ext *x = ev->ext;
    const sw_record_kind *k = sw_record_kind_of(x->kind);
    if (!k || (!x->malformed && !kernel_event(c, ev)))
        return;
    if (x->kind == SW_EXT_CPU && !x->malformed && x->a < CPU_UNKNOWN && x->a != c->ust.cpu) {
        flush_packet(c, &c->ust);   /* the CPU of the events from here on (run --cpu): a packet of its own */
        c->ust.cpu = (uint32_t)x->a;
    }
    sw_bytes *b = &c->ust.packet;
    begin_event(c, (unsigned)(ID_EXT0 + c->ext_class[k - sw_record_kinds]), ev->t_ns);
    sw_bytes_u8(b, x->malformed ? 1 : 0);
    for (unsigned i = 0; i < k->nfields; i++) {
        const sw_record_field *f = &k->fields[i];
        if (f->type == SW_FT_CODE) {
            const sw_code_info *ci = x->malformed ? NULL : sw_trace_code(c->t, x->code);
            put_str(b, code_name(ci));
            put_str(b, ci ? ci->filename : "?");
        } else if (f->type == SW_FT_STR) {
            put_str(b, x->malformed ? "" : sw_ext_string(x, f->slot));
        } else {
            put_u64(b, x->malformed ? 0 : sw_ext_number(x, f->slot));
        }
    }
}

/* A sample: its stack's names outermost first joined by ';' (native
 * frames "symbol [native]"), the lines they ran (when recorded), the
 * thread's state and the time it stands for. */
static void sample_event(ctf *c, const sw_trace_sample *s)
{
    sw_bytes *b = &c->ust.packet;
    begin_event(c, ID_SAMPLE, s->t_ns);
    const sw_frame_info *leaf = s->depth ? sw_trace_frame(c->t, s->frames[s->depth - 1]) : NULL;
    for (uint32_t k = 0; k < s->depth; k++) {
        const sw_frame_info *f = sw_trace_frame(c->t, s->frames[k]);
        if (k)
            sw_bytes_u8(b, ';');
        const char *name = f ? f->name : "?";
        sw_bytes_put(b, name, strlen(name));
        if (f && f->kind == SW_FRAME_NATIVE)
            sw_bytes_put(b, SW_NATIVE_SUFFIX, SW_NATIVE_SUFFIX_LEN);
    }
    sw_bytes_u8(b, 0);
    for (uint32_t k = 0; s->lines && k < s->depth; k++) {
        char num[16];
        int n = snprintf(num, sizeof num, k ? ";%u" : "%u", (unsigned)s->lines[k]);
        sw_bytes_put(b, num, (size_t)n);
    }
    sw_bytes_u8(b, 0);
    put_str(b, sw_thread_state_name(s->state));
    put_u64(b, s->weight_ns);
    sw_bytes_u8(b, leaf && leaf->kind == SW_FRAME_NATIVE);
}

static int ctf_event(void *ud, size_t thread, const sw_event *ev)
{
    ctf *c = ud;
    if ((!c->ust.f || thread != c->thread) && open_stream(c, thread))
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
        put_u64(&c->ust.packet, ev->code);
        break;
    case SW_EV_DROPPED: {   /* the DROPPED record's class (malformed 0, count) */
        const sw_record_kind *k = sw_record_kind_of(SW_EXT_DROPPED);
        begin_event(c, (unsigned)(ID_EXT0 + c->ext_class[k - sw_record_kinds]), ev->t_ns);
        sw_bytes_u8(&c->ust.packet, 0);
        put_u64(&c->ust.packet, ev->code);
        break;
    }
    case SW_EV_EXT:
        if (ev->ext)
            ext_event(c, ev);
        break;
    case SW_EV_SAMPLE:
        if (ev->sample)
            sample_event(c, ev->sample);
        break;
    case SW_WALK_SLICE_END:
        if (c->sys_open)
            syscall_exit(c, ev->t_ns);
        break;
    default:
        break;
    }
    if (c->ust.packet.failed || c->kern.packet.failed)
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
    c.kern.kernel = 1;
    c.ust.cpu = c.kern.cpu = CPU_UNKNOWN;
    const sw_meta_entry *e;
    if ((e = sw_trace_meta_find(t, "pid")))
        c.vpid = (uint32_t)e->u;
    if ((e = sw_trace_meta_find(t, "parent_pid")))
        c.ppid = (uint32_t)e->u;
    if ((e = sw_trace_meta_find(t, "real0_ns")))
        c.real0 = e->u;
    if ((e = sw_trace_meta_find(t, "mono0_ns")))
        c.mono0 = e->u;
    c.hostname = (e = sw_trace_meta_find(t, "hostname")) && e->s ? e->s : "";
    clock_uuid(t, c.hostname, c.clock_uuid);
    const char *command = c.command = (e = sw_trace_meta_find(t, "command")) && e->s ? e->s : "python";
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
    int wrc = sw_wake_flows_new(t, o, &c.wakes);
    if (wrc == SW_EIO) {
        snprintf(err, errlen, "a THREAD_RECORDS chunk could not be read");
        return SW_EIO;
    }
    c.name_len = calloc((size_t)c.codes * 2 + 1, sizeof *c.name_len);
    if (!c.name_len || !c.wakes) {
        free(c.name_len);
        sw_wake_flows_free(c.wakes);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    ext_classes(&c);
    write_metadata(&c, out);
    int rc = sw_export_walk(t, o, ctf_event, &c);
    close_streams(&c);
    if (c.kernel_dir && !c.err)
        write_file(&c, "kernel/metadata", write_kernel_metadata);
    if (!c.err && rc == SW_OK)
        write_file(&c, "functions.nm", write_name_map);
    sw_bytes_free(&c.ust.packet);
    sw_bytes_free(&c.kern.packet);
    for (size_t i = 0; i < c.nsyscalls; i++)
        free(c.syscalls[i]);
    free(c.syscalls);
    free(c.name_len);
    sw_wake_flows_free(c.wakes);
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
