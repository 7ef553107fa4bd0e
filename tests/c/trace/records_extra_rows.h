/*
 * records_extra_rows.h - rows added to the table of EXT record kinds
 * (native/trace/records.h) in one test build only (tests/c/meson.build:
 * the trace room built again with -DSW_RECORD_KINDS_EXTRA_H naming this
 * file), so that test_records_extra.c can check that a new row alone,
 * with no other edit, is written, read back, counted and exported:
 *   TASK_SWITCH  an instant with a field of every type
 *   WAIT_BEGIN / WAIT_END  a slice on a track of its own ("wait"), paired
 *                the way GC_START..GC_DONE are
 */
#ifndef SW_RECORDS_EXTRA_ROWS_H
#define SW_RECORDS_EXTRA_ROWS_H

#define SW_RECORD_KINDS_EXTRA(X, F)                                                                        \
    X(TASK_SWITCH, 40, task_switch, 7, PROGRAM, "task", "switch to", INSTANT, NONE, NONE, S1, NULL,         \
      F(code, CODE, CODE) F(line, VARINT, LINE) F(task, STR, S1) F(drift, SIGNED, A) F(waker, TID, B)       \
      F(note, STR, S2))                                                                                    \
    X(WAIT_BEGIN, 41, wait_begin, 7, PROGRAM, "wait", "wait begin", OPEN, WAIT_END, NONE, S1, "wait",       \
      F(lock, STR, S1))                                                                                    \
    X(WAIT_END, 42, wait_end, 7, PROGRAM, "wait", "wait end", CLOSE, WAIT_BEGIN, NONE, NONE, NULL,          \
      F(lock, STR, S1) F(spins, VARINT, A))

#endif
