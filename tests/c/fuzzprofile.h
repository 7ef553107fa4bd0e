/*
 * fuzzprofile.h - the profile-file half of the fuzz target (fuzz_reader.c
 * calls exercise_profile on every input it tries, with and without fixed
 * checksums, whole and cut after a chunk: profile files share the trace
 * container). Besides ASan/UBSan reports, it aborts when a promise of
 * profile_file.h or history.h is broken: a failed open without a message, a
 * tree whose root count is not the sum of its nodes' own counts, entries
 * out of time order, a window that does not merge, or a file read piece
 * by piece (from a memfd) that reads otherwise than from memory.
 */
#ifndef SW_FUZZPROFILE_H
#define SW_FUZZPROFILE_H

#include "profile/profile.h"
#include "profile/history.h"
#include "profile/profile_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void profile_fail(const char *what)
{
    fprintf(stderr, "fuzz_reader (profile): %s\n", what);
    abort();
}

static void exercise_profile(const uint8_t *data, size_t len)
{
    sw_profile_file *pf = NULL;
    char err[256];
    err[0] = 0;
    int rc = sw_profile_file_open_mem(data, len, &pf, err, sizeof err);
    if (rc) {
        if (rc > 0 || !err[0] || pf)
            profile_fail("open failed without a negative code and a message");
        return;
    }
    /* The same bytes read from a file, a piece at a time. */
    int fd = memfd_create("fuzzprofile", MFD_CLOEXEC);
    if (fd >= 0 && write(fd, data, len) == (ssize_t)len) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        sw_profile_file *ff = NULL;
        if (sw_profile_file_open_file(path, &ff, err, sizeof err) != SW_OK ||
            strcmp(sw_profile_file_damage(ff), sw_profile_file_damage(pf)) != 0 ||
            sw_history_len(sw_profile_file_history(ff)) != sw_history_len(sw_profile_file_history(pf)))
            profile_fail("a file and memory read differently");
        sw_profile_file_free(ff);
    }
    if (fd >= 0)
        close(fd);
    sw_history *h = sw_profile_file_history(pf);
    int64_t prev = INT64_MIN;
    uint64_t total = 0;
    for (size_t i = 0; i < sw_history_len(h); i++) {
        const sw_history_entry *e = sw_history_get(h, i);
        if (e->start_ns < prev || e->end_ns < e->start_ns)
            profile_fail("entries out of time order");
        prev = e->start_ns;
        uint64_t samples = 0;
        for (size_t k = 0; k < e->ntrees; k++) {
            const sw_calltree *t = e->trees[k].tree;
            uint64_t self = 0;
            for (uint32_t n = 0; n < sw_calltree_node_count(t); n++)
                self += sw_calltree_get_node(t, n)->self;
            if (self != sw_calltree_total(t))
                profile_fail("a tree's count is not the sum of its own counts");
            samples += self;
        }
        if (samples != e->samples)
            profile_fail("an entry's samples are not its trees' samples");
        total += samples;
    }
    for (size_t i = 0; i < sw_profile_file_thread_count(pf); i++)
        if (!sw_profile_file_thread(pf, i)->name)
            profile_fail("a thread without a name string");
    sw_calltree *all = sw_calltree_new(sw_history_functab(h));
    if (!all || sw_history_window(h, INT64_MIN, INT64_MAX, 1, 0, all) != SW_OK)
        profile_fail("the whole window did not merge");
    if (sw_calltree_total(all) != total)
        profile_fail("the whole window is not the sum of the entries");
    FILE *f = fopen("/dev/null", "w");
    if (f) {
        sw_calltree_write_collapsed(all, f, 0);
        fclose(f);
    }
    sw_calltree_free(all);
    sw_profile_file_free(pf);
}

#endif
