/*
 * test_tasks.c - tasks (format 1.7): a thread buffer that switches tasks
 * (sw_tbuf_task_switch) keeps each task's open frames, the reader lists
 * each task as a track after its thread and replays each one's own events
 * with its own depths; a chunk read after a ring's discards reopens every
 * task's frames from its TASK_FRAMES chunk; a TASK chunk that does not
 * parse is damage, not a crash; a replay with SW_REPLAY_TASKS has every
 * task's EXT events and the switches.
 */
#define _GNU_SOURCE
#include "check.h"
#include "tracegen.h"

static void expect(sw_trace *t, size_t pos, const int (*want)[4], int n)
{
    tg_seen s = {0};
    CHECK_EQ_I64(sw_trace_replay(t, pos, tg_seen_fn, &s), SW_OK);
    if (!CHECK_EQ_I64(s.n, n))
        return;
    for (int i = 0; i < n; i++)
        CHECK_MSG(memcmp(s.ev[i], want[i], sizeof want[i]) == 0, "track %zu event %d: %d %d %d %d", pos, i,
                  s.ev[i][0], s.ev[i][1], s.ev[i][2], s.ev[i][3]);
}

static void call(tg_thread *a, uint32_t code)
{
    a->ticks += 100;
    sw_tbuf_enter(a->b, a->ticks, SW_OP_CALL, code);
}

static void ret(tg_thread *a)
{
    a->ticks += 100;
    sw_tbuf_exit(a->b, a->ticks, SW_OP_RETURN);
}

static void to(tg_thread *a, uint64_t origin, uint64_t target)
{
    a->ticks += 100;
    sw_tbuf_task_switch(a->b, a->ticks, origin, target);
}

/* A trace being written (at path) with 6 codes and one thread, "main",
 * that has task 5, named name; NULL on failure. */
static tg_thread *one_thread_one_task(tg *g, char *path, size_t len, const char *name)
{
    check_tmp_path(path, len, ".swt");
    if (tg_open(g, path, 4096, 0, 0, 1e9) != SW_OK || tg_codes(g, 6, 0) != SW_OK)
        return NULL;
    tg_thread *a = tg_add_thread(g, 7, 8, "main", 1);
    return a && sw_writer_define_task(g->w, 5, a->b->index, name) == SW_OK ? a : NULL;
}

TEST(each_task_keeps_its_frames)
{
    char path[256];
    tg g;
    tg_thread *a = one_thread_one_task(&g, path, sizeof path, "greenlet one");
    REQUIRE(a);
    call(a, 0);
    call(a, 1);
    to(a, 0, 5);     /* task 5 starts inside the thread's two frames */
    call(a, 2);
    call(a, 3);
    to(a, 5, 0);
    ret(a);          /* the thread's frame 1, not task 5's frame 3 */
    call(a, 4);
    to(a, 0, 5);
    ret(a);
    ret(a);
    to(a, 5, 0);
    ret(a);
    ret(a);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    REQUIRE(sw_trace_thread_count(t) == 2);
    const sw_thread_info *th = sw_trace_thread(t, 0), *task = sw_trace_thread(t, 1);
    CHECK_EQ_U64(th->task, 0);
    CHECK_EQ_U64(task->task, 5);
    CHECK_EQ_U64(task->thread, th->index);
    CHECK_EQ_STR(task->name, "greenlet one");
    static const int main_events[][4] = {{SW_OP_CALL, 0, 0, 0}, {SW_OP_CALL, 1, 1, 0}, {SW_OP_RETURN, 1, 1, 0},
                                         {SW_OP_CALL, 4, 1, 0}, {SW_OP_RETURN, 4, 1, 0}, {SW_OP_RETURN, 0, 0, 0}};
    static const int task_events[][4] = {{SW_OP_CALL, 2, 0, 0}, {SW_OP_CALL, 3, 1, 0}, {SW_OP_RETURN, 3, 1, 0},
                                         {SW_OP_RETURN, 2, 0, 0}};
    expect(t, 0, main_events, 6);
    expect(t, 1, task_events, 4);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

/* A replay of the thread with SW_REPLAY_TASKS (tracer/task_events.py's):
 * every task's EXT events, and each TASK_SWITCH before it takes effect,
 * located at the innermost frame of the task it leaves. */
typedef struct ext_seen {
    int n;
    uint32_t kind[8], code[8], depth[8];
    uint64_t a[8];
} ext_seen;

static int note_ext(void *ud, const sw_event *ev)
{
    ext_seen *s = ud;
    if (ev->kind != SW_EV_EXT || s->n == 8)
        return 0;
    s->kind[s->n] = ev->ext->kind;
    s->code[s->n] = ev->ext->code;
    s->depth[s->n] = ev->depth;
    s->a[s->n++] = ev->ext->a;
    return 0;
}

TEST(a_replay_of_every_tasks_events_and_switches)
{
    char path[256];
    tg g;
    tg_thread *a = one_thread_one_task(&g, path, sizeof path, "Task-1 work");
    REQUIRE(a);
    call(a, 0);
    call(a, 1);
    tg_ext(a, SW_EXT_TASK_CREATE, 1, 10, 5, 2, 0, "Task-1 work", NULL);
    to(a, 0, 5);
    call(a, 2);
    tg_ext(a, SW_EXT_TASK_SEND, 2, 11, 0, 0, 0, "q", "42");
    to(a, 5, 0);
    ret(a);
    ret(a);
    sw_trace *t = tg_close(&g, 0) == SW_OK ? tg_open_trace(path) : NULL;
    REQUIRE(t);
    ext_seen s = {0};
    CHECK_EQ_I64(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT | SW_REPLAY_TASKS, note_ext, &s), SW_OK);
    static const uint32_t kinds[] = {SW_EXT_TASK_CREATE, SW_EXT_TASK_SWITCH, SW_EXT_TASK_SEND, SW_EXT_TASK_SWITCH};
    static const uint32_t codes[] = {1, 1, 2, 2}, depths[] = {2, 2, 1, 1};
    static const uint64_t as[] = {5, 0, 0, 5};   /* the created task; the switches' origins */
    if (CHECK_EQ_I64(s.n, 4))
        for (int i = 0; i < 4; i++)
            CHECK_MSG(s.kind[i] == kinds[i] && s.code[i] == codes[i] && s.depth[i] == depths[i] && s.a[i] == as[i],
                      "event %d: kind %u code %u depth %u a %llu", i, s.kind[i], s.code[i], s.depth[i],
                      (unsigned long long)s.a[i]);
    /* Without it, the thread's own replay has only its own EXT events. */
    s = (ext_seen){0};
    CHECK_EQ_I64(sw_trace_replay_ext(t, 0, SW_REPLAY_EXT, note_ext, &s), SW_OK);
    CHECK(s.n == 1 && s.kind[0] == SW_EXT_TASK_CREATE);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(a_chunk_after_a_gap_reopens_every_tasks_frames)
{
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    /* 4 KiB chunks, 8 KiB ring: the task's long run discards the chunks
     * in which both tasks opened their frames. */
    REQUIRE(tg_open(&g, path, 4096, 8192, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 6, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 7, 8, "main", 2);
    REQUIRE(a);
    REQUIRE(sw_writer_define_task(g.w, 9, a->b->index, "greenlet long") == SW_OK);
    call(a, 0);
    call(a, 1);
    to(a, 0, 9);
    call(a, 2);
    for (int k = 0; k < 20000; k++) {
        call(a, 3);
        ret(a);
    }
    to(a, 9, 0);
    ret(a);
    ret(a);
    to(a, 0, 9);
    ret(a);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    REQUIRE(sw_trace_thread_count(t) == 2);
    CHECK(sw_trace_thread(t, 0)->dropped > 0);
    /* The thread: a DROPPED, its two frames reopened, then their real
     * returns (found, not ignored). */
    static const int main_events[][4] = {{SW_EV_DROPPED, 0, 0, 1}, {SW_OP_CALL, 0, 0, 1}, {SW_OP_CALL, 1, 1, 1},
                                         {SW_OP_RETURN, 1, 1, 0}, {SW_OP_RETURN, 0, 0, 0}};
    tg_seen s = {0};
    CHECK_EQ_I64(sw_trace_replay(t, 0, tg_seen_fn, &s), SW_OK);
    if (CHECK_EQ_I64(s.n, 5)) {
        s.ev[0][1] = 0;   /* the count the ring discarded */
        for (int i = 0; i < 5; i++)
            CHECK_MSG(memcmp(s.ev[i], main_events[i], sizeof main_events[i]) == 0, "event %d: %d %d %d %d", i,
                      s.ev[i][0], s.ev[i][1], s.ev[i][2], s.ev[i][3]);
    }
    /* The task: its frame 2 reopened, its last return closes it. */
    s.n = 0;
    CHECK_EQ_I64(sw_trace_replay(t, 1, tg_seen_fn, &s), SW_OK);
    REQUIRE(s.n >= 3);
    CHECK(s.ev[0][0] == SW_OP_CALL && s.ev[0][1] == 2 && s.ev[0][2] == 0 && s.ev[0][3] == 1);
    int last = s.n < 63 ? s.n - 1 : 63;
    CHECK(s.ev[last][0] == SW_OP_RETURN && s.ev[last][1] == 2 && s.ev[last][2] == 0 && s.ev[last][3] == 0);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}

TEST(a_malformed_task_chunk_is_damage)
{
    /* A TASK chunk whose entry names task 0 (the thread itself). */
    char path[256];
    check_tmp_path(path, sizeof path, ".swt");
    tg g;
    REQUIRE(tg_open(&g, path, 4096, 0, 0, 1e9) == SW_OK);
    REQUIRE(tg_codes(&g, 2, 0) == SW_OK);
    tg_thread *a = tg_add_thread(&g, 7, 8, "main", 3);
    REQUIRE(a);
    uint8_t bad[] = {0, 0, 1, 'x'};
    REQUIRE(sw_writer_chunk(g.w, SW_CHUNK_TASK, bad, sizeof bad) == SW_OK);
    call(a, 0);
    to(a, 0, 4);   /* a task never defined: its track is not listed */
    call(a, 1);
    REQUIRE(tg_close(&g, 0) == SW_OK);
    sw_trace *t = tg_open_trace(path);
    REQUIRE(t);
    CHECK(strstr(sw_trace_damage(t), "malformed TASK chunk") != NULL);
    CHECK_EQ_U64(sw_trace_thread_count(t), 1);
    static const int main_events[][4] = {{SW_OP_CALL, 0, 0, 0}, {SW_OP_RETURN, 0, 0, 1}};
    expect(t, 0, main_events, 2);
    sw_trace_free(t);
    tg_free(&g);
    unlink(path);
}
