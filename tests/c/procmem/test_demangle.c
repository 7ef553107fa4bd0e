/*
 * test_demangle.c - C++ names made readable (procmem/demangle.h): what
 * c++filt prints for the same names (written down from GCC 12's c++filt),
 * NULL for C names, malformed and over-long ones, and for a thread whose
 * stack is too small for the demangler; and no crash on 100,000 mangled
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
