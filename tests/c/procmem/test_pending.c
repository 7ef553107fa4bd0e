/*
 * test_pending.c - a call queued into a pending-calls queue from outside
 * (procmem/pending.h), on a queue laid out as each known release lays it
 * out (the generated tables), in this process's own memory read and
 * written through process_vm_readv/writev: the call lands in the slot the
 * target fills next, its text in free slots at the far end (up to the
 * slot before first), the count and
 * the eval breaker are raised (3.13: in every thread state), a held lock
 * or a full queue says "retry", and taking the call back restores the
 * queue, moving the calls queued after it up a slot.
 */
#define _GNU_SOURCE
#include "check.h"
#include "procmem/procmem.h"

#include <string.h>
#include <unistd.h>

#define THREADS_HEAD 0x3000u   /* where the fake interpreter keeps its first thread state */
#define TSTATE_NEXT 0x8u

static const uint32_t VERSIONS[] = {0x30912f0u, 0x30a0df0u, 0x30b07f0u, 0x30c01f0u, 0x30d00f0u};

static _Alignas(16) unsigned char interp[0x4000];
static _Alignas(16) unsigned char tstates[2][0x100];
static _Alignas(16) uint32_t sem[4];   /* a glibc semaphore: value in the first word */

static unsigned char *queue_of(const sw_pending_layout *pl)
{
    return interp + pl->interp_pending;
}

static int32_t get32(const unsigned char *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void set32(unsigned char *p, int32_t v)
{
    memcpy(p, &v, 4);
}

/* An empty queue with its lock free, first = last = at, two thread states. */
static void reset(const sw_pending_layout *pl, int at)
{
    memset(interp, 0, sizeof interp);
    memset(tstates, 0, sizeof tstates);
    unsigned char *q = queue_of(pl);
    if (pl->lock_kind == SW_PENDING_LOCK_SEM) {
        uint64_t p = (uint64_t)(uintptr_t)sem;
        memcpy(q + pl->pending_lock, &p, 8);
        sem[0] = 1;
    }
    if (pl->pending_max != SW_NO_OFFSET)
        set32(q + pl->pending_max, (int32_t)pl->ncalls);
    set32(q + pl->pending_first, at);
    set32(q + pl->pending_last, at);
    uint64_t t0 = (uint64_t)(uintptr_t)tstates[0], t1 = (uint64_t)(uintptr_t)tstates[1];
    memcpy(interp + THREADS_HEAD, &t0, 8);
    memcpy(tstates[0] + TSTATE_NEXT, &t1, 8);
}

static uint64_t call_func(const sw_pending_layout *pl, int slot)
{
    return get64(queue_of(pl) + pl->pending_calls + (size_t)slot * pl->call_size + pl->call_func);
}

static int push(sw_mem *m, const sw_pending_layout *pl, uint64_t func, const char *text, sw_pending_call *c)
{
    char err[200] = "";
    int rc = sw_pending_push(m, pl, (uint64_t)(uintptr_t)interp, THREADS_HEAD, TSTATE_NEXT, func, text, 7, c, err,
                             sizeof err);
    CHECK_MSG(rc == SW_OK || rc == SW_ESTATE, "push: %d %s", rc, err);
    return rc;
}

static int take_back(sw_mem *m, const sw_pending_layout *pl, const sw_pending_call *c)
{
    char err[200] = "";
    int removed = -1;
    CHECK_EQ_I64(sw_pending_take_back(m, pl, (uint64_t)(uintptr_t)interp, c, &removed, err, sizeof err), SW_OK);
    return removed;
}

static void check_breaker(const sw_pending_layout *pl, int raised)
{
    if (pl->interp_eval_breaker != SW_NO_OFFSET) {
        CHECK_EQ_U64((uint32_t)get32(interp + pl->interp_eval_breaker) & pl->eval_breaker_bits,
                     raised ? pl->eval_breaker_bits : 0);
        return;
    }
    for (int i = 0; i < 2; i++)
        CHECK_EQ_U64(get64(tstates[i] + pl->tstate_eval_breaker) & pl->eval_breaker_bits,
                     raised ? pl->eval_breaker_bits : 0);
}

static void open_self(sw_mem *m)
{
    char err[200];
    CHECK_EQ_I64(sw_mem_open(m, getpid(), (uint64_t)(uintptr_t)interp, 8, err, sizeof err), SW_OK);
}

TEST(each_release_push_and_take_back)
{
    sw_mem m;
    open_self(&m);
    const char *text = "try:exec(open('/tmp/sw-abcdefgh/boot.py').read(),{})\nexcept BaseException:pass\n";
    for (size_t v = 0; v < sizeof VERSIONS / sizeof VERSIONS[0]; v++) {
        sw_pending_layout pl;
        CHECK_EQ_I64(sw_pending_layout_known(VERSIONS[v], &pl), SW_OK);
        int n = (int)pl.ncalls;
        reset(&pl, 20);
        check_breaker(&pl, 0);
        sw_pending_call c;
        CHECK_EQ_I64(push(&m, &pl, 0x1111, text, &c), SW_OK);
        unsigned char *q = queue_of(&pl);
        CHECK_EQ_I64(c.slot, 20);
        CHECK_EQ_U64(call_func(&pl, 20), 0x1111);
        CHECK_EQ_I64(get32(q + pl.pending_last), 21);
        CHECK_EQ_I64(get32(q + pl.pending_count), 1);
        check_breaker(&pl, 1);
        /* The text: whole, in slots of the array, ending as far from the
         * call as the queue allows: in the slot before first, 19. */
        uint64_t array = (uint64_t)(uintptr_t)(q + pl.pending_calls);
        CHECK(c.arg >= array && c.arg < array + (uint64_t)n * pl.call_size);
        CHECK_EQ_STR((const char *)(uintptr_t)c.arg, text);
        size_t k = (strlen(text) + pl.call_size) / pl.call_size;
        uint64_t last_text_slot = (c.arg - array) / pl.call_size + k - 1;
        CHECK_EQ_U64(last_text_slot, 19);
        /* A second call, then the first taken back: the second moves up. */
        sw_pending_call c2;
        CHECK_EQ_I64(push(&m, &pl, 0x2222, NULL, &c2), SW_OK);
        CHECK_EQ_I64(c2.slot, 21);
        CHECK_EQ_U64(c2.arg, 7);
        CHECK_EQ_I64(take_back(&m, &pl, &c), 1);
        CHECK_EQ_U64(call_func(&pl, 20), 0x2222);
        CHECK_EQ_I64(get32(q + pl.pending_last), 21);
        CHECK_EQ_I64(get32(q + pl.pending_count), 1);
        CHECK_EQ_I64(take_back(&m, &pl, &c), 0);   /* gone already */
        CHECK_EQ_I64(take_back(&m, &pl, &c2), 1);
        CHECK_EQ_I64(get32(q + pl.pending_last), 20);
        CHECK_EQ_I64(get32(q + pl.pending_count), 0);
        /* Wrapping: a call in the last slot goes on at slot 0. */
        reset(&pl, n - 1);
        CHECK_EQ_I64(push(&m, &pl, 0x3333, text, &c), SW_OK);
        CHECK_EQ_I64(c.slot, n - 1);
        CHECK_EQ_I64(get32(q + pl.pending_last), 0);
        CHECK_EQ_STR((const char *)(uintptr_t)c.arg, text);
    }
    sw_mem_close(&m);
}

TEST(held_lock_or_full_queue_says_retry)
{
    sw_mem m;
    open_self(&m);
    for (size_t v = 0; v < sizeof VERSIONS / sizeof VERSIONS[0]; v++) {
        sw_pending_layout pl;
        CHECK_EQ_I64(sw_pending_layout_known(VERSIONS[v], &pl), SW_OK);
        sw_pending_call c;
        reset(&pl, 0);
        if (pl.lock_kind == SW_PENDING_LOCK_SEM)
            sem[0] = 0;
        else
            queue_of(&pl)[pl.pending_lock] = 1;
        CHECK_EQ_I64(push(&m, &pl, 0x1111, NULL, &c), SW_ESTATE);
        CHECK_EQ_I64(get32(queue_of(&pl) + pl.pending_last), 0);   /* untouched */
        check_breaker(&pl, 0);
        /* Full: as many queued as it holds. */
        reset(&pl, 0);
        int n = (int)pl.ncalls, full = pl.count_kind == SW_PENDING_COUNT_FLAG ? n - 1 : n;
        set32(queue_of(&pl) + pl.pending_last, full % n);
        if (pl.count_kind == SW_PENDING_COUNT_N)
            set32(queue_of(&pl) + pl.pending_count, full);
        CHECK_EQ_I64(push(&m, &pl, 0x1111, NULL, &c), SW_ESTATE);
        /* No room for the text: refused too, nothing written. */
        reset(&pl, 0);
        char big[0x4000];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = 0;
        CHECK_EQ_I64(push(&m, &pl, 0x1111, big, &c), SW_ESTATE);
        CHECK_EQ_I64(get32(queue_of(&pl) + pl.pending_last), 0);
    }
    sw_mem_close(&m);
}

TEST(field_list_names_every_field)
{
    size_t n = 0;
#define COUNT(name) n++;
    SW_PENDING_LAYOUT_FIELDS(COUNT)
#undef COUNT
    CHECK_EQ_U64(n * sizeof(uint32_t), sizeof(sw_pending_layout));
}
