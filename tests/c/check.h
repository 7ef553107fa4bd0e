/*
 * check.h - a tiny test harness for the C core's unit tests.
 *
 *   TEST(name) { CHECK(x > 0); CHECK_EQ_U64(a, b); REQUIRE(p != NULL); }
 *
 * TEST registers the function at program start (a constructor), so a test
 * file is just a list of TESTs; check.h supplies main(). Each test runs in
 * its own forked child with a time limit, so a crash, a sanitizer report
 * (they abort the child) or a leak (LeakSanitizer makes the child's exit
 * status non-zero) fails that test alone and the others still run.
 *
 * CHECK* records a failure and continues; REQUIRE* returns from the test.
 * Only the first CHECK_MAX_REPORTS failures of a test are printed.
 *
 * Output: one line per test ("ok" / "FAIL"), then the line
 *   check-totals: P passed, F failed
 * that tests/c/run.sh adds up. Exit status: 0 if every test passed.
 * Arguments, if any, select tests whose name contains one of them.
 *
 * Include this header in exactly one .c file per test program (it defines
 * main), after defining _GNU_SOURCE.
 */
#ifndef SW_CHECK_H
#define SW_CHECK_H

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CHECK_BUILD
#  define CHECK_BUILD "?"
#endif
#define CHECK_MAX_TESTS   128
#define CHECK_MAX_REPORTS 12
#define CHECK_TIMEOUT_S   120

typedef void (*check_fn)(void);

static struct { const char *name; check_fn fn; } check_tests[CHECK_MAX_TESTS];
static int check_ntests;
static unsigned long check_failures;  /* in the running test (the child) */

static inline void check_register(const char *name, check_fn fn)
{
    if (check_ntests == CHECK_MAX_TESTS) {
        fprintf(stderr, "check.h: too many tests (raise CHECK_MAX_TESTS)\n");
        exit(2);
    }
    check_tests[check_ntests].name = name;
    check_tests[check_ntests].fn = fn;
    check_ntests++;
}

#define TEST(name)                                                              \
    static void test_##name(void);                                              \
    __attribute__((constructor)) static void check_register_##name(void)        \
    {                                                                           \
        check_register(#name, test_##name);                                     \
    }                                                                           \
    static void test_##name(void)

__attribute__((format(printf, 3, 4)))
static inline void check_fail(const char *file, int line, const char *fmt, ...)
{
    check_failures++;
    if (check_failures > CHECK_MAX_REPORTS) {
        if (check_failures == CHECK_MAX_REPORTS + 1)
            printf("      (further failures of this test not shown)\n");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    printf("      %s:%d: ", file, line);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* Each evaluates to 1 if the check held, 0 if not (after reporting it). */
#define CHECK(cond)                                                             \
    ((cond) ? 1 : (check_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond), 0))

#define CHECK_MSG(cond, ...)                                                    \
    ((cond) ? 1 : (check_fail(__FILE__, __LINE__, __VA_ARGS__), 0))

#define CHECK_EQ_U64(a, b)                                                      \
    check_eq_u64_(__FILE__, __LINE__, #a, #b, (uint64_t)(a), (uint64_t)(b))
#define CHECK_EQ_I64(a, b)                                                      \
    check_eq_i64_(__FILE__, __LINE__, #a, #b, (int64_t)(a), (int64_t)(b))
#define CHECK_EQ_STR(a, b)                                                      \
    check_eq_str_(__FILE__, __LINE__, #a, #b, (a), (b))
#define CHECK_EQ_MEM(a, b, n)                                                   \
    check_eq_mem_(__FILE__, __LINE__, #a, #b, (a), (b), (n))

#define REQUIRE(cond)                                                           \
    do { if (!CHECK(cond)) return; } while (0)
#define REQUIRE_EQ_U64(a, b)                                                    \
    do { if (!CHECK_EQ_U64(a, b)) return; } while (0)

static inline int check_eq_u64_(const char *f, int l, const char *as, const char *bs, uint64_t a, uint64_t b)
{
    if (a == b)
        return 1;
    check_fail(f, l, "%s == %s failed: %" PRIu64 " (0x%" PRIx64 ") != %" PRIu64 " (0x%" PRIx64 ")",
               as, bs, a, a, b, b);
    return 0;
}

static inline int check_eq_i64_(const char *f, int l, const char *as, const char *bs, int64_t a, int64_t b)
{
    if (a == b)
        return 1;
    check_fail(f, l, "%s == %s failed: %" PRId64 " != %" PRId64, as, bs, a, b);
    return 0;
}

static inline int check_eq_str_(const char *f, int l, const char *as, const char *bs, const char *a, const char *b)
{
    if (a && b && strcmp(a, b) == 0)
        return 1;
    check_fail(f, l, "%s == %s failed: \"%s\" != \"%s\"", as, bs, a ? a : "(null)", b ? b : "(null)");
    return 0;
}

static inline int check_eq_mem_(const char *f, int l, const char *as, const char *bs, const void *a,
                         const void *b, size_t n)
{
    if (memcmp(a, b, n) == 0)
        return 1;
    size_t i = 0;
    while (((const uint8_t *)a)[i] == ((const uint8_t *)b)[i])
        i++;
    check_fail(f, l, "%s == %s failed (%zu bytes): first difference at byte %zu: 0x%02x != 0x%02x",
               as, bs, n, i, ((const uint8_t *)a)[i], ((const uint8_t *)b)[i]);
    return 0;
}

/* A fresh temporary file name (the file exists, empty); remove it after. */
static inline void check_tmp_path(char *buf, size_t len, const char *suffix)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !dir[0])
        dir = "/tmp";
    snprintf(buf, len, "%s/swtest-XXXXXX%s", dir, suffix);
    int fd = mkstemps(buf, (int)strlen(suffix));
    if (fd < 0) {
        perror("mkstemps");
        exit(2);
    }
    close(fd);
}

/* The path of a fresh temporary file (check_tmp_path) in a static buffer,
 * for a test that needs one file at a time. */
static inline const char *check_tmp_file(const char *suffix)
{
    static char buf[256];
    check_tmp_path(buf, sizeof buf, suffix);
    return buf;
}

static inline double check_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline int check_selected(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i]))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    int passed = 0, failed = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < check_ntests; i++) {
        if (!check_selected(argc, argv, check_tests[i].name))
            continue;
        double t0 = check_now();
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            alarm(CHECK_TIMEOUT_S);
            check_tests[i].fn();
            fflush(stdout);
            exit(check_failures ? 1 : 0);  /* LeakSanitizer runs at exit */
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0)
            ;
        double dt = check_now() - t0;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            passed++;
            printf("  ok    %-5s %s.%s (%.2fs)\n", CHECK_BUILD, prog, check_tests[i].name, dt);
        } else {
            failed++;
            if (WIFSIGNALED(st))
                printf("  FAIL  %-5s %s.%s: killed by signal %d%s (%.2fs)\n", CHECK_BUILD, prog,
                       check_tests[i].name, WTERMSIG(st),
                       WTERMSIG(st) == SIGALRM ? " (timed out)" : "", dt);
            else
                printf("  FAIL  %-5s %s.%s: exit status %d (%.2fs)\n", CHECK_BUILD, prog,
                       check_tests[i].name, WEXITSTATUS(st), dt);
        }
    }
    printf("check-totals: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#endif /* SW_CHECK_H */
