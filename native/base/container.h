/*
 * container.h - the container every stackwatch file is made of: trace
 * files (.swt, native/trace) and profile files (.swprof, native/profile).
 * docs/format.md ("The container") is the specification.
 *
 * File   = header chunk*
 * header = magic[8] u16 major u16 minor u32 flags(0)      (16 bytes)
 * chunk  = u8 type, u8 flags(0), u16 reserved(0), u32 payload_len,
 *          u32 crc32c(payload), payload[payload_len]       (12 + n bytes)
 * Integers little-endian. Each kind of file has its own magic number,
 * versions and chunk types; types 1 (META) and 5 (END) are key/value
 * lists in every kind.
 *
 * Writing: sw_file_header_put() and sw_chunk_header_put() frame what a
 * writer sends (trace/writer.c, with writev), sw_chunk_begin()/_end() build
 * a chunk in place in a byte buffer (profile/profile_file.c); sw_kv_*()
 * append key/value entries.
 *
 * Reading: a chunk iterator (sw_chunks) over a byte source, which is a
 * buffer in memory or a file read piece by piece with pread(2), so that a
 * reader never needs the whole file in memory (a file source holds at most
 * a 1 MiB window and one payload). The iterator hands out every intact
 * chunk in file order and records every damaged range:
 *  - a chunk whose checksum does not match, or whose length cannot be
 *    right, is skipped: the iterator resynchronises at the next intact
 *    chunk (the first later offset holding a chunk header as version 1
 *    writers write them: type 1 to 63, flags and reserved 0, a payload of
 *    at least one byte that fits in the file and matches its checksum),
 *    and records the range it skipped (offset, bytes, and chunks when their
 *    lengths chain);
 *  - a file that ends inside a chunk is recorded as cut short;
 *  - an intact chunk of a type the kind does not know is skipped: counted
 *    (sw_chunks.unknown) when the file's minor version is newer than the
 *    reader's (a newer writer's chunk), recorded as damage otherwise (its
 *    type byte, which the checksum does not cover, was damaged);
 *  - the file's reader records an intact chunk it cannot use
 *    (sw_chunks_malformed).
 */
#ifndef SW_BASE_CONTAINER_H
#define SW_BASE_CONTAINER_H

#include "bytes.h"
#include "common.h"

#include <sys/uio.h>

#define SW_MAGIC_LEN        8
#define SW_FILE_HEADER_LEN  16
#define SW_CHUNK_HEADER_LEN 12
#define SW_CHUNK_MAX        (64u << 20)  /* no chunk payload is larger */

/* Chunk types every kind of file has. */
#define SW_CHUNK_META 1   /* key/value list describing the file (the first chunk) */
#define SW_CHUNK_END  5   /* key/value list written when the file is finished */

/* Key/value lists (META, END): repeated until the payload ends:
 * str key, u8 type, value. A later value of a key replaces an earlier one. */
#define SW_VAL_UINT   0  /* varint */
#define SW_VAL_SINT   1  /* zigzag varint */
#define SW_VAL_BYTES  2  /* str */
#define SW_VAL_F64    3  /* 8 bytes, IEEE 754 binary64 */

/* ---- writing ---- */

/* The 16-byte file header: magic (SW_MAGIC_LEN bytes), versions, flags 0. */
void sw_file_header_put(uint8_t out[SW_FILE_HEADER_LEN], const char *magic, unsigned major, unsigned minor);

/* The 12-byte header of a chunk whose payload is the concatenation of the
 * parts (its length and CRC-32C). Returns SW_EARG (out unchanged) if the
 * payload is longer than SW_CHUNK_MAX. */
int sw_chunk_header_put(uint8_t out[SW_CHUNK_HEADER_LEN], unsigned type, const struct iovec *parts, int nparts);

/* A chunk built in place at the end of b: sw_chunk_begin() appends room
 * for its header and returns the header's offset; the caller appends the
 * payload; sw_chunk_end() fills the header in. sw_chunk_end returns 0,
 * SW_ENOMEM if b->failed, or SW_EARG if the payload is too long. */
size_t sw_chunk_begin(sw_bytes *b, unsigned type);
int sw_chunk_end(sw_bytes *b, size_t at);

/* Key/value entries appended to b. Return 0 or SW_ENOMEM (b->failed). */
int sw_kv_uint(sw_bytes *b, const char *key, uint64_t v);
int sw_kv_sint(sw_bytes *b, const char *key, int64_t v);
int sw_kv_str(sw_bytes *b, const char *key, const char *v);
int sw_kv_f64(sw_bytes *b, const char *key, double v);

/* ---- reading key/value lists ---- */

typedef struct sw_kv {
    const char *key;         /* in the payload, not NUL-terminated */
    size_t key_len;
    unsigned type;           /* SW_VAL_* */
    uint64_t u;              /* UINT: the value; SINT: the zigzag encoding */
    int64_t i;               /* UINT, SINT: the value as signed */
    double f;                /* every numeric type, as a double */
    const char *s;           /* BYTES: in the payload, not NUL-terminated */
    size_t slen;
} sw_kv;

/* The next entry of a key/value payload [*p, end). Returns 1 and advances
 * *p, 0 at the end of the payload, or SW_ETRUNC / SW_EFORMAT (an entry cut
 * short, an unknown value type). */
int sw_kv_next(const uint8_t **p, const uint8_t *end, sw_kv *out);

/* ---- byte sources ---- */

typedef struct sw_source {
    const uint8_t *mem;      /* the whole content in memory, or NULL */
    int fd;                  /* else: read with pread(2) */
    uint64_t size;
} sw_source;

/* A source over len bytes at data (borrowed: it must outlive the source's
 * users). */
void sw_source_mem(sw_source *s, const uint8_t *data, size_t len);
/* A source over an open file (borrowed), of its size now. Returns 0 or
 * SW_EIO (errno kept). */
int sw_source_fd(sw_source *s, int fd);
/* The n bytes at off of a source (off + n must be within its size, else
 * SW_EFORMAT): *out points into a memory source's data, or at what pread(2)
 * read into buf (grown as needed; valid until buf's next use). Returns 0,
 * SW_EFORMAT, SW_EIO (the file cannot be read or shrank) or SW_ENOMEM. */
int sw_source_read(const sw_source *s, uint64_t off, size_t n, sw_bytes *buf, const uint8_t **out);

/* ---- the chunk iterator ---- */

/* What a kind of file is, for its reader. */
typedef struct sw_container_kind {
    const char *magic;       /* SW_MAGIC_LEN bytes */
    const char *what;        /* in messages: "trace", "profile" */
    unsigned major, minor;   /* the version this code reads (and writes) */
    uint64_t known_types;    /* bit t set: chunk type t exists in this version */
    const char *(*type_name)(unsigned type);   /* "META", ...; NULL: unknown */
} sw_container_kind;

/* One damaged range of a file. */
#define SW_DAMAGE_CUT       1  /* the file ends inside a chunk (cut short) */
#define SW_DAMAGE_CRC       2  /* a chunk's checksum does not match its payload */
#define SW_DAMAGE_LENGTH    3  /* a chunk header whose length cannot be right */
#define SW_DAMAGE_TYPE      4  /* an intact chunk of a type its version cannot have */
#define SW_DAMAGE_MALFORMED 5  /* an intact chunk its reader could not use */
typedef struct sw_damage {
    uint64_t off;            /* where it starts: the offset of a chunk header */
    uint64_t len;            /* bytes skipped from off: to the next intact chunk,
                                or to the end of the file */
    uint64_t chunks;         /* chunks in those bytes when their lengths chain
                                from off to the next intact chunk (at least
                                1), else 0: not known */
    unsigned kind;           /* SW_DAMAGE_* */
    int to_end;              /* nothing intact follows it */
    char what[112];          /* e.g. "corrupted: checksum mismatch in the chunk" */
} sw_damage;

/* One intact chunk. */
typedef struct sw_chunk {
    unsigned type;
    uint64_t off;            /* of its header in the file */
    uint32_t len;
    const uint8_t *payload;  /* len bytes. A memory source's payloads point
                                into its buffer; a file source's stay valid
                                until the next sw_chunks_next() */
} sw_chunk;

/* At most this many damaged ranges are kept in detail (all are counted). */
#define SW_DAMAGE_KEEP 64

typedef struct sw_chunks {
    const sw_container_kind *kind;
    sw_source src;
    unsigned major, minor;   /* the file's version */
    uint64_t off;            /* the next chunk header */
    uint64_t chunks;         /* intact chunks handed out */
    uint64_t unknown;        /* intact chunks of a newer minor's types, skipped */
    unsigned unknown_type;   /* the first of them */
    sw_damage *damage;       /* in file order, at most SW_DAMAGE_KEEP */
    size_t ndamage;
    uint64_t damage_total;   /* damaged ranges, also those not kept */
    uint64_t damaged_bytes;  /* bytes of all of them */
    uint64_t crc_budget;     /* payload bytes resynchronisation may still check */
    int gave_up;             /* the budget ran out in the last search: chunks
                                too long for what was left were not checked */
    /* File sources: a window of the file, and one payload. */
    uint8_t *win;
    uint64_t win_off;
    size_t win_len;
    uint8_t *buf;
    size_t buf_cap;
} sw_chunks;

/* Reads and checks the file header. Returns 0, or fails with a one-line
 * message in err: SW_EFORMAT (an empty file, another magic number, a file
 * that ends inside its header), SW_EVERSION (another major version),
 * SW_EIO, SW_ENOMEM. The source is borrowed; sw_chunks_close() frees what
 * the iterator holds, also after a failed open. */
int sw_chunks_open(sw_chunks *it, const sw_container_kind *kind, const sw_source *src, char *err,
                   size_t errlen);

/* The next intact chunk of a type the kind knows, in file order: returns 1
 * and fills *c, 0 at the end of the file, or SW_ENOMEM / SW_EIO (the
 * iteration cannot go on). Damaged ranges on the way are recorded. */
int sw_chunks_next(sw_chunks *it, sw_chunk *c);

/* Records an intact chunk that its reader could not use: "what" says why
 * (e.g. "malformed CODE chunk"); the damage text adds " at offset N". */
void sw_chunks_malformed(sw_chunks *it, const sw_chunk *c, const char *what);

void sw_chunks_close(sw_chunks *it);

/* Appends damaged ranges to a list that a reader keeps (a trace's replay
 * finds damage after its load): the same record a kind's reader would
 * add, for a list of at most SW_DAMAGE_KEEP records. */
void sw_damage_add(sw_damage *list, size_t *n, uint64_t *total, const sw_damage *d);

/* Describes damaged ranges in one line: each as "<what> at offset N",
 * followed, for a range that was skipped (not the end of the file), by
 * " (B bytes, C chunks, skipped)", separated by "; ", with "N damaged
 * ranges: " before them when there are several and "; ... and K more"
 * when they do not all fit or were not kept. Writes "" for none. */
void sw_damage_describe(const sw_damage *d, size_t n, uint64_t total, char *out, size_t outlen);

#endif /* SW_BASE_CONTAINER_H */
