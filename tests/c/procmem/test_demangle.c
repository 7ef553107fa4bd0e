/*
 * test_demangle.c - C++ names made readable (procmem/demangle.h): what
 * c++filt prints for the same names (written down from GCC 12's c++filt;
 * libstdc++'s abbreviation "Ss" stays std::string),
 * NULL for C names, malformed and over-long ones, names with more
 * back-references than the bound (whose text doubles with each pair) or
 * a readable form over its bound, and for a thread whose stack is too
 * small for the demangler; and no crash on 100,000 mangled
 * names damaged at random (cut, bytes changed, bytes repeated).
 */
#define _GNU_SOURCE
#include "check.h"
#include "procmem/procmem.h"

#include <pthread.h>

static const char *const NAMES[][2] = {
    {"_ZN3foo3barEv", "foo::bar()"},
    {"_ZN2ns5inner3sumIiEET_S2_S2_", "int ns::inner::sum<int>(int, int)"},
    {"_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector<int, std::allocator<int> >::push_back(int const&)"},
    {"_ZL7catcherv", "catcher()"},
    {"_ZN3cxxL5afterIiEET_S1_.isra.0", "int cxx::after<int>(int) [clone .isra.0]"},
    {"_ZN3foo3barEv.cold", "foo::bar() [clone .cold]"},
    {"_ZNK3Foo3getEv", "Foo::get() const"},
    {"_ZN3FooC2Ev", "Foo::Foo()"},
    {"_ZdlPv", "operator delete(void*)"},
    {"_Z1fPFvvE", "f(void (*)())"},
    /* (c++filt: f(std::basic_string<char, std::char_traits<char>, std::allocator<char> >)) */
    {"_Z1fSs", "f(std::string)"},
};

TEST(demangled_as_cxxfilt_prints_them)
{
    REQUIRE(sw_demangle_available());
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        char *d = sw_demangle(NAMES[i][0]);
        CHECK(d && strcmp(d, NAMES[i][1]) == 0);
        if (d && strcmp(d, NAMES[i][1]) != 0)
            fprintf(stderr, "  %s -> %s\n", NAMES[i][0], d);
        free(d);
    }
}

TEST(c_malformed_and_long_names_stay)
{
    const char *const keep[] = {"main", "_PyEval_EvalFrameDefault", "", "_Z", "_Zx", "_ZN3foo", "_ZN1aIiE", "Z3foov",
                                "_ZN3foo3barEv\377"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        CHECK(sw_demangle(keep[i]) == NULL);
    CHECK(sw_demangle(NULL) == NULL);
    /* _ZN 3foo... Ev: a valid name of exactly SW_DEMANGLE_MAX bytes, then one longer. */
    char name[SW_DEMANGLE_MAX + 8];
    for (int extra = 0; extra < 2; extra++) {
        size_t n = SW_DEMANGLE_MAX + (size_t)extra, k = 3;
        memcpy(name, "_ZN", 3);
        while (k + 2 < n) {
            size_t left = n - 2 - k;   /* before "Ev": a component "<len><letters>" */
            size_t len = left > 9 ? 8 : left - 1;
            name[k++] = (char)('0' + len);
            memset(name + k, 'a', len);
            k += len;
        }
        memcpy(name + k, "Ev", 3);
        REQUIRE(strlen(name) == n);
        char *d = sw_demangle(name);
        CHECK(extra ? d == NULL : d != NULL);
        free(d);
    }
}

/* "_Z1fI1AIiiE", then `levels` levels S_<prev, prev> (two back-references
 * each: twice the text of the one before), then "Evv". */
static void doubling_name(char *out, size_t cap, int levels)
{
    static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    size_t n = (size_t)snprintf(out, cap, "_Z1fI1AIiiE");
    for (int k = 1; k <= levels && n < cap; k++) {
        char id[3] = {digits[k % 36], 0, 0};
        if (k >= 36)
            id[0] = digits[k / 36], id[1] = digits[k % 36];
        n += (size_t)snprintf(out + n, cap - n, "S_IS%s_S%s_E", id, id);
    }
    if (n < cap)
        snprintf(out + n, cap - n, "Evv");
}

TEST(names_that_would_print_too_much_stay)
{
    char name[SW_DEMANGLE_MAX + 1];
    doubling_name(name, sizeof name, 5);   /* 15 back-references (3 a level): c++filt prints 1,056 bytes */
    char *d = sw_demangle(name);
    CHECK(d && strlen(d) == 1056 && strncmp(d, "void f<A<int, int>, ", 20) == 0);
    free(d);
    doubling_name(name, sizeof name, 6);   /* 18 */
    d = sw_demangle(name);
    CHECK(d == NULL);
    free(d);
    doubling_name(name, sizeof name, 40);  /* 2^40 times the text: never asked for */
    d = sw_demangle(name);
    CHECK(d == NULL);
    free(d);
    /* A<long long x n> then A<that, that>: c++filt prints 13,222 bytes for
     * n = 400 (kept), 16,522 for 500 (over SW_DEMANGLE_OUT_MAX) */
    for (int n = 400; n <= 500; n += 100) {
        memcpy(name, "_Z1fI1AI", 8);
        memset(name + 8, 'x', (size_t)n);
        snprintf(name + 8 + n, sizeof name - 8 - (size_t)n, "ES_IS1_S1_EEvv");
        d = sw_demangle(name);
        CHECK(n == 400 ? d && strlen(d) == 13222 : d == NULL);
        free(d);
    }
}

static void *demangle_in_thread(void *arg)
{
    return sw_demangle(arg);
}

/* sw_demangle's result in a new thread with a stack of `size` bytes. */
static char *in_thread(size_t size, const char *name)
{
    pthread_attr_t attr;
    pthread_t t;
    void *r = NULL;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, size);
    if (pthread_create(&t, &attr, demangle_in_thread, (void *)name) == 0)
        pthread_join(t, &r);
    pthread_attr_destroy(&attr);
    return r;
}

TEST(small_stacks_keep_the_name)
{
    char *d = in_thread(256 * 1024, "_ZN3foo3barEv");
    CHECK(d == NULL);
    free(d);
    d = in_thread(4 * SW_DEMANGLE_STACK, "_ZN3foo3barEv");
    CHECK(d && strcmp(d, "foo::bar()") == 0);
    free(d);
}

TEST(damaged_names_never_crash)
{
    uint64_t x = 0x9e3779b97f4a7c15u;
    char buf[SW_DEMANGLE_MAX + 1];
    unsigned demangled = 0;
    for (int round = 0; round < 100000; round++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *src = NAMES[x % (sizeof NAMES / sizeof NAMES[0])][0];
        size_t n = strlen(src);
        memcpy(buf, src, n + 1);
        for (int m = 0; m < 1 + (int)(x >> 60); m++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = 2 + (x >> 8) % (n > 2 ? n - 2 : 1);
            switch (x % 3) {
            case 0:   /* cut */
                n = at < n ? at : n;
                break;
            case 1:   /* a byte changed (never the end: a NUL cuts) */
                if (at < n)
                    buf[at] = (char)(1 + (x >> 32) % 255);
                break;
            default: { /* up to 8 bytes repeated at the end: deeper nesting */
                size_t len = at < n ? n - at : 0;
                len = len < 8 ? len : 8;
                len = len < sizeof buf - 1 - n ? len : sizeof buf - 1 - n;
                memmove(buf + n, buf + at, len);
                n += len;
                break;
            }
            }
            buf[n] = 0;
        }
        char *d = sw_demangle(buf);
        if (d) {
            CHECK(d[0] != 0);
            demangled++;
        }
        free(d);
    }
    CHECK(demangled > 0);
}
