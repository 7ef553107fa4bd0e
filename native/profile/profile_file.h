/*
 * profile_file.h - stackwatch profile files (".swprof"): a statistical
 * profile's history of call trees (history.h) with its threads and
 * totals, stored so that time windows and merges work on files as on a
 * live profile. docs/format.md ("Profile files") is the specification.
 *
 * The container is base/container.h's (that of trace files too), with
 * another magic number: a 16-byte header, then chunks of u8 type, u8 flags,
 * u16 reserved, u32 payload length, u32 CRC-32C of the payload, payload. A
 * reader reads every intact chunk, skips and reports each damaged range,
 * and gives functions whose definitions were lost names of their own.
 *
 * File   = header META FUNCS* THREADS THREAD_STATES? TREE* END
 * META   = key/value list (format.h SW_VAL_*): mode, interval_ns, ...,
 *          pid, parent_pid, process (1.1)
 * FUNCS  = { varint id, varint kind, str name, str filename, zigzag line }*
 *          ids dense from 0 in file order
 * THREADS= { varint thread_id, varint native_tid, str name, varint samples,
 *            varint off_cpu, varint cpu_ns }*
 * TREE   = zigzag start_ns, zigzag end_ns, varint thread_id, varint nodes,
 *          root: varint self, varint self_weight,
 *          then per node: varint parent (< its index), varint func,
 *                         varint self, varint self_weight
 *          (nodes parents first; a node's count is the sum of the self
 *          counts below it, so it is not stored)
 * THREAD_STATES (1.1) = { varint thread_id, varint running, varint gil_wait,
 *          varint idle, varint unknown }*  (threads with states only)
 * END    = key/value list: trees (number of TREE chunks written)
 */
#ifndef SW_PROFILE_FILE_H
#define SW_PROFILE_FILE_H

#include "base/base.h"
#include "history.h"

#define SW_PROF_MAGIC "\x89SWP\r\n\x1a\n"
#define SW_PROF_MAJOR 1   /* readers refuse another major */
#define SW_PROF_MINOR 1

#define SW_PCHUNK_META SW_CHUNK_META   /* 1 */
#define SW_PCHUNK_FUNCS 2
#define SW_PCHUNK_THREADS 3
#define SW_PCHUNK_TREE 4
#define SW_PCHUNK_END SW_CHUNK_END     /* 5 */
#define SW_PCHUNK_THREAD_STATES 6     /* 1.1 */

/* Function kinds of FUNCS entries. */
#define SW_PFUNC_PYTHON 0

typedef struct sw_prof_thread {
    uint64_t thread_id;      /* threading.get_ident() */
    uint64_t native_tid;     /* 0 where unknown */
    const char *name;        /* UTF-8; "" where unknown */
    uint64_t samples;        /* stored samples over the whole run */
    uint64_t off_cpu;        /* CPU mode: samples left out */
    uint64_t cpu_ns;
    /* 1.1: the thread's samples by state (indexed by base/sample.h's
     * SW_STATE_*), when has_states. */
    uint64_t states[SW_STATE_COUNT];
    int has_states;
} sw_prof_thread;

typedef struct sw_prof_info {
    char mode[8];            /* "wall" or "cpu" */
    uint64_t interval_ns, cycle_ns, maxlen;
    int64_t start_ns, stop_ns;   /* wall clock of the profile's start and stop; 0 if unknown */
    uint64_t samples;        /* stored samples */
    uint64_t dropped, cut, off_cpu, failed, missed;
    uint64_t evicted, evicted_samples;   /* history entries (and their samples) not kept (maxlen) */
    uint64_t history_dropped;            /* samples in the whole run but not in the history */
    /* The process profiled (1.1; 0 and "" where unknown): its pid, the pid
     * of the process that started it (0: none followed), and its name as
     * outputs show it (a command line, or multiprocessing's process name). */
    uint64_t pid, parent_pid;
    char process[256];
} sw_prof_info;

/* Appends a whole profile file to out: info, the threads, and every entry
 * of h (all trees use h's function table; every function of it is
 * written). The evicted counts written are h's. Returns 0, SW_ENOMEM, or
 * SW_EARG if one tree does not fit a chunk (SW_CHUNK_MAX). */
int sw_profile_file_build(sw_bytes *out, const sw_prof_info *info, const sw_prof_thread *threads, size_t nthreads,
                      const sw_history *h);

typedef struct sw_profile_file sw_profile_file;

/* Reads a profile file. On success *out holds it; a damaged file is read
 * (every intact chunk) and the damage described by sw_profile_file_damage.
 * Fails (SW_EFORMAT, SW_EVERSION, SW_EIO, SW_ENOMEM) with a message in err
 * for a file that is empty, not a profile, of another major version, or
 * without a single intact chunk. sw_profile_file_open_file reads the file
 * a piece at a time (it never holds the whole file). */
int sw_profile_file_open_mem(const uint8_t *data, size_t len, sw_profile_file **out, char *err, size_t errlen);
int sw_profile_file_open_file(const char *path, sw_profile_file **out, char *err, size_t errlen);
void sw_profile_file_free(sw_profile_file *pf);

const sw_prof_info *sw_profile_file_info(const sw_profile_file *pf);
size_t sw_profile_file_thread_count(const sw_profile_file *pf);
const sw_prof_thread *sw_profile_file_thread(const sw_profile_file *pf, size_t i);
/* The history read (its function table is the file's; owned by pf). */
sw_history *sw_profile_file_history(const sw_profile_file *pf);
/* "" if the file is intact, else what is wrong and where: every damaged
 * range (as sw_damage_describe() words them), then what it cost when that
 * is known: a lost META chunk (mode "unknown", interval and totals 0),
 * function definitions lost (their functions are named "<function N:
 * definition lost>"), the trees read of those END announced. */
const char *sw_profile_file_damage(const sw_profile_file *pf);
/* 1 if the END chunk was read (the writer finished the file). */
int sw_profile_file_complete(const sw_profile_file *pf);
/* Intact chunks of types a newer minor version added, skipped (not
 * damage). */
uint64_t sw_profile_file_unknown_chunks(const sw_profile_file *pf);

/* 1 if the bytes start with the profile magic number. */
int sw_profile_file_is_profile(const uint8_t *data, size_t len);

#endif
