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
    const sw_trace_sample *sample;  /* export_walk.h SW_WALK_SAMPLE only, else NULL */
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

/* Replays thread i's events. Returns 0, the callback's nonzero value, or a
 * negative code if a chunk is malformed (the events it gave before the
 * fault and those of the other chunks are delivered, the chunk after it is
 * read as after a gap, and every slice is closed). */
int sw_trace_replay(sw_trace *t, size_t i, sw_event_fn fn, void *ud);

/* Like sw_trace_replay; with SW_REPLAY_EXT in flags it also delivers the
 * EXT events of the known kinds 2-13 (SW_EV_EXT, in stream order, at the
 * depth of the frames open then). Unknown kinds are skipped. */
#define SW_REPLAY_EXT 1u
/* With SW_REPLAY_EXT: the EXT events of every task the thread runs (format
 * 1.7), not only those of the track replayed, and its TASK_SWITCH records
 * (SW_EV_EXT, delivered before the switch, at the depth of the task
 * switched away from, ext->code its innermost open frame or
 * SW_EXT_NO_CODE): what a reader of task events (stackwatch's
 * tracer/task_events.py) needs from one replay of the thread. */
#define SW_REPLAY_TASKS 2u
int sw_trace_replay_ext(sw_trace *t, size_t i, unsigned flags, sw_event_fn fn, void *ud);

/* Like sw_trace_replay_ext, for a consumer that wants the events from
 * about from_ns on: the thread's chunks that end before from_ns (those
 * followed by a chunk that starts at or before it) are not read, and the
 * first chunk read opens the frames its prefix lists with synthetic calls
 * at its start, without a DROPPED event. The events before from_ns that
 * this chunk holds are delivered too (the consumer clips: filter.h).
 * INT64_MIN: from the start. To stop before the end, the callback returns
 * nonzero (nothing is closed then). */
int sw_trace_replay_from(sw_trace *t, size_t i, unsigned flags, int64_t from_ns, sw_event_fn fn, void *ud);

/* Bytes of the EVENTS chunks of thread i (what a replay of it reads). */
uint64_t sw_trace_events_bytes(const sw_trace *t, size_t i);

/* Progress of long conversions: every replay tells fn the payload bytes of
 * each chunk it has replayed (or skipped); fn returning nonzero stops the
 * replay with SW_ECANCELED. One callback per trace (NULL: none); replays
 * of one trace in several threads at once would call it from each. */
typedef int (*sw_progress_fn)(void *ud, uint64_t bytes);
void sw_trace_set_progress(sw_trace *t, sw_progress_fn fn, void *ud);

/* ---- Samples of the statistical sampler (format 1.2) ----
 *
 * Threads are matched to samples by threading ident (then native thread
 * id); a sampled thread the trace has no events of gets an entry of its own
 * in the thread list (no chunks, name ""). Sample times are in the same
 * nanoseconds as events. */

typedef struct sw_frame_info {
    uint32_t id;
    uint8_t kind;            /* SW_FRAME_PYTHON or SW_FRAME_NATIVE (name: the
                                bare symbol; exports add " [native]") */
    const char *name, *filename;
    uint32_t line;
} sw_frame_info;

struct sw_trace_sample {
    int64_t t_ns;
    uint32_t thread;         /* position in the thread list */
    uint32_t state, flags;   /* sample.h SW_STATE_*, SW_SAMPLE_* */
    uint64_t weight_ns;      /* time the sample stands for */
    uint64_t cpu_ns;         /* CPU time since the thread's previous sample, or UINT64_MAX */
    uint32_t depth;
    const uint32_t *frames;  /* frame ids, outermost first (sw_trace_frame) */
    const uint32_t *lines;   /* format 1.3, when recorded: the line each frame
                                runs (0: unknown or native), parallel to
                                frames; else NULL */
};

/* Highest frame id + 1; sw_trace_frame() returns NULL for ids never defined. */
uint32_t sw_trace_frame_limit(const sw_trace *t);
const sw_frame_info *sw_trace_frame(const sw_trace *t, uint32_t id);
/* Samples of threads in the list (and those that could not be given one:
 * more than 4096 distinct sampled threads). */
uint64_t sw_trace_sample_count(const sw_trace *t);
uint64_t sw_trace_samples_unattributed(const sw_trace *t);

/* Iterates the samples of one thread (or of all, thread == SIZE_MAX) in
 * file order (time order for one sampler). next() returns 1 and fills *out
 * (valid until the next call), 0 at the end. */
typedef struct sw_sample_cursor sw_sample_cursor;
sw_sample_cursor *sw_sample_cursor_new(sw_trace *t, size_t thread);
int sw_sample_cursor_next(sw_sample_cursor *c, sw_trace_sample *out);
void sw_sample_cursor_free(sw_sample_cursor *c);

/* ---- Records of threads written by another thread (format 1.7) ----
 *
 * THREAD_RECORDS chunks hold EXT records (records.h rows written by
 * KERNEL: system calls, lost kernel records) of threads named by their
 * native tid, on the samples' time base. A record whose tid is no thread
 * of the trace is counted as unattributed and never delivered; a kind
 * this reader has no row for is skipped. */
typedef struct sw_trace_trec {
    int64_t t_ns;            /* same nanoseconds as events */
    uint32_t thread;         /* position in the thread list */
    const sw_ext *ext;       /* its payload decoded (valid until the next call) */
} sw_trace_trec;

uint64_t sw_trace_thread_record_count(const sw_trace *t);
uint64_t sw_trace_thread_records_unattributed(const sw_trace *t);

/* Iterates the records of one thread (or of all, thread == SIZE_MAX) in
 * file order (time order for one writer). next() returns 1 and fills
 * *out, 0 at the end, or a negative code. */
typedef struct sw_trec_cursor sw_trec_cursor;
sw_trec_cursor *sw_trec_cursor_new(sw_trace *t, size_t thread);
int sw_trec_cursor_next(sw_trec_cursor *c, sw_trace_trec *out);
void sw_trec_cursor_free(sw_trec_cursor *c);

#endif
