/*
 * test_asynciotree.c - the asyncio task reader (procmem/asynciotree.h)
 * over a target made here in the form of 3.9.18 (its generated layout and
 * probed asyncio table): sys.modules with asyncio.tasks and _asyncio, the
 * WeakSet _all_tasks, two tasks, one awaiting the other through two
 * coroutines, the other a future, a done task left out, the second with
 * two done callbacks (a functools.partial, then a closure in the list of
 * further callbacks) holding objects; each read as made.
 * Then 2000 rounds of damage (random bytes, pointers and counts written
 * over the made objects): every round ends, within its bounds (ASan and
 * UBSan watch every read), with tasks or a refusal. Types that are not
 * the table's are refused with the sentence naming them.
 */
#define _GNU_SOURCE
#include "check.h"
#include "objarena.h"
#include "procmem/procmem.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define V39 0x030912f0u

static sw_py_layout L;        /* the 3.9.18 layout, as the target's binding leaves it */
static sw_asyncio_layout A;   /* its asyncio table */
static uint64_t str_type, code_type, type_type;

static uint64_t object(uint64_t type, size_t size)
{
    return arena_object(L.ob_refcnt, L.ob_type, type, size);
}

/* A type object named name (its tp_name), of basic size size, whose
 * instances keep a dict at dictoffset (0: none). */
static uint64_t type_of(const char *name, uint64_t size, int64_t dictoffset)
{
    uint64_t t = object(type_type, 512);
    put64(t + L.type_name, (uint64_t)(uintptr_t)name);
    put64(t + L.type_basicsize, size);
    memcpy((void *)(uintptr_t)(t + L.type_dictoffset), &dictoffset, 8);
    return t;
}

static uint64_t str_of(const char *s)
{
    size_t n = strlen(s);
    uint64_t o = object(str_type, L.str_ascii_data + n + 1);
    put64(o + L.str_length, n);
    put32(o + L.str_state, (1u << L.str_kind_shift) | L.str_compact_mask | L.str_ascii_mask);
    memcpy((void *)(uintptr_t)(o + L.str_ascii_data), s, n + 1);
    return o;
}

/* A dict of 3.9's form (8 slots, 1-byte indices) of up to 5 str keys. */
static uint64_t dict_of(const char *const *keys, const uint64_t *values, size_t n)
{
    uint64_t k = alloc(A.keys_indices + 8 + 5 * A.entry_size);
    put64(k + A.keys_size, 8);
    put64(k + A.keys_nentries, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t e = k + A.keys_indices + 8 + i * A.entry_size;
        put64(e + A.entry_key, str_of(keys[i]));
        put64(e + A.entry_value, values[i]);
    }
    uint64_t d = object(type_of("dict", 48, 0), 64);
    put64(d + L.dict_keys, k);
    return d;
}

/* A coroutine whose frame runs code `name` at first line `line` and
 * awaits `awaited` (the top of its value stack). */
static uint64_t coro_of(uint64_t coro_type, const char *name, int32_t line, uint64_t awaited)
{
    uint64_t code = object(code_type, L.code_size);
    put64(code + L.code_name, str_of(name));
    put64(code + L.code_qualname, str_of(name));
    put64(code + L.code_filename, str_of("prog.py"));
    put32(code + L.code_firstlineno, (uint32_t)line);
    uint64_t table = object(0, L.bytes_data + 8);   /* an empty co_lnotab: every offset on the first line */
    put64(table + L.bytes_size, 0);
    put64(code + L.code_linetable, table);
    uint64_t frame = object(0, L.frame_size + 64);
    put64(frame + L.frame_code, code);
    put32(frame + L.frame_lasti, 10);
    ((unsigned char *)(uintptr_t)frame)[L.frame_state] = 0;   /* suspended */
    uint64_t stack = alloc(32);
    put64(stack + 8, awaited);
    put64(frame + A.frame_stack_top, stack + 16);   /* one past the top slot */
    uint64_t coro = object(coro_type, A.coro_size);
    put64(coro + A.coro_frame, frame);
    return coro;
}

static uint64_t INTERP;
static uint64_t T1, T2, FUT, LOOP, HELD1, HELD2;

/* A tuple of n items of type tuple_type. */
static uint64_t tuple_of(uint64_t tuple_type, const uint64_t *items, size_t n)
{
    uint64_t t = object(tuple_type, A.tuple_items + 8 * n);
    put64(t + A.tuple_size, n);
    for (size_t i = 0; i < n; i++)
        put64(t + A.tuple_items + 8 * i, items[i]);
    return t;
}

/* T2's done callbacks: functools.partial(fn, HELD1) first, then in the
 * list of further ones (callback, context) with a function closing over
 * a cell of HELD2. */
static void add_callbacks(uint64_t task)
{
    uint64_t tuple_type = type_of(A.tuple_type, A.tuple_items, 0), list_type = type_of(A.list_type, 64, 0);
    uint64_t partial = object(type_of(A.partial_type, 64, 0), 64), fn_type = type_of(A.function_type, 256, 0);
    uint64_t cell_type = type_of(A.cell_type, 32, 0);
    HELD1 = object(type_of("Held", 32, 0), 32);
    HELD2 = object(type_of("Held", 32, 0), 32);
    uint64_t args[] = {HELD1};
    put64(partial + A.partial_args, tuple_of(tuple_type, args, 1));
    put64(task + A.fut_callback0, partial);
    uint64_t cell = object(cell_type, 32), fn = object(fn_type, 256);
    put64(cell + A.cell_ref, HELD2);
    uint64_t cells[] = {object(cell_type, 32), cell};   /* (an empty cell first) */
    put64(fn + A.function_closure, tuple_of(tuple_type, cells, 2));
    uint64_t pair[] = {fn, 0}, list = object(list_type, 64), items = alloc(8);
    pair[1] = object(type_of("Context", 32, 0), 32);
    put64(items, tuple_of(tuple_type, pair, 2));
    put64(list + A.list_size, 1);
    put64(list + A.list_items, items);
    put64(task + A.fut_callbacks, list);
}

/* The target: T1 "one" awaits T2 "two" through outer -> inner; T2 waits
 * on FUT from leaf; a third task is done. */
static void make_target(void)
{
    used = 0;
    type_type = 0;
    type_type = type_of("type", 512, 0);
    str_type = type_of("str", 48, 0);
    code_type = type_of("code", L.code_size, 0);
    L.str_type = str_type;
    L.code_type = code_type;
    uint64_t task_type = type_of(A.task_type, A.task_size, 0), fut_type = type_of(A.future_type, A.future_size, 0);
    uint64_t coro_type = type_of(A.coroutine_type, A.coro_size, 0), set_type = type_of(A.set_type, 200, 0);
    uint64_t ref_type = type_of(A.weakref_type, 64, 0), weakset_type = type_of("WeakSet", 64, 16);
    LOOP = object(type_of("Loop", 64, 0), 64);
    FUT = object(fut_type, A.future_size);
    put64(FUT + A.fut_loop, LOOP);
    uint64_t tasks[3];
    for (int i = 0; i < 3; i++) {
        tasks[i] = object(task_type, A.task_size);
        put64(tasks[i] + A.fut_loop, LOOP);
        put32(tasks[i] + A.fut_state, i == 2 ? A.fut_state_finished : A.fut_state_pending);
    }
    T1 = tasks[0];
    T2 = tasks[1];
    put64(T1 + A.task_name, str_of("one"));
    put64(T2 + A.task_name, str_of("two"));
    put64(tasks[2] + A.task_name, str_of("done"));
    uint64_t inner = coro_of(coro_type, "inner", 20, FUT);   /* (awaits a future: T2's waiter below) */
    put64(T1 + A.task_coro, coro_of(coro_type, "outer", 10, inner));
    put64(T1 + A.task_fut_waiter, T2);
    put64(T2 + A.task_coro, coro_of(coro_type, "leaf", 30, FUT));
    put64(T2 + A.task_fut_waiter, FUT);
    put64(tasks[2] + A.task_coro, coro_of(coro_type, "gone", 40, 0));
    add_callbacks(T2);
    /* the WeakSet's set: weak references in slots 1, 4, 6 of 8 */
    uint64_t set = object(set_type, 200), table = alloc(8 * A.set_entry_size);
    memset((void *)(uintptr_t)table, 0, 8 * A.set_entry_size);
    put64(set + A.set_mask, 7);
    put64(set + A.set_table, table);
    const int slots[3] = {1, 4, 6};
    for (int i = 0; i < 3; i++) {
        uint64_t ref = object(ref_type, 64);
        put64(ref + A.weakref_object, tasks[i]);
        put64(table + slots[i] * A.set_entry_size + A.set_entry_key, ref);
    }
    uint64_t weakset = object(weakset_type, 64);
    const char *data_key[] = {"data"};
    put64(weakset + 16, dict_of(data_key, &set, 1));
    const char *tasks_keys[] = {"_all_tasks"}, *aio_keys[] = {"Task", "Future"};
    uint64_t aio_types[] = {task_type, fut_type};
    uint64_t mod_type = type_of("module", 64, 0), mod_tasks = object(mod_type, 64), mod_aio = object(mod_type, 64);
    put64(mod_tasks + A.module_dict, dict_of(tasks_keys, &weakset, 1));
    put64(mod_aio + A.module_dict, dict_of(aio_keys, aio_types, 2));
    const char *mod_keys[] = {"sys", "asyncio.tasks", "_asyncio"};
    uint64_t mods[] = {object(mod_type, 64), mod_tasks, mod_aio};
    INTERP = alloc(L.interp_modules + 8);
    put64(INTERP + L.interp_modules, dict_of(mod_keys, mods, 3));
}

typedef struct got {
    int n;
    sw_aio_task t[8];
} got;

static int collect(void *ud, const sw_aio_task *t)
{
    got *g = ud;
    if (g->n < 8)
        memcpy(&g->t[g->n], t, sizeof *t);
    g->n++;
    return 0;
}

static got G;

static sw_mem self_mem(void)
{
    sw_mem m;
    char err[200];
    CHECK_EQ_I64(sw_mem_open(&m, getpid(), (uint64_t)(uintptr_t)arena, 8, err, sizeof err), SW_OK);
    return m;
}

static int setup(void)
{
    if (sw_layout_known(V39, &L) != SW_OK || sw_asyncio_layout_known(V39, &A) != SW_OK)
        return 0;
    make_target();
    return 1;
}

TEST(tasks_read_as_made)
{
    REQUIRE(setup());
    sw_mem m = self_mem();
    sw_codecache *codes = sw_codecache_new(64);
    sw_aio_stats st;
    char err[300] = "";
    memset(&G, 0, sizeof G);
    CHECK_EQ_I64(sw_aio_read(&m, &L, INTERP, codes, collect, &G, &st, err, sizeof err), 2);
    CHECK_EQ_STR(err, "");
    CHECK_EQ_U64(st.found, 3);   /* (the done one found, not given) */
    REQUIRE_EQ_U64(G.n, 2);
    const sw_aio_task *one = G.t[0].addr == T1 ? &G.t[0] : &G.t[1], *two = one == &G.t[0] ? &G.t[1] : &G.t[0];
    CHECK_EQ_U64(one->addr, T1);
    CHECK_EQ_U64(two->addr, T2);
    CHECK_EQ_STR(one->name, "one");
    CHECK_EQ_STR(two->name, "two");
    CHECK_EQ_U64(one->loop, LOOP);
    REQUIRE_EQ_U64(one->depth, 2);   /* innermost first */
    CHECK_EQ_STR(one->codes[0]->name, "inner");
    CHECK_EQ_STR(one->codes[1]->name, "outer");
    CHECK_EQ_I64(one->lines[0], 20);
    CHECK_EQ_I64(one->lines[1], 10);
    CHECK_EQ_U64(one->awaits, SW_AIO_AWAITS_TASK);
    CHECK_EQ_U64(one->waiter, T2);
    REQUIRE_EQ_U64(two->depth, 1);
    CHECK_EQ_STR(two->codes[0]->name, "leaf");
    CHECK_EQ_U64(two->awaits, SW_AIO_AWAITS_FUTURE);
    CHECK_EQ_STR(two->waiter_type, A.future_type);
    CHECK(!one->running && !two->running && !one->group_parent);
    CHECK_EQ_U64(one->nrefs, 0);
    REQUIRE_EQ_U64(two->nrefs, 2);
    CHECK_EQ_U64(two->refs[0], HELD1);
    CHECK_EQ_U64(two->refs[1], HELD2);
    sw_codecache_free(codes);
    sw_mem_close(&m);
}

TEST(types_not_the_tables_are_refused_in_a_sentence)
{
    REQUIRE(setup());
    sw_mem m = self_mem();
    sw_codecache *codes = sw_codecache_new(64);
    sw_aio_stats st;
    char err[300];
    uint64_t task_type;
    CHECK_EQ_I64(sw_pyobj_type(&m, &L, T1, &task_type), SW_OK);
    put64(task_type + L.type_basicsize, A.task_size + 8);
    CHECK_EQ_I64(sw_aio_read(&m, &L, INTERP, codes, collect, &G, &st, err, sizeof err), SW_EARG);
    CHECK(strstr(err, "asyncio's Task of this Python is _asyncio.Task of ") && strstr(err, "3.9.18's table"));
    put64(task_type + L.type_basicsize, A.task_size);
    put64(task_type + L.type_name, (uint64_t)(uintptr_t)"Task");
    CHECK_EQ_I64(sw_aio_read(&m, &L, INTERP, codes, collect, &G, &st, err, sizeof err), SW_EARG);
    CHECK(strstr(err, "is Task of ") != NULL);
    sw_py_layout newer = L;
    newer.version_hex = 0x030e00f0u;
    CHECK_EQ_I64(sw_aio_read(&m, &newer, INTERP, codes, collect, &G, &st, err, sizeof err), SW_EARG);
    CHECK_EQ_STR(err, "asyncio tasks of Python 3.14 are not known to this stackwatch (3.9-3.13)");
    sw_codecache_free(codes);
    sw_mem_close(&m);
}

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

TEST(damaged_targets_end_within_bounds)
{
    REQUIRE(setup());
    size_t size = used;
    unsigned char *clean = malloc(size);
    REQUIRE(clean != NULL);
    memcpy(clean, arena, size);
    sw_mem m = self_mem();
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int refused = 0, read = 0;
    for (int round = 0; round < 2000; round++) {
        memcpy(arena, clean, size);
        for (int k = 0; k < 4; k++) {
            uint64_t at = next_random(&seed) % (size - 8), r = next_random(&seed);
            switch (r % 4) {
            case 0: arena[at] = (unsigned char)(r >> 8); break;                          /* a byte */
            case 1: put64((uint64_t)(uintptr_t)(arena + (at & ~7ull)), r >> 3); break;  /* any word */
            case 2:   /* a pointer into the target, maybe misaligned */
                put64((uint64_t)(uintptr_t)(arena + (at & ~7ull)), (uint64_t)(uintptr_t)arena + (r >> 8) % size);
                break;
            default: put64((uint64_t)(uintptr_t)(arena + (at & ~7ull)), (r >> 8) & 0xffff); break;   /* a count */
            }
        }
        sw_codecache *codes = sw_codecache_new(64);
        sw_aio_stats st;
        char err[300];
        memset(&G, 0, sizeof G);
        int rc = sw_aio_read(&m, &L, INTERP, codes, collect, &G, &st, err, sizeof err);
        CHECK((rc == G.n && rc <= 8) || (rc < 0 && err[0]));
        for (int i = 0; i < G.n && i < 8; i++)
            CHECK(G.t[i].depth <= SW_AIO_MAX_STACK && G.t[i].nchildren <= SW_AIO_MAX_CHILDREN &&
                  G.t[i].nrefs <= SW_AIO_MAX_REFS);
        sw_codecache_free(codes);
        rc < 0 ? refused++ : read++;
    }
    memcpy(arena, clean, size);
    CHECK(refused > 0 && read > 0);
    free(clean);
    sw_mem_close(&m);
}
