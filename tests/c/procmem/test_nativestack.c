/*
 * test_nativestack.c - the profiler's native frames, without Python:
 * - capturing another thread's stack in a signal handler
 *   (native/procmem/nativestack.h) on real threads: one spinning in a known
 *   function, one asleep in nanosleep (which still sleeps its full time),
 *   one that blocks the signal (the capture times out, the late signal is
 *   ignored, the process lives on); the previous handler gets foreign
 *   signals and is back after uninstall; a thread that blocks the signal is
 *   seen so in /proc, one inside the handler (slow to park) is not;
 * - parking a thread: two parkers and a capturer, each on its own thread,
 *   take turns on one counting thread, whose count does not move while it
 *   is parked; the handler stays until the last user leaves;
 * - naming addresses (symbols.h): a static function of this binary (from
 *   .symtab), a libc function, unknown addresses, damaged ELF files;
 * - merging native and Python frames (nativemerge.h) from the leaf and
 *   from the root, with missing or extra activations.
 */
#define _GNU_SOURCE
#include "check.h"
#include "base/textfile.h"
#include "procmem/nativemerge.h"
#include "procmem/nativestack.h"
#include "procmem/symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>

/* ---- merging ---- */

static sw_sample_code mk(const char *name)
{
    return (sw_sample_code){0, name, "f", (uint32_t)strlen(name), 1, 1, SW_NO_ID, NULL};
}

/* The merged stack as "a,b,c" (leaf first). */
static void merged_names(sw_sample_code **out, long n, char *buf, size_t len)
{
    buf[0] = 0;
    for (long i = 0; i < n; i++) {
        strncat(buf, out[i]->name, len - strlen(buf) - 1);
        if (i + 1 < n)
            strncat(buf, ",", len - strlen(buf) - 1);
    }
}

/* sw_merge_native without the native frames' lines and pcs. */
static long merge(sw_sample_code **nat, const unsigned char *nat_eval, uint32_t nn, int truncated, sw_sample_code **py,
                  const int32_t *py_lines, const unsigned char *py_end, uint32_t np, sw_sample_code **out,
                  int32_t *out_lines, uint32_t cap)
{
    sw_native_frames n = {nat, nat_eval, NULL, NULL, nn, truncated};
    return sw_merge_native(&n, py, py_lines, py_end, np, out, out_lines, NULL, cap);
}

TEST(merge_from_root_and_leaf)
{
    sw_sample_code leaf = mk("leaf"), call = mk("call"), ev = mk("EVAL"), mid = mk("mid"), main_ = mk("main");
    sw_sample_code f = mk("f"), g = mk("g"), h = mk("h");
    /* native (leaf first): leaf call EVAL mid EVAL main; Python: f | g h
     * (two groups: f alone, then g h with h its root-most frame). */
    sw_sample_code *nat[] = {&leaf, &call, &ev, &mid, &ev, &main_};
    unsigned char nat_eval[] = {0, 0, 1, 0, 1, 0};
    sw_sample_code *py[] = {&f, &g, &h};
    unsigned char py_end[] = {1, 0, 1};
    int32_t py_lines[] = {10, 20, 30}, lines[16];
    sw_sample_code *out[16];
    char buf[256];
    long n = merge(nat, nat_eval, 6, 0, py, py_lines, py_end, 3, out, lines, 16);
    merged_names(out, n, buf, sizeof buf);
    CHECK_EQ_STR(buf, "leaf,call,f,mid,g,h,main");
    CHECK(n == 7 && lines[2] == 10 && lines[4] == 20 && lines[5] == 30 && lines[0] == 0 && lines[6] == 0);
    /* The native frames' own lines and pcs go with them (0 for Python's),
     * from the root and from the leaf alike. */
    int32_t nat_lines[] = {1, 2, 3, 4, 5, 6};
    uint64_t nat_pcs[] = {0x10, 0x20, 0x30, 0x40, 0x50, 0x60}, pcs[16];
    for (int tr = 0; tr < 2; tr++) {
        n = sw_merge_native(&(sw_native_frames){nat, nat_eval, nat_lines, nat_pcs, 6, tr}, py, py_lines, py_end, 3,
                            out, lines, pcs, 16);
        CHECK(n == 7 && lines[0] == 1 && lines[1] == 2 && lines[2] == 10 && lines[3] == 4 && lines[6] == 6);
        CHECK(pcs[0] == 0x10 && pcs[1] == 0x20 && pcs[2] == 0 && pcs[3] == 0x40 && pcs[5] == 0 && pcs[6] == 0x60);
    }
    n = merge(nat, nat_eval, 6, 1, py, py_lines, py_end, 3, out, NULL, 16);
    merged_names(out, n, buf, sizeof buf);
    CHECK_EQ_STR(buf, "leaf,call,f,mid,g,h,main");
    /* An extra activation at the leaf (its frame not linked yet): from the
     * root it stays native at the leaf end, the groups keep their places. */
    sw_sample_code *nat2[] = {&ev, &call, &ev, &mid, &ev, &main_};
    unsigned char eval2[] = {1, 0, 1, 0, 1, 0};
    n = merge(nat2, eval2, 6, 0, py, NULL, py_end, 3, out, NULL, 16);
    merged_names(out, n, buf, sizeof buf);
    CHECK_EQ_STR(buf, "EVAL,call,f,mid,g,h,main");
    /* From the leaf (truncated native stack) the pairing shifts instead. */
    n = merge(nat2, eval2, 6, 1, py, NULL, py_end, 3, out, NULL, 16);
    merged_names(out, n, buf, sizeof buf);
    CHECK_EQ_STR(buf, "f,call,g,h,mid,EVAL,main");
    /* Fewer activations than groups: the Python frames left over go to the
     * leaf end (from the root) or the root end (from the leaf). */
    sw_sample_code *nat3[] = {&leaf, &ev, &main_};
    unsigned char eval3[] = {0, 1, 0};
    n = merge(nat3, eval3, 3, 0, py, NULL, py_end, 3, out, NULL, 16);
    merged_names(out, n, buf, sizeof buf);
    CHECK_EQ_STR(buf, "f,leaf,g,h,main");
    n = merge(nat3, eval3, 3, 1, py, NULL, py_end, 3, out, NULL, 16);
    merged_names(out, n, buf, sizeof buf);
    CHECK_EQ_STR(buf, "leaf,f,main,g,h");
    /* No Python frames, no native frames, too small an output. */
    n = merge(nat, nat_eval, 6, 0, py, NULL, py_end, 0, out, NULL, 16);
    merged_names(out, n, buf, sizeof buf);
    CHECK_EQ_STR(buf, "leaf,call,EVAL,mid,EVAL,main");
    n = merge(nat, nat_eval, 0, 0, py, NULL, py_end, 3, out, NULL, 16);
    merged_names(out, n, buf, sizeof buf);
    CHECK_EQ_STR(buf, "f,g,h");
    CHECK_EQ_I64(merge(nat, nat_eval, 6, 0, py, NULL, py_end, 3, out, NULL, 8), SW_EARG);
}

/* ---- symbols ---- */

enum { SPIN_HERE_LINE = __LINE__ + 1 };   /* spin_here's first line; its last is 6 below */
__attribute__((noinline)) static int spin_here(atomic_int *stop)
{
    int k = 0;
    while (!atomic_load(stop))
        k++;
    return k;
}

TEST(symbols_of_this_binary_and_libc)
{
    sw_symbols *s = sw_symbols_new();
    REQUIRE(s != NULL);
    int ev = 1;
    sw_sample_code *c = sw_symbols_lookup(s, (uint64_t)(uintptr_t)&spin_here + 4, &ev);
    REQUIRE(c != NULL);
    CHECK_EQ_STR(c->name, "spin_here [native]");   /* a static function: from .symtab */
    CHECK(ev == 0 && c->firstlineno == 0 && strstr(c->filename, "test_nativestack") != NULL);
    CHECK(c->addr == (uint64_t)(uintptr_t)&spin_here && sw_sample_code_is_native(c));
    /* Cached: the same entry for another address in the same function. */
    CHECK(sw_symbols_lookup(s, (uint64_t)(uintptr_t)&spin_here + 8, &ev) == c);
    c = sw_symbols_lookup(s, (uint64_t)(uintptr_t)&getpid, &ev);
    REQUIRE(c != NULL);
    CHECK(strstr(c->name, "getpid [native]") != NULL && strstr(c->filename, "libc") != NULL);
    /* An address in no object. */
    c = sw_symbols_lookup(s, 16, &ev);
    REQUIRE(c != NULL);
    CHECK_EQ_STR(c->name, "?? [native]");
    uint64_t objs, lookups, unknown;
    sw_symbols_counts(s, &objs, &lookups, &unknown);
    CHECK(objs >= 2 && lookups == 4 && unknown >= 1);
    sw_symbols_free(s);
}

/* With sources (sw_symbols_new_lines, the profiler's --lines): this
 * binary's function named by its file and first line from its line tables
 * (the tests are built with -g), each address by its own line, cached. */
TEST(symbols_of_this_binary_with_lines)
{
    sw_symbols *s = sw_symbols_new_lines();
    REQUIRE(s != NULL);
    int ev = 1;
    int32_t start = -1, inside = -1;
    uint64_t at = (uint64_t)(uintptr_t)&spin_here;
    sw_sample_code *c = sw_symbols_lookup_line(s, at, 0, &ev, &start);
    REQUIRE(c != NULL);
    CHECK_EQ_STR(c->name, "spin_here [native]");
    /* (its first row: the brace at -O0, the body's first statement at -O2) */
    CHECK(strstr(c->filename, "test_nativestack.c") != NULL && c->firstlineno >= SPIN_HERE_LINE &&
          c->firstlineno <= SPIN_HERE_LINE + 6);
    CHECK(c->library && strstr(c->library, "test_nativestack") != NULL && sw_sample_code_is_native(c));
    CHECK(start == c->firstlineno);
    CHECK(sw_symbols_lookup_line(s, at + 8, 0, &ev, &inside) == c);
    CHECK(inside >= SPIN_HERE_LINE && inside <= SPIN_HERE_LINE + 6);
    int32_t again = -1;
    CHECK(sw_symbols_lookup_line(s, at + 8, 0, &ev, &again) == c && again == inside);
    sw_symbols_free(s);
}

TEST(elf_parser_on_bad_files)
{
    char path[] = "/tmp/sw-elf-XXXXXX", name[64];
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    /* Not ELF, then this binary's header with everything after it cut or
     * scrambled: refused or parsed, never a crash (ASan run). */
    CHECK(write(fd, "hello", 5) == 5);
    CHECK(sw_symbols_elf_lookup(path, 0, name, sizeof name) == NULL);
    int self = open("/proc/self/exe", O_RDONLY);
    REQUIRE(self >= 0);
    unsigned char head[4096];
    ssize_t got = read(self, head, sizeof head);
    close(self);
    REQUIRE(got > 64);
    uint64_t seed = 88172645463325252ull;
    for (int round = 0; round < 200; round++) {
        unsigned char copy[4096];
        memcpy(copy, head, (size_t)got);
        size_t len = round < 64 ? (size_t)(round + 1) * 16 : (size_t)got;
        if (len > (size_t)got)
            len = (size_t)got;
        for (int k = 0; round >= 64 && k < 8; k++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            copy[16 + seed % ((uint64_t)got - 16)] = (unsigned char)(seed >> 32);
        }
        REQUIRE(ftruncate(fd, 0) == 0 && pwrite(fd, copy, len, 0) == (ssize_t)len);
        (void)sw_symbols_elf_lookup(path, 0x1000, name, sizeof name);
    }
    close(fd);
    unlink(path);
    CHECK(sw_symbols_elf_lookup("/nonexistent", 0, name, sizeof name) == NULL);
    CHECK(sw_symbols_elf_lookup("/proc/self", 0, name, sizeof name) == NULL);   /* not a regular file */
}

/* ---- capturing ---- */

typedef struct target {
    pthread_t th;
    atomic_int tid, stop, ready;
    int kind;                /* SPIN, SLEEP, BLOCKED */
    double slept;            /* SLEEP: seconds the 300 ms sleep took */
} target;

enum { SPIN, SLEEP, BLOCKED };

static void *target_main(void *arg)
{
    target *t = arg;
    atomic_store(&t->tid, (int)syscall(SYS_gettid));
    if (t->kind == BLOCKED) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sw_nstack_signal());
        pthread_sigmask(SIG_BLOCK, &set, NULL);
    }
    atomic_store(&t->ready, 1);
    if (t->kind == SLEEP) {
        /* A sleep interrupted by a signal goes on for the time left, as
         * CPython's time.sleep does after EINTR. */
        double t0 = check_now();
        struct timespec req = {0, 300000000}, rem;
        while (nanosleep(&req, &rem) != 0 && errno == EINTR)
            req = rem;
        t->slept = check_now() - t0;
        while (!atomic_load(&t->stop))
            usleep(1000);
    } else {
        spin_here(&t->stop);
    }
    if (t->kind == BLOCKED) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sw_nstack_signal());
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);   /* the late signal arrives now: ignored */
    }
    return NULL;
}

static void start_target(target *t, int kind)
{
    memset(t, 0, sizeof *t);
    t->kind = kind;
    pthread_create(&t->th, NULL, target_main, t);
    while (!atomic_load(&t->ready))
        usleep(100);
}

static int stack_has(sw_symbols *s, const uint64_t *pcs, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        int ev;
        sw_sample_code *c = sw_symbols_lookup(s, i ? pcs[i] - 1 : pcs[i], &ev);
        if (c && strncmp(c->name, name, strlen(name)) == 0)
            return 1;
    }
    return 0;
}

static atomic_int foreign_hits;
static void foreign_handler(int sig)
{
    (void)sig;
    atomic_fetch_add(&foreign_hits, 1);
}

/* Puts foreign_handler on the signal (the program's own, before ours is
 * installed over it); the action before into *old. */
static void put_foreign_handler(struct sigaction *old)
{
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = foreign_handler;
    sigaction(sw_nstack_signal(), &mine, old);
}

TEST(capture_spinning_sleeping_and_blocked_threads)
{
    struct sigaction old;
    put_foreign_handler(&old);
    char err[200];
    REQUIRE(sw_nstack_supported(err, sizeof err));
    REQUIRE(sw_nstack_install(err, sizeof err) == SW_OK);
    CHECK(sw_nstack_install(err, sizeof err) == SW_ESTATE);   /* one user at a time */
    sw_symbols *s = sw_symbols_new();
    target spin, sleep_, blocked;
    start_target(&spin, SPIN);
    start_target(&sleep_, SLEEP);
    start_target(&blocked, BLOCKED);
    uint64_t pcs[SW_NSTACK_MAX];
    /* 50 captures of each (on a loaded machine a thread waiting for a
     * CPU may not answer in time: a timeout, tried again, at most 400
     * times); each capture must show where the thread is. */
    int spun = 0, slept = 0, nspin = 0, nsleep = 0, trunc;
    for (int i = 0; i < 400 && (nspin < 50 || nsleep < 50); i++) {
        int n;
        if (nspin < 50 && (n = sw_nstack_capture(atomic_load(&spin.tid), pcs, &trunc)) > 0) {
            nspin++;
            spun += stack_has(s, pcs, n, "spin_here") && stack_has(s, pcs, n, "target_main");
            sw_nstack_release();
        }
        if (nsleep < 50 && (n = sw_nstack_capture(atomic_load(&sleep_.tid), pcs, &trunc)) > 0) {
            nsleep++;
            slept += stack_has(s, pcs, n, "target_main");
            sw_nstack_release();
        }
        usleep(2000);
    }
    CHECK_MSG(nspin == 50 && nsleep == 50, "captures answered: %d and %d of 50 in 400 tries", nspin, nsleep);
    CHECK_MSG(spun >= 48, "spinning thread seen in spin_here %d of %d captures", spun, nspin);
    CHECK_MSG(slept >= 48, "sleeping thread captured in target_main %d of %d captures", slept, nsleep);
    /* A thread that blocks the signal does not answer: a timeout, no hang. */
    double t0 = check_now();
    CHECK_EQ_I64(sw_nstack_capture(atomic_load(&blocked.tid), pcs, &trunc), SW_ESTATE);
    CHECK(check_now() - t0 < 1.0);
    /* Someone else's signal of the same number reaches the old handler. */
    pthread_kill(spin.th, sw_nstack_signal());
    for (int i = 0; i < 1000 && !atomic_load(&foreign_hits); i++)
        usleep(1000);
    CHECK_EQ_U64(atomic_load(&foreign_hits), 1);
    atomic_store(&spin.stop, 1);
    atomic_store(&sleep_.stop, 1);
    atomic_store(&blocked.stop, 1);
    pthread_join(spin.th, NULL);
    pthread_join(sleep_.th, NULL);
    pthread_join(blocked.th, NULL);
    CHECK_MSG(sleep_.slept >= 0.299, "the 300 ms sleep took %.3f s", sleep_.slept);
    sw_nstack_stats st;
    sw_nstack_get_stats(&st);
    /* One timeout at least (the blocked thread; on a loaded machine a
     * thread waiting for a CPU may time out too), each answered late. */
    CHECK(st.sent >= 90 && st.timeouts >= 1 && st.late >= 1 && st.late <= st.timeouts);
    sw_nstack_uninstall();
    /* Every signal was answered (the late one too): the old handler is back. */
    struct sigaction now;
    sigaction(sw_nstack_signal(), NULL, &now);
    CHECK(now.sa_handler == foreign_handler);
    sigaction(sw_nstack_signal(), &old, NULL);
    /* And installing again works. */
    CHECK(sw_nstack_install(err, sizeof err) == SW_OK);
    sw_nstack_uninstall();
    sw_symbols_free(s);
}

/* Whether thread tid has the capture signal in its status line `key`
 * ("SigBlk", "SigPnd"), read here on its own: -1 if unreadable. */
static int status_has_signal(int tid, const char *key)
{
    char path[64], buf[2048], line[16];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    snprintf(line, sizeof line, "\n%s:", key);
    unsigned long long mask;
    const char *p;
    if (sw_read_text(path, buf, sizeof buf) != 0 || !(p = strstr(buf, line)) ||
        sscanf(p + strlen(line), " %llx", &mask) != 1)
        return -1;
    return (int)(mask >> (sw_nstack_signal() - 1) & 1);
}

/* A thread that blocks the signal is seen so once it has been asked (the
 * handler installed first: the signal, pending until the thread unblocks
 * it, would end the process without it). */
TEST(blocked_signal_is_seen_in_proc)
{
    char err[200];
    REQUIRE(sw_nstack_supported(err, sizeof err));
    REQUIRE(sw_nstack_park_install(err, sizeof err) == SW_OK);
    target t;
    start_target(&t, BLOCKED);
    int tid = atomic_load(&t.tid);
    CHECK(status_has_signal(tid, "SigBlk") == 1);
    CHECK(sw_nstack_blocked(tid) == 0);   /* blocked, but never sent: nothing tells it from a thread in the handler */
    CHECK_EQ_I64(sw_nstack_park(tid, 20000000ull), SW_ESTATE);
    CHECK(status_has_signal(tid, "SigPnd") == 1);
    CHECK(sw_nstack_blocked(tid) == 1);
    CHECK(sw_nstack_blocked((int)syscall(SYS_gettid)) == 0);
    CHECK(sw_nstack_blocked(999999999) == 0);
    atomic_store(&t.stop, 1);
    pthread_join(t.th, NULL);   /* (it unblocks the signal: answered late) */
    sw_nstack_park_uninstall();
}

/* A thread inside the handler has the signal blocked by the handler's
 * mask: the state of one slow to park on a busy machine (preempted
 * between the signal's delivery and its answer, when the sampler gives up
 * waiting), which must not read as blocking the signal (it would be muted
 * for hundreds of rounds), with nothing pending, nor with another signal
 * pending behind the one it answers (asked twice before it ran). Seen
 * here with the thread parked in the handler; a release that finds it
 * gone on (parked past SW_NSTACK_PARK_MAX_NS on a loaded machine) is
 * tried again. */
TEST(a_thread_slow_to_park_is_not_seen_blocked)
{
    struct sigaction old;
    put_foreign_handler(&old);
    char err[200];
    REQUIRE(sw_nstack_supported(err, sizeof err));
    REQUIRE(sw_nstack_park_install(err, sizeof err) == SW_OK);
    target t;
    start_target(&t, SPIN);
    int tid = atomic_load(&t.tid), seen = 0, tries = 0, sent = 0, hits0 = atomic_load(&foreign_hits);
    for (; seen < 3 && tries < 50; tries++) {
        if (sw_nstack_park(tid, SW_NSTACK_WAIT_NS) != SW_OK)
            continue;
        int blk = status_has_signal(tid, "SigBlk"), pnd = status_has_signal(tid, "SigPnd");
        int alone = sw_nstack_blocked(tid);
        /* Someone else's signal of the same number, pending behind ours. */
        union sigval v = {.sival_int = 7};
        sent += pthread_sigqueue(t.th, sw_nstack_signal(), v) == 0;
        int pnd2 = status_has_signal(tid, "SigPnd");
        int behind = sw_nstack_blocked(tid);
        if (!sw_nstack_release())
            continue;   /* it went on meanwhile: not the state looked for */
        seen++;
        CHECK_MSG(blk == 1 && pnd == 0 && pnd2 == 1, "parked: SigBlk %d, SigPnd %d then %d", blk, pnd, pnd2);
        CHECK_MSG(alone == 0 && behind == 0, "in the handler, seen blocking: alone %d, a signal behind %d", alone,
                  behind);
    }
    CHECK_MSG(seen == 3, "parked and released in time %d of 3 in %d tries", seen, tries);
    /* The signals queued behind reached the old handler once the thread left ours. */
    for (int i = 0; i < 1000 && atomic_load(&foreign_hits) - hits0 < sent; i++)
        usleep(1000);
    CHECK_EQ_I64(atomic_load(&foreign_hits) - hits0, sent);
    CHECK(sw_nstack_blocked(tid) == 0);
    atomic_store(&t.stop, 1);
    pthread_join(t.th, NULL);
    sw_nstack_park_uninstall();
    sigaction(sw_nstack_signal(), &old, NULL);
}

/* ---- parking ---- */

static atomic_long ticks;            /* counted by the counting thread as it runs */
static atomic_int count_stop, count_tid;

static void *count_main(void *arg)
{
    (void)arg;
    atomic_store(&count_tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&count_stop))
        atomic_fetch_add(&ticks, 1);
    return NULL;
}

typedef struct parker {
    pthread_t th;
    int native;              /* captures (the native user) instead of parking */
    int ok;                  /* requests answered */
    int parked;              /* ... whose release found the thread still parked */
    int moved;               /* ... of those, ones the thread ran during */
    int early;               /* requests that failed, or whose release found the thread gone on, before
                              * their time was up (SW_NSTACK_WAIT_NS; SW_NSTACK_PARK_MAX_NS) */
} parker;

/* Parks the counting thread 100 times; while it is parked its count must
 * not move. Only time ends a park early: the thread goes on by itself
 * after SW_NSTACK_PARK_MAX_NS (the requester was not run for that long,
 * on a loaded machine), a request fails after SW_NSTACK_WAIT_NS unanswered. */
static void *parker_main(void *arg)
{
    parker *p = arg;
    uint64_t pcs[SW_NSTACK_MAX];
    int trunc;
    for (int i = 0; i < 100; i++) {
        int tid = atomic_load(&count_tid);
        double t0 = check_now();
        int rc = p->native ? sw_nstack_capture(tid, pcs, &trunc) : sw_nstack_park(tid, SW_NSTACK_WAIT_NS);
        if (rc >= 0) {
            long a = atomic_load(&ticks);
            usleep(100);
            int moved = atomic_load(&ticks) != a;
            p->ok++;
            if (sw_nstack_release()) {   /* parked from the answer to here: the count cannot have moved */
                p->parked++;
                p->moved += moved;
            } else {
                p->early += check_now() - t0 < SW_NSTACK_PARK_MAX_NS / 1e9;
            }
        } else {
            p->early += check_now() - t0 < SW_NSTACK_WAIT_NS / 1e9;
        }
        usleep(300);
    }
    return NULL;
}

TEST(parkers_and_a_capturer_take_turns)
{
    char err[200];
    REQUIRE(sw_nstack_supported(err, sizeof err));
    struct sigaction before, now;
    sigaction(sw_nstack_signal(), NULL, &before);
    sw_nstack_stats st0, st1;
    sw_nstack_get_stats(&st0);
    /* Any number of parkers beside the one native capturer. */
    REQUIRE(sw_nstack_park_install(err, sizeof err) == SW_OK);
    REQUIRE(sw_nstack_park_install(err, sizeof err) == SW_OK);
    REQUIRE(sw_nstack_install(err, sizeof err) == SW_OK);
    CHECK(sw_nstack_install(err, sizeof err) == SW_ESTATE);
    pthread_t counter;
    pthread_create(&counter, NULL, count_main, NULL);
    while (!atomic_load(&count_tid))
        usleep(100);
    parker ps[3] = {{.native = 0}, {.native = 0}, {.native = 1}};
    for (int i = 0; i < 3; i++)
        pthread_create(&ps[i].th, NULL, parker_main, &ps[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(ps[i].th, NULL);
    /* The parks that outlived SW_NSTACK_PARK_MAX_NS (one in 50 runs under
     * ASan with the other core busy) are not counted: the thread went on
     * then, as it should. */
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(ps[i].ok >= 50, "requester %d: %d of 100 answered", i, ps[i].ok);
        CHECK_MSG(ps[i].parked >= 50, "requester %d: %d of 100 releases found it parked", i, ps[i].parked);
        CHECK_MSG(ps[i].moved == 0, "requester %d: the thread ran while parked %d times", i, ps[i].moved);
        CHECK_MSG(ps[i].early == 0, "requester %d: %d requests ended before their time", i, ps[i].early);
    }
    /* Parked longer than SW_NSTACK_PARK_MAX_NS, it goes on by itself, and
     * the release says so (what was read meanwhile may be torn). */
    if (sw_nstack_park(atomic_load(&count_tid), 20000000ull) == SW_OK) {
        long b = atomic_load(&ticks);
        for (int i = 0; i < 1000 && atomic_load(&ticks) == b; i++)
            usleep(1000);
        CHECK(atomic_load(&ticks) != b);
        CHECK(sw_nstack_release() == 0);
    }
    /* Released, it runs on (within a second on a loaded machine). */
    long a = atomic_load(&ticks);
    for (int i = 0; i < 1000 && atomic_load(&ticks) == a; i++)
        usleep(1000);
    CHECK(atomic_load(&ticks) != a);
    atomic_store(&count_stop, 1);
    pthread_join(counter, NULL);
    /* An exited thread cannot be asked. */
    CHECK(sw_nstack_park(atomic_load(&count_tid), 1000000ull) < 0);
    sw_nstack_uninstall();
    sw_nstack_park_uninstall();
    sigaction(sw_nstack_signal(), NULL, &now);
    CHECK(now.sa_handler != before.sa_handler);   /* one parker left: still installed */
    sw_nstack_park_uninstall();
    /* Every signal answered (none timed out: on a loaded machine one may,
     * and its signal, never taken by the thread that exited, keeps the
     * handler installed): the handler before is back. */
    sw_nstack_get_stats(&st1);
    sigaction(sw_nstack_signal(), NULL, &now);
    CHECK(now.sa_handler == before.sa_handler || st1.timeouts != st0.timeouts);
}

/* ---- a read made by the thread itself (sw_nstack_read) ---- */

/* Two counters two pages apart, the higher one counted first: at any
 * instant of the counting thread, hi - lo is 0 or 1. A read of lo then hi
 * made from outside while it counts sees hi far ahead; one the thread makes
 * itself, in the handler, is of one instant. */
static struct {
    _Alignas(4096) atomic_long lo;
    _Alignas(4096) char gap[4096];
    _Alignas(4096) atomic_long hi;
} pair;
static atomic_int pair_stop, pair_tid;

static void *pair_main(void *arg)
{
    (void)arg;
    atomic_store(&pair_tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&pair_stop)) {
        atomic_fetch_add(&pair.hi, 1);
        atomic_fetch_add(&pair.lo, 1);
    }
    return NULL;
}

TEST(a_thread_reads_its_own_memory_at_one_instant)
{
    char err[200];
    REQUIRE(sw_nstack_supported(err, sizeof err));
    REQUIRE(sw_nstack_park_install(err, sizeof err) == SW_OK);
    sw_mem m;
    REQUIRE(sw_mem_open(&m, getpid(), (uint64_t)(uintptr_t)&pair.lo, 8, err, sizeof err) == SW_OK);
    sw_mem_plan *plan = sw_mem_plan_new();
    REQUIRE(plan != NULL);
    pthread_t th;
    pthread_create(&th, NULL, pair_main, NULL);
    while (!atomic_load(&pair_tid))
        usleep(100);
    int answered = 0, one_instant = 0;
    long last_hi = -1;
    for (int i = 0; i < 100; i++) {
        long lo = -1, hi = -1;
        sw_mem_req reqs[2] = {{(uint64_t)(uintptr_t)&pair.lo, &lo, sizeof lo, 0},
                              {(uint64_t)(uintptr_t)&pair.hi, &hi, sizeof hi, 0}};
        sw_mem_iov iov;
        REQUIRE(sw_mem_plan_make(&m, reqs, 2, plan, &iov) == SW_OK);
        CHECK_EQ_I64((long long)iov.nremote, 2);   /* (two pages apart: two ranges) */
        long got = sw_nstack_read(atomic_load(&pair_tid), &iov, SW_NSTACK_WAIT_NS);
        if (got < 0)
            continue;   /* (not answered in time: a loaded machine) */
        answered++;
        CHECK_EQ_I64(sw_mem_plan_done(&m, reqs, 2, plan, got), 2);
        one_instant += reqs[0].ok && reqs[1].ok && (hi - lo == 0 || hi - lo == 1);
        last_hi = hi;
        usleep(200);
    }
    CHECK_MSG(answered >= 50, "%d of 100 reads answered", answered);
    CHECK_EQ_I64(one_instant, answered);
    /* Not parked: it counts on after the last read (within a second on a
     * loaded machine), with no release. */
    long a = atomic_load(&pair.hi);
    for (int i = 0; i < 1000 && atomic_load(&pair.hi) == a; i++)
        usleep(1000);
    CHECK(atomic_load(&pair.hi) != a);
    atomic_store(&pair_stop, 1);
    pthread_join(th, NULL);
    /* An exited thread cannot be asked. */
    sw_mem_req one = {(uint64_t)(uintptr_t)&pair.lo, &last_hi, sizeof last_hi, 0};
    sw_mem_iov iov;
    REQUIRE(sw_mem_plan_make(&m, &one, 1, plan, &iov) == SW_OK);
    CHECK(sw_nstack_read(atomic_load(&pair_tid), &iov, 1000000ull) < 0);
    sw_mem_plan_free(plan);
    sw_mem_close(&m);
    sw_nstack_park_uninstall();
}

/* The plan of one call: requests less than a page apart coalesced, one
 * the kernel stops at leaves those after it unread (-1), more ranges than
 * one call takes are refused, and a refusing sw_mem reads nothing. */
TEST(a_planned_read_and_a_refusing_reader)
{
    char err[200];
    static char data[3 * 4096];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)(i * 7);
    sw_mem m;
    REQUIRE(sw_mem_open(&m, getpid(), (uint64_t)(uintptr_t)data, 8, err, sizeof err) == SW_OK);
    sw_mem_plan *plan = sw_mem_plan_new();
    REQUIRE(plan != NULL);
    char a[16], b[16], c[16];
    sw_mem_req reqs[4] = {{(uint64_t)(uintptr_t)data, a, sizeof a, 0},
                          {(uint64_t)(uintptr_t)(data + 100), b, sizeof b, 0},
                          {0, NULL, 0, 0},
                          {(uint64_t)(uintptr_t)(data + 2 * 4096 + 50), c, sizeof c, 0}};
    sw_mem_iov iov;
    REQUIRE(sw_mem_plan_make(&m, reqs, 4, plan, &iov) == SW_OK);
    CHECK_EQ_I64((long long)iov.nremote, 2);
    long got = (long)process_vm_readv(getpid(), iov.local, iov.nlocal, iov.remote, iov.nremote, 0);
    CHECK_EQ_I64(sw_mem_plan_done(&m, reqs, 4, plan, got), 4);
    CHECK(memcmp(a, data, sizeof a) == 0 && memcmp(b, data + 100, sizeof b) == 0 &&
          memcmp(c, data + 2 * 4096 + 50, sizeof c) == 0);
    /* A request in unmapped memory, one after it: the call stops there. */
    char *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(gone != MAP_FAILED);
    munmap(gone, 4096);
    sw_mem_req bad[3] = {{(uint64_t)(uintptr_t)data, a, sizeof a, 0},
                         {(uint64_t)(uintptr_t)gone, b, sizeof b, 0},
                         {(uint64_t)(uintptr_t)(data + 2 * 4096), c, sizeof c, 0}};
    REQUIRE(sw_mem_plan_make(&m, bad, 3, plan, &iov) == SW_OK);
    got = (long)process_vm_readv(getpid(), iov.local, iov.nlocal, iov.remote, iov.nremote, 0);
    CHECK_EQ_I64(sw_mem_plan_done(&m, bad, 3, plan, got), -1);
    CHECK(bad[0].ok && !bad[1].ok && !bad[2].ok);
    /* More ranges than one call's. */
    static sw_mem_req many[300];
    static char bytes[300];
    for (int i = 0; i < 300; i++)
        many[i] = (sw_mem_req){(uint64_t)(uintptr_t)data + (uint64_t)(i % 2) * 2 * 4096 + (uint64_t)i, &bytes[i], 1, 0};
    CHECK_EQ_I64(sw_mem_plan_make(&m, many, 300, plan, &iov), SW_EARG);
    /* Refusing: every read fails at once, counted. */
    m.refusing = 1;
    const uint64_t reads = m.reads;
    CHECK(sw_mem_read(&m, (uint64_t)(uintptr_t)data, a, sizeof a) != SW_OK);
    CHECK_EQ_I64((long long)sw_mem_read_upto(&m, (uint64_t)(uintptr_t)data, a, sizeof a), 0);
    CHECK_EQ_I64((long long)sw_mem_readv(&m, reqs, 4), 1);   /* (the empty request only) */
    CHECK_EQ_I64(sw_mem_plan_make(&m, reqs, 4, plan, &iov), SW_ESTATE);
    CHECK_EQ_I64((long long)m.refused, 3);
    CHECK_EQ_I64((long long)m.reads, (long long)reads);
    m.refusing = 0;
    CHECK(sw_mem_read(&m, (uint64_t)(uintptr_t)data, a, sizeof a) == SW_OK);
    sw_mem_plan_free(plan);
    sw_mem_close(&m);
}
