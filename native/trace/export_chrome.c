/*
 * export_chrome.c - Chrome Trace Event Format (JSON object form) writer: a
 * trace's process, alone or as one part of a merged document (merge.h:
 * the document's head or tail left to other parts, and flow events from
 * and to other processes).
 */
#include "export_chrome.h"

#include "format.h"
#include "base/base.h"
#include "merge.h"
#include "wake_flows.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A region (format 1.6) open on the current thread. */
typedef struct region {
    char *name;
    int64_t start;
} region;

/* An OPEN..CLOSE slice (records.h) open on the current thread: its
 * OPEN's payload, kept until its CLOSE. */
typedef struct open_slice {
    int open;
    int64_t start;
    sw_ext x;
    char s1[SW_EXT_STR_MAX + 1], s2[SW_EXT_STR_MAX + 1];
} open_slice;

typedef struct chrome {
    sw_trace *t;
    FILE *out;
    uint64_t pid;
    int64_t mono0;
    int first;
    open_slice *slices;      /* per OPEN kind (sw_export_pair_index) */
    uint64_t in_flow;        /* a merged output's flow to end at the first slice, until written */
    const sw_export_part *part;   /* of a merged output (merge.h), or NULL */
    const sw_export_flow *flow;   /* the next flow out of the process */
    size_t thread;           /* the thread whose slice begins are counted */
    uint64_t begins;
    region *regions;         /* the current thread's open regions, innermost last */
    size_t nregions, regions_cap;
    int oom;
    const sw_export_opts *o; /* with the wakeup flows' ends among the task flows */
    size_t task_flow;        /* the next of o->task_flows (sw_export_task_flow_due) */
    sw_wake_flows *wakes;    /* the wakeup flows (wake_flows.h) */
} chrome;

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void sep(chrome *c)
{
    fputs(c->first ? "\n" : ",\n", c->out);
    c->first = 0;
}

/* Microseconds with nanosecond decimals. */
static void put_ts(chrome *c, int64_t t_ns)
{
    /* mono0 comes from the file: saturate rather than overflow. */
    int64_t ns = t_ns > 0 && c->mono0 > INT64_MAX - t_ns ? INT64_MAX
               : t_ns < 0 && c->mono0 < INT64_MIN - t_ns ? INT64_MIN
               : c->mono0 + t_ns;
    if (ns < 0)
        ns = 0;
    fprintf(c->out, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

static void put_dur(chrome *c, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    fprintf(c->out, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
}

/* The fields of an EXT event as args (records.h): a code id as
 * "function" and "file", the others under their names; with `skip`, not
 * the fields that kind has too. Returns how many were written. */
static int put_fields(chrome *c, const sw_ext *x, const sw_record_kind *skip, int written)
{
    const sw_record_kind *k = sw_record_kind_of(x->kind);
    for (unsigned i = 0; k && i < k->nfields; i++) {
        const sw_record_field *f = &k->fields[i];
        if (skip && sw_export_field_in(skip, f->name))
            continue;
        if (written++)
            fputc(',', c->out);
        if (f->type == SW_FT_CODE) {
            const sw_code_info *ci = sw_trace_code(c->t, x->code);
            fputs("\"function\":", c->out);
            json_str(c->out, ci ? ci->qualname : "?");
            fputs(",\"file\":", c->out);
            json_str(c->out, ci ? ci->filename : "?");
            continue;
        }
        fprintf(c->out, "\"%s\":", f->name);
        if (f->type == SW_FT_STR)
            json_str(c->out, sw_ext_string(x, f->slot));
        else if (f->type == SW_FT_SIGNED)
            fprintf(c->out, "%lld", (long long)sw_ext_number(x, f->slot));
        else
            fprintf(c->out, "%llu", (unsigned long long)sw_ext_number(x, f->slot));
    }
    return written;
}

/* An OPEN..CLOSE slice as one complete event, from its OPEN to `end_ns`
 * (done: its CLOSE, or NULL when unfinished). */
static void put_slice(chrome *c, const sw_record_kind *open, open_slice *o, uint64_t tid, int64_t end_ns,
                      const sw_ext *done)
{
    char name[SW_EXT_STR_MAX + 64];
    sw_export_slice_name(open, &o->x, name, sizeof name);
    if (!done)
        strcat(name, " unfinished");
    sep(c);
    fprintf(c->out, "{\"ph\":\"X\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", c->pid, tid);
    put_ts(c, o->start);
    fputs(",\"dur\":", c->out);
    put_dur(c, end_ns - o->start);
    fputs(",\"name\":", c->out);
    json_str(c->out, name);
    fprintf(c->out, ",\"cat\":\"%s\",\"args\":{", open->category);
    int n = put_fields(c, &o->x, NULL, 0);
    if (done)
        put_fields(c, done, open, n);
    fputs("}}", c->out);
    o->open = 0;
}

static void slice_open(chrome *c, const sw_record_kind *open, uint64_t tid, int64_t t_ns, const sw_ext *x)
{
    open_slice *o = &c->slices[sw_export_pair_index(open)];
    if (o->open)
        put_slice(c, open, o, tid, t_ns, NULL);
    o->open = 1;
    o->start = t_ns;
    o->x = *x;
    snprintf(o->s1, sizeof o->s1, "%s", x->s1);
    snprintf(o->s2, sizeof o->s2, "%s", x->s2);
    o->x.s1 = o->s1;
    o->x.s2 = o->s2;
}

/* Ends every slice open on the thread, unfinished. */
static void slices_end(chrome *c, uint64_t tid, int64_t t_ns)
{
    for (size_t j = 0; j < sw_record_kind_count; j++) {
        const sw_record_kind *k = &sw_record_kinds[j];
        if (k->shape == SW_RS_OPEN && c->slices[sw_export_pair_index(k)].open)
            put_slice(c, k, &c->slices[sw_export_pair_index(k)], tid, t_ns, NULL);
    }
}

/* A region as one complete event on its thread ("X", category "region"),
 * from its begin to end_ns: regions the program marks around whole calls
 * (a test, a request) nest with the call slices. */
static void region_end(chrome *c, uint64_t tid, int64_t end_ns, int unfinished)
{
    region *r = &c->regions[--c->nregions];
    sep(c);
    fprintf(c->out, "{\"ph\":\"X\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", c->pid, tid);
    put_ts(c, r->start);
    fputs(",\"dur\":", c->out);
    put_dur(c, end_ns - r->start);
    fputs(",\"name\":", c->out);
    json_str(c->out, r->name);
    fprintf(c->out, ",\"cat\":\"region\",\"args\":{%s}}", unfinished ? "\"unfinished\":true" : "");
    free(r->name);
}

static void region_begin(chrome *c, int64_t t_ns, const sw_ext *x)
{
    region *rs = sw_array_grow(c->regions, &c->regions_cap, c->nregions + 1, sizeof *rs, 16);
    const char *s = x->malformed ? "?" : x->s1;
    size_t n = strlen(s) + 1;
    char *name = malloc(n);
    if (name)
        memcpy(name, s, n);
    if (!rs || !name) {
        free(name);
        c->oom = 1;
        return;
    }
    c->regions = rs;
    rs[c->nregions++] = (region){name, t_ns};
}

static void ext_event(chrome *c, size_t thread, uint64_t tid, const sw_event *ev)
{
    const sw_ext *x = ev->ext;
    if (!sw_wake_flows_shows(c->wakes, x))
        return;
    if (x->kind == SW_EXT_REGION_BEGIN) {
        region_begin(c, ev->t_ns, x);
        return;
    }
    if (x->kind == SW_EXT_REGION_END) {
        if (c->nregions)   /* an end without a begin: nothing */
            region_end(c, tid, ev->t_ns, 0);
        return;
    }
    const sw_record_kind *k;
    const char *cat, *slice = sw_export_record_slice(x, &cat);
    if (slice) {   /* a system call: a slice on the thread, ended by SW_WALK_SLICE_END */
        sep(c);
        fprintf(c->out, "{\"ph\":\"B\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", c->pid, tid);
        put_ts(c, ev->t_ns);
        fputs(",\"name\":", c->out);
        json_str(c->out, slice);
        fprintf(c->out, ",\"cat\":\"%s\",\"args\":{", cat);
        put_fields(c, x, NULL, 0);
        fputs("}}", c->out);
        return;
    }
    if ((k = sw_export_pair_open(x))) {
        slice_open(c, k, tid, ev->t_ns, x);
        return;
    }
    if ((k = sw_export_pair_close(x)) && c->slices[sw_export_pair_index(k)].open) {
        put_slice(c, k, &c->slices[sw_export_pair_index(k)], tid, ev->t_ns, x);
        return;
    }
    char name[SW_EXT_STR_MAX + 32];
    sw_export_ext_name(x, name, sizeof name, &cat);
    /* A wakeup that starts a flow (wake_flows.h) is a zero-length slice
     * with the flow's start bound to it, as a task flow's end is drawn. */
    uint64_t flow = sw_wake_flow_start(c->wakes, thread, ev->t_ns, x);
    sep(c);
    fprintf(c->out, flow ? "{\"ph\":\"B\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":"
                         : "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":",
            c->pid, tid);
    put_ts(c, ev->t_ns);
    fputs(",\"name\":", c->out);
    json_str(c->out, name);
    fprintf(c->out, ",\"cat\":\"%s\",\"args\":{", cat);
    if (x->malformed)
        fputs("\"malformed\":true", c->out);
    else
        put_fields(c, x, NULL, 0);
    fputs("}}", c->out);
    if (flow) {
        for (int k = 0; k < 2; k++) {
            sep(c);
            fprintf(c->out, "{\"ph\":\"%s\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", k ? "E" : "s", c->pid, tid);
            put_ts(c, ev->t_ns);
            if (!k) {
                fprintf(c->out, ",\"id\":%" PRIu64 ",\"cat\":\"%s\",\"name\":", flow, cat);
                json_str(c->out, name);
            }
            fputc('}', c->out);
        }
    }
}


/* A sample frame's name, JSON-escaped without quotes (names are joined in
 * one string): a native frame's symbol with " [native]" after it. */
static void put_frame_name(chrome *c, const sw_frame_info *f)
{
    for (const unsigned char *p = (const unsigned char *)(f ? f->name : "?"); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(c->out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(c->out, "\\u%04x", *p);
        else
            fputc(*p, c->out);
    }
    if (f && f->kind == SW_FRAME_NATIVE)
        fputs(SW_NATIVE_SUFFIX, c->out);
}

/* A sampler sample: an instant named after the innermost frame, with the
 * whole stack (outermost first) in args: "stack" the names joined by ';'
 * (native frames "symbol [native]"), "native" true when the innermost
 * frame is native, and with lines "lines" the line each frame was running
 * (0: unknown or native), joined by ';' too. */
static void sample_event(chrome *c, uint64_t tid, const sw_trace_sample *s)
{
    const sw_frame_info *leaf = s->depth ? sw_trace_frame(c->t, s->frames[s->depth - 1]) : NULL;
    sep(c);
    fprintf(c->out, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", c->pid, tid);
    put_ts(c, s->t_ns);
    fputs(",\"name\":", c->out);
    if (leaf) {
        fputc('"', c->out);
        put_frame_name(c, leaf);
        fputc('"', c->out);
    } else {
        json_str(c->out, s->depth ? "?" : "(no Python frame)");
    }
    fputs(",\"cat\":\"sample\",\"args\":{\"stack\":\"", c->out);
    for (uint32_t k = 0; k < s->depth; k++) {
        if (k)
            fputc(';', c->out);
        put_frame_name(c, sw_trace_frame(c->t, s->frames[k]));
    }
    fputc('"', c->out);
    if (s->lines) {
        fputs(",\"lines\":\"", c->out);
        for (uint32_t k = 0; k < s->depth; k++)
            fprintf(c->out, k ? ";%u" : "%u", (unsigned)s->lines[k]);
        fputc('"', c->out);
    }
    if (leaf && leaf->kind == SW_FRAME_NATIVE)
        fputs(",\"native\":true", c->out);
    fprintf(c->out, ",\"state\":\"%s\",\"weight_us\":", sw_thread_state_name(s->state));
    put_dur(c, s->weight_ns > INT64_MAX ? INT64_MAX : (int64_t)s->weight_ns);
    fputs("}}", c->out);
}

/* After a slice begin of a merged output's process: the flows it starts
 * (the child processes started while it was the innermost open slice of
 * its thread: "s" at its begin binds to it) and the one it ends (the
 * process's first slice). */
static void flow_event(chrome *c, const char *ph, uint64_t id, uint64_t tid, int64_t t_ns)
{
    sep(c);
    fprintf(c->out, "{\"ph\":\"%s\",%s\"id\":%" PRIu64 ",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64
            ",\"name\":\"start process\",\"cat\":\"process\",\"ts\":", ph, *ph == 'f' ? "\"bp\":\"e\"," : "",
            id, c->pid, tid);
    put_ts(c, t_ns);
    fputc('}', c->out);
}

static void slice_flows(chrome *c, size_t thread, uint64_t tid, int64_t t_ns)
{
    if (thread != c->thread) {
        c->thread = thread;
        c->begins = 0;
    }
    const sw_export_flow *end = c->part->flows + c->part->nflows;
    while (c->flow < end && (c->flow->thread < thread || (c->flow->thread == thread && c->flow->begin < c->begins)))
        c->flow++;   /* flows of threads or slices not handed over */
    for (; c->flow < end && c->flow->thread == thread && c->flow->begin == c->begins; c->flow++)
        flow_event(c, "s", c->flow->id, tid, t_ns);
    if (c->in_flow) {
        flow_event(c, "f", c->in_flow, tid, t_ns);
        c->in_flow = 0;
    }
    c->begins++;
}

/* The ends of task flows on the thread due by t_ns: each a zero-length
 * slice on its track with a flow event bound to it ("s" starts the flow,
 * "f" with "bp":"e" ends it in the slice around it). */
static void task_flows(chrome *c, size_t thread, uint64_t tid, int64_t t_ns)
{
    const sw_export_task_flow *f;
    while ((f = sw_export_task_flow_due(c->o, &c->task_flow, thread, t_ns))) {
        for (int k = 0; k < 3; k++) {
            sep(c);
            fprintf(c->out, "{\"ph\":\"%s\",%s\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":",
                    k == 0 ? "B" : k == 2 ? "E" : f->ends ? "f" : "s", k == 1 && f->ends ? "\"bp\":\"e\"," : "",
                    c->pid, tid);
            put_ts(c, f->t_ns);
            if (k == 1)
                fprintf(c->out, ",\"id\":%" PRIu64, f->id);
            if (k < 2) {
                fprintf(c->out, ",\"cat\":\"%s\",\"name\":", f->category ? f->category : "task");
                json_str(c->out, f->name ? f->name : "task");
            }
            fputc('}', c->out);
        }
    }
}

static int chrome_event(void *ud, size_t thread, const sw_event *ev)
{
    chrome *c = ud;
    const sw_thread_info *ti = sw_trace_thread(c->t, thread);
    uint64_t tid = ti->native_tid ? ti->native_tid : ti->index;
    task_flows(c, thread, tid, ev->t_ns);
    switch (ev->kind) {
    case SW_OP_CALL:
    case SW_OP_RESUME:
    case SW_OP_C_CALL: {
        const sw_code_info *ci = sw_trace_code(c->t, ev->code);
        sep(c);
        fprintf(c->out, "{\"ph\":\"B\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", c->pid, tid);
        put_ts(c, ev->t_ns);
        fputs(",\"name\":", c->out);
        json_str(c->out, ci ? ci->qualname : "?");
        fprintf(c->out, ",\"cat\":\"%s\"", ev->kind == SW_OP_C_CALL ? "c" : "python");
        if (ci) {
            fputs(",\"args\":{\"file\":", c->out);
            json_str(c->out, ci->filename);
            fprintf(c->out, ",\"line\":%u%s}", ci->firstlineno,
                    ev->kind == SW_OP_RESUME ? ",\"resumed\":true" : "");
        }
        fputc('}', c->out);
        if (c->part)
            slice_flows(c, thread, tid, ev->t_ns);
        break;
    }
    case SW_OP_RETURN:
    case SW_OP_YIELD:
    case SW_OP_UNWIND:
    case SW_OP_C_RETURN:
        sep(c);
        fprintf(c->out, "{\"ph\":\"E\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", c->pid, tid);
        put_ts(c, ev->t_ns);
        fputc('}', c->out);
        break;
    case SW_EV_DROPPED:
        sep(c);
        fprintf(c->out, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", c->pid, tid);
        put_ts(c, ev->t_ns);
        fprintf(c->out, ",\"name\":\"stackwatch: events dropped\",\"args\":{\"count\":%u}}", ev->code);
        break;
    case SW_EV_EXT:
        if (ev->ext)
            ext_event(c, thread, tid, ev);
        break;
    case SW_EV_SAMPLE:
        if (ev->sample)
            sample_event(c, tid, ev->sample);
        break;
    case SW_WALK_SLICE_END:
        sep(c);
        fprintf(c->out, "{\"ph\":\"E\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"ts\":", c->pid, tid);
        put_ts(c, ev->t_ns);
        fputc('}', c->out);
        break;
    case SW_WALK_THREAD_END:
        while (c->nregions)
            region_end(c, tid, ev->t_ns, 1);
        slices_end(c, tid, ev->t_ns);
        task_flows(c, thread, tid, INT64_MAX);   /* those after the thread's last event */
        break;
    default:
        break;
    }
    return ferror(c->out) || c->oom ? 1 : 0;
}

int sw_export_chrome(sw_trace *t, FILE *out, const sw_export_opts *o, char *err, size_t errlen)
{
    const sw_export_part *part = o ? o->part : NULL;
    chrome c = {t, out, 0, 0, !part || part->first, NULL, part ? part->in_flow : 0, part,
                part ? part->flows : NULL, 0, 0, NULL, 0, 0, 0, o, 0, NULL};
    int wrc = sw_wake_flows_new(t, o, &c.wakes);
    if (wrc == SW_EIO) {
        snprintf(err, errlen, "a THREAD_RECORDS chunk could not be read");
        return SW_EIO;
    }
    c.slices = calloc((size_t)sw_export_pair_count() + 1, sizeof *c.slices);
    if (!c.slices || !c.wakes) {
        free(c.slices);
        sw_wake_flows_free(c.wakes);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    c.o = sw_wake_flows_opts(c.wakes);
    const sw_meta_entry *e;
    if ((e = sw_trace_meta_find(t, "pid")))
        c.pid = e->u;
    if ((e = sw_trace_meta_find(t, "mono0_ns")))
        c.mono0 = (int64_t)e->u;
    if (!part || part->first)
        fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
    const char *pname = (e = sw_trace_meta_find(t, "command")) && e->s ? e->s : "python";
    sep(&c);
    fprintf(out, "{\"ph\":\"M\",\"pid\":%" PRIu64 ",\"name\":\"process_name\",\"args\":{\"name\":", c.pid);
    json_str(out, pname);
    fputs("}}", out);
    for (size_t i = 0; i < sw_trace_thread_count(t); i++) {
        const sw_thread_info *ti = sw_trace_thread(t, i);
        if (!sw_filter_has_thread(o ? o->filter : NULL, i))
            continue;
        sep(&c);
        fprintf(out, "{\"ph\":\"M\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64 ",\"name\":\"thread_name\",\"args\":{\"name\":",
                c.pid, ti->native_tid ? ti->native_tid : ti->index);
        json_str(out, ti->name && ti->name[0] ? ti->name : "thread");
        fputs("}}", out);
    }
    int rc = sw_export_walk(t, c.o, chrome_event, &c);
    sw_wake_flows_free(c.wakes);
    while (c.nregions)   /* the walk stopped early */
        free(c.regions[--c.nregions].name);
    free(c.regions);
    free(c.slices);
    if (!part || part->last)
        fputs("\n]}\n", out);
    if (rc == SW_ENOMEM || c.oom) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    if (rc || fflush(out) != 0 || ferror(out)) {
        snprintf(err, errlen, "write error");
        return SW_EIO;
    }
    return SW_OK;
}
