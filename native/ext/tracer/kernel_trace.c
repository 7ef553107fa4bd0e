/*
 * kernel_trace.c - the kernel reader's system calls written into the
 * session's trace, as one of its attachments (kernel_trace.h).
 */
#include "ext/tracer/session.h"   /* first: Python.h before any system header */

#include "kernel_trace.h"

#include "ext/dispatch/lttng_events.h"
#include "ext/tracer/attachments.h"
#include "kernel/kernel.h"
#include "lttng/lttng_provider.h"   /* the kernel events' numbers */

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct kernel_trace {
    sw_syscalls *reader;
    sw_trec_stream *stream;
    uint64_t main_tid;
    pid_t pid;               /* the process that started it */
} kernel_trace;

static kernel_trace K;
/* The END keys of the reader detached last, until the session takes them. */
static sw_bytes end_keys;
static uint64_t end_calls, end_lost;

/* On the reader's thread: one finished system call. */
static void on_syscall(void *ud, const sw_syscall *s)
{
    kernel_trace *k = ud;
    sw_ext v = {.s1 = s->name ? s->name : "", .a = (uint64_t)s->nr, .b = (uint64_t)s->ret,
                .c = s->exit_ns - s->enter_ns};
    sw_trec_stream_add(k->stream, s->tid, s->enter_ns, SW_EXT_SYSCALL, &v);
    sw_lttng_emit_kernel(SW_LTTNG_SYSCALL_ENTRY, s->tid, s->enter_ns, 0, s->nr, 0, 0, v.s1, NULL);
    sw_lttng_emit_kernel(SW_LTTNG_SYSCALL_EXIT, s->tid, s->exit_ns, 0, s->nr, s->ret, 0, v.s1, NULL);
}

/* On the reader's thread: a switch out or in, a wakeup, a page fault. */
static void on_event(void *ud, const sw_kevent *e)
{
    kernel_trace *k = ud;
    sw_ext v = {.a = e->cpu};
    uint32_t kind;
    switch (e->kind) {
    case SW_KEV_OFF_CPU:
        kind = SW_EXT_OFF_CPU;
        v.s1 = e->reason;
        v.b = e->a;
        v.c = e->peer;
        v.s2 = e->comm;
        break;
    case SW_KEV_ON_CPU:
        kind = SW_EXT_ON_CPU;
        v.b = e->a;
        v.c = e->b;
        v.line = e->peer;
        v.s1 = e->comm;
        break;
    case SW_KEV_WAKEUP:   /* the wakee's tid, its CPU */
    case SW_KEV_FAULT:    /* the address, the CPU */
        kind = e->kind == SW_KEV_WAKEUP ? SW_EXT_WAKEUP : SW_EXT_PAGE_FAULT;
        v.a = e->a;
        v.b = e->cpu;
        if (e->kind == SW_KEV_WAKEUP)
            v.s1 = e->comm;
        break;
    default:
        return;
    }
    sw_trec_stream_add(k->stream, e->tid, e->t_ns, kind, &v);
    /* --lttng: the same event, with its thread and time */
    if (kind == SW_EXT_OFF_CPU)
        sw_lttng_emit_kernel(SW_LTTNG_OFF_CPU, e->tid, e->t_ns, e->cpu, (int64_t)e->a, e->peer, 0, e->reason, e->comm);
    else if (kind == SW_EXT_ON_CPU)
        sw_lttng_emit_kernel(SW_LTTNG_ON_CPU, e->tid, e->t_ns, e->cpu, (int64_t)e->a, (int64_t)e->b, e->peer, e->comm,
                             NULL);
    else if (kind == SW_EXT_WAKEUP)
        sw_lttng_emit_kernel(SW_LTTNG_WAKEUP, e->tid, e->t_ns, e->cpu, (int64_t)e->a, 0, 0, e->comm, NULL);
    else
        sw_lttng_emit_kernel(SW_LTTNG_PAGE_FAULT, e->tid, e->t_ns, e->cpu, (int64_t)e->a, 0, 0, NULL, NULL);
}

/* Records the kernel lost: shown on the main thread's track. */
static void on_lost(void *ud, uint64_t mono_ns, uint64_t count)
{
    kernel_trace *k = ud;
    sw_ext v = {.a = count};
    sw_trec_stream_add(k->stream, k->main_tid, mono_ns ? mono_ns : sw_clock_ns(CLOCK_MONOTONIC), SW_EXT_KERNEL_LOST,
                       &v);
}

/* Its detach (attachments.h): stops the reader, writes its last records,
 * keeps its counts for END. */
static void kernel_detach(void *ud)
{
    kernel_trace *k = ud;
    if (!k->reader)
        return;
    sw_syscalls_stop(k->reader);   /* joins its thread, which never takes the GIL */
    sw_trec_stream_flush(k->stream);
    sw_syscalls_stats st;
    sw_syscalls_stats_get(k->reader, &st);
    uint64_t written, unwritten;
    sw_trec_stream_counts(k->stream, &written, &unwritten);
    end_keys.len = 0;
    end_calls = st.calls;
    end_lost = st.lost;
    sw_kv_uint(&end_keys, "kernel.syscalls", st.calls);
    sw_kv_uint(&end_keys, "kernel.records", st.records);
    sw_kv_uint(&end_keys, "kernel.lost", st.lost);
    sw_kv_uint(&end_keys, "kernel.unpaired", st.unpaired);
    sw_kv_uint(&end_keys, "kernel.unfinished", st.unfinished);
    sw_kv_uint(&end_keys, "kernel.malformed", st.malformed);
    sw_kv_uint(&end_keys, "kernel.off_cpu", st.off_cpu);
    sw_kv_uint(&end_keys, "kernel.wakeups", st.wakeups);
    sw_kv_uint(&end_keys, "kernel.faults", st.faults);
    sw_kv_uint(&end_keys, "kernel.unwritten", unwritten);
    sw_syscalls_free(k->reader);
    sw_trec_stream_free(k->stream);
    *k = (kernel_trace){0};
}

/* The SW_KERNEL_* mask of a comma-separated list of names; 0 (msg says
 * why) when a name is unknown. */
static unsigned kernel_mask(const char *what, char *msg, size_t len)
{
    static const struct {
        const char *name;
        unsigned bit;
    } parts[] = {{"syscalls", SW_KERNEL_SYSCALLS}, {"sched", SW_KERNEL_SCHED}, {"faults", SW_KERNEL_FAULTS}};
    unsigned mask = 0;
    for (const char *p = what; *p;) {
        size_t n = strcspn(p, ",");
        unsigned bit = 0;
        for (size_t i = 0; i < sizeof parts / sizeof *parts && !bit; i++)
            if (n == strlen(parts[i].name) && memcmp(p, parts[i].name, n) == 0)
                bit = parts[i].bit;
        if (!bit) {
            snprintf(msg, len, "unknown kernel events %.*s (known: syscalls, sched, faults)", (int)(n > 64 ? 64 : n), p);
            return 0;
        }
        mask |= bit;
        p += n + (p[n] == ',');
    }
    if (!mask)
        snprintf(msg, len, "no kernel events named (known: syscalls, sched, faults)");
    return mask;
}

int sw_kernel_trace_start(const char *what, char *msg, size_t len)
{
    msg[0] = 0;
    unsigned mask = kernel_mask(what, msg, len);
    if (!mask)
        return -1;
    if (K.reader && K.pid != getpid())
        K = (kernel_trace){0};   /* a forked child: the reader's thread is the parent's (leaked, never touched) */
    if (K.reader) {
        snprintf(msg, len, "the kernel reader already writes into this trace");
        return -1;
    }
    char err[320], note[384];
    sw_syscalls *s;
    /* STACKWATCH_TEST_KERNEL_RING=<bytes> (the tests): rings that small
     * (a page at least), which a burst of system calls fills: lost records. */
    const char *ring = getenv("STACKWATCH_TEST_KERNEL_RING");
    size_t ring_bytes = ring ? (size_t)strtoull(ring, NULL, 10) : 0;
    if (sw_syscalls_open(&s, mask, ring_bytes, err, sizeof err, note, sizeof note) != SW_OK) {
        snprintf(msg, len, "%s", err);
        return -1;
    }
    sw_writer *w = NULL;
    uint64_t mono0 = 0;
    sw_attachment att = {"kernel", SW_CHUNK_THREAD_RECORDS, kernel_detach, &K};
    int why = sw_session_attach(&att, &w, &mono0);
    if (why != SW_ATTACH_OK) {
        sw_syscalls_free(s);
        snprintf(msg, len, "%s", why == SW_ATTACH_NO_SESSION ? "no trace session records"
                                 : why == SW_ATTACH_TAKEN    ? "another producer writes this trace's thread records"
                                                             : "too many producers write into this trace");
        return -1;
    }
    K.stream = sw_trec_stream_new(w, mono0);
    K.main_tid = (uint64_t)getpid();
    K.pid = getpid();
    K.reader = s;
    sw_syscall_sink sink = {on_syscall, on_event, on_lost, &K};
    if (!K.stream || sw_syscalls_start(s, &sink) != SW_OK) {
        sw_session_detach(&K);
        sw_syscalls_free(s);
        sw_trec_stream_free(K.stream);
        K = (kernel_trace){0};
        snprintf(msg, len, "cannot start the kernel reader's thread");
        return -1;
    }
    end_keys.len = 0;
    if (note[0])
        snprintf(msg, len, "note: %s", note);
    return 0;
}

int sw_kernel_trace_end_keys(sw_bytes *kv, uint64_t *calls, uint64_t *lost)
{
    int had = end_keys.len != 0;
    if (had)
        sw_bytes_put(kv, end_keys.data, end_keys.len);
    sw_bytes_free(&end_keys);
    *calls = had ? end_calls : 0;
    *lost = had ? end_lost : 0;
    return had;
}
