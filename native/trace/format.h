/*
 * format.h - constants of the stackwatch trace file format, version 1.
 * docs/format.md is the specification; every constant here is described
 * there too, with its encoding. Integers are little-endian; "varint" is
 * unsigned LEB128 (varint.h); "str" is a varint byte length then UTF-8.
 *
 * A trace is a container file (base/container.h: file header, chunks,
 * key/value lists, damage and recovery) with the magic number and chunk
 * types below.
 */
#ifndef SW_FORMAT_H
#define SW_FORMAT_H

#include "base/base.h"

#define SW_MAGIC            "\x89SWT\r\n\x1a\n"
#define SW_FORMAT_MAJOR     1   /* readers refuse a different major */
#define SW_FORMAT_MINOR     20  /* readers accept any minor of their major */

/* Chunk types, besides the container's META (1: key/value pairs describing
 * the trace, the first chunk) and END (5: key/value totals written when
 * tracing stops). Unknown types: see base/container.h. */
#define SW_CHUNK_CODE    2  /* code (function) definitions */
#define SW_CHUNK_THREAD  3  /* thread definitions; a later one renames */
#define SW_CHUNK_EVENTS  4  /* one thread's events */
/* Format 1.2: the statistical sampler's samples (stackwatch run --sample). */
#define SW_CHUNK_SAMPLE_FRAMES 6  /* frame definitions of samples (own id space) */
#define SW_CHUNK_SAMPLES       7  /* samples of any threads, in time order */
#define SW_CHUNK_TASK          8  /* task definitions (1.7): id, thread, name (written until 1.17) */
#define SW_CHUNK_TASK_FRAMES   9  /* the tasks' open frames when an EVENTS chunk starts (1.7) */
/* Format 1.8: EXT records of threads written by another thread of
 * stackwatch (the kernel reader's system calls: stackwatch run --kernel).
 * Payload: varint n, then n records, each: varint native tid, zigzag time
 * (CLOCK_MONOTONIC ns minus META mono0_ns, as samples), varint kind
 * (records.h), varint len, len bytes of the kind's payload. */
#define SW_CHUNK_THREAD_RECORDS 10
/* Format 1.16: interned strings (the channel of the task events, records.h
 * ISTR fields). Payload: entries, each varint id, str text; ids are dense
 * from 0, in order of first use, and defined before the first EVENTS
 * chunk that uses them, for the whole file (as code ids). */
#define SW_CHUNK_STRINGS 11
/* Format 1.18: task definitions with their names interned (the TASK
 * chunk's entries with the name a STRINGS entry's id, which TASK_CREATE's
 * name shares: a name is written once). Entry: varint task, varint
 * thread, varint string id. */
#define SW_CHUNK_TASK_INTERNED 12

/* SAMPLE_FRAMES entry: varint id, u8 kind, str name, str filename, varint
 * line. Ids are dense from 0, in order of first use. */
#define SW_FRAME_PYTHON 0   /* a Python function (line: its first line) */
#define SW_FRAME_NATIVE 1   /* a native (C) frame (format 1.3): name = symbol,
                             * filename = its shared object, line 0 */
/* A reader refuses other kinds (the chunk is reported as damage). */
/* SAMPLES payload: varint n, then n samples, each: varint len, then len
 * bytes: varint ident, varint native tid, zigzag time (CLOCK_MONOTONIC ns
 * minus META mono0_ns), varint weight ns, varint cpu ns + 1 (0: unknown),
 * varint state (sample.h SW_STATE_*), varint flags (SW_SAMPLE_*), varint
 * depth, depth x varint frame id (outermost first); format 1.3, only when
 * lines were recorded: varint n (= depth, or 0: none), n x varint line being run (0:
 * unknown or native), outermost first. A reader ignores the bytes of a
 * sample after the fields it knows. */

/* CODE entry: varint id, u8 kind, str name, str qualname, str filename,
 * varint firstlineno. */
#define SW_CODE_PYTHON 0  /* a Python code object */
#define SW_CODE_C      1  /* a builtin or extension function */
#define SW_CODE_NATIVE 2  /* a native function (format 1.11): an -finstrument-functions
                           * build's, named "symbol [native]", file its object's path */

/* Event operations: the low 3 bits of an event's first varint; the rest of
 * that varint is the time since the thread's previous event (or since the
 * chunk's t_start), in units of 2^time_shift clock ticks. */
#define SW_OP_CALL      0  /* + varint code: a Python frame starts */
#define SW_OP_RETURN    1  /* the innermost frame returns a value */
#define SW_OP_RESUME    2  /* + varint code: a generator/coroutine resumes */
#define SW_OP_YIELD     3  /* the innermost frame suspends (yield/await) */
#define SW_OP_UNWIND    4  /* the innermost frame exits with an exception */
#define SW_OP_C_CALL    5  /* + varint code (kind SW_CODE_C): a C call */
#define SW_OP_C_RETURN  6  /* the innermost C call returns (or raises) */
#define SW_OP_EXT       7  /* + varint kind, varint len, len bytes */
#define SW_OP_BITS      3

/* Extended event kinds (SW_EXT_*: their numbers, payloads and meaning)
 * are the rows of one table, records.h. The payload length lets a reader
 * skip the kinds it does not know. */
#include "records.h"

#endif
