/*
 * fuzz_reader.c - libFuzzer target for the trace reader and everything that
 * consumes it: sw_trace_open_mem, replay of every thread, sw_stats_compute,
 * sw_slice_durations, the EXT replay and sw_ext_summary_compute, the
 * sampler samples (format 1.2; native frames and lines, 1.3), the Chrome
 * and Perfetto exporters (into memory streams) and the CTF exporter (into a
 * fresh directory, each file at most CTF_FILE_MAX bytes, removed after;
 * once an input, on its version with correct checksums).
 *
 * Chunks are protected by a CRC, so almost every mutation of a valid trace
 * is stopped at the checksum. To reach the parsers behind it, each input is
 * also tried with every chunk's CRC recomputed (when that changes anything),
 * and cut after one of its chunks so that an overread of that chunk is an
 * overread of the buffer.
 *
 * Besides memory errors (ASan) and undefined behaviour (UBSan), the target
 * aborts when a promise of reader.h or export.h is broken: a failed open
 * without a message, an unbalanced or time-reversed replay, malformed
 * exporter output (for CTF: its packets, see ctf_stream_valid()).
 *
 * The ELF reader gets every input too (fuzzelf.h; its seed is a small
 * ELF file), and so does the C++ demangler (fuzzdemangle.h), and so does the profile-file reader (fuzzprofile.h), and so
 * does the container's chunk iterator alone, from memory and from a file
 * read piece by piece (a memfd): both must hand out the same chunks and
 * the same damage, in file order, without overlaps, and within the file.
 *
 * Built with -DFUZZ_FILES_MAIN it is a plain program that runs the target
 * on each file named on its command line (the seed corpus, under gcc).
 */
#define _GNU_SOURCE
#include "trace/analysis.h"
#include "base/crc32.h"
#include "trace/trace.h"
#include "exportcheck.h"
#include "trace/export_ctf.h"
#include "trace/format.h"
#include "fuzzdemangle.h"
#include "fuzzelf.h"
#include "fuzzprofile.h"
#include "trace/reader.h"

#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_reader: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

typedef struct replay_check {
    uint32_t depth;
    int64_t last;
    int any;
    uint64_t n;
} replay_check;

/* The replay promises balanced slices and non-decreasing times. */
static int check_event(void *ud, const sw_event *ev)
{
    replay_check *c = ud;
    if (c->any && ev->t_ns < c->last)
        fail("replay time goes back", NULL);
    c->last = ev->t_ns;
    c->any = 1;
    c->n++;
    switch (ev->kind) {
    case SW_OP_CALL:
    case SW_OP_RESUME:
    case SW_OP_C_CALL:
        if (ev->depth != c->depth)
            fail("enter event at the wrong depth", NULL);
        c->depth++;
        break;
    case SW_OP_RETURN:
    case SW_OP_YIELD:
    case SW_OP_UNWIND:
    case SW_OP_C_RETURN:
        if (c->depth == 0 || ev->depth != c->depth - 1)
            fail("exit event without a matching enter", NULL);
        c->depth--;
        break;
    case SW_EV_DROPPED:
        if (ev->depth != c->depth)
            fail("dropped event at the wrong depth", NULL);
        break;
    default:
        fail("unknown event kind", NULL);
    }
    return 0;
}

/* The EXT replay: the same events plus SW_EV_EXT ones, each with a
 * decoded payload whose strings are bounded and terminated. */
static int check_ext_event(void *ud, const sw_event *ev)
{
    if (ev->kind != SW_EV_EXT)
        return check_event(ud, ev);
    replay_check *c = ud;
    if (c->any && ev->t_ns < c->last)
        fail("replay time goes back (ext)", NULL);
    c->last = ev->t_ns;
    c->any = 1;
    const sw_ext *x = ev->ext;
    if (!x || !x->s1 || !x->s2)
        fail("ext event without its payload", NULL);
    const sw_record_kind *k = sw_record_kind_of(x->kind);
    if (!k || k->shape == SW_RS_REPLAY)
        fail("ext event of a kind the reader does not know or does not deliver", NULL);
    /* The slots its row (records.h) has no field for stay empty. */
    unsigned used = 0;
    for (unsigned i = 0; i < k->nfields; i++)
        used |= 1u << k->fields[i].slot;
    for (unsigned slot = SW_SLOT_CODE; slot < SW_SLOT_NONE; slot++) {
        if (used & (1u << slot))
            continue;
        if (slot == SW_SLOT_S1 || slot == SW_SLOT_S2 ? sw_ext_string(x, slot)[0] != 0
            : slot == SW_SLOT_CODE                   ? x->code != SW_EXT_NO_CODE
                                                     : sw_ext_number(x, slot) != 0)
            fail("ext event with a value in a slot its kind has no field for", NULL);
    }
    if (ev->depth != c->depth)
        fail("ext event at the wrong depth", NULL);
    if (strlen(x->s1) > SW_EXT_STR_MAX || strlen(x->s2) > SW_EXT_STR_MAX)
        fail("ext string too long", NULL);
    if (ev->code != x->code)
        fail("ext code mismatch", NULL);
    c->n++;
    return 0;
}

static int stop_after_one(void *ud, const sw_event *ev)
{
    (void)ev;
    return ++*(int *)ud >= 1 ? 7 : 0;
}

/* What the iterator made of one input. */
typedef struct walk {
    int rc;
    uint64_t n, unknown, damage_total, damaged_bytes, sum;
    char text[512];
} walk;

static const char *any_name(unsigned type) { return type < 8 ? "T" : NULL; }
/* Traces' chunk types, as a kind the iterator knows (any magic: it is
 * taken from the input, so that every input gets iterated). */
static char fuzz_magic[SW_MAGIC_LEN + 1] = SW_MAGIC;
static const sw_container_kind fuzz_kind = {fuzz_magic, "fuzzed file", SW_FORMAT_MAJOR, SW_FORMAT_MINOR, 0xfe,
                                            any_name};

static void iterate(const sw_source *src, walk *w)
{
    memset(w, 0, sizeof *w);
    sw_chunks it;
    char err[256] = "";
    w->rc = sw_chunks_open(&it, &fuzz_kind, src, err, sizeof err);
    if (w->rc == SW_OK) {
        sw_chunk c;
        uint64_t end = SW_FILE_HEADER_LEN;   /* where the previous chunk ended */
        size_t d = 0;
        while ((w->rc = sw_chunks_next(&it, &c)) == 1) {
            if (c.off < end || c.off + SW_CHUNK_HEADER_LEN + c.len > src->size)
                fail("container: a chunk overlaps another or the end of the file", NULL);
            for (; d < it.ndamage && it.damage[d].off < c.off; d++)
                if (it.damage[d].off < end || it.damage[d].off + it.damage[d].len > c.off)
                    fail("container: a damaged range overlaps a chunk", NULL);
            end = c.off + SW_CHUNK_HEADER_LEN + c.len;
            w->n++;
            w->sum = w->sum * 31 + sw_crc32((uint32_t)c.off, c.payload, c.len);
        }
        if (it.damaged_bytes > src->size)
            fail("container: more damaged bytes than the file has", NULL);
        w->unknown = it.unknown;
        w->damage_total = it.damage_total;
        w->damaged_bytes = it.damaged_bytes;
        sw_damage_describe(it.damage, it.ndamage, it.damage_total, w->text, sizeof w->text);
        if (strlen(w->text) >= sizeof w->text - 1 && w->damage_total < 2)
            fail("container: an unbounded damage text", NULL);
    }
    sw_chunks_close(&it);
}

static void exercise_container(const uint8_t *data, size_t len)
{
    if (len >= SW_MAGIC_LEN)
        memcpy(fuzz_magic, data, SW_MAGIC_LEN);
    sw_source src;
    walk m, f;
    sw_source_mem(&src, data, len);
    iterate(&src, &m);
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return;
    if (write(fd, data, len) == (ssize_t)len && sw_source_fd(&src, fd) == SW_OK) {
        iterate(&src, &f);
        if (m.rc != f.rc || m.n != f.n || m.sum != f.sum || m.unknown != f.unknown ||
            m.damage_total != f.damage_total || strcmp(m.text, f.text) != 0)
            fail("container: a file and memory read differently", m.text);
    }
    close(fd);
}

/* ---- the CTF export ---- */

/* No file of the CTF export grows past this (RLIMIT_FSIZE while it runs:
 * a write beyond fails, and the export must then fail with a message). */
#define CTF_FILE_MAX (8u << 20)
#define CTF_HEAD 68   /* a packet's header and context (export_ctf.c) */

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A stream file of the export (thread position `thread`): whole packets,
 * each with the magic, its thread as stream instance, its sizes equal and
 * within the file, numbered from 0, times that never go back. */
static const char *ctf_stream_valid(const uint8_t *p, size_t n, uint64_t thread)
{
    uint64_t seq = 0, last = 0;
    for (size_t off = 0; off < n; seq++) {
        const uint8_t *h = p + off;
        if (n - off < CTF_HEAD)
            return "a packet cut short";
        if ((h[0] | h[1] << 8 | h[2] << 16 | (uint32_t)h[3] << 24) != 0xC1FC1FC1u)
            return "a packet without the CTF magic";
        uint64_t begin = le64(h + 16), end = le64(h + 24), content = le64(h + 32), size = le64(h + 40);
        if (le64(h + 8) != thread)
            return "a packet of another stream instance";
        if (content != size || size % 8 || size / 8 <= CTF_HEAD || size / 8 > n - off)
            return "a packet's sizes";
        if (le64(h + 48) != seq)
            return "a packet's sequence number";
        if (begin > end || begin < last)
            return "a packet's times go back";
        last = end;
        off += (size_t)(size / 8);
    }
    return NULL;
}

/* nftw's visitor: checks each stream file (the first fault kept in
 * ctf_fault), then removes what it visits (children first). */
static const char *ctf_fault;
static int ctf_visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    const char *base = path + ftw->base;
    unsigned long long thread;
    char tail;
    if (type == FTW_F && sscanf(base, "stream_%llu%c", &thread, &tail) == 1) {
        uint8_t *buf = malloc(st->st_size ? (size_t)st->st_size : 1);
        FILE *f = buf ? fopen(path, "rb") : NULL;
        size_t n = f ? fread(buf, 1, (size_t)st->st_size, f) : 0;
        if (f)
            fclose(f);
        const char *why = n == (size_t)st->st_size ? ctf_stream_valid(buf, n, thread) : "unreadable";
        free(buf);
        if (why && !ctf_fault)
            ctf_fault = why;
    }
    remove(path);
    return 0;
}

/* The CTF export of t into a fresh directory (under /dev/shm, else
 * $TMPDIR), each file bounded; removed after, whatever the export did. */
static void exercise_ctf(sw_trace *t)
{
    static int ready;
    if (!ready) {
        signal(SIGXFSZ, SIG_IGN);   /* a write past the limit fails with EFBIG instead */
        ready = 1;
    }
    ctf_fault = NULL;
    /* In memory (tmpfs) where there is one: a disk's metadata writes made
     * each export cost milliseconds on a busy machine. */
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/sw-fuzz-ctf-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return;
    snprintf(path, sizeof path, "%s/ust", dir);
    FILE *out = NULL;
    if (mkdir(path, 0700) == 0) {
        snprintf(path, sizeof path, "%s/" SW_CTF_FIRST_FILE, dir);
        out = fopen(path, "w+");
    }
    if (out) {
        struct rlimit was, lim;
        int limited = getrlimit(RLIMIT_FSIZE, &was) == 0;
        lim = was;
        if (limited && (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > CTF_FILE_MAX))
            lim.rlim_cur = CTF_FILE_MAX;
        limited = limited && setrlimit(RLIMIT_FSIZE, &lim) == 0;
        sw_export_opts o = {0, NULL, NULL, dir, NULL, 0};
        char err[256] = "";
        int rc = sw_export_ctf(t, out, &o, err, sizeof err);
        if (limited)
            setrlimit(RLIMIT_FSIZE, &was);
        char head[16] = "";
        rewind(out);
        size_t got = fread(head, 1, 13, out);
        fclose(out);
        if (rc != SW_OK && !err[0])
            ctf_fault = "it failed without a message";
        else if (rc == SW_OK && (got != 13 || memcmp(head, "/* CTF 1.8 */", 13) != 0))
            ctf_fault = "its metadata does not start with /* CTF 1.8 */";
    }
    nftw(dir, ctf_visit, 16, FTW_DEPTH | FTW_PHYS);
    if (ctf_fault)   /* (reported once nothing is left behind) */
        fail("ctf export is not valid", ctf_fault);
}

/* with_ctf: the CTF export too (once an input: it writes files). */
static void exercise(const uint8_t *data, size_t len, int with_ctf)
{
    exercise_container(data, len);
    exercise_profile(data, len);   /* profile files share the container */
    sw_trace *t = NULL;
    char err[256];
    err[0] = 0;
    int rc = sw_trace_open_mem(data, len, &t, err, sizeof err);
    if (rc) {
        if (rc > 0 || !err[0] || t)
            fail("open failed without a negative code and a message", err);
        return;
    }
    if (!t)
        fail("open succeeded without a trace", NULL);
    const char *damage = sw_trace_damage(t);
    (void)strlen(damage);
    for (size_t i = 0; i < sw_trace_damage_count(t); i++) {
        const sw_damage *d = sw_trace_damage_range(t, i);
        if (!d || d->off + d->len > len || (i && d->off <= sw_trace_damage_range(t, i - 1)->off))
            fail("damage range out of the file or out of order", damage);
    }
    if (sw_trace_damage_total(t) && !damage[0])
        fail("damage without a description", NULL);
    (void)sw_trace_complete(t);
    for (size_t i = 0; i < sw_trace_meta_count(t); i++) {
        const sw_meta_entry *e = sw_trace_meta(t, i);
        if (!e || !e->key)
            fail("meta entry without a key", NULL);
        if (e->type == 2 && (!e->s || strlen(e->s) > e->slen))
            fail("string meta value", NULL);
        if (sw_trace_meta_find(t, e->key) == NULL)
            fail("meta key not found", e->key);
    }
    uint32_t limit = sw_trace_code_limit(t);
    for (uint32_t id = 0; id < limit && id < 100000; id++) {
        const sw_code_info *ci = sw_trace_code(t, id);
        if (ci && (ci->id != id || !ci->name || !ci->qualname || !ci->filename))
            fail("code info", NULL);
    }
    if (sw_trace_code(t, limit) != NULL)
        fail("code beyond the limit", NULL);
    (void)sw_trace_end_ns(t);
    size_t nth = sw_trace_thread_count(t);
    for (size_t i = 0; i < nth; i++) {
        const sw_thread_info *ti = sw_trace_thread(t, i);
        if (!ti || !ti->name)
            fail("thread info", NULL);
        replay_check c = {0, 0, 0, 0};
        rc = sw_trace_replay(t, i, check_event, &c);
        if (rc > 0)
            fail("replay returned a positive code the callback never gave", NULL);
        if (c.depth != 0)
            fail("replay left slices open", NULL);
        replay_check cx = {0, 0, 0, 0};
        rc = sw_trace_replay_ext(t, i, SW_REPLAY_EXT, check_ext_event, &cx);
        if (rc > 0)
            fail("ext replay returned a positive code the callback never gave", NULL);
        if (cx.depth != 0 || cx.n < c.n)
            fail("ext replay left slices open or delivered fewer events", NULL);
        int seen = 0;
        rc = sw_trace_replay(t, i, stop_after_one, &seen);
        if (seen && rc != 7)
            fail("replay did not return the callback's stop value", NULL);
        int64_t *dur = NULL;
        size_t ndur = 0;
        if (sw_slice_durations(t, i, &dur, &ndur) == SW_OK) {
            for (size_t k = 0; k < ndur; k++)
                if (dur[k] < 0)
                    fail("negative slice duration", NULL);
            free(dur);
        }
    }
    if (sw_trace_thread(t, nth) != NULL)
        fail("thread beyond the count", NULL);
    sw_stat_row *rows = NULL;
    size_t nrows = 0;
    if (sw_stats_compute(t, &rows, &nrows) == SW_OK) {
        for (size_t k = 0; k < nrows; k++)
            if (rows[k].thread >= nth || rows[k].code >= limit)
                fail("stats row out of range", NULL);
        free(rows);
    }
    /* Samples: every one on a listed thread, frames readable. */
    for (size_t pass = 0; pass < 2; pass++) {
        sw_sample_cursor *sc = sw_sample_cursor_new(t, pass ? 0 : SIZE_MAX);
        if (!sc)
            break;
        sw_trace_sample smp;
        uint64_t got = 0;
        int n;
        while ((n = sw_sample_cursor_next(sc, &smp)) == 1) {
            got++;
            if (smp.thread >= nth || (pass && smp.thread != 0))
                fail("sample on a thread not in the list", NULL);
            for (uint32_t k = 0; k < smp.depth; k++) {
                const sw_frame_info *f = sw_trace_frame(t, smp.frames[k]);
                if (f && (f->id != smp.frames[k] || f->kind > SW_FRAME_NATIVE))
                    fail("sample frame", NULL);
                if (smp.lines) {
                    volatile uint32_t line = smp.lines[k];  /* parallel to frames: readable (ASan) */
                    (void)line;
                }
            }
        }
        if (n < 0 && n != SW_ENOMEM)
            fail("sample iteration failed after a clean load", NULL);
        if (!pass && n == 0 && got != sw_trace_sample_count(t))
            fail("sample count", NULL);
        sw_sample_cursor_free(sc);
        if (!nth)
            break;
    }
    sw_ext_summary xs;
    if (sw_ext_summary_compute(t, &xs) == SW_OK && xs.gc_ns < 0)
        fail("negative GC time", NULL);
    static const int64_t mins[] = {0, 1000};
    for (int m = 0; m < 2; m++) {
        size_t n = 0;
        char why[160];
        char *out = ec_export_mem(sw_export_chrome, t, mins[m], &n, &rc, err, sizeof err);
        if (rc == SW_OK) {
            ec_chrome_stats cs;
            if (!ec_chrome(out, n, 0, &cs, why, sizeof why))
                fail("chrome export is not valid", why);
        } else if (!err[0]) {
            fail("chrome export failed without a message", NULL);
        }
        free(out);
        out = ec_export_mem(sw_export_perfetto, t, mins[m], &n, &rc, err, sizeof err);
        if (rc == SW_OK) {
            ec_pb_stats ps;
            if (!ec_perfetto((const uint8_t *)out, n, 0, &ps, why, sizeof why))
                fail("perfetto export is not valid", why);
        } else if (!err[0]) {
            fail("perfetto export failed without a message", NULL);
        }
        free(out);
    }
    if (with_ctf)
        exercise_ctf(t);
    sw_trace_free(t);
}

/* Recomputes every chunk's CRC in place; returns the number of chunks and
 * stores up to max chunk end offsets in ends. *changed tells whether any
 * CRC was wrong. */
static size_t fix_crcs(uint8_t *copy, size_t len, size_t *ends, size_t max, int *changed)
{
    size_t n = 0, off = SW_FILE_HEADER_LEN;
    *changed = 0;
    if (len < SW_FILE_HEADER_LEN)
        return 0;
    while (len - off >= SW_CHUNK_HEADER_LEN) {
        uint8_t *h = copy + off;
        size_t plen = (size_t)h[4] | (size_t)h[5] << 8 | (size_t)h[6] << 16 | (size_t)h[7] << 24;
        size_t poff = off + SW_CHUNK_HEADER_LEN;
        if (plen > len - poff)
            break;
        uint32_t crc = sw_crc32(0, copy + poff, plen);
        uint8_t le[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16), (uint8_t)(crc >> 24)};
        if (memcmp(h + 8, le, 4) != 0) {
            memcpy(h + 8, le, 4);
            *changed = 1;
        }
        off = poff + plen;
        if (n < max)
            ends[n] = off;
        n++;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    exercise_elf(data, size);
    exercise_demangle(data, size);
    /* The same input with correct checksums, so that mutations reach the
     * parsers behind them; the CTF export of whichever has them. */
    uint8_t *fixed = malloc(size ? size : 1);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    size_t ends[64];
    int changed;
    size_t n = fix_crcs(fixed, size, ends, 64, &changed);
    exercise(data, size, !changed);
    if (changed)
        exercise(fixed, size, 1);
    /* And cut after one of its chunks (chosen by the input), which then
     * ends the buffer: a parser reading past its chunk reads past the
     * buffer, which AddressSanitizer reports. */
    if (n > 1) {
        size_t k = (size_t)sw_crc32(0, data, size < 64 ? size : 64) % (n < 64 ? n : 64);
        if (ends[k] < size)
            exercise(fixed, ends[k], 0);
    }
    free(fixed);
    return 0;
}

#ifdef FUZZ_FILES_MAIN
int main(int argc, char **argv)
{
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        size_t cap = 1 << 16, n = 0, k;
        uint8_t *buf = malloc(cap);
        while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
            n += k;
            if (n == cap) {
                uint8_t *nb = realloc(buf, cap *= 2);
                if (!nb)
                    free(buf);
                buf = nb;
            }
        }
        fclose(f);
        if (!buf) {
            fprintf(stderr, "%s: out of memory\n", argv[i]);
            return 1;
        }
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
    }
    return bad;
}
#endif
