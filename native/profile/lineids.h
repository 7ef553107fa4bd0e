/*
 * lineids.h - per-line function ids for the profiler's --lines mode: maps
 * (function id, line being run) to the id of (name, file, line) in the same
 * function table, so that a sample's frames are interned by two integers
 * instead of by hashing their strings every time.
 *
 * Not thread-safe: its user (profile.c) serialises calls.
 */
#ifndef SW_LINEIDS_H
#define SW_LINEIDS_H

#include "calltree.h"

typedef struct sw_lineids sw_lineids;

sw_lineids *sw_lineids_new(void);   /* NULL if out of memory */
void sw_lineids_free(sw_lineids *m);

/* The id in ft of (name, file, line) where func_id is (name, file,
 * first line) in ft; func_id itself when line is the function's own line
 * or line <= 0 (unknown). Returns 0, SW_EARG for an unknown func_id, or
 * SW_ENOMEM. */
int sw_lineids_get(sw_lineids *m, sw_functab *ft, uint32_t func_id, int32_t line, uint32_t *id);

#endif
