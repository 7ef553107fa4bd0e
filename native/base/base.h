/*
 * base.h - the public header of native/base, what every other room
 * includes (never the files below one by one). C11 without Python.h.
 *
 *   common.h     error codes, branch hints
 *   bytes.h      growable byte buffers, array growth
 *   varint.h     LEB128 and zigzag integers
 *   cursor.h     bounded reading of a byte range
 *   crc32.h      CRC-32C
 *   container.h  the file container of traces and profile files: framing,
 *                key/value lists, the chunk iterator, damage and recovery
 *   hashtab.h    the hash table and its hash functions
 *   clock.h      the trace clock
 *   utf8.h       UTF-8 checks
 *   glob.h       glob matching
 *   sample.h     the sampler's sample record
 *   textfile.h   a small text file read whole
 */
#ifndef SW_BASE_H
#define SW_BASE_H

#include "bytes.h"
#include "clock.h"
#include "common.h"
#include "container.h"
#include "crc32.h"
#include "cursor.h"
#include "glob.h"
#include "hashtab.h"
#include "sample.h"
#include "textfile.h"
#include "utf8.h"
#include "varint.h"

#endif
