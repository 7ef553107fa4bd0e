/*
 * records.h - the trace's EXT record kinds (format.h SW_OP_EXT), defined
 * once. One table, SW_RECORD_KINDS, gives each kind its number on disk, its
 * name (the Python view's, stackwatch.EVENTS' where the dispatch layer
 * delivers it), the format minor version that added it, the fields of its
 * payload and what it means to the views. From it come the SW_EXT_* numbers,
 * the writer's encoder (sw_record_encode), the reader's decoder
 * (sw_record_decode) and its skipping of unknown kinds, the names,
 * categories and args of every export (export_walk.c, export_chrome.c,
 * export_perfetto.c), the counts and the GC time of stats (analysis.c), the test generator
 * (tests/c/tracegen.h) and the Python view (_native.RECORD_KINDS, read by
 * stackwatch/tracer/tracefile.py). Adding a kind is one row here, plus its
 * producer; a consumer names a kind only where the replay itself depends on
 * it (DROPPED and TEARDOWN in replay.c, the regions' own track in the
 * exporters).
 *
 * A payload is its fields in the order of the row, then possibly bytes a
 * newer minor version added (a reader ignores them). A decoded payload is
 * an sw_ext (reader.h): each field has a slot there.
 */
#ifndef SW_RECORDS_H
#define SW_RECORDS_H

#include <stddef.h>
#include <stdint.h>

/*
 * X(KIND, number, name, since, from, category, label, shape, pair, stat, title, track, F), one row per kind:
 *   number    its number on disk (never reused)
 *   name      its name in the Python view and the stats' table
 *   since     the format minor version (1.x) that added it
 *   from      who writes it: WRITER (writer.c), TRACER (the tracer's
 *             frames), PROGRAM (the traced program, stackwatch.region),
 *             DISPATCH (the dispatch layer's event kind of the same name,
 *             ext/dispatch/kinds.h, through ext/tracer/file_events.c),
 *             KERNEL (the kernel's events of a thread, read by stackwatch's
 *             kernel reader, native/kernel, and written into a side stream:
 *             format.h SW_CHUNK_THREAD_RECORDS), OLDER (written by an
 *             older writer only: read, never written; a row of the same
 *             name replaced it)
 *   category  its category in the exports ("line", "exception", "gc", ...)
 *   label     the name of its instants in the exports, followed by its
 *             title field when that is set: "raise ValueError", "line 12"
 *   shape     what it is to the views (SW_RS_*): REPLAY the replay itself
 *             consumes it (never delivered to the views; the task
 *             reader's replay, SW_REPLAY_TASKS, gets TASK_STACK); INSTANT an instant on its
 *             thread's track; OPEN / CLOSE it opens / closes a slice on a
 *             track of its own under its thread (one open at a time: a
 *             second OPEN ends the first as unfinished; a CLOSE with no
 *             OPEN, or a malformed one, is an instant); NEST_OPEN /
 *             NEST_CLOSE a slice on its own track, nesting (regions);
 *             SLICE a slice on its thread's own track, nested among the
 *             frames, from its time for its `duration` field (ns; slot C),
 *             named by its title alone ("write"); it ends early where the
 *             thread's next frame event comes first (a system call)
 *   pair      the kind it pairs with (OPEN <-> CLOSE, and the start and
 *             done of an object's creation and deletion, which the views
 *             show as instants), or NONE
 *   stat      the figure of stats it adds to (SW_RSTAT_*): NONE, or GC
 *             (an OPEN..CLOSE pair of one thread is one collection whose
 *             time adds to the GC time; the CLOSE's fields b and c add to
 *             the collected and uncollectable sums), SYSCALL (a SLICE whose
 *             count and duration add to the time in system calls, per name
 *             S1), KERNEL_LOST (field A adds to the kernel records lost),
 *             OFF_CPU (an OPEN..CLOSE pair of one thread is an interval off
 *             CPU whose time adds to the thread's and to the function's
 *             that was innermost when it began), FAULT (one page fault,
 *             counted per function as a system call is)
 *   title     the slot whose value follows the label (SW_SLOT_*: a number
 *             always, a string when not empty), or NONE
 *   track     OPEN kinds: the name of the slice and of its track ("GC"); the
 *             slice is named "track (field value)" after the OPEN's first
 *             field, e.g. "GC (generation 2)"; else NULL
 *   F         F(field, type, slot) for each field of the payload, in order:
 *             type SW_FT_* (VARINT, SIGNED, STR, CODE, TID; TID_LATER,
 *             STR_LATER: a field a later minor version appended to the
 *             row, absent from older traces, read as 0 / "" there;
 *             VARINT_LATER likewise, and not written when 0: the row's
 *             last field; ISTR:
 *             a str written as the varint id of a STRINGS entry, format
 *             1.16, which the views see as a STR), slot
 *             SW_SLOT_* (CODE, LINE, A, B, C, S1, S2) where the reader puts it
 *
 * The exports' args of an instant are its fields in order: a CODE field
 * as "function" and "file" (the code's qualified name and file), the
 * others under their field names. The slice of an OPEN..CLOSE pair has the
 * OPEN's fields, then the CLOSE's fields the OPEN does not have.
 */
#define SW_RECORD_KINDS_BASE(X, F)                                                                           \
    X(DROPPED, 1, dropped, 0, WRITER, "event", "dropped", REPLAY, NONE, NONE, NONE, NULL,                           \
      F(count, VARINT, A))                                                                                 \
    X(LINE, 2, line, 1, DISPATCH, "line", "line", INSTANT, NONE, NONE, LINE, NULL,                                    \
      F(code, CODE, CODE) F(line, VARINT, LINE))                                                           \
    X(INSTRUCTION, 3, instruction, 1, DISPATCH, "instruction", "instruction", INSTANT, NONE, NONE, S1, NULL,          \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(offset, VARINT, A) F(opcode, VARINT, B)                  \
      F(opname, STR, S1))                                                                                  \
    X(RAISE, 4, raise, 1, DISPATCH, "exception", "raise", INSTANT, NONE, NONE, S1, NULL,                              \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(type, STR, S1))                                          \
    X(HANDLED, 5, handled, 1, DISPATCH, "exception", "handled", INSTANT, NONE, NONE, S1, NULL,                        \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(type, STR, S1))                                          \
    X(GC_START, 6, gc_start, 1, DISPATCH, "gc", "GC start", OPEN, GC_DONE, GC, NONE, "GC",                             \
      F(generation, VARINT, A))                                                                            \
    X(GC_DONE, 7, gc_done, 1, DISPATCH, "gc", "GC done", CLOSE, GC_START, GC, NONE, NULL,                              \
      F(generation, VARINT, A) F(collected, VARINT, B) F(uncollectable, VARINT, C))                       \
    X(NEW_START, 8, new_start, 1, DISPATCH, "object", "new start", INSTANT, NEW_DONE, NONE, S1, NULL,                  \
      F(class, STR, S1) F(file, STR, S2))                                                                  \
    X(NEW_DONE, 9, new_done, 1, DISPATCH, "object", "new done", INSTANT, NEW_START, NONE, S1, NULL,                    \
      F(class, STR, S1) F(file, STR, S2))                                                                  \
    X(DEL_START, 10, delete_start, 1, DISPATCH, "object", "delete start", INSTANT, DEL_DONE, NONE, S1, NULL,           \
      F(class, STR, S1) F(file, STR, S2))                                                                  \
    X(DEL_DONE, 11, delete_done, 1, DISPATCH, "object", "delete done", INSTANT, DEL_START, NONE, S1, NULL,             \
      F(class, STR, S1) F(file, STR, S2))                                                                  \
    X(THREAD_START, 12, thread_start, 1, DISPATCH, "thread", "thread start", INSTANT, NONE, NONE, S1, NULL,           \
      F(name, STR, S1) F(native_id, TID, A))                                                               \
    X(THREAD_EXIT, 13, thread_exit, 1, DISPATCH, "thread", "thread exit", INSTANT, NONE, NONE, S1, NULL,              \
      F(name, STR, S1) F(native_id, TID, A))                                                               \
    X(TEARDOWN, 14, teardown, 4, TRACER, "event", "teardown", REPLAY, NONE, NONE, NONE, NULL, )                    \
    X(REGION_BEGIN, 15, region_begin, 6, PROGRAM, "region", "region", NEST_OPEN, REGION_END, NONE, S1, NULL,         \
      F(name, STR, S1))                                                                                    \
    X(REGION_END, 16, region_end, 6, PROGRAM, "region", "region end", NEST_CLOSE, REGION_BEGIN, NONE, NONE, NULL, ) \
    X(TASK_SWITCH, 17, task_switch, 7, TRACER, "task", "task switch", REPLAY, NONE, NONE, NONE, NULL,           \
      F(origin, VARINT, A) F(task, VARINT, B))                                                     \
    X(SYSCALL, 18, syscall, 8, KERNEL, "syscall", "syscall", SLICE, NONE, SYSCALL, S1, NULL,                    \
      F(name, STR, S1) F(nr, VARINT, A) F(ret, SIGNED, B) F(duration, VARINT, C))                           \
    X(KERNEL_LOST, 19, kernel_lost, 8, KERNEL, "kernel", "kernel records lost", INSTANT, NONE, KERNEL_LOST, A,  \
      NULL, F(count, VARINT, A))                                                                           \
    X(TASK_CREATE_INLINE, 20, task_create, 9, OLDER, "task", "task create", INSTANT, NONE, NONE, S1, NULL,      \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(task, VARINT, A) F(kind, VARINT, B) F(native_id, TID, C)  \
      F(name, STR, S1))                                                                                    \
    X(TASK_EXIT, 21, task_exit, 9, DISPATCH, "task", "task exit", INSTANT, NONE, NONE, S1, NULL,                \
      F(task, VARINT, A) F(outcome, VARINT, B) F(result, STR, S1))                                         \
    X(TASK_BLOCK_INLINE, 22, task_block, 9, OLDER, "task", "task block", INSTANT, NONE, NONE, S1, NULL,             \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(reason, VARINT, A) F(channel, STR, S1))                  \
    X(TASK_WAKE_INLINE, 23, task_wake, 9, OLDER, "task", "task wake", INSTANT, NONE, NONE, S1, NULL,                \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(task, VARINT, A) F(native_id, TID, C) F(channel, STR, S1)) \
    X(TASK_SEND_INLINE, 24, task_send, 9, OLDER, "task", "send", INSTANT, NONE, NONE, S1, NULL,                      \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(peer, VARINT, A) F(channel, STR, S1) F(value, STR, S2))  \
    X(TASK_RECEIVE_INLINE, 25, task_receive, 9, OLDER, "task", "receive", INSTANT, NONE, NONE, S1, NULL,             \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(peer, VARINT, A) F(channel, STR, S1) F(value, STR, S2))  \
    X(TASK_NAME, 26, task_name, 9, DISPATCH, "task", "task name", INSTANT, NONE, NONE, S1, NULL,                \
      F(task, VARINT, A) F(native_id, TID, C) F(name, STR, S1) F(group, STR, S2))                          \
    X(TASK_WOKEN_INLINE, 27, task_woken, 12, OLDER, "task", "task woken", INSTANT, NONE, NONE, S1, NULL,            \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(task, VARINT, A) F(native_id, TID, C) F(ago, VARINT, B)  \
      F(channel, STR, S1))                                                                                 \
    X(OFF_CPU, 28, off_cpu, 10, KERNEL, "sched", "off CPU", OPEN, ON_CPU, OFF_CPU, S1, "off CPU",              \
      F(reason, STR, S1) F(cpu, VARINT, A) F(state, VARINT, B) F(next_tid, TID_LATER, C)                   \
      F(next_comm, STR_LATER, S2))                                                                         \
    X(ON_CPU, 29, on_cpu, 10, KERNEL, "sched", "on CPU", CLOSE, OFF_CPU, OFF_CPU, NONE, NULL,                  \
      F(next_cpu, VARINT, A) F(waker, TID, B) F(woken_ns, VARINT, C) F(prev_tid, TID_LATER, LINE)           \
      F(prev_comm, STR_LATER, S1))                                                                         \
    X(WAKEUP, 30, wakeup, 10, KERNEL, "sched", "wakeup", INSTANT, NONE, NONE, A, NULL,                        \
      F(tid, TID, A) F(cpu, VARINT, B) F(comm, STR_LATER, S1))                                             \
    X(PAGE_FAULT, 31, page_fault, 10, KERNEL, "fault", "page fault", INSTANT, NONE, FAULT, NONE, NULL,        \
      F(address, VARINT, A) F(cpu, VARINT, B))                                                             \
    X(CPU, 32, cpu, 13, TRACER, "sched", "cpu", INSTANT, NONE, NONE, A, NULL, F(cpu, VARINT, A))                                                   \
    X(TASK_BLOCK, 33, task_block, 16, DISPATCH, "task", "task block", INSTANT, NONE, NONE, S1, NULL,             \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(reason, VARINT, A) F(channel, ISTR, S1))                  \
    X(TASK_WAKE, 34, task_wake, 16, DISPATCH, "task", "task wake", INSTANT, NONE, NONE, S1, NULL,                \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(task, VARINT, A) F(native_id, TID, C) F(channel, ISTR, S1)  \
      F(cause, VARINT_LATER, B))                                                                           \
    X(TASK_SEND, 35, task_send, 16, DISPATCH, "task", "send", INSTANT, NONE, NONE, S1, NULL,                      \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(peer, VARINT, A) F(channel, ISTR, S1) F(value, STR, S2))  \
    X(TASK_RECEIVE, 36, task_receive, 16, DISPATCH, "task", "receive", INSTANT, NONE, NONE, S1, NULL,             \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(peer, VARINT, A) F(channel, ISTR, S1) F(value, STR, S2))  \
    X(TASK_WOKEN, 37, task_woken, 16, DISPATCH, "task", "task woken", INSTANT, NONE, NONE, S1, NULL,            \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(task, VARINT, A) F(native_id, TID, C) F(ago, VARINT, B)  \
      F(channel, ISTR, S1))                                                                                \
    X(TASK_CREATE, 38, task_create, 18, DISPATCH, "task", "task create", INSTANT, NONE, NONE, S1, NULL,         \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(task, VARINT, A) F(kind, VARINT, B) F(native_id, TID, C)  \
      F(name, ISTR, S1))                                                                                   \
    X(TASK_STACK, 39, task_stack, 20, TRACER, "task", "task stack", REPLAY, NONE, NONE, NONE, NULL,            \
      F(task, VARINT, A) F(native_id, TID, C) F(frames, ISTR, S1))

/* A test build may add rows (tests/c/meson.build: a trace library built
 * with -DSW_RECORD_KINDS_EXTRA_H="file" whose file defines
 * SW_RECORD_KINDS_EXTRA(X, F)), to check that a new row reaches every
 * consumer with no other edit. */
#ifdef SW_RECORD_KINDS_EXTRA_H
#  include SW_RECORD_KINDS_EXTRA_H
#else
#  define SW_RECORD_KINDS_EXTRA(X, F)
#endif
#define SW_RECORD_KINDS(X, F) SW_RECORD_KINDS_BASE(X, F) SW_RECORD_KINDS_EXTRA(X, F)

/* What the DROPPED and TEARDOWN records are (the replay consumes them):
 *   DROPPED   varint n: n events were lost at this point (the writer's
 *             buffer was full; 0: unknown)
 *   TEARDOWN  no payload (format 1.4): the innermost open frame has
 *             returned (or unwound) and its locals are being cleared; the
 *             events up to its exit ran during that clearing (3.12+:
 *             finalizers, weakref callbacks, generators closed). A reader
 *             ends the frame here and puts those events after it, one level
 *             up, as sys.setprofile reports them.
 * Regions (format 1.6) are named parts of a thread's time marked by the
 * program (stackwatch.region, the pytest plugin); they nest among
 * themselves, not with the frames: REGION_END closes the innermost open
 * one.
 * TASK_SWITCH (format 1.7): the thread stops running task `origin` and
 * runs task `task` (a greenlet: `stackwatch run --events tasks`). Task 0 is
 * the thread itself (its main greenlet); other ids are defined by TASK
 * chunks (format.h), which name them. Each task has its own open frames:
 * the frames open before the record are `origin`'s (when the replay had
 * them as another task's, e.g. at a chunk read after a gap, they are
 * relabelled), those after it are `task`'s, as it left them. A reader
 * shows each task as a track of its own (reader.h sw_thread_info.task).
 * Task events (format 1.9, `--events tasks`; tracer/task_events.py reads
 * them): a task is named by its id on the thread that writes the record
 * (0: that thread itself); a thread elsewhere by its native id
 * (`native_id`, 0: this thread).
 *   TASK_CREATE   task `task` made by the running task, here; kind 1
 *                 greenlet, 2 asyncio, 3 thread: written by the new
 *                 thread as it starts, made by task `task` of the thread
 *                 `native_id`, here (that thread's code); name its name
 *   TASK_EXIT     task `task` ended: outcome 0 returned (result its repr),
 *                 1 raised (result the exception's repr), 2 cancelled; a
 *                 greenlet's result "": not known (one that began before
 *                 task events and ended into a parent waiting in a
 *                 switch() not ours; else the record is written as that
 *                 switch() returns the result, after the switch to it)
 *   TASK_BLOCK    the running task waits, here: reason (by number: lock, condition,
 *                 event, queue, future, channel, sleep, io, join),
 *                 channel what it waits on ("" unknown)
 *   TASK_WAKE     the running task ends task `task`'s wait, here;
 *                 (format 1.19) cause 0: it did; else a TASK_BLOCK reason
 *                 + 1 (io: 8): that ended the wait, no task did (the fd
 *                 the task waited on became ready: asyncio's selector
 *                 found it so, and the running task, the loop's thread,
 *                 only passed it on)
 *   TASK_SEND     the running task hands value to channel, here; peer the
 *                 receiving task's id + 1 (0: not known yet)
 *   TASK_RECEIVE  the running task's get or switch returns value from
 *                 channel; peer the sender's id + 1 (0: not known)
 *   TASK_NAME     task `task` is named name, in group ("": none) by
 *                 stackwatch.name(): the name wins over the automatic one;
 *                 or by asyncio after its creation (set_name; an eager
 *                 task, whose TASK_CREATE has no name)
 *   TASK_WOKEN    (format 1.12) the running task's wait on channel ended,
 *                 here: task `task` of thread `native_id` ended it `ago` ns
 *                 before this record (written by the woken task, when only
 *                 it can know who woke it: a lock's last release)
 * Format 1.16 writes TASK_BLOCK, WAKE, SEND, RECEIVE and WOKEN as kinds
 * 33-37, whose channel is interned (a STRINGS entry's id: a channel's
 * name is written once, not in every record); the kinds 22-25 and 27 of
 * the older versions, the channel inline, read as the same events.
 * Format 1.18 writes TASK_CREATE as kind 38, its name interned: the same
 * entry as the task's definition (format.h SW_CHUNK_TASK_INTERNED), so a
 * task's name is written once; kind 20 (the name inline) reads as it.
 *   TASK_STACK    (format 1.20) only in a file without call records
 *                 (META calls 0: `run --no-trace --events tasks`), where
 *                 no replay of the creator's frames can give a task's
 *                 creation stack: the stack that made task `task` (of
 *                 this thread; a thread: task 0 and the new thread's
 *                 `native_id`), as text, interned (one STRINGS entry per
 *                 distinct stack): its frames innermost first, separated
 *                 by spaces, each a code id, the innermost with `:line`
 *                 (`12:40 7 3`); at most 200 bytes, whole frames (the
 *                 outermost dropped). Shape REPLAY: no view shows it; the
 *                 task reader gets it (SW_REPLAY_TASKS).
 * OFF_CPU..ON_CPU (format 1.10, `run --kernel=sched`): the thread is off
 * CPU from its switch out (reason: sleeping S, blocked D, preempted R,
 * other, or without the privilege preempted / waiting; cpu: the CPU it
 * left; state: sched_switch's prev_state, 0 when unknown; format 1.15:
 * next_tid, next_comm: sched_switch's next_pid and next_comm, the task of
 * any process that got the CPU, 0 the idle task, 0 and "" when not seen)
 * to its switch in (next_cpu: the CPU it runs on next; waker: the thread
 * of the process that woke it, 0 when none was seen; woken_ns: ns from
 * that wakeup to the switch in; format 1.17: prev_tid, prev_comm:
 * sched_switch's prev_pid and prev_comm, the task of any process that ran
 * before it on that CPU, 0 the idle task, 0 and "" when not seen). WAKEUP: the thread woke thread `tid`
 * (format 1.15: named `comm`, sched_waking's, "" when not seen).
 * PAGE_FAULT (`run --kernel=faults`): one page fault at `address`.
 * CPU (format 1.13, `run --cpu`): the thread's events from here on run on
 * CPU `cpu`, until its next CPU record; written by the thread before its
 * first event of each chunk and before an event on another CPU than its
 * previous one's. */

/* Field types. */
#define SW_FT_VARINT 0  /* unsigned LEB128 */
#define SW_FT_SIGNED 1  /* zigzag LEB128; its slot holds the int64_t's bits */
#define SW_FT_STR    2  /* varint byte length, then UTF-8 */
#define SW_FT_CODE   3  /* varint code id (CODE chunk) */
#define SW_FT_TID    4  /* varint native thread id */
#define SW_FT_LATER  8  /* flag: appended by a later minor version (may be absent: 0 / "") */
#define SW_FT_INTERNED 16  /* flag on STR: written as the varint id of a STRINGS entry (format 1.16) */
#define SW_FT_TID_LATER (SW_FT_TID | SW_FT_LATER)
#define SW_FT_STR_LATER (SW_FT_STR | SW_FT_LATER)
/* A varint a later minor appended, written only when it is not 0 (so a
 * record whose value is 0 keeps the older bytes): the row's last field. */
#define SW_FT_VARINT_LATER (SW_FT_VARINT | SW_FT_LATER)
#define SW_FT_ISTR (SW_FT_STR | SW_FT_INTERNED)

/* Slots of a decoded payload (reader.h sw_ext). */
#define SW_SLOT_CODE 0
#define SW_SLOT_LINE 1
#define SW_SLOT_A    2
#define SW_SLOT_B    3
#define SW_SLOT_C    4
#define SW_SLOT_S1   5
#define SW_SLOT_S2   6
#define SW_SLOT_NONE 7

/* Shapes and stats figures (see the table). */
#define SW_RS_REPLAY     0
#define SW_RS_INSTANT    1
#define SW_RS_OPEN       2
#define SW_RS_CLOSE      3
#define SW_RS_NEST_OPEN  4
#define SW_RS_NEST_CLOSE 5
#define SW_RS_SLICE      6
#define SW_RSTAT_NONE 0
#define SW_RSTAT_GC   1
#define SW_RSTAT_SYSCALL 2
#define SW_RSTAT_KERNEL_LOST 3
#define SW_RSTAT_OFF_CPU 4
#define SW_RSTAT_FAULT 5

/* SW_EXT_<KIND>: the kinds' numbers. */
#define SW_X_REC_NUM_(K, n, ...) SW_EXT_##K = n,
#define SW_X_REC_NONE_(...)
enum sw_ext_kind { SW_EXT_NONE = 0, SW_RECORD_KINDS(SW_X_REC_NUM_, SW_X_REC_NONE_) };

/* One more than the largest number of a kind: arrays indexed by number. */
#define SW_X_REC_LIMIT_(K, n, ...) char k_##K[n + 1];
union sw_ext_limit_ { SW_RECORD_KINDS(SW_X_REC_LIMIT_, SW_X_REC_NONE_) };
#define SW_EXT_KIND_LIMIT ((uint32_t)sizeof(union sw_ext_limit_))

/* The table as data, for the consumers that walk it. */
typedef struct sw_record_field {
    const char *name;
    uint8_t type;            /* SW_FT_* (without SW_FT_LATER and SW_FT_INTERNED) */
    uint8_t slot;            /* SW_SLOT_* */
    uint8_t later;           /* 1: appended by a later minor (absent from older traces) */
    uint8_t interned;        /* 1: a STR written as a STRINGS entry's id (format 1.16) */
} sw_record_field;

#define SW_RECORD_FIELDS_MAX 8
typedef struct sw_record_kind {
    uint32_t number;
    const char *name;
    uint32_t since;          /* format minor version */
    const char *source;      /* who writes it: "writer", "tracer", "program", "dispatch", "kernel" */
    const char *category, *label;
    uint8_t shape;           /* SW_RS_* */
    uint8_t stat;            /* SW_RSTAT_* */
    uint8_t title;           /* SW_SLOT_* */
    uint8_t nfields;
    uint32_t pair;           /* SW_EXT_* or SW_EXT_NONE */
    const char *track;       /* OPEN kinds: the slice's name, else NULL */
    const sw_record_field *fields;
} sw_record_kind;

/* Every kind, in the table's order, and their count. */
extern const sw_record_kind sw_record_kinds[];
extern const size_t sw_record_kind_count;

/* The kind numbered `number`, or NULL when this reader does not know it
 * (a newer minor version's: skipped). Inline: the reader asks for every
 * EXT record. */
extern const uint8_t sw_record_index[SW_EXT_KIND_LIMIT];  /* position + 1 by number, 0: none */
static inline const sw_record_kind *sw_record_kind_of(uint64_t number)
{
    if (number >= SW_EXT_KIND_LIMIT || !sw_record_index[number])
        return NULL;
    return &sw_record_kinds[sw_record_index[number] - 1];
}

/* Kinds written only into a side stream (from KERNEL: format.h
 * SW_CHUNK_THREAD_RECORDS): one in a thread's own EVENTS is damage, refused
 * by the replay (replay.c). Numbers are below 64 (records.c checks). */
#define SW_X_SIDE_ONLY_WRITER 0
#define SW_X_SIDE_ONLY_TRACER 0
#define SW_X_SIDE_ONLY_PROGRAM 0
#define SW_X_SIDE_ONLY_DISPATCH 0
#define SW_X_SIDE_ONLY_KERNEL 1
#define SW_X_SIDE_ONLY_OLDER 0
#define SW_X_REC_SIDE_ONLY_(K, n, nm, since, from, ...) | (SW_X_SIDE_ONLY_##from ? UINT64_C(1) << n : 0)
static inline int sw_record_side_only(uint64_t number)
{
    return number < 64 && ((0 SW_RECORD_KINDS(SW_X_REC_SIDE_ONLY_, SW_X_REC_NONE_)) >> number & 1);
}

/* The shapes', types', slots' and stats figures' names (for the Python view). */
const char *sw_record_shape_name(unsigned shape);
const char *sw_record_type_name(unsigned type);
const char *sw_record_slot_name(unsigned slot);
const char *sw_record_stat_name(unsigned stat);

/* A record's payload decoded (reader.h says how the reader fills it), or
 * the values to encode. A code field of a record located nowhere holds
 * SW_EXT_NO_CODE, written as it is (format 1.14: before, no code was
 * written as 0, the id of a real code, and such a file's 0 reads as it). */
#define SW_EXT_NO_CODE UINT32_MAX
#define SW_EXT_STR_MAX 255
typedef struct sw_ext {
    uint32_t kind;           /* SW_EXT_* */
    uint32_t malformed;
    uint32_t code;           /* code id, or SW_EXT_NO_CODE */
    uint64_t line;
    uint64_t a, b, c;
    const char *s1, *s2;
} sw_ext;

/* The number in a numeric slot (SW_SLOT_CODE..C) and the string in a
 * string slot (S1, S2). */
static inline uint64_t sw_ext_number(const sw_ext *x, unsigned slot)
{
    switch (slot) {
    case SW_SLOT_CODE: return x->code;
    case SW_SLOT_LINE: return x->line;
    case SW_SLOT_A: return x->a;
    case SW_SLOT_B: return x->b;
    default: return x->c;
    }
}
static inline const char *sw_ext_string(const sw_ext *x, unsigned slot)
{
    return slot == SW_SLOT_S1 ? x->s1 : x->s2;
}

/* Gives the id of string s (len bytes) in the trace's STRINGS (format
 * 1.16), defining it when new: 0, or a negative SW_E* code. */
typedef int (*sw_intern_fn)(void *ctx, const char *s, size_t len, uint64_t *id);

/* Encodes the payload of a record of kind `number` from the slots of
 * `vals` (strings: NULL is ""; each cut at str_max bytes, on a UTF-8
 * character boundary) into buf (cap
 * bytes); an interned str (ISTR) as the id intern(ctx, ...) gives it.
 * Returns the payload's length, or -1 when the kind is unknown, the
 * payload does not fit, or a string cannot be interned (intern NULL:
 * sw_record_encode, for kinds without ISTR fields). */
long sw_record_encode_interned(uint32_t number, const sw_ext *vals, size_t str_max, sw_intern_fn intern, void *ctx,
                               uint8_t *buf, size_t cap);
long sw_record_encode(uint32_t number, const sw_ext *vals, size_t str_max, uint8_t *buf, size_t cap);

/* The strings of a trace's STRINGS chunks (format 1.16), by id: what an
 * interned str field reads as (NULL: not defined, read as "?"). */
typedef struct sw_strings {
    char **s;
    uint32_t n;
} sw_strings;

/* Decodes the payload (p, len bytes) of a record of kind `number` into x:
 * x->kind, each field of its row in its slot (x->code SW_EXT_NO_CODE
 * when the row has no code field; an interned str is the entry of
 * `strings` its id names, "?" when it has none, e.g. a STRINGS chunk
 * lost to damage); strings into s1 and s2 (each
 * SW_EXT_STR_MAX + 1 bytes, NUL-terminated, cut at SW_EXT_STR_MAX bytes on
 * a character boundary), which x->s1 and x->s2 point to. A payload shorter
 * than the row's fields (or a code id out of range) sets x->malformed;
 * bytes after them are ignored (room for fields a newer minor version
 * adds); a kind without a row decodes to no fields. */
void sw_record_decode(uint32_t number, const uint8_t *p, size_t len, const sw_strings *strings, char *s1, char *s2,
                      sw_ext *x);

#endif
