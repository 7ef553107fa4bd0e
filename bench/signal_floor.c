/*
 * signal_floor.c - what interrupting a busy thread 1,000 times a second
 * costs it on this machine, whoever does the work after: the floor under
 * the in-process sampler's parks (bench/signal_floor.py builds and runs it;
 * see bench/README.md "The floor under a park").
 *
 * A worker thread, pinned to the first CPU allowed, runs fixed batches of
 * integer work; windows of WINDOW_NS alternate, one with nothing else, one
 * with a signal every millisecond, ROUNDS times; a round's figure is the
 * mean batch time with the signals over the mean without, the way's the
 * median round's. The signals,
 * each to an empty handler:
 *   other_cpu  sent with tgkill by a thread pinned to another CPU (what the
 *              sampler does: the kernel interrupts the worker's CPU);
 *   same_cpu   sent by a thread pinned to the worker's own CPU (it waits
 *              for the worker's CPU, which is then already in the kernel);
 *   timer      a POSIX timer of CLOCK_MONOTONIC armed by the worker for
 *              itself (SIGEV_THREAD_ID), expiring every millisecond.
 * Prints one JSON object: per way, the median ratio, its quartiles and the
 * signals taken. No argument; exit 2 with a line on stderr when the
 * machine has one CPU.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 40
#define WINDOW_NS 100000000LL
#define MAX_BATCHES 4000

static atomic_int sending;         /* the sender signals while 1 */
static atomic_long taken;          /* signals the handler took */
static pid_t worker_tid;
static volatile unsigned long sink;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    atomic_fetch_add(&taken, 1);
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

static long long batch(void)
{
    long long t = now_ns();
    unsigned long x = 1;
    for (int i = 0; i < 200000; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        sink += x >> 33;
    }
    return now_ns() - t;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The mean batch time of one window (not the median: at 1 kHz most
 * batches take no signal, and a median of them would not see it). */
static double window_mean(void)
{
    long long sum = 0, end = now_ns() + WINDOW_NS;
    int n = 0;
    while (n < MAX_BATCHES && now_ns() < end) {
        sum += batch();
        n++;
    }
    return (double)sum / n;
}

static void *sender(void *arg)
{
    pin(*(int *)arg);
    for (;;) {
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
        int s = atomic_load(&sending);
        if (s < 0)
            return NULL;
        if (s)
            syscall(SYS_tgkill, getpid(), worker_tid, SIGRTMAX - 3);
    }
}

/* One way: ROUNDS rounds of a window without, then one with (on(1) turns
 * the signals on, on(0) off). Prints its JSON member. */
static void measure(const char *name, void (*on)(int), int last)
{
    double r[ROUNDS];
    long before = atomic_load(&taken);
    for (int i = 0; i < ROUNDS; i++) {
        on(0);
        double off = window_mean();
        on(1);
        double with = window_mean();
        r[i] = with / off;
    }
    on(0);
    qsort(r, ROUNDS, sizeof r[0], cmp_d);
    printf("\"%s\": {\"ratio\": %.5f, \"q1\": %.5f, \"q3\": %.5f, \"signals\": %ld, \"seconds\": %.1f}%s", name,
           r[ROUNDS / 2], r[ROUNDS / 4], r[3 * ROUNDS / 4], atomic_load(&taken) - before,
           ROUNDS * WINDOW_NS / 1e9, last ? "" : ", ");
    fflush(stdout);
}

static void sender_on(int on)
{
    atomic_store(&sending, on);
}

static timer_t timer;

static void timer_on(int on)
{
    struct itimerspec it = {{0, on ? 1000000 : 0}, {0, on ? 1000000 : 0}};
    timer_settime(timer, 0, &it, NULL);
}

int main(void)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) {
        fprintf(stderr, "signal_floor: needs two CPUs\n");
        return 2;
    }
    int cpus[2], k = 0;
    for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[k++] = c;
    pin(cpus[0]);
    worker_tid = (pid_t)syscall(SYS_gettid);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMAX - 3, &sa, NULL);
    printf("{");
    for (int way = 0; way < 2; way++) {
        pthread_t t;
        atomic_store(&sending, 0);
        if (pthread_create(&t, NULL, sender, &cpus[way == 0 ? 1 : 0]) != 0) {
            fprintf(stderr, "signal_floor: cannot start a thread\n");
            return 1;
        }
        measure(way == 0 ? "other_cpu" : "same_cpu", sender_on, 0);
        atomic_store(&sending, -1);
        pthread_join(t, NULL);
    }
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGRTMAX - 3;
    ev._sigev_un._tid = worker_tid;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) {
        fprintf(stderr, "signal_floor: cannot make a timer\n");
        return 1;
    }
    measure("timer", timer_on, 1);
    printf("}\n");
    return 0;
}
