/*
 * test_demangle.c - C++ names made readable (procmem/demangle.h): what
 * c++filt prints for the same names (written down from GCC 12's c++filt;
 * libstdc++'s abbreviation "Ss" stays std::string),
 * NULL for C names, malformed and over-long ones, names with more
 * back-references than the bound (whose text doubles with each pair) or
 * a readable form over its bound, and for a thread whose stack is too
 * small for the demangler; and no crash on 100,000 mangled
 * names damaged at random (cut, bytes changed, bytes repeated).
 *
 * Rust's v0 names (procmem/demangle_rust.h, through sw_demangle): names
 * taken from real builds (rustc 1.95's librustc_driver and a cdylib built
 * with -C symbol-mangling-version=v0), each as c++filt (binutils 2.40)
 * prints it less the crates' disambiguators and the constants' types;
 * NULL for malformed, truncated and unsupported names, back-references
 * forward or to themselves, nesting past the depth bound, output past its
 * bound and a thread with too little stack left; and no crash on 100,000
 * of them damaged at random. Rust's legacy names (real ones of rustup's
 * cargo) as c++filt prints them less their hash part, and 100,000 of them
 * damaged. (tests/py/cli/test_dump_native.py names the frames of a Rust
 * library built with rustc as c++filt does.)
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

static const char *const RUST_NAMES[][2] = {
    /* an inherent method: <Type>::name */
    {"_RNvMNtCsh537bOAIRKx_3lib6shapesNtB2_6Circle4area", "<lib::shapes::Circle>::area"},
    /* a trait impl for a basic type, and for &mut [u8] */
    {"_RNvXsh_NtCsgEmfK2I1SDS_4core3fmteNtB5_5Debug3fmt", "<str as core::fmt::Debug>::fmt"},
    {"_RNvXs1h_NtCsgEmfK2I1SDS_4core3fmtQShNtB6_5Debug3fmtCsgY6Mt91CT9J_14rustc_demangle",
     "<&mut [u8] as core::fmt::Debug>::fmt"},
    /* a value's generic arguments (::<>), a closure, a constant in a path */
    {"_RNvNCNvNtCslKGqiwnqz1t_17rustc_codegen_ssa3mir11codegen_mirs2_010___CALLSITE",
     "rustc_codegen_ssa::mir::codegen_mir::{closure#4}::__CALLSITE"},
    {"_RINvNtCsgEmfK2I1SDS_4core9panicking13assert_failedONtNtB4_3ffi6c_voidBM_ECs2N2TEQjwqGk_7stacker",
     "core::panicking::assert_failed::<*mut core::ffi::c_void, *mut core::ffi::c_void>"},
    /* arrays and constants, negative ones too */
    {"_RNvXs0_NtCsfoXig8kEbyV_12simd_adler324hashAhj0_NtB7_11Adler32Hash4hash",
     "<[u8; 0] as simd_adler32::Adler32Hash>::hash"},
    {"_RINvMs_NtCshg5UprtI8ZK_4jiff5errorNtB5_5Error5rangeINtNtNtB7_4util8rangeint4ri32Knn3b9ac9ff_Kn3b9ac9ff_EllEB7_",
     "<jiff::error::Error>::range::<jiff::util::rangeint::ri32<-999999999, 999999999>, i32, i32>"},
    /* a fn pointer under a binder (for<'a, 'b>), its lifetimes */
    {"_RNvXs0_NtNtCs7OxSQD10jZQ_18tracing_subscriber3fmt4timeFG0_QL1_INtNtB7_6format6WriterL0_EEINtNtCsgEmfK2I1SDS_"
     "4core6result6ResultuNtNtB1u_3fmt5ErrorENtB5_10FormatTime11format_time",
     "<for<'a, 'b> fn(&'a mut tracing_subscriber::fmt::format::Writer<'b>) -> core::result::Result<(), "
     "core::fmt::Error> as tracing_subscriber::fmt::time::FormatTime>::format_time"},
    /* unsafe extern "C" fn in a tuple */
    {"_RNvMs3_NtCslNYArtu3iFV_5alloc7raw_vecINtB5_6RawVecTOhFUKCBN_EuENtNtCsjrHSEGnQ3l9_3std5alloc6SystemE8grow_oneB13_",
     "<alloc::raw_vec::RawVec<(*mut u8, unsafe extern \"C\" fn(*mut u8)), std::alloc::System>>::grow_one"},
    /* dyn traits with an associated type's binding */
    {"_RNvMs3_NtCslNYArtu3iFV_5alloc7raw_vecINtB5_6RawVecINtNtB7_5boxed3BoxDINtNtNtCsgEmfK2I1SDS_4core3ops8function5"
     "FnMutuEp6OutputINtNtB1c_6result6ResultuNtNtNtCsjrHSEGnQ3l9_3std2io5error5ErrorENtNtB1c_6marker4SyncNtB32_4SendEL_"
     "EE8grow_oneB2s_",
     "<alloc::raw_vec::RawVec<alloc::boxed::Box<dyn core::ops::function::FnMut<(), Output = core::result::Result<(), "
     "std::io::error::Error>> + core::marker::Sync + core::marker::Send>>>::grow_one"},
    /* a bool constant, closures in generic arguments (no ::), tuples */
    {"_RINvNtNtNtNtCsgEmfK2I1SDS_4core5slice4sort6stable9quicksort9quicksortTNtNtCsdoLGDhjbLAL_13rustc_type_ir7ty_kind"
     "5TyVidB16_ENCINvMNtCslNYArtu3iFV_5alloc5sliceSB15_11sort_by_keyB15_NCNvMNtNtCs3MG2ofusW15_21rustc_data_"
     "structures5graph9vec_graphINtB2V_8VecGraphB16_Kb1_E3news0_0E0ECsjargyg6XnQl_16rustc_hir_typeck",
     "core::slice::sort::stable::quicksort::quicksort::<(rustc_type_ir::ty_kind::TyVid, rustc_type_ir::ty_kind::TyVid), "
     "<[(rustc_type_ir::ty_kind::TyVid, rustc_type_ir::ty_kind::TyVid)]>::sort_by_key<(rustc_type_ir::ty_kind::TyVid, "
     "rustc_type_ir::ty_kind::TyVid), <rustc_data_structures::graph::vec_graph::VecGraph<rustc_type_ir::ty_kind::TyVid, "
     "true>>::new::{closure#2}>::{closure#0}>"},
    /* punycode identifiers (rustc 1.63's v0 names of non-ASCII functions, a
     * module and a type): with and without an ASCII part, "_" in it */
    {"_RNvCsh537bOAIRKx_3libu7bbrz78b", "lib::\u51fd\u6570"},
    {"_RNvCsh537bOAIRKx_3libu9ab_c__xwe", "lib::ab_c_\u0434"},
    {"_RNvMCsh537bOAIRKx_3libNtB2_u8bung_fnau7_2hvz82f", "<lib::\u00dcbung>::\u8aac\u660e"},
    {"_RNvNtCsh537bOAIRKx_3libu9gre_6ka8iu6ma_hia", "lib::gr\u00f6\u00dfe::ma\u00df"},
    /* a vendor suffix: left out, as c++filt does */
    {"_RNvNtNtCsjrHSEGnQ3l9_3std6thread11main_thread4MAIN.0", "std::thread::main_thread::MAIN"},
};

/* Rust's legacy mangling (real names of rustup's cargo): as c++filt prints
 * them less the hash part; a name with an escape none knows, or no hash,
 * is a C++ name. */
static const char *const RUST_LEGACY_NAMES[][2] = {
    {"_ZN5alloc4sync12Arc$LT$T$GT$3new17h45c49fcaeded8ad0E", "alloc::sync::Arc<T>::new"},
    {"_ZN5alloc3str21_$LT$impl$u20$str$GT$7replace17h3325436e6172dbd2E", "alloc::str::<impl str>::replace"},
    {"_ZN11rustup_init4main28_$u7b$$u7b$closure$u7d$$u7d$17ha4444ffd4fbde65aE", "rustup_init::main::{{closure}}"},
    {"_ZN50_$LT$$RF$mut$u20$T$u20$as$u20$core..fmt..Debug$GT$3fmt17h1593cce12508d13aE",
     "<&mut T as core::fmt::Debug>::fmt"},
    {"_ZN103_$LT$std..sys..thread_local..abort_on_dtor_unwind..DtorUnwindGuard$u20$as$u20$core..ops..drop..Drop$GT$"
     "4drop17h89b1b288af29ce99E.2321",
     "<std::sys::thread_local::abort_on_dtor_unwind::DtorUnwindGuard as core::ops::drop::Drop>::drop"},
    /* an unknown escape, no hash part: C++ names */
    {"_ZN3foo5$ZZ$a17h0123456789abcdefE", "foo::$ZZ$a::h0123456789abcdef"},
    {"_ZN3foo17h0123456789abcdefEv", "foo::h0123456789abcdef()"},
    {"_ZN5alloc4sync12Arc$LT$T$GT$3newE", "alloc::sync::Arc$LT$T$GT$::new"},
};

/* Each of n pairs (mangled, readable) demangled as readable. */
static void check_names(const char *const names[][2], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *d = sw_demangle(names[i][0]);
        CHECK(d && strcmp(d, names[i][1]) == 0);
        if (!d || strcmp(d, names[i][1]) != 0)
            fprintf(stderr, "  %s -> %s\n", names[i][0], d ? d : "(null)");
        free(d);
    }
}

TEST(rust_legacy_names_as_cxxfilt_prints_them_less_the_hash)
{
    check_names(RUST_LEGACY_NAMES, sizeof RUST_LEGACY_NAMES / sizeof RUST_LEGACY_NAMES[0]);
}

TEST(rust_names_as_cxxfilt_prints_them_less_disambiguators)
{
    check_names(RUST_NAMES, sizeof RUST_NAMES / sizeof RUST_NAMES[0]);
}

TEST(rust_malformed_and_unsupported_names_stay)
{
    const char *const keep[] = {
        "_R", "_RC", "_RNvC3foo", "_RNvCs_3foo3ba", "_R0NvC3foo3bar" /* an encoding version */,
        "_RNvC3foo3bar!" /* no suffix */, "_RB_" /* itself */, "_RNvB3_3foo" /* forward */,
        "_RNvCs_3foou3b-r" /* punycode, not its alphabet */, "_RNvCs_3foou2zz" /* punycode, cut short */,
        "_RNvCs_3foou0" /* punycode, empty */, "_RNvCs_3foou3a_a" /* punycode, decodes to U+0080 */,
        "_RNvC3f\001o3bar" /* a control byte */,
        "_RINvC3foo3barKRe616263_E" /* a &str constant */, "_RINvC3foo3barKm_E" /* no digits */,
        "_RIC3fooKb2_E" /* a bool of 2 */, "_RNvC3foo3bar\377",
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        char *d = sw_demangle_rust(keep[i]);
        CHECK(d == NULL);
        if (d)
            fprintf(stderr, "  %s -> %s\n", keep[i], d);
        free(d);
    }
    CHECK(sw_demangle_rust(NULL) == NULL);
    CHECK(sw_demangle_rust("_ZN3foo3barEv") == NULL);
    /* every truncation of every name: NULL, or the same name (cut before
     * its instantiating crate or its suffix, which are not printed) */
    for (size_t i = 0; i < sizeof RUST_NAMES / sizeof RUST_NAMES[0]; i++) {
        char buf[SW_DEMANGLE_MAX + 1];
        size_t n = strlen(RUST_NAMES[i][0]);
        for (size_t k = 0; k < n; k++) {
            memcpy(buf, RUST_NAMES[i][0], k);
            buf[k] = 0;
            char *d = sw_demangle_rust(buf);
            CHECK(d == NULL || strcmp(d, RUST_NAMES[i][1]) == 0);
            free(d);
        }
    }
}

/* A back-reference to position `at` (after "_R"): "B", then at - 1 in
 * base 62 and "_" ("B_" for 0). */
static int backref(char *out, size_t cap, size_t at)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    char tmp[16];
    size_t n = 0;
    if (at) {
        for (size_t v = at - 1;; v /= 62) {
            tmp[n++] = digits[v % 62];
            if (v < 62)
                break;
        }
    }
    int w = snprintf(out, cap, "B");
    while (n)
        w += snprintf(out + w, cap - (size_t)w, "%c", tmp[--n]);
    return w + snprintf(out + w, cap - (size_t)w, "_");
}

TEST(rust_nesting_and_output_are_bounded)
{
    char name[SW_DEMANGLE_MAX + 1];
    /* foo::<&&&...u8>: 100 references deep is fine, 500 past the depth bound */
    for (int depth = 100; depth <= 500; depth += 400) {
        size_t n = (size_t)snprintf(name, sizeof name, "_RINvC3foo3bar");
        memset(name + n, 'R', (size_t)depth);
        snprintf(name + n + (size_t)depth, sizeof name - n - (size_t)depth, "hE");
        char *d = sw_demangle_rust(name);
        CHECK(depth == 100 ? d && strlen(d) == strlen("foo::bar::<>") + 100 + 2 : d == NULL);
        free(d);
    }
    /* foo::<u8, (A, A), (B, B), ...>: each argument a tuple of two
     * back-references to the one before, the text doubling: 10 levels
     * print under the bound, 60 would print 2^60 times u8 */
    for (int levels = 10; levels <= 60; levels += 50) {
        size_t n = (size_t)snprintf(name, sizeof name, "_RINvC3foo3barh");
        size_t prev = n - 3;   /* the position (after "_R") of the argument before: "h" */
        for (int k = 0; k < levels; k++) {
            size_t here = n - 2;
            n += (size_t)snprintf(name + n, sizeof name - n, "T");
            n += (size_t)backref(name + n, sizeof name - n, prev);
            n += (size_t)backref(name + n, sizeof name - n, prev);
            n += (size_t)snprintf(name + n, sizeof name - n, "E");
            prev = here;
        }
        snprintf(name + n, sizeof name - n, "E");
        char *d = sw_demangle_rust(name);
        CHECK(levels == 10 ? d != NULL : d == NULL);
        if (d)   /* (the last level: 2^10 times u8, with ", " and parentheses) */
            CHECK(strlen(d) > 1024 * 2 && strlen(d) <= SW_DEMANGLE_OUT_MAX);
        free(d);
    }
}

TEST(rust_small_stacks_keep_the_name)
{
    for (size_t size = 32 * 1024; size <= 256 * 1024; size *= 8) {
        char *d = in_thread(size, RUST_NAMES[0][0]);
        CHECK(size < SW_RUST_DEMANGLE_STACK ? d == NULL : d && strcmp(d, RUST_NAMES[0][1]) == 0);
        free(d);
    }
}

TEST(damaged_names_never_crash)
{
    uint64_t x = 0x9e3779b97f4a7c15u;
    char buf[SW_DEMANGLE_MAX + 1];
    unsigned demangled[3] = {0, 0, 0};   /* Rust's v0, C++'s, Rust's legacy */
    for (int round = 0; round < 300000; round++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *src = round % 3 == 1   ? NAMES[x % (sizeof NAMES / sizeof NAMES[0])][0]
                          : round % 3 == 2 ? RUST_LEGACY_NAMES[x % (sizeof RUST_LEGACY_NAMES / sizeof RUST_LEGACY_NAMES[0])][0]
                                           : RUST_NAMES[x % (sizeof RUST_NAMES / sizeof RUST_NAMES[0])][0];
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
            CHECK(d[0] != 0 && strlen(d) <= SW_DEMANGLE_OUT_MAX);
            demangled[round % 3]++;
        }
        free(d);
    }
    CHECK(demangled[0] > 0 && demangled[1] > 0 && demangled[2] > 0);
}
