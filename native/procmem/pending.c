/*
 * pending.c - a call queued into another Python process's pending-calls
 * queue from outside (see pending.h).
 */
#include "pending.h"

#include <stdio.h>
#include <string.h>

#include "pending_generated.h"

#define N_KNOWN (sizeof sw_pending_generated / sizeof sw_pending_generated[0])
#define PENDING_MAX_SIZE 16384u   /* a queue larger than this is not believed */
#define MAX_THREAD_STATES 4096

int sw_pending_layout_known(uint32_t version_hex, sw_pending_layout *out)
{
    for (size_t i = 0; i < N_KNOWN; i++) {
        if ((sw_pending_generated[i].version_hex >> 8) == (version_hex >> 8)) {
            *out = sw_pending_generated[i];
            return SW_OK;
        }
    }
    return SW_EARG;
}

static int32_t i32_at(const unsigned char *b, uint32_t off)
{
    int32_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

static uint64_t u64_at(const unsigned char *b, uint32_t off)
{
    uint64_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

static int layout_ok(const sw_pending_layout *pl)
{
    uint32_t s = pl->pending_size;
    return s <= PENDING_MAX_SIZE && pl->ncalls >= 2 && pl->call_size >= 16 &&
           pl->pending_calls + (uint64_t)pl->ncalls * pl->call_size <= s && pl->call_func + 8 <= pl->call_size &&
           pl->call_arg + 8 <= pl->call_size && pl->pending_first + 4 <= s && pl->pending_last + 4 <= s &&
           pl->pending_count + 4 <= s && pl->pending_lock + 8 <= s &&
           (pl->pending_max == SW_NO_OFFSET || pl->pending_max + 4 <= s) &&
           (pl->interp_eval_breaker != SW_NO_OFFSET) != (pl->tstate_eval_breaker != SW_NO_OFFSET);
}

/* The queue as it is now: the struct's bytes, its indices, how many
 * calls are queued, and how many it may hold. */
typedef struct queue {
    unsigned char raw[PENDING_MAX_SIZE];
    uint64_t addr;
    int first, last, used, capacity;
} queue;

static int read_queue(sw_mem *m, const sw_pending_layout *pl, uint64_t interp, queue *q, char *err,
                      size_t errlen)
{
    if (!layout_ok(pl)) {
        snprintf(err, errlen, "the pending-calls layout of this version is not usable");
        return SW_EARG;
    }
    q->addr = interp + pl->interp_pending;
    if (sw_mem_read(m, q->addr, q->raw, pl->pending_size) != SW_OK) {
        snprintf(err, errlen, "the interpreter's pending-calls queue cannot be read");
        return SW_EIO;
    }
    int n = (int)pl->ncalls;
    q->first = i32_at(q->raw, pl->pending_first);
    q->last = i32_at(q->raw, pl->pending_last);
    if (q->first < 0 || q->first >= n || q->last < 0 || q->last >= n) {
        snprintf(err, errlen, "the pending-calls queue holds indices out of range (%d, %d)", q->first, q->last);
        return SW_EFORMAT;
    }
    if (pl->count_kind == SW_PENDING_COUNT_N) {
        int max = pl->pending_max == SW_NO_OFFSET ? n : i32_at(q->raw, pl->pending_max);
        q->used = i32_at(q->raw, pl->pending_count);
        q->capacity = max < n ? max : n;
        if (q->used < 0 || q->used > n || (q->first + q->used) % n != q->last) {
            snprintf(err, errlen, "the pending-calls queue is inconsistent (%d queued)", q->used);
            return SW_EFORMAT;
        }
    } else {
        q->used = (q->last - q->first + n) % n;
        q->capacity = n - 1;   /* one slot always stays empty: full when last + 1 == first */
    }
    return SW_OK;
}

static int locked(sw_mem *m, const sw_pending_layout *pl, const queue *q, int *busy)
{
    if (pl->lock_kind == SW_PENDING_LOCK_MUTEX) {
        *busy = (q->raw[pl->pending_lock] & 1) != 0;
        return SW_OK;
    }
    /* glibc's sem_t: its value in the low 32 bits of the first word; 0 = held. */
    uint64_t sem = u64_at(q->raw, pl->pending_lock);
    uint32_t value;
    if (!sem || sw_mem_read(m, sem, &value, sizeof value) != SW_OK)
        return SW_EIO;
    *busy = value == 0;
    return SW_OK;
}

static int write_at(sw_mem *m, uint64_t addr, const void *buf, size_t len, char *err, size_t errlen)
{
    if (sw_mem_write(m, addr, buf, len) == SW_OK)
        return SW_OK;
    snprintf(err, errlen, "cannot write into the target's memory at 0x%llx", (unsigned long long)addr);
    return SW_EIO;
}

static int write_i32(sw_mem *m, uint64_t addr, int32_t v, char *err, size_t errlen)
{
    return write_at(m, addr, &v, sizeof v, err, errlen);
}

/* The first of k free slots, consecutive in memory, as far from the
 * call's slot (in the order the queue fills) as the nfree slots after it
 * allow; -1 if there are not k of them. */
static int text_slots(int n, int call_slot, int nfree, int k)
{
    int best = -1, run = 0, prev = -2;
    for (int j = 1; j <= nfree; j++) {
        int s = (call_slot + j) % n;
        run = s == prev + 1 ? run + 1 : 1;
        prev = s;
        if (run >= k)
            best = s - k + 1;
    }
    return best;
}

static int raise_breaker(sw_mem *m, const sw_pending_layout *pl, uint64_t interp, uint32_t threads_head,
                         uint32_t tstate_next, char *err, size_t errlen)
{
    if (pl->interp_eval_breaker != SW_NO_OFFSET) {
        uint64_t at = interp + pl->interp_eval_breaker;
        uint32_t v;
        if (sw_mem_read(m, at, &v, sizeof v) != SW_OK) {
            snprintf(err, errlen, "the interpreter's eval breaker cannot be read");
            return SW_EIO;
        }
        v |= pl->eval_breaker_bits;
        return write_at(m, at, &v, sizeof v, err, errlen);
    }
    uint64_t ts;
    if (sw_mem_read(m, interp + threads_head, &ts, sizeof ts) != SW_OK)
        return SW_EIO;
    for (int i = 0; ts && i < MAX_THREAD_STATES; i++) {
        uint64_t v;
        if (sw_mem_read(m, ts + pl->tstate_eval_breaker, &v, sizeof v) != SW_OK) {
            snprintf(err, errlen, "a thread state's eval breaker cannot be read");
            return SW_EIO;
        }
        v |= pl->eval_breaker_bits;
        int rc = write_at(m, ts + pl->tstate_eval_breaker, &v, sizeof v, err, errlen);
        if (rc != SW_OK)
            return rc;
        if (sw_mem_read(m, ts + tstate_next, &ts, sizeof ts) != SW_OK)
            return SW_EIO;
    }
    return SW_OK;
}

int sw_pending_push(sw_mem *m, const sw_pending_layout *pl, uint64_t interp, uint32_t threads_head,
                    uint32_t tstate_next, uint64_t func, const char *text, uint64_t arg, sw_pending_call *out,
                    char *err, size_t errlen)
{
    static queue q;   /* 16 KiB: not on the stack */
    int rc = read_queue(m, pl, interp, &q, err, errlen);
    if (rc != SW_OK)
        return rc;
    int busy = 0;
    if (locked(m, pl, &q, &busy) != SW_OK) {
        snprintf(err, errlen, "the pending-calls lock cannot be read");
        return SW_EIO;
    }
    int n = (int)pl->ncalls, nfree = q.capacity - q.used - 1;   /* free after ours */
    if (busy || nfree < 0)
        return SW_ESTATE;   /* held by a frozen thread, or full: thaw and retry */
    int slot = q.last;
    if (text) {
        size_t len = strlen(text) + 1;
        int k = (int)((len + pl->call_size - 1) / pl->call_size);
        /* 3.9-3.12: the slot before first is never filled (the ring is
         * full when last + 1 == first): free for the text too. */
        int room = nfree + (pl->count_kind == SW_PENDING_COUNT_FLAG);
        int first = text_slots(n, slot, room, k);
        if (first < 0)
            return SW_ESTATE;
        arg = q.addr + pl->pending_calls + (uint64_t)first * pl->call_size;
        if ((rc = write_at(m, arg, text, len, err, errlen)) != SW_OK)
            return rc;
    }
    uint64_t at = q.addr + pl->pending_calls + (uint64_t)slot * pl->call_size;
    unsigned char call[64] = {0};
    if (pl->call_size > sizeof call)
        return SW_EARG;
    memcpy(call + pl->call_func, &func, 8);
    memcpy(call + pl->call_arg, &arg, 8);   /* flags (3.13), if any, stay 0 */
    if ((rc = write_at(m, at, call, pl->call_size, err, errlen)) != SW_OK ||
        (rc = write_i32(m, q.addr + pl->pending_last, (slot + 1) % n, err, errlen)) != SW_OK ||
        (rc = write_i32(m, q.addr + pl->pending_count, pl->count_kind == SW_PENDING_COUNT_N ? q.used + 1 : 1, err,
                        errlen)) != SW_OK)
        return rc;
    if ((rc = raise_breaker(m, pl, interp, threads_head, tstate_next, err, errlen)) != SW_OK)
        return rc;
    out->func = func;
    out->arg = arg;
    out->slot = slot;
    return SW_OK;
}

int sw_pending_take_back(sw_mem *m, const sw_pending_layout *pl, uint64_t interp, const sw_pending_call *c,
                         int *removed, char *err, size_t errlen)
{
    static queue q;
    *removed = 0;
    int rc = read_queue(m, pl, interp, &q, err, errlen);
    if (rc != SW_OK)
        return rc;
    int busy = 0;
    if (locked(m, pl, &q, &busy) != SW_OK || busy)
        return SW_ESTATE;
    int n = (int)pl->ncalls, found = -1;
    for (int j = 0; j < q.used && found < 0; j++) {
        int s = (q.first + j) % n;
        const unsigned char *e = q.raw + pl->pending_calls + (size_t)s * pl->call_size;
        if (u64_at(e, pl->call_func) == c->func && u64_at(e, pl->call_arg) == c->arg)
            found = j;
    }
    if (found < 0)
        return SW_OK;
    /* The calls queued after it move up one slot, in the target's order. */
    for (int j = found; j + 1 < q.used; j++) {
        int s = (q.first + j) % n, t = (q.first + j + 1) % n;
        uint64_t at = q.addr + pl->pending_calls + (uint64_t)s * pl->call_size;
        if ((rc = write_at(m, at, q.raw + pl->pending_calls + (size_t)t * pl->call_size, pl->call_size, err,
                           errlen)) != SW_OK)
            return rc;
    }
    int used = q.used - 1;
    if ((rc = write_i32(m, q.addr + pl->pending_last, (q.last - 1 + n) % n, err, errlen)) != SW_OK ||
        (rc = write_i32(m, q.addr + pl->pending_count,
                        pl->count_kind == SW_PENDING_COUNT_N ? used : used > 0, err, errlen)) != SW_OK)
        return rc;
    *removed = 1;
    return SW_OK;
}
