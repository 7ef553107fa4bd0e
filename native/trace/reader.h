/*
 * reader.h - reading a trace file.
 *
 * sw_trace_open_*() reads the file once, checks every chunk (bounds,
 * checksum), keeps the definitions and indexes the event and sample chunks
 * (which replays read again, one chunk at a time). A damaged file still opens:
 * every intact chunk is read, each damaged range is skipped and reported
 * (base/container.h: the reader resynchronises at the next intact chunk),
 * and sw_trace_damage() says what is wrong and where. Only a file that is
 * not a stackwatch trace at all (bad magic, other major version, too
 * short, no intact chunk) fails to open.
 *
 * sw_trace_replay() decodes one thread's events in order and hands each to
 * a callback with its time in nanoseconds since the trace clock's start, its
 * nesting depth and the code id of the frame it opens or closes. Frames
 * still open where the stream ends or has a gap are closed by synthetic
 * events (flag `synthetic`), so every consumer sees balanced slices. A gap
 * (a chunk of the thread missing: discarded in ring mode, or lost to
 * damage) is never bridged: the frames open before it are closed at the
 * last event before it, a DROPPED event follows, and the frames the next
 * chunk says were open when it started are reopened (synthetic calls) at
 * its start; docs/format.md ("Damage and recovery") has the whole rule.
 *
 * Ownership: the trace owns all returned pointers; sw_trace_free() frees it.
 */
#ifndef SW_READER_H
#define SW_READER_H

#include "base/base.h"
#include "records.h"

typedef struct sw_trace sw_trace;

typedef struct sw_code_info {
    uint32_t id;
    uint8_t kind;            /* SW_CODE_PYTHON or SW_CODE_C */
    const char *name, *qualname, *filename;
    uint32_t firstlineno;
} sw_code_info;

typedef struct sw_thread_info {
    uint32_t index;
    uint64_t native_tid, ident;
    const char *name;
    uint64_t chunks;         /* events chunks read */
    uint64_t events;         /* events those chunks declare */
    uint64_t dropped;        /* events the writer reported lost */
    uint64_t samples;        /* sampler samples of this thread (format 1.2) */
    /* A task (format 1.7: a greenlet) is listed as a track of its own,
     * after the thread it runs on is listed: task is its id (0 for a
     * thread), thread the index of that thread; index is then
     * UINT32_MAX - its position among the tasks; native_tid, ident,
     * chunks, events and dropped 0 (its events are counted with its
     * thread's). Its replay delivers the
     * events the thread ran while it ran the task; a thread's replay
     * those it ran as itself (task 0). */
    uint64_t task;
    uint32_t thread;
} sw_thread_info;

typedef struct sw_meta_entry {
    const char *key;
    int type;                /* SW_VAL_* */
    uint64_t u;
    int64_t i;
    double f;
    const char *s;           /* NUL-terminated copy for SW_VAL_BYTES */
    size_t slen;
} sw_meta_entry;

/* Event kinds handed to replay callbacks: the SW_OP_* values for ordinary
 * events, plus: */
#define SW_EV_DROPPED 16     /* events were lost here; `code` holds how many
                              * (0 when unknown, e.g. a ring discard) */
#define SW_EV_EXT 17         /* an EXT event (line, exception, GC, thread, ...),
                              * delivered only by sw_trace_replay_ext(); `ext`
                              * holds its decoded payload, `code` its code id
                              * (SW_EXT_NO_CODE for kinds without one) */

/* The decoded payload of an EXT event (docs/format.md, "EXT kinds"): each
 * field of the kind's row (records.h) in its slot: a code id in `code`,
 * numbers in line, a, b, c (a SIGNED field's int64_t as its bits),
 * strings in s1, s2. Kinds of this version:
 *   LINE          code, line
 *   INSTRUCTION   code, line, a = byte offset, b = opcode, s1 = opcode name
 *   RAISE/HANDLED code, line, s1 = exception type
 *   GC_START      a = generation
 *   GC_DONE       a = generation, b = collected, c = uncollectable
 *   NEW_START..DEL_DONE  s1 = class, s2 = file that defines it
 *   THREAD_*      s1 = thread name, a = native thread id
 *   REGION_BEGIN  s1 = region name (REGION_END: nothing)
 * Strings are NUL-terminated copies, cut at SW_EXT_STR_MAX bytes (on a
 * UTF-8 character boundary); they are valid during the callback only. A
 * payload too short for its kind's fields is delivered with `malformed` set
 * and the fields it could not read zero / "". */
/* (sw_ext and its slots: records.h.) */

typedef struct sw_trace_sample sw_trace_sample;

typedef struct sw_event {
    int64_t t_ns;            /* since the clock's calibration point */
    uint32_t code;           /* code id of the frame opened or closed */
    uint32_t depth;          /* 0 for an outermost frame */
    uint8_t kind;            /* SW_OP_* or SW_EV_DROPPED */
    uint8_t synthetic;       /* made up by the reader to balance the stream */
    const sw_ext *ext;       /* SW_EV_EXT only, else NULL */
    const sw_trace_sample *sample;  /* SW_EV_SAMPLE (side_streams.h) only, else NULL */
} sw_event;

/* Returns nonzero to stop the replay (sw_trace_replay then returns it). */
typedef int (*sw_event_fn)(void *ud, const sw_event *ev);

/* Opens a trace. On failure returns a negative code and writes one line
 * naming what is wrong into err. A file is read as it is needed (pread):
 * the trace keeps its definitions and an index of its chunks, and memory
 * stays bounded whatever the file's size; sw_trace_open_mem reads a copy
 * of the bytes given. */
int sw_trace_open_file(const char *path, sw_trace **out, char *err, size_t errlen);
int sw_trace_open_mem(const uint8_t *data, size_t len, sw_trace **out, char *err, size_t errlen);
void sw_trace_free(sw_trace *t);

/* "" for an intact file, else what is damaged and at which offsets (every
 * damaged range, as sw_damage_describe() words them; when the damage took
 * keys of the time base with a META chunk, which ones; and, when END was
 * read, how many events the lost chunks held: "; N events lost", or "at
 * least N" when the writer also dropped events). A replay
 * that finds an intact chunk whose events do not decode adds it. */
const char *sw_trace_damage(const sw_trace *t);
/* The damaged ranges, in file order: sw_trace_damage_count() of them are
 * kept (at most SW_DAMAGE_KEEP), sw_trace_damage_total() counts all. */
size_t sw_trace_damage_count(const sw_trace *t);
const sw_damage *sw_trace_damage_range(const sw_trace *t, size_t i);
uint64_t sw_trace_damage_total(const sw_trace *t);
/* Intact chunks of types a newer minor version added, skipped (not
 * damage). */
uint64_t sw_trace_unknown_chunks(const sw_trace *t);
/* 1 when the END chunk was read (tracing stopped normally). */
int sw_trace_complete(const sw_trace *t);

size_t sw_trace_meta_count(const sw_trace *t);
const sw_meta_entry *sw_trace_meta(const sw_trace *t, size_t i);
/* Finds a key in META, then END chunks; NULL if absent. */
const sw_meta_entry *sw_trace_meta_find(const sw_trace *t, const char *key);

size_t sw_trace_thread_count(const sw_trace *t);
const sw_thread_info *sw_trace_thread(const sw_trace *t, size_t i);

/* Highest code id + 1; sw_trace_code() returns NULL for ids never defined. */
uint32_t sw_trace_code_limit(const sw_trace *t);
const sw_code_info *sw_trace_code(const sw_trace *t, uint32_t id);

/* Converts a timestamp in stored units to nanoseconds since the clock's
 * calibration point. */
int64_t sw_trace_units_to_ns(const sw_trace *t, uint64_t units);
/* Nanoseconds (same origin) when tracing stopped, or -1 if unknown. */
int64_t sw_trace_end_ns(const sw_trace *t);

/* The replay of a thread's events (replay.c), and the side streams:
 * samples and records of threads written by another thread (side_streams.c). */
#include "replay.h"
#include "side_streams.h"

#endif
