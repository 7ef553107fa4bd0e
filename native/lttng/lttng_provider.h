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
 * An LTTng session adds the vpid / vtid / procname contexts itself
 * (`lttng add-context -u -t vpid -t vtid -t procname`).
 */
#ifndef SW_LTTNG_PROVIDER_H
#define SW_LTTNG_PROVIDER_H

/* The library's entry points, found with dlsym under these names. */
#define SW_LTTNG_ENTRY_SYMBOL "stackwatch_lttng_function_entry"
#define SW_LTTNG_EXIT_SYMBOL "stackwatch_lttng_function_exit"

typedef void (*sw_lttng_fn)(const char *function, const char *file, int line);

void stackwatch_lttng_function_entry(const char *function, const char *file, int line);
void stackwatch_lttng_function_exit(const char *function, const char *file, int line);

#endif
