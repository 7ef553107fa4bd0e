/*
 * glob.h - matching a file or module name against a glob pattern, as
 * fnmatch(pattern, name, 0) does in a UTF-8 locale, for the patterns made
 * only of literal characters, `*` (any run of characters, `/` included) and
 * `?` (one character). Those are the patterns users give to --include,
 * --exclude, --lines and handlers' `where`; matching them here costs a few
 * instructions per character, where glibc's fnmatch converts both strings to
 * wide characters first (the cost showed in the benchmarks, once per code
 * object per pattern).
 *
 * sw_glob_is_simple() says whether a pattern is of that kind;
 * sw_glob_match() uses fnmatch for the others (brackets, escapes).
 */
#ifndef SW_GLOB_H
#define SW_GLOB_H

/* 1 if the pattern holds no `[` and no `\`. */
int sw_glob_is_simple(const char *pattern);

/* 1 if name matches the pattern (fnmatch(3) without flags; the simple
 * patterns matched here). */
int sw_glob_match(const char *pattern, const char *name);

/* 1 if any pattern of the NULL-terminated list g matches name (never for
 * an empty list or NULL). */
int sw_globs_match(char *const *g, const char *name);

/* 1 if something known by any of names[0..n) (a function's qualified
 * name, name and file) is kept by include / exclude glob lists: one of the
 * names matches an include glob (or there are none) and none matches an
 * exclude glob. The one rule of --include / --exclude, for traces and
 * profiles alike. */
int sw_globs_keep(char *const *include, char *const *exclude, const char *const *names, int n);

/* 1 if name matches the simple pattern, else 0. Both NUL-terminated UTF-8;
 * a byte that starts no well-formed sequence counts as one character. */
int sw_glob_match_simple(const char *pattern, const char *name);

#endif
