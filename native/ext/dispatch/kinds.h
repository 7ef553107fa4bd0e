/*
 * kinds.h - the event kinds of the dispatch layer, defined once. One table,
 * SW_EVENT_KINDS, gives the C enum (SW_K_*), the names (stackwatch.EVENTS,
 * _native.EVENT_KINDS), the groups users may ask for by name ("calls",
 * "c_calls", "exceptions", "gc", "objects", "threads"; "all" is every
 * kind: _native.EVENT_GROUPS) and which CPython mechanism delivers each
 * kind on each version, hence the per-mechanism masks from which the
 * switching owner (ext/tracer/switch.c) decides what to turn on.
 *
 * A kind's number is its row in the table; its bit in a mask is
 * SW_EVB(kind). The numbering is part of the Python API (the bits of a
 * handler's mask) and of nothing on disk (the trace file has its own EXT
 * kinds, trace/format.h).
 */
#ifndef SW_KINDS_H
#define SW_KINDS_H

#include "ext/shared/compat.h"

#include <stdint.h>

#if PY_VERSION_HEX >= 0x030D0000
#  define SW_MON(e) (1u << PY_MONITORING_EVENT_##e)   /* cpython/monitoring.h */
#elif PY_VERSION_HEX >= 0x030C0000
#  include <internal/pycore_instruments.h>
#  define SW_MON(e) (1u << PY_MONITORING_EVENT_##e)
#else
#  define SW_MON(e) 0u                                /* no sys.monitoring */
#endif
/* sys.monitoring events that deliver the C-call kinds: a return pairs with
 * its call, so the three come together. */
#define SW_MON_C_CALLS (SW_MON(CALL) | SW_MON(C_RETURN) | SW_MON(C_RAISE))

/*
 * X(KIND, name, group, mechanism, monitoring, a), one row per kind:
 *   group       its named group (SW_G_*): CALLS, C_CALLS, LINES (not a name
 *               users can give: line and instruction are asked for alone),
 *               EXCEPTIONS, GC, OBJECTS, THREADS
 *   mechanism   what delivers it on 3.9-3.11 (SW_M_*): EVAL the PEP 523
 *               frame-evaluation hook, PROFILE the C profile hook of every
 *               thread, TRACE its C trace hook, NONE nothing (not
 *               available before 3.12); GC_CALLBACK an entry in
 *               gc.callbacks, CLASS_SLOTS the wrapped slots of every
 *               Python class, THREAD_WRAPPER a wrapper of
 *               threading.Thread._bootstrap_inner, TASK_HOOKS a
 *               greenlet.settrace callback (ext/tracer/tasks.c), the
 *               lock types' methods (ext/tracer/task_locks.c) and the
 *               wrappers of asyncio's and threading's task and queue methods
 *               (events/task_hooks.py) (these four, and EVAL, on every
 *               version)
 *   monitoring  from 3.12 on, the sys.monitoring events that deliver it
 *               instead (0: none, the mechanism above delivers it)
 *   a           passed through to X (see SW_GROUP_MASK)
 */
#define SW_EVENT_KINDS(X, a)                                                         \
    X(CALL,         call,         CALLS,      EVAL,           0, a)                  \
    X(RETURN,       return,       CALLS,      EVAL,           0, a)                  \
    X(YIELD,        yield,        CALLS,      EVAL,           0, a)                  \
    X(RESUME,       resume,       CALLS,      EVAL,           0, a)                  \
    X(UNWIND,       unwind,       CALLS,      EVAL,           0, a)                  \
    X(C_CALL,       c_call,       C_CALLS,    PROFILE,        SW_MON_C_CALLS, a)     \
    X(C_RETURN,     c_return,     C_CALLS,    PROFILE,        SW_MON_C_CALLS, a)     \
    X(C_RAISE,      c_raise,      C_CALLS,    PROFILE,        SW_MON_C_CALLS, a)     \
    X(LINE,         line,         LINES,      TRACE,          SW_MON(LINE), a)       \
    X(INSTRUCTION,  instruction,  LINES,      TRACE,          SW_MON(INSTRUCTION), a) \
    X(RAISE,        raise,        EXCEPTIONS, TRACE,          SW_MON(RAISE), a)      \
    X(HANDLED,      handled,      EXCEPTIONS, NONE,           SW_MON(EXCEPTION_HANDLED), a) \
    X(GC_START,     gc_start,     GC,         GC_CALLBACK,    0, a)                  \
    X(GC_DONE,      gc_done,      GC,         GC_CALLBACK,    0, a)                  \
    X(NEW_START,    new_start,    OBJECTS,    CLASS_SLOTS,    0, a)                  \
    X(NEW_DONE,     new_done,     OBJECTS,    CLASS_SLOTS,    0, a)                  \
    X(DEL_START,    delete_start, OBJECTS,    CLASS_SLOTS,    0, a)                  \
    X(DEL_DONE,     delete_done,  OBJECTS,    CLASS_SLOTS,    0, a)                  \
    X(THREAD_START, thread_start, THREADS,    THREAD_WRAPPER, 0, a)                  \
    X(THREAD_EXIT,  thread_exit,  THREADS,    THREAD_WRAPPER, 0, a)                  \
    X(TASK_SWITCH,  task_switch,  TASKS,      TASK_HOOKS,     0, a)                  \
    X(TASK_CREATE,  task_create,  TASKS,      TASK_HOOKS,     0, a)                  \
    X(TASK_EXIT,    task_exit,    TASKS,      TASK_HOOKS,     0, a)                  \
    X(TASK_BLOCK,   task_block,   TASKS,      TASK_HOOKS,     0, a)                  \
    X(TASK_WAKE,    task_wake,    TASKS,      TASK_HOOKS,     0, a)                  \
    X(TASK_SEND,    task_send,    TASKS,      TASK_HOOKS,     0, a)                  \
    X(TASK_RECEIVE, task_receive, TASKS,      TASK_HOOKS,     0, a)                  \
    X(TASK_NAME,    task_name,    TASKS,      TASK_HOOKS,     0, a)                  \
    X(TASK_WOKEN,   task_woken,   TASKS,      TASK_HOOKS,     0, a)

/* G(GROUP, name, named): named groups are the ones users may ask for. */
#define SW_EVENT_GROUPS(G)                                                            \
    G(CALLS, calls, 1) G(C_CALLS, c_calls, 1) G(GC, gc, 1) G(OBJECTS, objects, 1)    \
    G(THREADS, threads, 1) G(EXCEPTIONS, exceptions, 1) G(LINES, lines, 0) G(TASKS, tasks, 1)

#define SW_X_ENUM_(K, n, g, m, mon, a) SW_K_##K,
enum sw_ev_kind { SW_EVENT_KINDS(SW_X_ENUM_, _) SW_K_COUNT };

#define SW_G_ENUM_(G, n, named) SW_G_##G,
enum sw_ev_group { SW_EVENT_GROUPS(SW_G_ENUM_) SW_G_COUNT };

enum sw_ev_mechanism {
    SW_M_EVAL, SW_M_PROFILE, SW_M_TRACE, SW_M_NONE, SW_M_GC_CALLBACK, SW_M_CLASS_SLOTS,
    SW_M_THREAD_WRAPPER, SW_M_TASK_HOOKS,
};

#define SW_EVB(k) (1u << (k))
#define SW_MASK_ALL ((1u << SW_K_COUNT) - 1)

/* The kinds of a group, or of a mechanism: constant expressions. */
#define SW_X_IF_GROUP_(K, n, g, m, mon, want) | (SW_G_##g == (want) ? SW_EVB(SW_K_##K) : 0u)
#define SW_X_IF_MECH_(K, n, g, m, mon, want) | (SW_M_##m == (want) ? SW_EVB(SW_K_##K) : 0u)
#define SW_GROUP_MASK(g) (0u SW_EVENT_KINDS(SW_X_IF_GROUP_, SW_G_##g))
#define SW_MECH_MASK(m) (0u SW_EVENT_KINDS(SW_X_IF_MECH_, SW_M_##m))

#define SW_MASK_CALLS SW_GROUP_MASK(CALLS)           /* Python frames */
#define SW_MASK_C_CALLS SW_GROUP_MASK(C_CALLS)
#define SW_MASK_LINES SW_GROUP_MASK(LINES)           /* line and instruction */

/* What each mechanism delivers (the masks the switching owner reads; from
 * 3.12 on, sw_monitoring_events() says what sys.monitoring must deliver). */
#define SW_MASK_EVAL_HOOK SW_MECH_MASK(EVAL)
#define SW_MASK_GC_CALLBACK SW_MECH_MASK(GC_CALLBACK)
#define SW_MASK_CLASS_SLOTS SW_MECH_MASK(CLASS_SLOTS)
#define SW_MASK_THREAD_WRAPPER SW_MECH_MASK(THREAD_WRAPPER)
#define SW_MASK_TASK_HOOKS SW_MECH_MASK(TASK_HOOKS)
#if PY_VERSION_HEX < 0x030C0000
#  define SW_MASK_PROFILE_HOOK SW_MECH_MASK(PROFILE)
#  define SW_MASK_TRACE_HOOK SW_MECH_MASK(TRACE)   /* also: sys.settrace replaced */
#endif

/* The names of the kinds, by number. */
extern const char *const sw_kind_names[SW_K_COUNT];

/* The sys.monitoring events (3.12+) that deliver the kinds of mask (0
 * before 3.12). */
static inline uint32_t sw_monitoring_events(uint32_t mask)
{
    uint32_t e = 0;
#define SW_X_MON_EVENTS_(K, n, g, m, mon, a) if (mask & SW_EVB(SW_K_##K)) e |= (mon);
    SW_EVENT_KINDS(SW_X_MON_EVENTS_, _)
#undef SW_X_MON_EVENTS_
    return e;
}

/* Adds EVENT_KINDS (the names, by number) and EVENT_GROUPS ({name: mask}
 * of the named groups and "all") to the module. Returns 0, or -1 with an
 * exception set. */
int sw_kinds_add_to_module(PyObject *m);

#endif
