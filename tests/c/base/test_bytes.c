/*
 * test_bytes.c - the growable buffer and key/value encoding (bytes.c), error
 * strings (errors.c) and the clock (clock.c).
 */
#define _GNU_SOURCE
#include "check.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "trace/format.h"
#include "base/varint.h"

#include <sys/stat.h>
#include <unistd.h>

TEST(put_grows_and_keeps_contents)
{
    sw_bytes b = {0};
    uint8_t expect[5000];
    for (size_t i = 0; i < sizeof expect; i++) {
        expect[i] = (uint8_t)(i * 31 + 7);
        CHECK_EQ_I64(sw_bytes_u8(&b, expect[i]), SW_OK);
    }
    CHECK_EQ_U64(b.len, sizeof expect);
    CHECK(b.cap >= b.len);
    CHECK_EQ_MEM(b.data, expect, sizeof expect);
    CHECK_EQ_U64(b.failed, 0);
    CHECK_EQ_I64(sw_bytes_put(&b, expect, 0), SW_OK);
    CHECK_EQ_I64(sw_bytes_put(&b, expect, 3000), SW_OK);
    CHECK_EQ_U64(b.len, 8000);
    CHECK_EQ_MEM(b.data + 5000, expect, 3000);
    sw_bytes_free(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
    sw_bytes_free(&b);  /* twice is harmless */
}

TEST(reserve_failure_keeps_contents)
{
    sw_bytes b = {0};
    sw_bytes_put(&b, "abc", 3);
    size_t cap = b.cap;
    CHECK_EQ_I64(sw_bytes_reserve(&b, SIZE_MAX), SW_ENOMEM);
    CHECK_EQ_U64(b.failed, 1);
    CHECK_EQ_U64(b.len, 3);
    CHECK_EQ_U64(b.cap, cap);
    CHECK_EQ_MEM(b.data, "abc", 3);
    CHECK_EQ_I64(sw_bytes_put(&b, "x", SIZE_MAX - 1), SW_ENOMEM);
    CHECK_EQ_U64(b.len, 3);
    /* The kv helpers report the sticky failure. */
    CHECK_EQ_I64(sw_kv_uint(&b, "k", 1), SW_ENOMEM);
    sw_bytes_free(&b);
}

TEST(varint_str_u8_f64_encodings)
{
    sw_bytes b = {0};
    sw_bytes_varint(&b, 300);
    sw_bytes_str(&b, "hi");
    sw_bytes_str(&b, NULL);
    sw_bytes_str(&b, "");
    sw_bytes_u8(&b, 0xfe);
    sw_bytes_f64(&b, 1.0);
    sw_bytes_f64(&b, -2.5);
    const uint8_t expect[] = {
        0xac, 0x02,                                      /* 300 */
        0x02, 'h', 'i',                                  /* "hi" */
        0x00,                                            /* NULL = "" */
        0x00,                                            /* "" */
        0xfe,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f,  /* 1.0, little-endian */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xc0,  /* -2.5 */
    };
    CHECK_EQ_U64(b.len, sizeof expect);
    CHECK_EQ_MEM(b.data, expect, sizeof expect);
    CHECK_EQ_U64(b.failed, 0);
    sw_bytes_free(&b);

    /* A long string gets a multi-byte length. */
    char big[200];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = 0;
    sw_bytes_str(&b, big);
    CHECK_EQ_U64(b.len, 2 + 199);
    CHECK_EQ_U64(b.data[0], 0x80 | (199 & 0x7f));
    CHECK_EQ_U64(b.data[1], 199 >> 7);
    sw_bytes_free(&b);
}

TEST(kv_encodings)
{
    sw_bytes b = {0};
    CHECK_EQ_I64(sw_kv_uint(&b, "u", 128), SW_OK);
    CHECK_EQ_I64(sw_kv_sint(&b, "s", -3), SW_OK);
    CHECK_EQ_I64(sw_kv_str(&b, "t", "xy"), SW_OK);
    CHECK_EQ_I64(sw_kv_f64(&b, "f", 0.5), SW_OK);
    CHECK_EQ_I64(sw_kv_sint(&b, "m", INT64_MIN), SW_OK);
    const uint8_t expect[] = {
        1, 'u', SW_VAL_UINT, 0x80, 0x01,
        1, 's', SW_VAL_SINT, 0x05,                       /* zigzag(-3) = 5 */
        1, 't', SW_VAL_BYTES, 2, 'x', 'y',
        1, 'f', SW_VAL_F64, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f,
        1, 'm', SW_VAL_SINT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    };
    CHECK_EQ_U64(b.len, sizeof expect);
    CHECK_EQ_MEM(b.data, expect, sizeof expect);
    sw_bytes_free(&b);
}

TEST(strerror_texts)
{
    const int codes[] = {SW_OK, SW_ENOMEM, SW_EIO, SW_EFORMAT, SW_ETRUNC, SW_ECRC, SW_EVERSION,
                         SW_EARG, SW_ESTATE};
    const char *unknown = sw_strerror(12345);
    CHECK_EQ_STR(unknown, "unknown error");
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = sw_strerror(codes[i]);
        CHECK(s && s[0]);
        CHECK(strcmp(s, unknown) != 0);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(s, sw_strerror(codes[j])) != 0);
    }
}

TEST(clock_monotonic_and_calibrated)
{
    sw_clock c;
    sw_clock_calibrate(&c, 0, NULL, NULL);
    CHECK_EQ_U64(c.kind, SW_CLOCK_MONOTONIC);
    CHECK(c.hz == 1e9);
    CHECK(c.tick0 == c.mono0_ns);
    CHECK(c.real0_ns > 1500000000ull * 1000000000ull);  /* after 2017 */
    uint64_t prev = sw_clock_now(&c);
    CHECK(prev >= c.tick0);
    for (int i = 0; i < 10000; i++) {
        uint64_t now = sw_clock_now(&c);
        CHECK(now >= prev);
        prev = now;
    }
    sw_clock_refine(&c, NULL, NULL);
    CHECK(c.hz == 1e9);

    sw_clock t;
    sw_clock_calibrate(&t, 1, NULL, NULL);  /* TSC if the kernel trusts it */
    CHECK(t.kind == SW_CLOCK_MONOTONIC || t.kind == SW_CLOCK_TSC);
    CHECK(t.hz > 1e6 && t.hz < 1e11);
    prev = sw_clock_now(&t);
    CHECK(prev >= t.tick0);
    uint64_t m0 = sw_clock_ns(CLOCK_MONOTONIC);
    while (sw_clock_ns(CLOCK_MONOTONIC) - m0 < 5000000)
        CHECK(sw_clock_now(&t) >= prev);
    /* 5 ms of ticks at the measured rate is about 5 ms. */
    double secs = (double)(sw_clock_now(&t) - prev) / t.hz;
    CHECK_MSG(secs > 0.004 && secs < 0.5, "5 ms measured as %g s", secs);
}

/* A cache file's rate, as cache_write writes it. */
static void write_cache(const char *path, const char *boot, unsigned long long millihz, unsigned long long over)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fprintf(f, "stackwatch-clock 1 %s %llu %llu\n", boot, millihz, over);
    fclose(f);
    chmod(path, 0644);
}

static unsigned long long cached_millihz(const char *path)
{
    char buf[160] = {0}, id[64];
    unsigned long long millihz = 0, over = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return sscanf(buf, "stackwatch-clock 1 %63s %llu %llu", id, &millihz, &over) == 3 ? millihz : 0;
}

TEST(clock_rate_cached_for_the_boot)
{
    /* The TSC's rate is measured over 2 ms once and cached; a later
     * calibration takes the cached rate when a 0.2 ms measure agrees with
     * it, and measures again (and replaces it) when it does not, or when
     * the file is another boot's, not one of ours, or writable by others. */
    const char *boot = "0f0e0d0c-aaaa-bbbb-cccc-000000000001";
    char path[256];
    check_tmp_path(path, sizeof path, ".clock");
    unlink(path);
    sw_clock t;
    sw_clock_calibrate(&t, 1, path, boot);
    if (t.kind != SW_CLOCK_TSC) {   /* (the kernel's clocksource is not the TSC: no rate, no cache) */
        CHECK(access(path, F_OK) != 0);
        return;
    }
    unlink(path);
    sw_clock c;
    sw_clock_calibrate(&c, 1, path, boot);   /* no file: measured over 2 ms, written */
    CHECK(c.kind == SW_CLOCK_TSC && c.hz_over_ns >= 2000000);
    unsigned long long written = cached_millihz(path);
    CHECK_MSG(written > 0 && (double)written / 1000.0 - c.hz < 1 && c.hz - (double)written / 1000.0 < 1,
              "cached %llu mHz, measured %f Hz", written, c.hz);
    /* A rate off by 1e-4, measured over 5 s: taken as it is. */
    unsigned long long near = (unsigned long long)(c.hz * 1000.0 * (1 + 1e-4));
    write_cache(path, boot, near, 5000000000ull);
    sw_clock d;
    sw_clock_calibrate(&d, 1, path, boot);
    CHECK_MSG(d.hz == (double)near / 1000.0 && d.hz_over_ns == 5000000000ull, "%f Hz over %llu ns", d.hz,
              (unsigned long long)d.hz_over_ns);
    /* Refined over less than the cached rate was measured over: kept. */
    sw_clock_refine(&d, path, boot);
    CHECK(d.hz == (double)near / 1000.0);
    /* Off by 1%: measured again, and the file replaced. */
    unsigned long long far = (unsigned long long)(c.hz * 1000.0 * 1.01);
    write_cache(path, boot, far, 5000000000ull);
    sw_clock e;
    sw_clock_calibrate(&e, 1, path, boot);
    CHECK(e.hz_over_ns >= 2000000 && e.hz_over_ns < 5000000000ull);
    CHECK(e.hz / c.hz > 0.999 && e.hz / c.hz < 1.001);
    CHECK(cached_millihz(path) != far && cached_millihz(path) > 0);
    /* Another boot's, or writable by others: not read. */
    write_cache(path, "another-boot", near, 5000000000ull);
    sw_clock f;
    sw_clock_calibrate(&f, 1, path, boot);
    CHECK(f.hz != (double)near / 1000.0 && f.hz_over_ns < 5000000000ull);
    write_cache(path, boot, near, 5000000000ull);
    chmod(path, 0666);
    sw_clock g;
    sw_clock_calibrate(&g, 1, path, boot);
    CHECK(g.hz != (double)near / 1000.0 && g.hz_over_ns < 5000000000ull);
    /* A symbolic link is not followed (to read it). */
    char target[256];
    check_tmp_path(target, sizeof target, ".clock");
    write_cache(target, boot, near, 5000000000ull);
    unlink(path);
    CHECK(symlink(target, path) == 0);
    sw_clock h;
    sw_clock_calibrate(&h, 1, path, boot);
    CHECK(h.hz != (double)near / 1000.0);
    CHECK(cached_millihz(target) == near);   /* (the link replaced, not written through) */
    unlink(path);
    unlink(target);
}
