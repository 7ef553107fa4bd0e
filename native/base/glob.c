/*
 * glob.c - simple glob patterns (see glob.h).
 */
#include "glob.h"

#include "utf8.h"

#include <fnmatch.h>
#include <string.h>

int sw_glob_is_simple(const char *pattern)
{
    return strpbrk(pattern, "[\\") == NULL;
}

/* Bytes of the character at s (at least 1; never past the NUL). */
static size_t char_len(const char *s)
{
    size_t n = sw_utf8_len((const unsigned char *)s);
    return n ? n : 1;
}

int sw_glob_match_simple(const char *p, const char *s)
{
    /* The classic backtracking walk: on a mismatch, the last `*` takes one
     * more character. Linear in practice, O(|p|*|s|) at worst. */
    const char *star_p = NULL, *star_s = NULL;
    while (*s) {
        if (*p == '*') {
            while (*p == '*')
                p++;
            if (!*p)
                return 1;
            star_p = p;
            star_s = s;
            continue;
        }
        if (*p == '?') {
            p++;
            s += char_len(s);
            continue;
        }
        if (*p && *p == *s) {
            p++;
            s++;
            continue;
        }
        if (!star_p)
            return 0;
        star_s += char_len(star_s);
        p = star_p;
        s = star_s;
    }
    while (*p == '*')
        p++;
    return *p == 0;
}

int sw_glob_match(const char *pattern, const char *s)
{
    return sw_glob_is_simple(pattern) ? sw_glob_match_simple(pattern, s) : fnmatch(pattern, s, 0) == 0;
}

int sw_globs_match(char *const *g, const char *s)
{
    for (char *const *p = g; p && *p; p++)
        if (sw_glob_match(*p, s))
            return 1;
    return 0;
}

int sw_globs_keep(char *const *include, char *const *exclude, const char *const *names, int n)
{
    int in = !(include && include[0]), out = 0;
    for (int k = 0; k < n; k++) {
        in = in || sw_globs_match(include, names[k]);
        out = out || sw_globs_match(exclude, names[k]);
    }
    return in && !out;
}
