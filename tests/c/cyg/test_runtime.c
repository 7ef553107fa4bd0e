/*
 * test_runtime.c - the native-function runtime (native/cyg/runtime.c,
 * built into this test; the package ships it as libstackwatch_cyg.so):
 * entries and exits become C_CALL / C_RETURN events of the ids define()
 * gives, read back by the real reader. Balanced calls nest; the frames a
 * longjmp left are closed at the next exit below them; an exit with no
 * entry is ignored; nothing is written while the thread does not hold the
 * GIL, is busy, or its session is not the live one, and the frames opened
 * then still pair; a function without an id gives its place to its
 * callees; frames deeper than SW_CYG_MAX_OPEN are not recorded, and their
 * exits leave the frames below them balanced. While emit_on is set (`run
 * --lttng`), every entry and exit written, and only those, is also
 * handed to emit, in the same order.
 */
#define _GNU_SOURCE
#include "check.h"
#include "tracegen.h"

#include "cyg/cyg.h"

#define FN(i) ((void *)(uintptr_t)(0x1000 + (i)))
#define CALL SW_OP_C_CALL
#define RET SW_OP_C_RETURN
#define UNNAMED ((void *)(uintptr_t)0x2000)

static struct _ts *holder;                              /* the "thread state" holding the GIL */
static struct _ts *const me = (struct _ts *)(uintptr_t)0x40;
static int busy;
static uint64_t live = 1;

static struct _ts *current(void) { return holder; }

/* What emit() was handed: (exit, fn), in order. */
static uint32_t emit_on = 1;
static struct { int exit; void *fn; } emitted[4096];
static int nemitted;
static void emit(int exit, void *fn)
{
    if (nemitted < 4096)
        emitted[nemitted] = (__typeof__(emitted[0])){exit, fn};
    nemitted++;
}

/* FN(i) is the C function of id i (tg_codes defines 0..9); UNNAMED has
 * none. */
static uint32_t define(void *fn) { return fn == UNNAMED ? SW_CYG_SKIP : (uint32_t)((uintptr_t)fn - 0x1000); }

static void in(int i) { stackwatch_cyg_enter(FN(i), NULL); }
static void out(int i) { stackwatch_cyg_exit(FN(i), NULL); }

/* A trace with one thread whose runtime state is set; run() writes its
 * events, then the trace's replay is compared with want. */
static void check_run(void (*run)(void), const int (*want)[3], int n, int total)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 0, 10) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 7, 8, "main", 1);
    REQUIRE(a);
    sw_clock clock = {.kind = SW_CLOCK_MONOTONIC, .hz = 1e9};
    sw_cyg_thread *c = calloc(1, sizeof *c);
    REQUIRE(c);
    *c = (sw_cyg_thread){.tb = a->b, .clock = &clock, .live = &live, .gen = 1, .busy = &busy,
                         .current = current, .me = me, .make_room = sw_tbuf_make_room, .define = define,
                         .emit_on = &emit_on, .emit = emit};
    nemitted = 0;
    holder = me;
    busy = 0;
    live = 1;
    stackwatch_cyg_set_thread(c);
    run();
    stackwatch_cyg_set_thread(NULL);
    free(c);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    tg_seen s = {0};
    CHECK_EQ_I64(sw_trace_replay(t, 0, tg_seen_fn, &s), SW_OK);
    CHECK_EQ_I64(s.n, total);
    for (int i = 0; i < n && i < s.n && i < 64; i++)
        CHECK_MSG(memcmp(s.ev[i], want[i], sizeof want[i]) == 0 && s.ev[i][3] == 0, "event %d: %d %d %d", i,
                  s.ev[i][0], s.ev[i][1], s.ev[i][2]);
    /* emit saw the events written (the trace's, but for its synthetic
     * ends of the frames still open), in order. */
    int written = 0;
    for (int i = 0; i < s.n && i < 63; i++) {
        if (s.ev[i][3])
            continue;
        CHECK_MSG(written < nemitted && emitted[written].exit == (s.ev[i][0] == RET) &&
                      (s.ev[i][0] == RET || emitted[written].fn == FN(s.ev[i][1])),
                  "emitted %d", written);
        written++;
    }
    if (s.n <= 63)
        CHECK_EQ_I64(nemitted, written);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}


static void nested_and_longjmp(void)
{
    out(7);          /* began before: ignored */
    in(1);
    in(2);
    out(2);
    in(3);
    in(4);
    in(5);           /* 5 and 4 are left by a longjmp to 3 */
    out(3);
    out(1);
}

TEST(frames_nest_and_a_longjmp_is_closed_at_the_next_exit_below)
{
    static const int want[][3] = {{CALL, 1, 0}, {CALL, 2, 1}, {RET, 2, 1}, {CALL, 3, 1}, {CALL, 4, 2},
                                  {CALL, 5, 3}, {RET, 5, 3},  {RET, 4, 2},  {RET, 3, 1},  {RET, 1, 0}};
    check_run(nested_and_longjmp, want, 10, 10);
}

static void not_recording(void)
{
    in(1);
    holder = NULL;   /* the GIL released */
    in(2);
    out(2);
    holder = me;
    busy = 1;        /* stackwatch's own code */
    in(3);
    out(3);
    busy = 0;
    in(4);
    stackwatch_cyg_enter(UNNAMED, NULL);
    in(6);
    out(6);
    stackwatch_cyg_exit(UNNAMED, NULL);
    out(4);
    live = 2;        /* another session */
    in(8);
    out(8);
    live = 1;
    out(1);
}

TEST(nothing_is_written_without_the_gil_when_busy_or_in_another_session)
{
    static const int want[][3] = {{CALL, 1, 0}, {CALL, 4, 1}, {CALL, 6, 2}, {RET, 6, 2}, {RET, 4, 1},
                                  {RET, 1, 0}};
    check_run(not_recording, want, 6, 6);
}

static void too_deep(void)
{
    for (unsigned i = 0; i < SW_CYG_MAX_OPEN + 3; i++)
        in(9);
    for (unsigned i = 0; i < SW_CYG_MAX_OPEN + 3; i++)
        out(9);
    in(2);
    out(2);
}

TEST(frames_beyond_the_deepest_are_not_recorded)
{
    static const int want[][3] = {{CALL, 9, 0}, {CALL, 9, 1}};
    /* the 512 recorded frames' calls and returns, then 2's */
    check_run(too_deep, want, 2, 2 * SW_CYG_MAX_OPEN + 2);
}
