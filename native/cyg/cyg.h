/*
 * cyg.h - the native-function runtime's public header (native/cyg): what
 * the tracer and the runtime library libstackwatch_cyg.so share. C
 * functions compiled with -finstrument-functions call
 * __cyg_profile_func_enter/exit at their start and end; a static archive
 * of hidden stubs linked into such an extension (stubs.c, what `python -m
 * stackwatch config --ldflags` names) forwards them to
 * stackwatch_cyg_enter/exit of the runtime (runtime.c), which writes them
 * into the running trace's per-thread buffer as C_CALL / C_RETURN events
 * of native code ids (format.h SW_CODE_NATIVE), without Python.h.
 *
 * The runtime finds the thread's buffer through a thread-local pointer
 * that the tracer sets when the thread attaches to a session
 * (stackwatch_cyg_set_thread): an sw_cyg_thread the tracer owns, until
 * the thread exits (12 KiB). An event is recorded only while its session is
 * the live one, the thread holds the GIL (the flusher seals buffers under
 * it, and define() needs it) and is not running stackwatch's own code; each thread keeps the
 * native frames it has open, so an exit pairs with its entry, and the
 * frames a longjmp (or a C++ exception) left without an exit are closed at
 * the next exit of a frame below them. With `run --lttng` the tracer
 * also gets each recorded entry and exit (emit), for LTTng-UST.
 */
#ifndef SW_CYG_H
#define SW_CYG_H

#include <stdint.h>

struct sw_tbuf;
struct sw_clock;
struct _ts;   /* CPython's PyThreadState */

#define SW_CYG_MAX_OPEN 512u   /* native frames a thread keeps open; deeper ones are not recorded */
#define SW_CYG_CACHE 256u      /* per-thread cache of function address -> code id */
#define SW_CYG_SKIP UINT32_MAX /* a function left out (or that could not be defined) */

typedef struct sw_cyg_open {
    void *fn;
    uint32_t recorded;
} sw_cyg_open;

typedef struct sw_cyg_slot {
    void *fn;
    uint32_t id;
} sw_cyg_slot;

typedef struct sw_cyg_thread {
    /* Set by the tracer (native/ext/tracer/native_frames.c). */
    struct sw_tbuf *tb;              /* the thread's buffer in the trace */
    const struct sw_clock *clock;    /* the session's clock */
    const uint64_t *live;            /* the live session's generation (0: none) */
    uint64_t gen;                    /* records while *live == gen */
    const int *busy;                 /* the thread's calls-off mark (stackwatch's own code: busy or quiet) */
    /* The thread holds the GIL when the interpreter's current thread state
     * (_PyThreadState_UncheckedGet: NULL while released) is its own. */
    struct _ts *(*current)(void);
    const struct _ts *me;
    int (*make_room)(struct sw_tbuf *);       /* writer.h sw_tbuf_make_room */
    uint32_t (*define)(void *fn);             /* a function's code id (GIL held), or SW_CYG_SKIP */
    /* While *emit_on is nonzero (`run --lttng`), each recorded entry and
     * exit is also handed to emit (exit 0 / 1, the function), GIL held. */
    const uint32_t *emit_on;
    void (*emit)(int exit, void *fn);
    /* The runtime's (zero when the tracer hands it over). */
    uint32_t depth;                  /* frames in open[] */
    uint32_t over;                   /* frames open beyond SW_CYG_MAX_OPEN */
    uint64_t events;                 /* events written */
    sw_cyg_open open[SW_CYG_MAX_OPEN];
    sw_cyg_slot cache[SW_CYG_CACHE];
} sw_cyg_thread;

/* Where an extension's stubs keep the runtime's entry points: its
 * exported `stackwatch_cyg_slots`, filled by the stubs when they find the
 * runtime, or by the tracer when it loads the runtime after them. */
typedef void (*sw_cyg_fn)(void *fn, void *site);
typedef struct sw_cyg_slots {
    sw_cyg_fn enter, exit;
} sw_cyg_slots;

/* The runtime's entry points (exported by libstackwatch_cyg.so under these
 * unique names: glibc's own empty __cyg_profile_func_* would win over a
 * shared library's). */
void stackwatch_cyg_enter(void *fn, void *site);
void stackwatch_cyg_exit(void *fn, void *site);
/* The calling thread's state (NULL: record nothing on this thread). */
void stackwatch_cyg_set_thread(sw_cyg_thread *t);

#endif
