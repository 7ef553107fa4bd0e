/*
 * export_perfetto.c - Perfetto protobuf writer: a trace's process, alone or
 * as one part of a merged output (merge.h: its own track ids and packet
 * sequences, and the flows from and to other processes). Field numbers are those of
 * perfetto/protos/perfetto/trace/perfetto_trace.proto; each constant below
 * names its message and field.
 *
 * Compact encoding: each thread is one packet sequence whose first packet
 * clears its incremental state and sets the sequence's defaults (the
 * thread's track, the timestamp clock) and a ClockSnapshot defining a
 * sequence-scoped incremental clock equal to CLOCK_BOOTTIME at the trace's
 * start; every later packet's timestamp is the delta from the previous
 * packet of its sequence. Names, source locations and the categories of
 * slices are interned per sequence with small iids in order of first use.
 */
#include "export_perfetto.h"

#include "base/base.h"
#include "format.h"
#include "merge.h"
#include "wake_flows.h"

#include <stdlib.h>
#include <string.h>

/* Trace */
#define F_TRACE_PACKET 1
/* TracePacket */
#define F_PKT_FTRACE_EVENTS 1
#define F_PKT_TIMESTAMP 8
#define F_PKT_SEQ_ID 10               /* trusted_packet_sequence_id */
#define F_PKT_TRACK_EVENT 11
#define F_PKT_INTERNED_DATA 12
#define F_PKT_SEQ_FLAGS 13
#define F_PKT_TRACK_DESCRIPTOR 60
#define F_PKT_CLOCK_SNAPSHOT 6
#define F_PKT_DEFAULTS 59             /* trace_packet_defaults */
#define SEQ_INCREMENTAL_STATE_CLEARED 1
#define SEQ_NEEDS_INCREMENTAL_STATE 2
/* TracePacketDefaults / TrackEventDefaults */
#define F_DEF_TIMESTAMP_CLOCK_ID 58
#define F_DEF_TRACK_EVENT 11
#define F_TED_TRACK_UUID 11
/* ClockSnapshot / ClockSnapshot.Clock */
#define F_CS_CLOCKS 1
#define F_CS_PRIMARY_TRACE_CLOCK 2
#define F_CLK_ID 1
#define F_CLK_TIMESTAMP 2
#define F_CLK_INCREMENTAL 3
#define PF_CLOCK_BOOTTIME 6
#define PF_CLOCK_SEQ_DELTA 64            /* the first sequence-scoped clock id */
/* TrackDescriptor */
#define F_TD_UUID 1
#define F_TD_NAME 2
#define F_TD_PROCESS 3
#define F_TD_THREAD 4
#define F_TD_PARENT_UUID 5
/* ProcessDescriptor */
#define F_PD_PID 1
#define F_PD_NAME 6
/* ThreadDescriptor */
#define F_THD_PID 1
#define F_THD_TID 2
#define F_THD_NAME 5
/* TrackEvent */
#define F_TE_CATEGORIES 22
#define F_TE_CATEGORY_IIDS 3
#define F_TE_TYPE 9
#define F_TE_NAME_IID 10
#define F_TE_TRACK_UUID 11
#define F_TE_NAME 23
#define F_TE_SOURCE_LOCATION_IID 34
#define F_TE_DEBUG_ANNOTATIONS 4
#define F_TE_FLOW_IDS 47              /* repeated fixed64 */
#define F_TE_TERMINATING_FLOW_IDS 48  /* repeated fixed64 */
/* DebugAnnotation */
#define F_DA_NAME 10
#define F_DA_BOOL 2
#define F_DA_UINT 3
#define F_DA_INT 4
#define F_DA_STRING 6
/* TrackEvent.callstack (TrackEvent.Callstack, inline) and its frames */
#define F_TE_CALLSTACK 55
#define F_CS_FRAMES 1
#define F_CSF_FUNCTION 1
#define F_CSF_FILE 2
#define F_CSF_LINE 3
#define TE_SLICE_BEGIN 1
#define TE_SLICE_END 2
#define TE_INSTANT 3
/* InternedData */
#define F_ID_EVENT_CATEGORIES 1
#define F_ID_EVENT_NAMES 2
#define F_ID_SOURCE_LOCATIONS 4
/* EventName / SourceLocation */
#define F_EN_IID 1
#define F_EN_NAME 2
#define F_EC_IID 1
#define F_EC_NAME 2
#define CAT_PYTHON 1                  /* the interned categories' iids */
#define CAT_C 2
#define F_SL_IID 1
#define F_SL_FILE 2
#define F_SL_FUNCTION 3
#define F_SL_LINE 4

/* FtraceEventBundle / FtraceEvent: the scheduler's events as the kernel's
 * ftrace writes them, from which trace_processor makes the threads'
 * scheduling states (thread_state) and the CPUs' tracks (sched). */
#define F_FB_CPU 1
#define F_FB_EVENT 2
#define F_FE_TIMESTAMP 1
#define F_FE_PID 2
#define F_FE_SCHED_SWITCH 4
#define F_FE_SCHED_WAKING 20
/* SchedSwitchFtraceEvent / SchedWakingFtraceEvent */
#define F_SS_PREV_COMM 1
#define F_SS_PREV_PID 2
#define F_SS_PREV_PRIO 3
#define F_SS_PREV_STATE 4
#define F_SS_NEXT_COMM 5
#define F_SS_NEXT_PID 6
#define F_SS_NEXT_PRIO 7
#define F_SW_COMM 1
#define F_SW_PID 2
#define F_SW_PRIO 3
#define F_SW_SUCCESS 4
#define F_SW_TARGET_CPU 5
#define PRIO_NORMAL 120               /* nice 0 as sched_switch shows it (not recorded) */

static void pb_varint(sw_bytes *b, unsigned field, uint64_t v)
{
    sw_bytes_varint(b, (uint64_t)field << 3);
    sw_bytes_varint(b, v);
}

static void pb_bytes(sw_bytes *b, unsigned field, const void *p, size_t n)
{
    sw_bytes_varint(b, ((uint64_t)field << 3) | 2);
    sw_bytes_varint(b, n);
    sw_bytes_put(b, p, n);
}

static void pb_str(sw_bytes *b, unsigned field, const char *s)
{
    pb_bytes(b, field, s ? s : "", s ? strlen(s) : 0);
}

static void pb_fixed64(sw_bytes *b, unsigned field, uint64_t v)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    sw_bytes_varint(b, ((uint64_t)field << 3) | 1);
    sw_bytes_put(b, le, 8);
}

typedef struct perfetto {
    sw_trace *t;
    FILE *out;
    const sw_export_part *part;   /* of a merged output (merge.h), or NULL */
    const sw_export_flow *flow;   /* the next flow out of the process */
    uint64_t begins;         /* slice begins written on the current thread */
    uint64_t in_flow;        /* the flow to end at the process's first slice, until written */
    uint64_t pid, process_uuid;
    int64_t boot0;
    sw_bytes pkt, ev, interned, tmp;
    uint32_t *iid;           /* per code id: its iid on the current sequence, 0 if not interned */
    uint32_t next_iid;
    unsigned cats;           /* bit k: category iid k interned on the current sequence */
    uint64_t t0;             /* CLOCK_BOOTTIME ns of the trace's start: the clock snapshot's */
    uint64_t last_ts;        /* the previous packet's time on the current sequence */
    uint32_t limit;
    size_t cur_thread;
    int started;             /* a sequence has been started */
    int failed;
    uint8_t *slice_described;  /* per OPEN kind and thread: its track (e.g. "GC") was described */
    uint8_t *samples_described;  /* per thread: its "samples" track was described */
    sw_bytes cs, fr;         /* a sample's callstack and one of its frames */
    size_t nthreads;
    uint8_t *slice_open;     /* per OPEN kind: a slice is open on the current thread's track of it */
    int npairs;              /* OPEN kinds (records.h) */
    uint8_t *regions_described;  /* per thread: its "regions" track was described */
    uint64_t regions_open;   /* regions open on the current thread's "regions" track */
    sw_wake_flows *wakes;    /* the wakeup flows (wake_flows.h) */
    sw_bytes fe, fs;         /* an ftrace event and its sched event */
    const sw_export_opts *o; /* with the wakeup flows' ends among the task flows */
    size_t task_flow;        /* the next of o->task_flows (sw_export_task_flow_due) */
} perfetto;

static uint64_t thread_uuid(const perfetto *p, size_t thread) { return p->process_uuid + 1 + thread; }
/* The thread's packet sequence (a merged output's parts each have their own). */
static uint64_t seq_id(const perfetto *p, size_t thread)
{
    return (p->part ? p->part->seq_base : 0) + (uint64_t)thread + 1;
}
/* The track of an OPEN..CLOSE kind's slices under the thread's (the
 * first OPEN kind, GC, before the samples' and regions' tracks). */
static uint64_t slice_uuid(const perfetto *p, int pair, size_t thread)
{
    return p->process_uuid + 1 + (pair ? 3 + (uint64_t)pair : 1) * p->nthreads + thread;
}
static uint64_t samples_uuid(const perfetto *p, size_t thread)
{
    return p->process_uuid + 1 + 2 * (uint64_t)p->nthreads + thread;
}

static uint64_t regions_uuid(const perfetto *p, size_t thread)
{
    return p->process_uuid + 1 + 3 * (uint64_t)p->nthreads + thread;
}

/* The boot-clock time of a trace time (saturated: boot0 comes from the file). */
static uint64_t boot_ns(const perfetto *p, int64_t t_ns)
{
    int64_t ts = t_ns > 0 && p->boot0 > INT64_MAX - t_ns ? INT64_MAX
               : t_ns < 0 && p->boot0 < INT64_MIN - t_ns ? INT64_MIN
               : p->boot0 + t_ns;
    return (uint64_t)(ts < 0 ? 0 : ts);
}

static void emit_packet(perfetto *p)
{
    uint8_t hdr[2 * 10];
    sw_bytes h = {hdr, 0, sizeof hdr, 0};
    sw_bytes_varint(&h, ((uint64_t)F_TRACE_PACKET << 3) | 2);
    sw_bytes_varint(&h, p->pkt.len);
    if (fwrite(hdr, 1, h.len, p->out) != h.len || fwrite(p->pkt.data, 1, p->pkt.len, p->out) != p->pkt.len)
        p->failed = 1;
    p->pkt.len = 0;
}

/* The iid of a code's name and source location on the current sequence,
 * interning both (in p->interned) on its first use there. */
static uint32_t intern_code(perfetto *p, uint32_t code)
{
    if (p->iid[code])
        return p->iid[code];
    uint32_t iid = p->iid[code] = p->next_iid++;
    const sw_code_info *ci = sw_trace_code(p->t, code);
    p->tmp.len = 0;
    pb_varint(&p->tmp, F_EN_IID, iid);
    pb_str(&p->tmp, F_EN_NAME, ci ? ci->qualname : "?");
    pb_bytes(&p->interned, F_ID_EVENT_NAMES, p->tmp.data, p->tmp.len);
    p->tmp.len = 0;
    pb_varint(&p->tmp, F_SL_IID, iid);
    pb_str(&p->tmp, F_SL_FILE, ci ? ci->filename : "?");
    pb_str(&p->tmp, F_SL_FUNCTION, ci ? ci->qualname : "?");
    pb_varint(&p->tmp, F_SL_LINE, ci ? ci->firstlineno : 0);
    pb_bytes(&p->interned, F_ID_SOURCE_LOCATIONS, p->tmp.data, p->tmp.len);
    return iid;
}

/* A slice category by iid, interned on the current sequence at its first use. */
static void category(perfetto *p, unsigned iid, const char *name)
{
    if (!(p->cats & (1u << iid))) {
        p->cats |= 1u << iid;
        p->tmp.len = 0;
        pb_varint(&p->tmp, F_EC_IID, iid);
        pb_str(&p->tmp, F_EC_NAME, name);
        pb_bytes(&p->interned, F_ID_EVENT_CATEGORIES, p->tmp.data, p->tmp.len);
    }
    pb_varint(&p->ev, F_TE_CATEGORY_IIDS, iid);
}

/* Starts the thread's packet sequence: one packet that clears its
 * incremental state, sets its defaults (the thread's track; timestamps on
 * the sequence's incremental clock) and defines that clock, at t0 when
 * CLOCK_BOOTTIME is t0. */
static int begin_thread(perfetto *p, size_t thread)
{
    p->cur_thread = thread;
    p->started = 1;
    p->begins = 0;
    if (p->limit)
        memset(p->iid, 0, p->limit * sizeof *p->iid);
    p->next_iid = 1;
    p->cats = 0;
    p->last_ts = p->t0;
    sw_bytes *b = &p->tmp, *c = &p->ev;
    b->len = c->len = 0;
    pb_varint(b, F_TED_TRACK_UUID, thread_uuid(p, thread));
    pb_varint(c, F_DEF_TIMESTAMP_CLOCK_ID, PF_CLOCK_SEQ_DELTA);
    pb_bytes(c, F_DEF_TRACK_EVENT, b->data, b->len);
    pb_varint(&p->pkt, F_PKT_SEQ_ID, seq_id(p, thread));
    pb_varint(&p->pkt, F_PKT_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
    pb_bytes(&p->pkt, F_PKT_DEFAULTS, c->data, c->len);
    c->len = 0;
    b->len = 0;
    pb_varint(b, F_CLK_ID, PF_CLOCK_SEQ_DELTA);
    pb_varint(b, F_CLK_TIMESTAMP, p->t0);
    pb_varint(b, F_CLK_INCREMENTAL, 1);
    pb_bytes(c, F_CS_CLOCKS, b->data, b->len);
    b->len = 0;
    pb_varint(b, F_CLK_ID, PF_CLOCK_BOOTTIME);
    pb_varint(b, F_CLK_TIMESTAMP, p->t0);
    pb_bytes(c, F_CS_CLOCKS, b->data, b->len);
    pb_varint(c, F_CS_PRIMARY_TRACE_CLOCK, PF_CLOCK_BOOTTIME);
    pb_bytes(&p->pkt, F_PKT_CLOCK_SNAPSHOT, c->data, c->len);
    c->len = 0;
    emit_packet(p);
    return p->failed || p->pkt.failed || b->failed || c->failed ? 1 : 0;
}

/* At a slice begin of a merged output's process: the flows it starts (the
 * child processes started while it was the innermost open slice of its
 * thread) and the one it ends (the process's first slice). */
static void slice_flows(perfetto *p, size_t thread)
{
    const sw_export_flow *end = p->part->flows + p->part->nflows;
    while (p->flow < end && (p->flow->thread < thread || (p->flow->thread == thread && p->flow->begin < p->begins)))
        p->flow++;   /* flows of threads or slices not handed over */
    for (; p->flow < end && p->flow->thread == thread && p->flow->begin == p->begins; p->flow++)
        pb_fixed64(&p->ev, F_TE_FLOW_IDS, p->flow->id);
    if (p->in_flow) {
        pb_fixed64(&p->ev, F_TE_TERMINATING_FLOW_IDS, p->in_flow);
        p->in_flow = 0;
    }
    p->begins++;
}

/* Writes p->ev (and p->interned) as one packet of the thread's sequence,
 * its time as the delta from the sequence's previous packet. */
static int send_event(perfetto *p, size_t thread, int64_t t_ns)
{
    uint64_t now = boot_ns(p, t_ns);
    /* A step back (never made by the walk) is a negative delta, which
     * readers take as an int64. */
    pb_varint(&p->pkt, F_PKT_TIMESTAMP, now - p->last_ts);
    p->last_ts = now;
    pb_varint(&p->pkt, F_PKT_SEQ_ID, seq_id(p, thread));
    pb_varint(&p->pkt, F_PKT_SEQ_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
    if (p->interned.len)
        pb_bytes(&p->pkt, F_PKT_INTERNED_DATA, p->interned.data, p->interned.len);
    pb_bytes(&p->pkt, F_PKT_TRACK_EVENT, p->ev.data, p->ev.len);
    emit_packet(p);
    p->ev.len = 0;
    p->interned.len = 0;
    return p->failed || p->pkt.failed || p->ev.failed ? 1 : 0;
}

/* Debug annotations (args) of the event being built in p->ev. */
static void da_str(perfetto *p, const char *name, const char *v)
{
    p->tmp.len = 0;
    pb_str(&p->tmp, F_DA_NAME, name);
    pb_str(&p->tmp, F_DA_STRING, v);
    pb_bytes(&p->ev, F_TE_DEBUG_ANNOTATIONS, p->tmp.data, p->tmp.len);
}

static void da_uint(perfetto *p, const char *name, uint64_t v)
{
    p->tmp.len = 0;
    pb_str(&p->tmp, F_DA_NAME, name);
    pb_varint(&p->tmp, F_DA_UINT, v);
    pb_bytes(&p->ev, F_TE_DEBUG_ANNOTATIONS, p->tmp.data, p->tmp.len);
}

static void da_int(perfetto *p, const char *name, int64_t v)
{
    p->tmp.len = 0;
    pb_str(&p->tmp, F_DA_NAME, name);
    pb_varint(&p->tmp, F_DA_INT, (uint64_t)v);
    pb_bytes(&p->ev, F_TE_DEBUG_ANNOTATIONS, p->tmp.data, p->tmp.len);
}

/* The fields of an EXT event as debug annotations (records.h): a code id
 * as "function" and "file", the others under their names; with `skip`,
 * not the fields that kind has too. */
static void da_fields(perfetto *p, const sw_ext *x, const sw_record_kind *skip)
{
    const sw_record_kind *k = sw_record_kind_of(x->kind);
    for (unsigned i = 0; k && i < k->nfields; i++) {
        const sw_record_field *f = &k->fields[i];
        if (skip && sw_export_field_in(skip, f->name))
            continue;
        if (f->type == SW_FT_CODE) {
            const sw_code_info *ci = sw_trace_code(p->t, x->code);
            da_str(p, "function", ci ? ci->qualname : "?");
            da_str(p, "file", ci ? ci->filename : "?");
        } else if (f->type == SW_FT_STR) {
            da_str(p, f->name, sw_ext_string(x, f->slot));
        } else if (f->type == SW_FT_SIGNED) {
            da_int(p, f->name, (int64_t)sw_ext_number(x, f->slot));
        } else {
            da_uint(p, f->name, sw_ext_number(x, f->slot));
        }
    }
}

/* Ends the open slice of an OPEN kind on the thread at t_ns (done: its
 * CLOSE, whose fields the OPEN does not have are its args). */
static int slice_end(perfetto *p, const sw_record_kind *open, size_t thread, int64_t t_ns, const sw_ext *done)
{
    int pair = sw_export_pair_index(open);
    p->slice_open[pair] = 0;
    p->ev.len = 0;
    pb_varint(&p->ev, F_TE_TYPE, TE_SLICE_END);
    pb_varint(&p->ev, F_TE_TRACK_UUID, slice_uuid(p, pair, thread));
    if (done)
        da_fields(p, done, open);
    return send_event(p, thread, t_ns);
}

/* Describes a named track under the thread's track (its "GC" or
 * "samples" track) before its first use. */
static int describe_child(perfetto *p, size_t thread, uint64_t uuid, const char *name, uint8_t *described)
{
    if (*described)
        return 0;
    sw_bytes d = {0};
    pb_varint(&d, F_TD_UUID, uuid);
    pb_varint(&d, F_TD_PARENT_UUID, thread_uuid(p, thread));
    pb_str(&d, F_TD_NAME, name);
    pb_bytes(&p->pkt, F_PKT_TRACK_DESCRIPTOR, d.data, d.len);
    int oom = d.failed;
    sw_bytes_free(&d);
    if (oom)
        return p->failed = 1;
    emit_packet(p);
    *described = 1;
    return 0;
}


/* A sample frame's name as a string field: a native frame's symbol with
 * " [native]" after it, as the profiler names it. */
static void pb_frame_name(sw_bytes *b, unsigned field, const sw_frame_info *f)
{
    if (!f) {
        pb_str(b, field, "?");
        return;
    }
    size_t n = strlen(f->name), k = f->kind == SW_FRAME_NATIVE ? SW_NATIVE_SUFFIX_LEN : 0;
    sw_bytes_varint(b, ((uint64_t)field << 3) | 2);
    sw_bytes_varint(b, n + k);
    sw_bytes_put(b, f->name, n);
    sw_bytes_put(b, SW_NATIVE_SUFFIX, k);
}

/* A sampler sample: an instant on the thread's "samples" track, named after
 * the innermost frame, with the stack as its callstack (outermost first).
 * Native frames are named "symbol [native]" (and a sample whose innermost
 * frame is native has the category "native" too); with lines, a Python
 * frame's line is the line it was running, else its function's first. */
static int sample_event(perfetto *p, size_t thread, const sw_trace_sample *s)
{
    if (describe_child(p, thread, samples_uuid(p, thread), "samples", &p->samples_described[thread]))
        return 1;
    const sw_frame_info *leaf = s->depth ? sw_trace_frame(p->t, s->frames[s->depth - 1]) : NULL;
    p->ev.len = 0;
    pb_varint(&p->ev, F_TE_TYPE, TE_INSTANT);
    pb_varint(&p->ev, F_TE_TRACK_UUID, samples_uuid(p, thread));
    if (leaf)
        pb_frame_name(&p->ev, F_TE_NAME, leaf);
    else
        pb_str(&p->ev, F_TE_NAME, s->depth ? "?" : "(no Python frame)");
    pb_str(&p->ev, F_TE_CATEGORIES, "sample");
    if (leaf && leaf->kind == SW_FRAME_NATIVE)
        pb_str(&p->ev, F_TE_CATEGORIES, "native");
    p->cs.len = 0;
    for (uint32_t k = 0; k < s->depth; k++) {
        const sw_frame_info *f = sw_trace_frame(p->t, s->frames[k]);
        uint32_t line = s->lines && s->lines[k] ? s->lines[k] : f ? f->line : 0;
        p->fr.len = 0;
        pb_frame_name(&p->fr, F_CSF_FUNCTION, f);
        if (f && f->filename[0])
            pb_str(&p->fr, F_CSF_FILE, f->filename);
        if (line)
            pb_varint(&p->fr, F_CSF_LINE, line);
        pb_bytes(&p->cs, F_CS_FRAMES, p->fr.data, p->fr.len);
    }
    if (s->depth)
        pb_bytes(&p->ev, F_TE_CALLSTACK, p->cs.data, p->cs.len);
    da_str(p, "state", sw_thread_state_name(s->state));
    da_uint(p, "weight_ns", s->weight_ns);
    if (s->lines && s->depth && s->lines[s->depth - 1])
        da_uint(p, "line", s->lines[s->depth - 1]);
    if (p->cs.failed || p->fr.failed)
        return p->failed = 1;
    return send_event(p, thread, s->t_ns);
}

/* An OPEN kind's slice begins on its track under the thread ("GC"),
 * named after its first field, its fields as args. */
static int slice_begin(perfetto *p, const sw_record_kind *open, size_t thread, int64_t t_ns, const sw_ext *x)
{
    int pair = sw_export_pair_index(open);
    uint64_t uuid = slice_uuid(p, pair, thread);
    if (describe_child(p, thread, uuid, open->track, &p->slice_described[(size_t)pair * p->nthreads + thread]))
        return 1;
    char name[SW_EXT_STR_MAX + 64];
    sw_export_slice_name(open, x, name, sizeof name);
    p->ev.len = 0;
    pb_varint(&p->ev, F_TE_TYPE, TE_SLICE_BEGIN);
    pb_varint(&p->ev, F_TE_TRACK_UUID, uuid);
    pb_str(&p->ev, F_TE_NAME, name);
    pb_str(&p->ev, F_TE_CATEGORIES, open->category);
    da_fields(p, x, NULL);
    p->slice_open[pair] = 1;
    return send_event(p, thread, t_ns);
}

/* Ends every slice open on the thread. */
static int slices_end(perfetto *p, size_t thread, int64_t t_ns)
{
    for (size_t j = 0; j < sw_record_kind_count; j++) {
        const sw_record_kind *k = &sw_record_kinds[j];
        if (k->shape == SW_RS_OPEN && p->slice_open[sw_export_pair_index(k)] && slice_end(p, k, thread, t_ns, NULL))
            return 1;
    }
    return 0;
}

/* A region (format 1.6) begins: a slice on the thread's "regions" track
 * (regions nest among themselves, not with the calls). A begin whose name
 * did not decode is a region named "?", so that the ends still pair. */
static int region_begin(perfetto *p, size_t thread, int64_t t_ns, const sw_ext *x)
{
    if (describe_child(p, thread, regions_uuid(p, thread), "regions", &p->regions_described[thread]))
        return 1;
    p->ev.len = 0;
    pb_varint(&p->ev, F_TE_TYPE, TE_SLICE_BEGIN);
    pb_varint(&p->ev, F_TE_TRACK_UUID, regions_uuid(p, thread));
    pb_str(&p->ev, F_TE_NAME, x->malformed ? "?" : x->s1);
    pb_str(&p->ev, F_TE_CATEGORIES, "region");
    p->regions_open++;
    return send_event(p, thread, t_ns);
}

/* Ends the innermost open region of the thread (unfinished: at the end of
 * the thread's events, the program never ended it). */
static int region_end(perfetto *p, size_t thread, int64_t t_ns, int unfinished)
{
    p->regions_open--;
    p->ev.len = 0;
    pb_varint(&p->ev, F_TE_TYPE, TE_SLICE_END);
    pb_varint(&p->ev, F_TE_TRACK_UUID, regions_uuid(p, thread));
    if (unfinished)
        da_uint(p, "unfinished", 1);
    return send_event(p, thread, t_ns);
}

/* A thread's name as its comm in the scheduler's events. */
static const char *comm_of(const sw_thread_info *ti)
{
    return ti->name && ti->name[0] ? ti->name : "thread";
}

/* The name of task `tid` in the scheduler's events: its thread's, when
 * it is a thread of the trace, else `comm` as the kernel gave it. */
static const char *task_comm(perfetto *p, uint64_t tid, const char *comm)
{
    const sw_thread_info *ti = sw_wake_flows_thread(p->wakes, p->t, tid);
    return ti ? comm_of(ti) : comm ? comm : "";
}

/* The scheduler's records (format 1.10) as ftrace events too, one bundle
 * per event on the CPU it happened on, so that trace_processor and the
 * Perfetto UI show each thread's scheduling state (running, then
 * sleeping S, blocked D or runnable R, with the CPU of each running
 * interval) and the CPUs' tracks: OFF_CPU is a sched_switch from the
 * thread to the task that got the CPU (format 1.15: its next_tid and
 * next_comm, of any process; before, and without the privilege, pid 0)
 * on CPU `cpu` with prev_state its state; ON_CPU one from the task that
 * ran before (format 1.17: its prev_tid and prev_comm, of any process;
 * before, and without the privilege, pid 0 named "") to the
 * thread on CPU `next_cpu`, unless that switch was from another thread
 * of the trace, already written whole by its switch out
 * (sw_wake_flows_switch_joined); a WAKEUP a sched_waking by the waker (the
 * bundle's CPU: the wakee's target CPU; the waker's is not recorded) of a
 * thread of the trace, or of a task outside it named by its comm. The
 * timestamps are CLOCK_BOOTTIME, the bundles' default clock. */
static int ftrace_event(perfetto *p, size_t thread, int64_t t_ns, const sw_ext *x)
{
    const sw_thread_info *ti = sw_trace_thread(p->t, thread);
    uint64_t tid = ti->native_tid, cpu;
    if (!tid || x->malformed || sw_wake_flows_switch_joined(p->wakes, thread, t_ns, x))
        return 0;   /* (a joined switch in: its switch out wrote the whole switch) */
    p->fs.len = p->fe.len = 0;
    unsigned field;
    if (x->kind == SW_EXT_OFF_CPU || x->kind == SW_EXT_ON_CPU) {
        int out = x->kind == SW_EXT_OFF_CPU;
        cpu = x->a;
        int prev_seen = !out && x->s1 && x->s1[0];   /* format 1.17: the task that ran before */
        pb_str(&p->fs, F_SS_PREV_COMM, out ? comm_of(ti) : prev_seen ? task_comm(p, x->line, x->s1) : "");
        pb_varint(&p->fs, F_SS_PREV_PID, out ? tid : prev_seen ? x->line : 0);
        pb_varint(&p->fs, F_SS_PREV_PRIO, PRIO_NORMAL);
        /* (Without the privilege the state is not recorded: "waiting" is
         * shown as sleeping, S.) */
        uint64_t state = x->b || !x->s1 || strcmp(x->s1, "waiting") ? x->b : 1;
        pb_varint(&p->fs, F_SS_PREV_STATE, out ? state : 0);
        pb_str(&p->fs, F_SS_NEXT_COMM, out ? task_comm(p, x->c, x->s2) : comm_of(ti));
        pb_varint(&p->fs, F_SS_NEXT_PID, out ? x->c : tid);
        pb_varint(&p->fs, F_SS_NEXT_PRIO, PRIO_NORMAL);
        field = F_FE_SCHED_SWITCH;
    } else if (x->kind == SW_EXT_WAKEUP) {
        cpu = x->b;
        pb_str(&p->fs, F_SW_COMM, task_comm(p, x->a, x->s1));
        pb_varint(&p->fs, F_SW_PID, x->a);
        pb_varint(&p->fs, F_SW_PRIO, PRIO_NORMAL);
        pb_varint(&p->fs, F_SW_SUCCESS, 1);
        pb_varint(&p->fs, F_SW_TARGET_CPU, cpu);
        field = F_FE_SCHED_WAKING;
    } else {
        return 0;
    }
    pb_varint(&p->fe, F_FE_TIMESTAMP, boot_ns(p, t_ns));
    pb_varint(&p->fe, F_FE_PID, tid);
    pb_bytes(&p->fe, field, p->fs.data, p->fs.len);
    p->fs.len = 0;
    pb_varint(&p->fs, F_FB_CPU, cpu);
    pb_bytes(&p->fs, F_FB_EVENT, p->fe.data, p->fe.len);
    pb_bytes(&p->pkt, F_PKT_FTRACE_EVENTS, p->fs.data, p->fs.len);
    emit_packet(p);
    return p->failed || p->pkt.failed || p->fs.failed || p->fe.failed ? 1 : 0;
}

/* An EXT event: GC start/done open and close a slice on the GC track,
 * region begin/end one on the regions track; everything else is an
 * instant on the thread's track. */
static int ext_event(perfetto *p, size_t thread, const sw_event *ev)
{
    const sw_ext *x = ev->ext;
    if (!sw_wake_flows_shows(p->wakes, x))
        return 0;
    if (ftrace_event(p, thread, ev->t_ns, x))
        return 1;
    if (x->kind == SW_EXT_REGION_BEGIN)
        return region_begin(p, thread, ev->t_ns, x);
    if (x->kind == SW_EXT_REGION_END)
        return p->regions_open ? region_end(p, thread, ev->t_ns, 0) : 0;   /* an end without a begin: nothing */
    const sw_record_kind *k;
    const char *cat, *slice = sw_export_record_slice(x, &cat);
    if (slice) {   /* a system call: a slice on the thread's track, ended by SW_WALK_SLICE_END */
        p->ev.len = 0;
        pb_varint(&p->ev, F_TE_TYPE, TE_SLICE_BEGIN);
        pb_str(&p->ev, F_TE_NAME, slice);
        pb_str(&p->ev, F_TE_CATEGORIES, cat);
        da_fields(p, x, NULL);
        return send_event(p, thread, ev->t_ns);
    }
    if ((k = sw_export_pair_open(x))) {
        if (p->slice_open[sw_export_pair_index(k)] && slice_end(p, k, thread, ev->t_ns, NULL))
            return 1;
        return slice_begin(p, k, thread, ev->t_ns, x);
    }
    if ((k = sw_export_pair_close(x)) && p->slice_open[sw_export_pair_index(k)])
        return slice_end(p, k, thread, ev->t_ns, x);
    char name[SW_EXT_STR_MAX + 32];
    sw_export_ext_name(x, name, sizeof name, &cat);
    p->ev.len = 0;
    pb_varint(&p->ev, F_TE_TYPE, TE_INSTANT);   /* on the thread's track, the sequence's default */
    pb_str(&p->ev, F_TE_NAME, name);
    pb_str(&p->ev, F_TE_CATEGORIES, cat);
    if (x->malformed) {
        p->tmp.len = 0;
        pb_str(&p->tmp, F_DA_NAME, "malformed");
        pb_varint(&p->tmp, F_DA_BOOL, 1);
        pb_bytes(&p->ev, F_TE_DEBUG_ANNOTATIONS, p->tmp.data, p->tmp.len);
    } else {
        da_fields(p, x, NULL);
        uint64_t flow = sw_wake_flow_start(p->wakes, thread, ev->t_ns, x);
        if (flow)
            pb_fixed64(&p->ev, F_TE_FLOW_IDS, flow);
    }
    return send_event(p, thread, ev->t_ns);
}

/* The ends of task flows on the thread due by t_ns: each an instant on
 * its track that starts or ends its flow. */
static int task_flows(perfetto *p, size_t thread, int64_t t_ns)
{
    const sw_export_task_flow *f;
    while ((f = sw_export_task_flow_due(p->o, &p->task_flow, thread, t_ns))) {
        p->ev.len = 0;
        p->interned.len = 0;
        pb_varint(&p->ev, F_TE_TYPE, TE_INSTANT);
        pb_str(&p->ev, F_TE_NAME, f->name ? f->name : "task");
        pb_str(&p->ev, F_TE_CATEGORIES, f->category ? f->category : "task");
        pb_fixed64(&p->ev, f->ends ? F_TE_TERMINATING_FLOW_IDS : F_TE_FLOW_IDS, f->id);
        if (send_event(p, thread, f->t_ns))
            return 1;
    }
    return 0;
}

static int perfetto_event(void *ud, size_t thread, const sw_event *ev)
{
    perfetto *p = ud;
    if ((thread != p->cur_thread || !p->started) && begin_thread(p, thread))
        return 1;
    if (task_flows(p, thread, ev->t_ns))
        return 1;
    p->ev.len = 0;
    p->interned.len = 0;
    /* Events on the thread's own track leave track_uuid to the defaults. */
    switch (ev->kind) {
    case SW_OP_CALL:
    case SW_OP_RESUME:
    case SW_OP_C_CALL:
        pb_varint(&p->ev, F_TE_TYPE, TE_SLICE_BEGIN);
        if (ev->code < p->limit) {
            uint32_t iid = intern_code(p, ev->code);
            pb_varint(&p->ev, F_TE_NAME_IID, iid);
            pb_varint(&p->ev, F_TE_SOURCE_LOCATION_IID, iid);
        } else {
            pb_str(&p->ev, F_TE_NAME, "?");
        }
        if (ev->kind == SW_OP_C_CALL)
            category(p, CAT_C, "c");
        else
            category(p, CAT_PYTHON, "python");
        if (p->part)
            slice_flows(p, thread);
        break;
    case SW_OP_RETURN:
    case SW_OP_YIELD:
    case SW_OP_UNWIND:
    case SW_OP_C_RETURN:
        pb_varint(&p->ev, F_TE_TYPE, TE_SLICE_END);
        break;
    case SW_EV_DROPPED:
        pb_varint(&p->ev, F_TE_TYPE, TE_INSTANT);
        pb_str(&p->ev, F_TE_NAME, "stackwatch: events dropped");
        break;
    case SW_EV_EXT:
        return ev->ext ? ext_event(p, thread, ev) : 0;
    case SW_EV_SAMPLE:
        return ev->sample ? sample_event(p, thread, ev->sample) : 0;
    case SW_WALK_SLICE_END:
        pb_varint(&p->ev, F_TE_TYPE, TE_SLICE_END);
        break;
    case SW_WALK_THREAD_END:   /* (then the task flows after the thread's last event) */
        while (p->regions_open)
            if (region_end(p, thread, ev->t_ns, 1))
                return 1;
        return slices_end(p, thread, ev->t_ns) || task_flows(p, thread, INT64_MAX);
    default:
        return 0;
    }
    return send_event(p, thread, ev->t_ns);
}

int sw_export_perfetto(sw_trace *t, FILE *out, const sw_export_opts *o, char *err, size_t errlen)
{
    perfetto p;
    memset(&p, 0, sizeof p);
    p.t = t;
    p.out = out;
    p.o = o;
    const sw_meta_entry *e;
    if ((e = sw_trace_meta_find(t, "pid")))
        p.pid = e->u;
    if ((e = sw_trace_meta_find(t, "boot0_ns")))
        p.boot0 = (int64_t)e->u;
    p.t0 = p.boot0 < 0 ? 0 : (uint64_t)p.boot0;
    if (o && o->part) {
        p.part = o->part;
        p.flow = o->part->flows;
        p.in_flow = o->part->in_flow;
    }
    p.process_uuid = ((p.part ? p.part->key : p.pid) << 20) ^ 0x5357000000000000ull;
    p.limit = sw_trace_code_limit(t);
    p.iid = calloc(p.limit ? p.limit : 1, sizeof *p.iid);
    p.nthreads = sw_trace_thread_count(t);
    p.npairs = sw_export_pair_count();
    p.slice_described = calloc((size_t)(p.npairs ? p.npairs : 1) * (p.nthreads ? p.nthreads : 1), 1);
    p.slice_open = calloc((size_t)(p.npairs ? p.npairs : 1), 1);
    p.samples_described = calloc(p.nthreads ? p.nthreads : 1, 1);
    p.regions_described = calloc(p.nthreads ? p.nthreads : 1, 1);
    int wrc = sw_wake_flows_new(t, o, &p.wakes);
    if (wrc == SW_EIO) {
        snprintf(err, errlen, "a THREAD_RECORDS chunk could not be read");
        free(p.iid);
        free(p.slice_described);
        free(p.slice_open);
        free(p.samples_described);
        free(p.regions_described);
        return SW_EIO;
    }
    if (p.wakes)
        p.o = sw_wake_flows_opts(p.wakes);
    if (!p.iid || !p.slice_described || !p.slice_open || !p.samples_described || !p.regions_described || !p.wakes) {
        sw_wake_flows_free(p.wakes);
        free(p.iid);
        free(p.slice_described);
        free(p.slice_open);
        free(p.samples_described);
        free(p.regions_described);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    /* The process track. */
    sw_bytes d = {0}, pd = {0};
    pb_varint(&pd, F_PD_PID, p.pid);
    e = sw_trace_meta_find(t, "command");
    pb_str(&pd, F_PD_NAME, e && e->s ? e->s : "python");
    pb_varint(&d, F_TD_UUID, p.process_uuid);
    pb_bytes(&d, F_TD_PROCESS, pd.data, pd.len);
    pb_bytes(&p.pkt, F_PKT_TRACK_DESCRIPTOR, d.data, d.len);
    emit_packet(&p);
    /* One track per thread. */
    for (size_t i = 0; i < sw_trace_thread_count(t); i++) {
        const sw_thread_info *ti = sw_trace_thread(t, i);
        if (!sw_filter_has_thread(o ? o->filter : NULL, i))
            continue;
        d.len = pd.len = 0;
        pb_varint(&pd, F_THD_PID, p.pid);
        pb_varint(&pd, F_THD_TID, ti->native_tid ? ti->native_tid : ti->index);
        pb_str(&pd, F_THD_NAME, ti->name && ti->name[0] ? ti->name : "thread");
        pb_varint(&d, F_TD_UUID, thread_uuid(&p, i));
        pb_varint(&d, F_TD_PARENT_UUID, p.process_uuid);
        pb_bytes(&d, F_TD_THREAD, pd.data, pd.len);
        pb_bytes(&p.pkt, F_PKT_TRACK_DESCRIPTOR, d.data, d.len);
        emit_packet(&p);
    }
    int dfailed = d.failed || pd.failed;
    sw_bytes_free(&d);
    sw_bytes_free(&pd);
    int rc = dfailed ? SW_ENOMEM : sw_export_walk(t, p.o, perfetto_event, &p);
    int oom = p.pkt.failed || p.ev.failed || p.interned.failed || p.tmp.failed || p.fe.failed || p.fs.failed;
    sw_bytes_free(&p.pkt);
    sw_bytes_free(&p.ev);
    sw_bytes_free(&p.interned);
    sw_bytes_free(&p.tmp);
    free(p.iid);
    free(p.slice_described);
    free(p.slice_open);
    free(p.samples_described);
    free(p.regions_described);
    sw_wake_flows_free(p.wakes);
    sw_bytes_free(&p.fe);
    sw_bytes_free(&p.fs);
    sw_bytes_free(&p.cs);
    sw_bytes_free(&p.fr);
    if (rc == SW_ENOMEM || oom) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    if (rc || p.failed || fflush(out) != 0 || ferror(out)) {
        snprintf(err, errlen, "write error");
        return SW_EIO;
    }
    return SW_OK;
}
