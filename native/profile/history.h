/*
 * history.h - call trees over time: a bounded list of entries, each one
 * cycle of a profile ([start_ns, end_ns), wall-clock ns since the Unix
 * epoch) holding one call tree per thread that had samples in it.
 *
 * The profile (profile.c) opens a new entry every cycle and adds each
 * stored sample both to the thread's whole-run tree and to the thread's
 * tree of the current entry; profile files (profile_file.c) store and read
 * back a history. Queries merge the trees of the entries that overlap a
 * time window into a caller's tree (which may use another function table:
 * sw_calltree_merge interns across tables).
 *
 * Every tree of a history uses the function table given to
 * sw_history_new (borrowed: it must outlive the history). With maxlen > 0
 * pushing an entry onto a full history frees the oldest one; what was
 * freed is counted (sw_history_evicted*), never lost silently.
 * Not thread-safe: callers serialise access (profile.c holds its lock).
 * Functions return 0 or a negative SW_E* code.
 */
#ifndef SW_HISTORY_H
#define SW_HISTORY_H

#include "calltree.h"

typedef struct sw_history sw_history;

typedef struct sw_history_tree {
    uint64_t thread_id;      /* threading.get_ident() of the thread */
    sw_calltree *tree;
    sw_calltree_cursor cursor;   /* sw_history_entry_add's, into tree */
} sw_history_tree;

typedef struct sw_history_entry {
    int64_t start_ns, end_ns;   /* wall clock, ns since the Unix epoch; start <= end */
    sw_history_tree *trees;     /* one per thread, in order of first sample */
    size_t ntrees, cap;
    uint64_t samples;           /* samples added to this entry (all threads) */
} sw_history_entry;

/* maxlen 0 keeps every entry. NULL if out of memory. */
sw_history *sw_history_new(sw_functab *ft, size_t maxlen);
void sw_history_free(sw_history *h);
sw_functab *sw_history_functab(const sw_history *h);

/* Appends an empty entry [start_ns, end_ns) (evicting the oldest if the
 * history is full) and returns it in *out (valid until the next push).
 * SW_EARG if end_ns < start_ns or start_ns is before the newest entry's
 * start (entries are kept in time order). */
int sw_history_push(sw_history *h, int64_t start_ns, int64_t end_ns, sw_history_entry **out);

/* The thread's tree in entry e, created (empty) if it has none yet. */
int sw_history_entry_tree(sw_history *h, sw_history_entry *e, uint64_t thread_id, sw_calltree **out);

/* Adds `count` samples of one stack (as sw_calltree_add) to the thread's
 * tree of entry e. */
int sw_history_entry_add(sw_history *h, sw_history_entry *e, uint64_t thread_id, const uint32_t *funcs, size_t n,
                         uint64_t count, uint64_t weight);

size_t sw_history_len(const sw_history *h);
/* Entry i, 0 the oldest; NULL if out of range. */
sw_history_entry *sw_history_get(const sw_history *h, size_t i);
sw_history_entry *sw_history_newest(const sw_history *h);   /* NULL if empty */

/* Entries and samples freed because the history was full. */
uint64_t sw_history_evicted(const sw_history *h);
uint64_t sw_history_evicted_samples(const sw_history *h);
/* Sets both counters (a profile file carries them over). */
void sw_history_set_evicted(sw_history *h, uint64_t entries, uint64_t samples);

/* Whether entry e is in the window [start_ns, stop_ns]: it starts at or
 * before stop_ns and ends after start_ns, or starts inside the window
 * (for an entry of length 0). A window selects whole entries; the window
 * [e->start_ns, e->start_ns] selects exactly the entry e. */
int sw_history_in_window(const sw_history_entry *e, int64_t start_ns, int64_t stop_ns);

/* Merges into dst the trees of every entry in the window: all threads'
 * (all_threads != 0) or only those of thread_id. All threads are merged
 * thread by thread in order of first appearance, each thread's entries
 * oldest first: a window over a whole profile's history gives the tree
 * sw_profile_merged gives, children in the same order. */
int sw_history_window(const sw_history *h, int64_t start_ns, int64_t stop_ns, int all_threads, uint64_t thread_id,
                      sw_calltree *dst);

#endif
