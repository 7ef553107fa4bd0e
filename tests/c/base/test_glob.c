/*
 * test_glob.c - simple glob patterns (native/base/glob.h) against two
 * references: glibc's fnmatch(pattern, name, 0) on ASCII (what they stand
 * in for), and, with multibyte characters, a plain recursive matcher over
 * decoded characters (the semantics of Python's fnmatch.fnmatchcase: `?` is
 * one character; glibc's fnmatch in C.UTF-8 lets `?` and `??` both match
 * "é", so it is no reference there). Hand-picked cases, then random
 * patterns over a small alphabet, so that every backtracking path is met.
 */
#define _GNU_SOURCE
#include "check.h"
#include "base/glob.h"

#include <fnmatch.h>

/* The reference: recursive, one decoded character at a time. */
static size_t clen(const char *s)
{
    unsigned c = (unsigned char)*s;
    return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

static int ref_match(const char *p, const char *s)
{
    if (!*p)
        return !*s;
    if (*p == '*')
        return ref_match(p + 1, s) || (*s && ref_match(p, s + clen(s)));
    if (!*s)
        return 0;
    if (*p == '?')
        return ref_match(p + 1, s + clen(s));
    size_t n = clen(p);
    return clen(s) == n && memcmp(p, s, n) == 0 && ref_match(p + n, s + n);
}

static int ascii(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80)
            return 0;
    return 1;
}

static int agree(const char *p, const char *s)
{
    int want = ref_match(p, s);
    if (ascii(p) && ascii(s) && !CHECK_MSG(want == (fnmatch(p, s, 0) == 0), "reference vs fnmatch: '%s' '%s'", p, s))
        return 0;
    int got = sw_glob_match_simple(p, s);
    return CHECK_MSG(got == want, "pattern '%s' name '%s': got %d, reference %d", p, s, got, want);
}

TEST(known_cases_equal_fnmatch)
{
    static const char *const cases[][2] = {
        {"", ""}, {"", "a"}, {"*", ""}, {"*", "abc"}, {"?", ""}, {"?", "a"}, {"?", "ab"},
        {"a*", "a"}, {"a*", "ba"}, {"*a", "ba"}, {"*a*", "xyz"}, {"*/site-packages/*", "/usr/lib/python3/site-packages/x.py"},
        {"*/site-packages/*", "site-packages/x.py"}, {"*.py", "/a/b.py"}, {"*.py", "/a/b.pyc"},
        {"/a/*/c", "/a/b/x/c"}, {"a**b", "ab"}, {"a*b*c", "abbbc"}, {"a*b*c", "acb"},
        {"?é", "xé"}, {"é?", "éé"}, {"*é", "aé"}, {"??", "é"}, {"?", "é"}, {"*?x", "éx"},
        {"<frozen *>", "<frozen importlib._bootstrap>"}, {"*ab*ab*", "abaabab"}, {".*", ".hidden"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        agree(cases[i][0], cases[i][1]);
    CHECK(sw_glob_is_simple("*/x/?.py"));
    CHECK(!sw_glob_is_simple("*[ab]*"));
    CHECK(!sw_glob_is_simple("a\\*"));
}

TEST(keep_by_include_and_exclude)
{
    char *inc[] = {"*/app/*", "main", NULL}, *exc[] = {"*_test.py", NULL}, *none[] = {NULL};
    const char *app[] = {"mod.f", "f", "/src/app/mod.py"}, *test[] = {"t", "t", "/src/app/x_test.py"},
               *other[] = {"g", "g", "/lib/g.py"}, *main_[] = {"main", "main", "/lib/m.py"};
    CHECK(sw_globs_keep(inc, exc, app, 3));
    CHECK(!sw_globs_keep(inc, exc, test, 3));     /* included by its file, excluded by it too */
    CHECK(!sw_globs_keep(inc, exc, other, 3));    /* no include glob matches */
    CHECK(sw_globs_keep(inc, exc, main_, 3));     /* included by name */
    CHECK(sw_globs_keep(NULL, NULL, other, 3));   /* no globs: everything kept */
    CHECK(sw_globs_keep(none, exc, other, 3));    /* an empty include list is none */
    CHECK(!sw_globs_keep(NULL, exc, test, 3));
}

TEST(random_patterns_equal_fnmatch)
{
    static const char *const atoms[] = {"a", "b", "/", "é", "*", "?"};
    uint64_t r = 12345;
    char p[64], s[64];
    for (int iter = 0; iter < 20000; iter++) {
        size_t pl = 0, sl = 0;
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int np = (int)(r >> 60), ns = (int)((r >> 50) & 15);
        for (int i = 0; i < np; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const char *a = atoms[(r >> 33) % 6];
            memcpy(p + pl, a, strlen(a));
            pl += strlen(a);
        }
        for (int i = 0; i < ns; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const char *a = atoms[(r >> 33) % 4];   /* names: no wildcards */
            memcpy(s + sl, a, strlen(a));
            sl += strlen(a);
        }
        p[pl] = s[sl] = 0;
        if (!agree(p, s))
            break;
    }
}
