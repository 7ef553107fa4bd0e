/*
 * kernel_trace.c - the kernel reader's system calls written into the
 * session's trace (kernel_trace.h).
 */
#include "ext/tracer/session.h"   /* first: Python.h before any system header */

#include "kernel_trace.h"

#include "kernel/kernel.h"

#include <string.h>
#include <unistd.h>

static sw_syscalls *reader;
static sw_trec_stream *stream;
static uint64_t main_tid;

/* On the reader's thread: one finished system call. */
static void on_syscall(void *ud, const sw_syscall *s)
{
    (void)ud;
    sw_ext v = {.s1 = s->name ? s->name : "", .a = (uint64_t)s->nr, .b = (uint64_t)s->ret,
                .c = s->exit_ns - s->enter_ns};
    sw_trec_stream_add(stream, s->tid, s->enter_ns, SW_EXT_SYSCALL, &v);
}

/* Records the kernel lost: shown on the main thread's track. */
static void on_lost(void *ud, uint64_t mono_ns, uint64_t count)
{
    (void)ud;
    sw_ext v = {.a = count};
    sw_trec_stream_add(stream, main_tid, mono_ns ? mono_ns : sw_clock_ns(CLOCK_MONOTONIC), SW_EXT_KERNEL_LOST, &v);
}

int sw_kernel_trace_start(sw_writer *w, uint64_t mono0_ns, const char *what, char *msg, size_t len)
{
    msg[0] = 0;
    if (strcmp(what, "syscalls") != 0) {
        snprintf(msg, len, "unknown kernel events %.64s (known: syscalls)", what);
        return -1;
    }
    char err[256], note[128];
    sw_syscalls *s;
    if (sw_syscalls_open(&s, 0, err, sizeof err, note, sizeof note) != SW_OK) {
        snprintf(msg, len, "%s", err);
        return -1;
    }
    stream = sw_trec_stream_new(w, mono0_ns);
    main_tid = (uint64_t)getpid();
    sw_syscall_sink sink = {on_syscall, on_lost, NULL};
    if (!stream || sw_syscalls_start(s, &sink) != SW_OK) {
        sw_syscalls_free(s);
        sw_trec_stream_free(stream);
        stream = NULL;
        snprintf(msg, len, "cannot start the kernel reader's thread");
        return -1;
    }
    reader = s;
    if (note[0])
        snprintf(msg, len, "note: %s", note);
    return 0;
}

void sw_kernel_trace_stop(sw_bytes *kv)
{
    if (!reader)
        return;
    sw_syscalls_stop(reader);
    sw_trec_stream_flush(stream);
    sw_syscalls_stats st;
    sw_syscalls_stats_get(reader, &st);
    uint64_t written, lost_writing;
    sw_trec_stream_counts(stream, &written, &lost_writing);
    sw_kv_uint(kv, "kernel.syscalls", st.calls);
    sw_kv_uint(kv, "kernel.records", st.records);
    sw_kv_uint(kv, "kernel.lost", st.lost);
    sw_kv_uint(kv, "kernel.unpaired", st.unpaired);
    sw_kv_uint(kv, "kernel.unfinished", st.unfinished);
    sw_kv_uint(kv, "kernel.malformed", st.malformed);
    sw_kv_uint(kv, "kernel.unwritten", lost_writing);
    sw_syscalls_free(reader);
    sw_trec_stream_free(stream);
    reader = NULL;
    stream = NULL;
}

void sw_kernel_trace_forget(void)
{
    reader = NULL;
    stream = NULL;
}
