/*
 * profilegen.h - profile files made with the real profile, history and
 * writer, for the fuzz seed corpus (make_seed.c): two threads over several
 * cycles, one tree per cycle, truncated stacks, a deep recursion; and one
 * with the history off (no trees).
 */
#ifndef SW_PROFILEGEN_H
#define SW_PROFILEGEN_H

#include "profile/aggregate.h"
#include "profile/profile_file.h"

#include <stdio.h>
#include <string.h>

static int write_bytes(const char *path, const sw_bytes *b)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int bad = fwrite(b->data, 1, b->len, f) != b->len;
    return fclose(f) != 0 || bad ? -1 : 0;
}

/* Writes DIR/NAME: a profile of `cycles` cycles (0: history off). */
static int profile_seed(const char *dir, const char *name, int cycles, int deep)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return -1;
    sw_profile *p = sw_profile_new();
    if (!p || (cycles && sw_profile_set_history(p, 1000, 0, 1700000000000000000ll, 0) != SW_OK))
        return -1;
    sw_sample_code codes[40];
    sw_sample_code *stack[40];
    static const char *names[] = {"main", "run", "work", "helper"};
    for (int i = 0; i < 40; i++) {
        const char *n = names[i % 4];
        codes[i] = (sw_sample_code){(uint64_t)i + 1, n, i % 2 ? "b.py" : "a.py", (uint32_t)strlen(n), 4, i, SW_NO_ID,
                                    NULL};
    }
    int depth = deep ? 40 : 4;
    for (int t = 0; t < (cycles ? cycles : 1) * 7; t++) {
        int d = 1 + t % depth;
        for (int i = 0; i < d; i++)
            stack[i] = &codes[d - 1 - i];
        sw_sample s = {1 + (uint64_t)(t % 2), 100, (int64_t)t * 150, 1000, (uint32_t)d,
                       t % 5 == 4 ? SW_SAMPLE_TRUNCATED : 0, stack, SW_STATE_RUNNING, SW_NO_CPU, NULL, NULL, NULL};
        sw_profile_sink(p, &s);
    }
    sw_prof_info info = {.mode = "wall", .interval_ns = 150, .cycle_ns = 1000, .start_ns = 1700000000000000000ll,
                         .stop_ns = 1700000000000010000ll, .samples = sw_profile_samples(p)};
    sw_prof_thread th[] = {{1, 100, "MainThread", 0, 0, 0, {0}, 0}, {2, 101, "worker", 0, 0, 0, {0}, 0}};
    sw_bytes b = {0};
    sw_history *h = sw_profile_history(p), *none = NULL;
    if (!h)
        h = none = sw_history_new(sw_profile_functab(p), 0);
    int rc = h && sw_profile_file_build(&b, &info, th, 2, h) == SW_OK ? write_bytes(path, &b) : -1;
    sw_bytes_free(&b);
    sw_history_free(none);
    sw_profile_free(p);
    return rc;
}

static int profile_seeds(const char *dir)
{
    return profile_seed(dir, "profile-cycles.swprof", 4, 0) | profile_seed(dir, "profile-deep.swprof", 2, 1) |
           profile_seed(dir, "profile-no-history.swprof", 0, 0);
}

#endif
