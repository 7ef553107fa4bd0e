/*
 * test_freeze.c - freezing a live process (procmem/freeze.h) on a child
 * made for it: a thread that cannot stop (a vfork parent, waiting
 * uninterruptibly for its child: state D) fails the freeze within the
 * bound, the thread stopped before it runs on, nothing stays stopped; a
 * later freeze fails at once while it sleeps, the thread is let go once
 * it has stopped and goes on; and signals sent around the freezes all
 * reach the target's handler (none swallowed or added at the detach; the
 * race where a stop reports a signal on its way, which the detach hands
 * back, did not happen here in 900 tries, busy target or not). A process
 * whose main thread has ended (a zombie) is frozen without it, and one
 * that has ended whole is said to be exiting; a thread that ends between
 * its seize and its interrupt is collected, not left a zombie.
 */
#define _GNU_SOURCE
#include "check.h"
#include "procmem/freeze.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define VFORK_SLEEP_NS 700000000L   /* how long the vfork child keeps its parent waiting */

static int report_fd;
static volatile sig_atomic_t got, report;

/* The target's second thread: vforks; the child says so, sleeps, exits;
 * the parent, back, says so. */
static void *vforker(void *arg)
{
    (void)arg;
    pid_t c = vfork();
    if (c == 0) {
        (void)!write(report_fd, "v", 1);
        struct timespec ts = {0, VFORK_SLEEP_NS};
        nanosleep(&ts, NULL);
        _exit(0);
    }
    (void)!write(report_fd, "b", 1);
    for (;;)
        pause();
}

static void on_rt(int sig)
{
    (void)sig;
    got++;
}

static void on_usr2(int sig)
{
    (void)sig;
    report = 1;
}

/* The target: counts SIGRTMIN; on SIGUSR2 writes the count; with vfork,
 * starts vforker. Its main thread sleeps in short steps (stops at once). */
static pid_t start_target(int with_vfork, int *fd)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        report_fd = p[1];
        signal(SIGRTMIN, on_rt);
        signal(SIGUSR2, on_usr2);
        pthread_t t;
        if (with_vfork)
            pthread_create(&t, NULL, vforker, NULL);
        else
            (void)!write(report_fd, "r", 1);
        for (;;) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            if (report) {
                report = 0;
                int n = got;
                (void)!write(report_fd, &n, sizeof n);
            }
        }
    }
    close(p[1]);
    *fd = p[0];
    return pid;
}

static void stop_target(pid_t pid, int fd)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fd);
}

/* A field of /proc/PID/task/TID/status ("State:", "TracerPid:"): its first
 * character, or its number. */
static int status_field(pid_t pid, int tid, const char *key, char *state)
{
    char path[96], line[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int v = -1;
    size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0) {
            const char *p = line + k;
            while (*p == ' ' || *p == '\t')
                p++;
            if (state)
                *state = *p;
            v = atoi(p);
        }
    fclose(f);
    return v;
}

static int other_tid(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    int tid = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (atoi(e->d_name) > 0 && atoi(e->d_name) != pid)
            tid = atoi(e->d_name);
    if (d)
        closedir(d);
    return tid;
}

/* Waits up to s seconds for a byte from fd; the byte, or 0. */
static char read_byte(int fd, double s)
{
    double end = check_now() + s;
    char c = 0;
    while (check_now() < end) {
        struct timeval tv = {0, 10000};
        fd_set set;
        FD_ZERO(&set);
        FD_SET(fd, &set);
        if (select(fd + 1, &set, NULL, NULL, &tv) == 1)
            return read(fd, &c, 1) == 1 ? c : 0;
    }
    return 0;
}

/* Waits up to 10 s for thread tid to be in a tracing stop; its state. */
static char traced_stop(pid_t pid, int tid)
{
    char st = 0;
    double end = check_now() + 10;
    while (check_now() < end && (status_field(pid, tid, "State:", &st), st != 't')) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return st;
}

/* A target whose second thread (its tid) waits for its vfork child now. */
static pid_t vforking_target(int *fd, int *tid)
{
    pid_t pid = start_target(1, fd);
    if (pid <= 0)
        return -1;
    *tid = read_byte(*fd, 10) == 'v' ? other_tid(pid) : 0;
    return pid;
}

TEST(a_thread_that_cannot_stop_fails_the_freeze_within_the_bound)
{
    int fd, tid;
    pid_t pid = vforking_target(&fd, &tid);
    REQUIRE(pid > 0 && tid > 0);
    char st = 0;
    status_field(pid, tid, "State:", &st);
    CHECK_MSG(st == 'D', "the vfork parent is in state %c", st);

    sw_frozen f;
    char err[400] = "";
    double t0 = check_now();
    int rc = sw_freeze(&f, pid, err, sizeof err);
    double took = check_now() - t0;
    CHECK_EQ_I64(rc, SW_ESTATE);
    CHECK_MSG(took >= SW_FREEZE_WAIT_NS / 1e9 && took < SW_FREEZE_WAIT_NS / 1e9 + 0.25, "took %.3f s", took);
    char want[64];
    snprintf(want, sizeof want, "thread %d of process %d did not stop", tid, pid);
    CHECK_MSG(strstr(err, want) != NULL, "%s", err);
    CHECK_EQ_I64(f.n, 0);
    CHECK_EQ_I64(sw_freeze_late(), 1);
    /* the wait was a blocking one ended by the timer (its signal's no-op
     * action set), not a poll */
    struct sigaction cur;
    sigaction(SW_FREEZE_SIGNAL, NULL, &cur);
    CHECK(cur.sa_handler != SIG_DFL);
    /* the main thread, stopped first (lower tid), runs again: not traced */
    CHECK_EQ_I64(status_field(pid, pid, "TracerPid:", NULL), 0);
    status_field(pid, pid, "State:", &st);
    CHECK_MSG(st == 'S' || st == 'R', "main thread in state %c", st);

    /* while it sleeps, a freeze fails at once */
    t0 = check_now();
    rc = sw_freeze(&f, pid, err, sizeof err);
    CHECK_EQ_I64(rc, SW_ESTATE);
    CHECK_MSG(check_now() - t0 < 0.1, "took %.3f s", check_now() - t0);
    CHECK_MSG(strstr(err, want) != NULL, "%s", err);

    /* its child gone, it stops (its interrupt pending) and waits for us:
     * the next thaw lets it go, and it goes on */
    st = traced_stop(pid, tid);
    CHECK_MSG(st == 't', "vfork parent in state %c", st);
    CHECK_EQ_I64(read_byte(fd, 0.05), 0);   /* stopped: not back yet */
    sw_frozen none = {0};
    sw_thaw(&none);
    CHECK_EQ_I64(sw_freeze_late(), 0);
    CHECK_EQ_I64(read_byte(fd, 10), 'b');
    CHECK_EQ_I64(status_field(pid, tid, "TracerPid:", NULL), 0);

    /* and the whole process freezes again */
    rc = sw_freeze(&f, pid, err, sizeof err);
    CHECK_MSG(rc == SW_OK, "%s", err);
    CHECK(f.n >= 1);
    sw_thaw(&f);
    CHECK_EQ_I64(status_field(pid, pid, "TracerPid:", NULL), 0);
    stop_target(pid, fd);
}

TEST(a_late_thread_stopped_since_is_taken_by_the_next_freeze)
{
    int fd, tid;
    pid_t pid = vforking_target(&fd, &tid);
    REQUIRE(pid > 0 && tid > 0);
    sw_frozen f;
    char err[400] = "";
    sw_frozen one;
    /* a program with its own action for the timer's signal: the thread is
     * polled instead, within the same bound */
    struct sigaction mine, was;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = on_rt;
    sigaction(SW_FREEZE_SIGNAL, &mine, &was);
    double t0 = check_now();
    CHECK_EQ_I64(sw_freeze_thread(&one, pid, tid, err, sizeof err), SW_ESTATE);
    double took = check_now() - t0;
    sigaction(SW_FREEZE_SIGNAL, &was, NULL);
    CHECK_MSG(took >= SW_FREEZE_WAIT_NS / 1e9 && took < SW_FREEZE_WAIT_NS / 1e9 + 0.25, "took %.3f s", took);
    CHECK_EQ_I64(traced_stop(pid, tid), 't');
    int rc = sw_freeze(&f, pid, err, sizeof err);
    CHECK_MSG(rc == SW_OK, "%s", err);
    CHECK_EQ_I64(f.n, 2);
    CHECK_EQ_I64(sw_freeze_late(), 0);
    sw_thaw(&f);
    CHECK_EQ_I64(read_byte(fd, 10), 'b');
    CHECK_EQ_I64(status_field(pid, tid, "TracerPid:", NULL), 0);
    stop_target(pid, fd);
}

TEST(a_check_from_its_own_thread_leaves_nothing_seized)
{
    int fd, tid;
    pid_t pid = vforking_target(&fd, &tid);
    REQUIRE(pid > 0 && tid > 0);
    char err[400] = "";
    CHECK_EQ_I64(sw_freeze_check(pid, tid, err, sizeof err), SW_ESTATE);
    CHECK_EQ_I64(sw_freeze_late(), 0);
    /* its tracer ended: nothing holds it once its child is gone */
    CHECK_EQ_I64(read_byte(fd, 10), 'b');
    CHECK_EQ_I64(status_field(pid, tid, "TracerPid:", NULL), 0);
    CHECK_EQ_I64(sw_freeze_check(pid, pid, err, sizeof err), SW_OK);
    stop_target(pid, fd);
}

TEST(signals_sent_around_freezes_all_arrive)
{
    int fd;
    pid_t pid = start_target(0, &fd);
    REQUIRE(pid > 0);
    REQUIRE(read_byte(fd, 10) == 'r');
    enum { N = 300 };
    char err[400] = "";
    int failed = 0;
    for (int i = 0; i < N; i++) {
        sw_frozen f;
        kill(pid, SIGRTMIN);   /* real-time: each one queued, none merged */
        if (sw_freeze(&f, pid, err, sizeof err) != SW_OK)
            failed++;
        else
            sw_thaw(&f);
    }
    CHECK_EQ_I64(failed, 0);
    kill(pid, SIGUSR2);
    int n = -1;
    double end = check_now() + 10;
    while (check_now() < end) {
        struct timeval tv = {0, 10000};
        fd_set set;
        FD_ZERO(&set);
        FD_SET(fd, &set);
        if (select(fd + 1, &set, NULL, NULL, &tv) == 1) {
            CHECK(read(fd, &n, sizeof n) == (ssize_t)sizeof n);
            break;
        }
    }
    CHECK_EQ_I64(n, N);
    stop_target(pid, fd);
}

static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void *pauser(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* A child whose main thread has ended (SYS_exit: that thread only) while
 * its second thread runs on. */
static pid_t zombie_main_target(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        pthread_t t;
        pthread_create(&t, NULL, pauser, NULL);
        syscall(SYS_exit, 0);
    }
    return pid;
}

/* Waits up to 10 s for thread tid of pid to be in state want. */
static char wait_state(pid_t pid, int tid, char want)
{
    char st = 0;
    double end = check_now() + 10;
    while (check_now() < end && (status_field(pid, tid, "State:", &st), st != want))
        nap_ms(2);
    return st;
}

TEST(a_main_thread_ended_is_not_frozen_and_said_so)
{
    pid_t pid = zombie_main_target();
    REQUIRE(pid > 0);
    REQUIRE(wait_state(pid, pid, 'Z') == 'Z');
    int tid = 0;
    double end = check_now() + 10;
    while (!(tid = other_tid(pid)) && check_now() < end)
        nap_ms(2);
    REQUIRE(tid > 0);
    sw_frozen f;
    char err[400] = "";
    int rc = sw_freeze(&f, pid, err, sizeof err);
    CHECK_MSG(rc == SW_OK, "%s", err);
    CHECK_EQ_I64(f.n, 1);
    CHECK_EQ_I64(f.ended, 1);
    CHECK_EQ_I64(f.n ? f.tids[0] : 0, tid);
    sw_thaw(&f);
    CHECK_EQ_I64(status_field(pid, tid, "TracerPid:", NULL), 0);
    /* the main thread alone: ended, said so (not "traced already") */
    CHECK_EQ_I64(sw_freeze_check(pid, pid, err, sizeof err), SW_EARG);
    char want[96];
    snprintf(want, sizeof want, "thread %d of process %d has ended (zombie): the process is exiting", pid, pid);
    CHECK_MSG(strcmp(err, want) == 0, "%s", err);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

TEST(a_process_that_has_ended_is_said_to_be_exiting)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    REQUIRE(pid > 0);
    REQUIRE(wait_state(pid, pid, 'Z') == 'Z');
    sw_frozen f;
    char err[400] = "";
    CHECK_EQ_I64(sw_freeze(&f, pid, err, sizeof err), SW_EIO);
    char want[64];
    snprintf(want, sizeof want, "process %d is exiting", pid);
    CHECK_MSG(strstr(err, want) == err, "%s", err);
    CHECK_EQ_I64(f.n, 0);
    waitpid(pid, NULL, 0);
}

static int ender_fd = -1, ender_tid;
static pid_t ender_pid;

static void *ender(void *arg)
{
    (void)arg;
    char c;
    (void)!read(ender_fd, &c, 1);
    syscall(SYS_exit, 0);
    return NULL;
}

/* Between the seize and the interrupt of the second thread: it ends
 * (traced now, it stays a zombie until its tracer collects it). */
static void end_it(int tid)
{
    if (tid != ender_tid)
        return;
    (void)!write(ender_fd, "x", 1);
    wait_state(ender_pid, tid, 'Z');
}

TEST(a_thread_ending_between_seize_and_interrupt_is_collected)
{
    int p[2];
    REQUIRE(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        ender_fd = p[0];
        pthread_t t;
        pthread_create(&t, NULL, ender, NULL);
        for (;;)
            pause();
    }
    REQUIRE(pid > 0);
    close(p[0]);
    ender_fd = p[1];
    ender_pid = pid;
    double end = check_now() + 10;
    while (!(ender_tid = other_tid(pid)) && check_now() < end)
        nap_ms(2);
    REQUIRE(ender_tid > 0);
    sw_freeze_set_seize_hook(end_it);
    sw_frozen f;
    char err[400] = "";
    int rc = sw_freeze(&f, pid, err, sizeof err);
    sw_freeze_set_seize_hook(NULL);
    CHECK_MSG(rc == SW_OK, "%s", err);
    CHECK_EQ_I64(f.n, 1);
    CHECK_EQ_I64(f.n ? f.tids[0] : 0, pid);
    sw_thaw(&f);
    /* collected: its task is gone, not left a zombie of ours */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d", pid, ender_tid);
    CHECK_MSG(access(path, F_OK) != 0, "thread %d still there", ender_tid);
    CHECK_EQ_I64(status_field(pid, pid, "TracerPid:", NULL), 0);
    CHECK_EQ_I64(sw_freeze_late(), 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(p[1]);
}
