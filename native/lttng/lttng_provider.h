/*
 * lttng_provider.h - the public header of native/lttng: libstackwatch_lttng.so, the
 * LTTng-UST tracepoint provider of `stackwatch run --lttng`. Built only
 * where the lttng-ust headers are found (src/stackwatch/meson.build) and
 * loaded at run time by the tracer (ext/dispatch/lttng_events.c, dlopen), so
 * stackwatch has no hard dependency on LTTng. No Python.h: the library
 * takes the names as C strings.
 *
 * Tracepoints (provider "stackwatch", readable by babeltrace2 once an LTTng
 * session enabled them: `lttng enable-event -u 'stackwatch:*'`):
 *   stackwatch:function_entry  { function, file, line }  a Python frame
 *                              starts or resumes (line: its first line)
 *   stackwatch:function_exit   { function, file, line }  it returns, yields
 *                              or unwinds (line: the one it leaves from)
 *   stackwatch:native_entry    { function, file, line, addr }  a native
 *   stackwatch:native_exit     { function, file, line, addr }  function
 *                              (-finstrument-functions) starts / returns:
 *                              its symbol, source file and first line (or
 *                              its object and 0), its address
 *   stackwatch:task_switch ... task_woken  { function, file, line, a, b,
 *                              c, s1, s2 }  a task event (`--events
 *                              tasks`): where, then its record's fields
 *                              (records.h: a task id, a thread id, ...)
 *   stackwatch:syscall_entry   { tid, ts, id, name }  the kernel events of
 *   stackwatch:syscall_exit    { tid, ts, id, name, ret }  `--kernel`,
 *   stackwatch:off_cpu         { tid, ts, cpu, reason, state, next_tid,
 *                                next_comm }           as the trace's
 *   stackwatch:on_cpu          { tid, ts, cpu, waker, woken_ns, prev_tid,
 *                                prev_comm }           records have them
 *   stackwatch:wakeup          { tid, ts, cpu, wakee, comm }  (records.h):
 *   stackwatch:page_fault      { tid, ts, cpu, address }  tid the thread
 *                              they are about, ts their time (the perf
 *                              record's, CLOCK_MONOTONIC ns: LTTng's own
 *                              timestamp and vtid are those of the reader
 *                              thread that emits them, milliseconds later)
 * An LTTng session adds the vpid / vtid / procname contexts itself
 * (`lttng add-context -u -t vpid -t vtid -t procname`).
 */
#ifndef SW_LTTNG_PROVIDER_H
#define SW_LTTNG_PROVIDER_H

#include <stdint.h>

/* The task events, in the order of the dispatch layer's kinds
 * (ext/dispatch/kinds.h, TASK_SWITCH..TASK_WOKEN): T(name). */
#define SW_LTTNG_TASKS(T)                                                                                     \
    T(task_switch) T(task_create) T(task_exit) T(task_block) T(task_wake) T(task_send) T(task_receive)       \
    T(task_name) T(task_woken)

/* The library's entry points, found with dlsym under these names. */
#define SW_LTTNG_ENTRY_SYMBOL "stackwatch_lttng_function_entry"
#define SW_LTTNG_EXIT_SYMBOL "stackwatch_lttng_function_exit"
#define SW_LTTNG_NATIVE_SYMBOL "stackwatch_lttng_native"
#define SW_LTTNG_TASK_SYMBOL "stackwatch_lttng_task"
#define SW_LTTNG_KERNEL_SYMBOL "stackwatch_lttng_kernel"

/* The kernel events, by number (stackwatch_lttng_kernel's kind). */
enum {
    SW_LTTNG_SYSCALL_ENTRY,  /* a: id; s1: name */
    SW_LTTNG_SYSCALL_EXIT,   /* a: id, b: ret; s1: name */
    SW_LTTNG_OFF_CPU,        /* a: state, b: next_tid; s1: reason, s2: next_comm */
    SW_LTTNG_ON_CPU,         /* a: waker, b: woken_ns, c: prev_tid; s1: prev_comm */
    SW_LTTNG_WAKEUP,         /* a: the wakee; s1: its comm */
    SW_LTTNG_PAGE_FAULT,     /* a: address */
};

typedef void (*sw_lttng_fn)(const char *function, const char *file, int line);
typedef void (*sw_lttng_native_fn)(int exit, const char *function, const char *file, int line, uintptr_t addr);
typedef void (*sw_lttng_task_fn)(int task, const char *function, const char *file, int line, int64_t a, int64_t b,
                                 int64_t c, const char *s1, const char *s2);
typedef void (*sw_lttng_kernel_fn)(int kind, uint32_t tid, uint64_t ts, uint32_t cpu, int64_t a, int64_t b,
                                   int64_t c, const char *s1, const char *s2);

void stackwatch_lttng_function_entry(const char *function, const char *file, int line);
void stackwatch_lttng_function_exit(const char *function, const char *file, int line);
/* native_entry (exit 0) or native_exit (1). */
void stackwatch_lttng_native(int exit, const char *function, const char *file, int line, uintptr_t addr);
/* The task event `task` (its position in SW_LTTNG_TASKS; others: none). */
void stackwatch_lttng_task(int task, const char *function, const char *file, int line, int64_t a, int64_t b,
                           int64_t c, const char *s1, const char *s2);
/* The kernel event `kind` (SW_LTTNG_SYSCALL_ENTRY ...; others: none) of
 * thread tid at ts (CLOCK_MONOTONIC ns), on CPU cpu. */
void stackwatch_lttng_kernel(int kind, uint32_t tid, uint64_t ts, uint32_t cpu, int64_t a, int64_t b, int64_t c,
                             const char *s1, const char *s2);

#endif
