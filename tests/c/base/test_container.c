/*
 * test_container.c - the container of every stackwatch file
 * (base/container.h): framing and key/value lists round trip; the chunk
 * iterator over memory and over a file (pread, with its 1 MiB window) hands
 * out the same chunks and the same damage; a damaged chunk anywhere (bad
 * checksum, bad length, garbage between chunks, two damaged ranges, a cut)
 * hides nothing after it, and is reported with its offset, its bytes and
 * its chunks; chunks of unknown types are skipped, counted in a newer
 * minor version and damage in the same one.
 */
#define _GNU_SOURCE
#include "check.h"
#include "base/container.h"
#include "base/crc32.h"

#include <fcntl.h>

#define MAGIC "\x89TST\r\n\x1a\n"

static const char *type_name(unsigned t) { return t == 1 ? "META" : t == 5 ? "END" : t == 2 ? "DATA" : NULL; }

/* Knows types 1 (META), 2 (DATA) and 5 (END); version 1.3. */
static const sw_container_kind KIND = {MAGIC, "test file", 1, 3, (1u << 1) | (1u << 2) | (1u << 5), type_name};

typedef struct layout {
    size_t off[400];      /* header offset of each chunk */
    size_t len[400];      /* payload length */
    unsigned type[400];
    size_t n;
} layout;

/* A file of n chunks: META, DATA chunks of the given sizes (each payload a
 * pattern naming its chunk), END. Sizes cycle through `sizes`. */
static void build(sw_bytes *f, layout *L, unsigned minor, size_t n, const size_t *sizes, size_t nsizes)
{
    uint8_t hdr[SW_FILE_HEADER_LEN];
    sw_file_header_put(hdr, MAGIC, 1, minor);
    f->len = 0;
    sw_bytes_put(f, hdr, sizeof hdr);
    L->n = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned type = i == 0 ? SW_CHUNK_META : i + 1 == n ? SW_CHUNK_END : 2;
        size_t at;
        if (type == 2) {
            at = sw_chunk_begin(f, type);
            size_t len = sizes[i % nsizes];
            for (size_t k = 0; k < len; k++)
                sw_bytes_u8(f, (uint8_t)(i * 31 + k * 7 + (k >> 8)));
        } else {
            /* META and END: key/value lists, framed from parts. */
            sw_bytes kv = {0};
            sw_kv_uint(&kv, "chunk", i);
            sw_kv_sint(&kv, "neg", -5 - (int64_t)i);
            sw_kv_str(&kv, "name", type == SW_CHUNK_META ? "start" : "end");
            sw_kv_f64(&kv, "rate", 2.5e9);
            struct iovec parts[2] = {{kv.data, 7}, {kv.data + 7, kv.len - 7}};
            uint8_t ch[SW_CHUNK_HEADER_LEN];
            CHECK_EQ_I64(sw_chunk_header_put(ch, type, parts, 2), SW_OK);
            at = f->len;
            sw_bytes_put(f, ch, sizeof ch);
            sw_bytes_put(f, kv.data, kv.len);
            sw_bytes_free(&kv);
        }
        if (type == 2)
            CHECK_EQ_I64(sw_chunk_end(f, at), SW_OK);
        L->off[L->n] = at;
        L->len[L->n] = f->len - at - SW_CHUNK_HEADER_LEN;
        L->type[L->n] = type;
        L->n++;
    }
    REQUIRE(!f->failed);
}

typedef struct seen {
    size_t n;
    uint64_t off[400];
    uint32_t len[400];
    uint32_t crc[400];
    sw_damage damage[SW_DAMAGE_KEEP];
    size_t ndamage;
    uint64_t damage_total, unknown;
    char text[512];
    int rc;
} seen;

/* Iterates data (from memory, or from a file holding it). */
static void iterate(const uint8_t *data, size_t len, int from_file, seen *s)
{
    memset(s, 0, sizeof *s);
    sw_source src;
    int fd = -1;
    char path[256];
    if (from_file) {
        check_tmp_path(path, sizeof path, ".bin");
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        REQUIRE(fd >= 0);
        unlink(path);
        REQUIRE(write(fd, data, len) == (ssize_t)len);
        REQUIRE(sw_source_fd(&src, fd) == SW_OK);
    } else {
        sw_source_mem(&src, data, len);
    }
    sw_chunks it;
    char err[256] = "";
    s->rc = sw_chunks_open(&it, &KIND, &src, err, sizeof err);
    if (s->rc == SW_OK) {
        sw_chunk c;
        int r;
        while ((r = sw_chunks_next(&it, &c)) == 1 && s->n < 400) {
            s->off[s->n] = c.off;
            s->len[s->n] = c.len;
            s->crc[s->n] = sw_crc32(0, c.payload, c.len);
            s->n++;
        }
        CHECK_EQ_I64(r, 0);
        if (it.ndamage)
            memcpy(s->damage, it.damage, it.ndamage * sizeof *it.damage);
        s->ndamage = it.ndamage;
        s->damage_total = it.damage_total;
        s->unknown = it.unknown;
        sw_damage_describe(it.damage, it.ndamage, it.damage_total, s->text, sizeof s->text);
    } else {
        snprintf(s->text, sizeof s->text, "%s", err);
    }
    sw_chunks_close(&it);
    if (fd >= 0)
        close(fd);
}

/* Both sources, which must agree; the memory one is returned. */
static void iterate_both(const uint8_t *data, size_t len, seen *s)
{
    static seen f;
    iterate(data, len, 0, s);
    iterate(data, len, 1, &f);
    CHECK_EQ_I64(f.rc, s->rc);
    CHECK_EQ_U64(f.n, s->n);
    CHECK_EQ_U64(f.damage_total, s->damage_total);
    CHECK_EQ_STR(f.text, s->text);
    for (size_t i = 0; i < s->n && i < f.n; i++) {
        CHECK_EQ_U64(f.off[i], s->off[i]);
        CHECK_EQ_U64(f.crc[i], s->crc[i]);
    }
}

/* Every chunk of L except those in skip[] was read, in order. */
static int read_all_but(const seen *s, const layout *L, const size_t *skip, size_t nskip)
{
    size_t k = 0;
    for (size_t i = 0; i < L->n; i++) {
        int skipped = 0;
        for (size_t j = 0; j < nskip; j++)
            skipped |= skip[j] == i;
        if (skipped)
            continue;
        if (!CHECK_MSG(k < s->n && s->off[k] == L->off[i] && s->len[k] == L->len[i], "chunk %zu at %zu not read", i,
                       L->off[i]))
            return 0;
        k++;
    }
    return CHECK_EQ_U64(s->n, k);
}

static const size_t SMALL[] = {40, 300, 1, 4000, 77};

/* build(), then checks that every chunk reads without damage, from memory
 * and from a file. */
static void build_intact(sw_bytes *f, layout *L, size_t n, const size_t *sizes, size_t nsizes)
{
    static seen s;
    build(f, L, 3, n, sizes, nsizes);
    iterate_both(f->data, f->len, &s);
    CHECK_EQ_I64(s.rc, SW_OK);
    read_all_but(&s, L, NULL, 0);
    CHECK_EQ_U64(s.damage_total, 0);
    CHECK_EQ_STR(s.text, "");
}

TEST(framing_and_key_values_round_trip)
{
    sw_bytes f = {0};
    layout L;
    build_intact(&f, &L, 12, SMALL, 5);
    /* The key/value list of the META chunk. */
    const uint8_t *p = f.data + L.off[0] + SW_CHUNK_HEADER_LEN, *end = p + L.len[0];
    sw_kv kv;
    REQUIRE(sw_kv_next(&p, end, &kv) == 1);
    CHECK(kv.key_len == 5 && memcmp(kv.key, "chunk", 5) == 0 && kv.type == SW_VAL_UINT && kv.u == 0);
    REQUIRE(sw_kv_next(&p, end, &kv) == 1);
    CHECK(kv.type == SW_VAL_SINT && kv.i == -5 && kv.f == -5.0);
    REQUIRE(sw_kv_next(&p, end, &kv) == 1);
    CHECK(kv.type == SW_VAL_BYTES && kv.slen == 5 && memcmp(kv.s, "start", 5) == 0);
    REQUIRE(sw_kv_next(&p, end, &kv) == 1);
    CHECK(kv.type == SW_VAL_F64 && kv.f == 2.5e9);
    CHECK_EQ_I64(sw_kv_next(&p, end, &kv), 0);
    /* Cut entries and unknown value types are errors, never overreads. */
    const uint8_t *q = f.data + L.off[0] + SW_CHUNK_HEADER_LEN;
    for (size_t cut = 1; cut < L.len[0]; cut++) {
        uint8_t *copy = malloc(cut);
        memcpy(copy, q, cut);
        const uint8_t *c = copy;
        int rc;
        while ((rc = sw_kv_next(&c, copy + cut, &kv)) == 1) {
        }
        CHECK(rc == 0 || rc == SW_ETRUNC);
        free(copy);
    }
    uint8_t bad[] = {1, 'k', 9, 0};
    const uint8_t *b = bad;
    CHECK_EQ_I64(sw_kv_next(&b, bad + sizeof bad, &kv), SW_EFORMAT);
    /* A payload longer than SW_CHUNK_MAX cannot be framed. */
    uint8_t hdr[SW_CHUNK_HEADER_LEN];
    struct iovec big[2] = {{bad, SW_CHUNK_MAX}, {bad, 1}};
    CHECK_EQ_I64(sw_chunk_header_put(hdr, 2, big, 2), SW_EARG);
    sw_bytes_free(&f);
}

TEST(open_errors)
{
    seen s;
    iterate((const uint8_t *)"", 0, 0, &s);
    CHECK(s.rc == SW_EFORMAT && strstr(s.text, "empty file (no magic number of a stackwatch test file)"));
    iterate((const uint8_t *)"hello, world, not at all a file", 31, 0, &s);
    CHECK(s.rc == SW_EFORMAT && strstr(s.text, "bad magic"));
    iterate((const uint8_t *)MAGIC "\x01", 9, 1, &s);
    CHECK(s.rc == SW_EFORMAT && strstr(s.text, "ends inside its header"));
    uint8_t hdr[SW_FILE_HEADER_LEN];
    sw_file_header_put(hdr, MAGIC, 2, 0);
    iterate(hdr, sizeof hdr, 0, &s);
    CHECK(s.rc == SW_EVERSION && strstr(s.text, "version 2"));
    /* A header alone: no chunk, no damage. */
    sw_file_header_put(hdr, MAGIC, 1, 7);
    iterate_both(hdr, sizeof hdr, &s);
    CHECK(s.rc == SW_OK && s.n == 0 && s.damage_total == 0);
}

/* One flipped bit in chunk `k`: every other chunk is read, and the damage
 * names the chunk's offset, its bytes and one chunk. */
static void flip_in_chunk(const sw_bytes *f0, const layout *L, size_t k, size_t where)
{
    uint8_t *d = malloc(f0->len);
    memcpy(d, f0->data, f0->len);
    d[L->off[k] + SW_CHUNK_HEADER_LEN + where] ^= 0x10;
    seen s;
    iterate_both(d, f0->len, &s);
    read_all_but(&s, L, &k, 1);
    REQUIRE_EQ_U64(s.damage_total, 1);
    const sw_damage *x = &s.damage[0];
    CHECK_EQ_U64(x->off, L->off[k]);
    CHECK_EQ_U64(x->kind, SW_DAMAGE_CRC);
    CHECK_EQ_U64(x->len, SW_CHUNK_HEADER_LEN + L->len[k]);
    CHECK_EQ_I64(x->to_end, k + 1 == L->n);
    CHECK_EQ_U64(x->chunks, k + 1 == L->n ? 0 : 1);
    char want[160];
    snprintf(want, sizeof want, "corrupted: checksum mismatch in the chunk at offset %zu", L->off[k]);
    if (k + 1 < L->n)
        snprintf(want + strlen(want), sizeof want - strlen(want), " (%zu bytes, 1 chunk, skipped)",
                 SW_CHUNK_HEADER_LEN + L->len[k]);
    CHECK_EQ_STR(s.text, want);
    free(d);
}

TEST(a_flipped_bit_hides_only_its_chunk)
{
    sw_bytes f = {0};
    layout L;
    build(&f, &L, 3, 30, SMALL, 5);
    flip_in_chunk(&f, &L, 0, 3);             /* the first chunk */
    flip_in_chunk(&f, &L, 14, L.len[14] / 2); /* the middle */
    flip_in_chunk(&f, &L, L.n - 1, 0);        /* the last chunk */
    for (size_t k = 0; k < L.n; k++)          /* and every one */
        flip_in_chunk(&f, &L, k, L.len[k] - 1);
    sw_bytes_free(&f);
}

TEST(two_damaged_ranges_and_a_run_of_chunks)
{
    sw_bytes f = {0};
    layout L;
    build(&f, &L, 3, 30, SMALL, 5);
    f.data[L.off[4] + SW_CHUNK_HEADER_LEN] ^= 1;
    for (size_t k = 20; k <= 22; k++)        /* three chunks in a row */
        f.data[L.off[k] + SW_CHUNK_HEADER_LEN + L.len[k] - 1] ^= 0x80;
    seen s;
    iterate_both(f.data, f.len, &s);
    size_t skip[] = {4, 20, 21, 22};
    read_all_but(&s, &L, skip, 4);
    REQUIRE_EQ_U64(s.damage_total, 2);
    CHECK_EQ_U64(s.damage[0].off, L.off[4]);
    CHECK_EQ_U64(s.damage[0].chunks, 1);
    CHECK_EQ_U64(s.damage[1].off, L.off[20]);
    CHECK_EQ_U64(s.damage[1].len, L.off[23] - L.off[20]);
    CHECK_EQ_U64(s.damage[1].chunks, 3);
    CHECK_MSG(strncmp(s.text, "2 damaged ranges: corrupted: checksum mismatch in the chunk at offset ", 70) == 0 &&
                  strstr(s.text, "3 chunks, skipped"),
              "%s", s.text);
    sw_bytes_free(&f);
}

TEST(a_damaged_length_or_garbage_between_chunks)
{
    sw_bytes f = {0};
    layout L;
    build(&f, &L, 3, 20, SMALL, 5);
    /* A length far too long, then one a little too long. */
    for (int variant = 0; variant < 2; variant++) {
        uint8_t *d = malloc(f.len);
        memcpy(d, f.data, f.len);
        if (variant == 0)
            d[L.off[7] + 7] = 0x7f;
        else
            d[L.off[7] + 4] += 3;
        seen s;
        iterate_both(d, f.len, &s);
        size_t k = 7;
        read_all_but(&s, &L, &k, 1);
        REQUIRE_EQ_U64(s.damage_total, 1);
        CHECK_EQ_U64(s.damage[0].off, L.off[7]);
        CHECK_EQ_U64(s.damage[0].len, L.off[8] - L.off[7]);
        CHECK_EQ_U64(s.damage[0].kind, variant == 0 ? SW_DAMAGE_LENGTH : SW_DAMAGE_CRC);
        free(d);
    }
    /* 37 bytes of garbage inserted before chunk 9. */
    sw_bytes g = {0};
    sw_bytes_put(&g, f.data, L.off[9]);
    for (int i = 0; i < 37; i++)
        sw_bytes_u8(&g, (uint8_t)(0xa5 ^ (i * 13)));
    sw_bytes_put(&g, f.data + L.off[9], f.len - L.off[9]);
    seen s;
    iterate_both(g.data, g.len, &s);
    CHECK_EQ_U64(s.n, L.n);
    REQUIRE_EQ_U64(s.damage_total, 1);
    CHECK_EQ_U64(s.damage[0].off, L.off[9]);
    CHECK_EQ_U64(s.damage[0].len, 37);
    CHECK_EQ_U64(s.damage[0].chunks, 0);
    CHECK(strstr(s.text, "(37 bytes skipped)") != NULL);
    sw_bytes_free(&g);
    sw_bytes_free(&f);
}

TEST(cut_at_every_offset)
{
    sw_bytes f = {0};
    layout L;
    build(&f, &L, 3, 8, SMALL, 5);
    for (size_t cut = SW_FILE_HEADER_LEN; cut <= f.len; cut++) {
        uint8_t *d = malloc(cut);   /* exact size: ASan sees an overread */
        memcpy(d, f.data, cut);
        seen s;
        iterate(d, cut, 0, &s);
        size_t whole = 0;
        while (whole < L.n && L.off[whole] + SW_CHUNK_HEADER_LEN + L.len[whole] <= cut)
            whole++;
        CHECK_MSG(s.n == whole, "cut at %zu: %zu chunks, expected %zu", cut, s.n, whole);
        int boundary = cut == f.len || (whole < L.n && L.off[whole] == cut);
        if (boundary) {
            CHECK_EQ_U64(s.damage_total, 0);
        } else if (CHECK_EQ_U64(s.damage_total, 1)) {
            CHECK_EQ_U64(s.damage[0].off, L.off[whole]);
            CHECK(s.damage[0].to_end && s.damage[0].kind == SW_DAMAGE_CUT && strstr(s.text, "truncated"));
        }
        free(d);
        if (check_failures > 10)
            break;
    }
    sw_bytes_free(&f);
}

TEST(unknown_chunk_types)
{
    for (unsigned minor = 3; minor <= 4; minor++) {
        sw_bytes f = {0};
        layout L;
        build(&f, &L, minor, 10, SMALL, 5);
        /* Chunk 3 becomes type 9, chunk 6 type 200: intact, unknown. */
        f.data[L.off[3]] = 9;
        f.data[L.off[6]] = 200;
        seen s;
        iterate_both(f.data, f.len, &s);
        size_t skip[] = {3, 6};
        read_all_but(&s, &L, skip, 2);
        if (minor > KIND.minor) {
            /* A newer minor version's chunks: counted, not damage. */
            CHECK_EQ_U64(s.unknown, 2);
            CHECK_EQ_U64(s.damage_total, 0);
        } else {
            /* This version has no such types: their type bytes were damaged. */
            CHECK_EQ_U64(s.unknown, 0);
            REQUIRE_EQ_U64(s.damage_total, 2);
            CHECK_EQ_U64(s.damage[0].kind, SW_DAMAGE_TYPE);
            CHECK_EQ_U64(s.damage[1].off, L.off[6]);
            CHECK_MSG(strstr(s.text, "a chunk of type 9, which test file format 1.3 does not have") != NULL, "%s",
                      s.text);
        }
        sw_bytes_free(&f);
    }
}

/* Chunks around and larger than the file source's 1 MiB window: damage
 * anywhere, in memory and in the file, found alike. */
TEST(large_chunks_across_the_file_window)
{
    static const size_t sizes[] = {700000, 3, 1500000, 65536, 1048575, 1048576, 200, 999999};
    sw_bytes f = {0};
    layout L;
    build_intact(&f, &L, 18, sizes, 8);
    seen s;
    for (size_t k = 1; k < L.n; k += 3) {
        uint8_t *d = malloc(f.len);
        memcpy(d, f.data, f.len);
        d[L.off[k] + SW_CHUNK_HEADER_LEN + L.len[k] / 3] ^= 4;
        d[L.off[k + 1 < L.n ? k + 1 : k] + 5] ^= 0x40;   /* and the next one's length */
        iterate_both(d, f.len, &s);
        CHECK(s.damage_total >= 1 && s.damage[0].off == L.off[k]);
        free(d);
    }
    sw_bytes_free(&f);
}

TEST(an_empty_chunk_reads_but_is_never_a_resync_point)
{
    static const size_t sizes[] = {0, 50};
    sw_bytes f = {0};
    layout L;
    build_intact(&f, &L, 7, sizes, 2);
    seen s;
    /* Chunk 1 (50 bytes) damaged: chunk 2 is empty, so reading resumes at
     * chunk 3, and chunks 1-2 are one range of two chunks. */
    REQUIRE(L.len[1] == 50 && L.len[2] == 0);
    f.data[L.off[1] + SW_CHUNK_HEADER_LEN] ^= 1;
    iterate_both(f.data, f.len, &s);
    size_t skip[] = {1, 2};
    read_all_but(&s, &L, skip, 2);
    REQUIRE_EQ_U64(s.damage_total, 1);
    CHECK_EQ_U64(s.damage[0].chunks, 2);
    sw_bytes_free(&f);
}

TEST(many_damaged_ranges_are_counted_and_described_in_a_bounded_line)
{
    sw_bytes f = {0};
    layout L;
    build(&f, &L, 3, 300, SMALL, 5);
    for (size_t k = 1; k + 1 < L.n; k += 2)
        f.data[L.off[k] + SW_CHUNK_HEADER_LEN] ^= 1;
    seen s;
    iterate_both(f.data, f.len, &s);
    CHECK_EQ_U64(s.damage_total, (L.n - 1) / 2);
    CHECK_EQ_U64(s.n, L.n - (L.n - 1) / 2);
    CHECK(strlen(s.text) < sizeof s.text && strstr(s.text, "149 damaged ranges: ") == s.text);
    CHECK_MSG(strstr(s.text, " more") != NULL, "%s", s.text);
    sw_bytes_free(&f);
}

TEST(resynchronisation_work_is_bounded)
{
    /* After a damaged chunk, 120 KB of plausible headers each claiming a
     * 60 KB payload (checking them all: 300 MB of checksums), then an
     * intact chunk of 100 KB and END. The search stops checking payloads
     * once its budget (8 times the file plus 256 MiB) is spent, says so,
     * and then finds only END, whose payload is short. */
    sw_bytes f = {0};
    layout L;
    build(&f, &L, 3, 2, SMALL, 5);   /* META, DATA (no END) */
    f.data[L.off[1] + SW_CHUNK_HEADER_LEN] ^= 1;
    for (size_t i = 0; i < 10000; i++) {
        uint8_t h[SW_CHUNK_HEADER_LEN] = {2, 0, 0, 0, 0x60, 0xea, 0, 0, (uint8_t)i, 1, 2, 3};   /* 60000 bytes */
        sw_bytes_put(&f, h, sizeof h);
    }
    size_t big = sw_chunk_begin(&f, 2);
    for (int i = 0; i < 100000; i++)
        sw_bytes_u8(&f, (uint8_t)(i * 7));
    REQUIRE(sw_chunk_end(&f, big) == SW_OK);
    size_t end = sw_chunk_begin(&f, SW_CHUNK_END);
    sw_kv_uint(&f, "done", 1);
    REQUIRE(sw_chunk_end(&f, end) == SW_OK);
    double t0 = check_now();
    seen s;
    iterate(f.data, f.len, 0, &s);
    CHECK_MSG(check_now() - t0 < 30, "%.1f s", check_now() - t0);
    CHECK_EQ_U64(s.n, 2);   /* META and END */
    REQUIRE_EQ_U64(s.damage_total, 1);
    CHECK_EQ_U64(s.damage[0].off, L.off[1]);
    CHECK_EQ_U64(s.damage[0].len, end - L.off[1]);
    CHECK_MSG(strstr(s.text, "the search for the next intact chunk was cut short") != NULL, "%s", s.text);
    sw_bytes_free(&f);
}
