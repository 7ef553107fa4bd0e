/*
 * textfile.h - a small text file read whole (a /proc or tracefs file):
 * the one reader of such files for the rooms above.
 */
#ifndef SW_BASE_TEXTFILE_H
#define SW_BASE_TEXTFILE_H

#include <stddef.h>

/* Reads the file at path into buf (at most cap - 1 bytes, then a NUL), to
 * its end or buf's. Returns 0, or -1 if it cannot be opened or is empty
 * (buf then holds ""). cap must be at least 1. */
int sw_read_text(const char *path, char *buf, size_t cap);

#endif
