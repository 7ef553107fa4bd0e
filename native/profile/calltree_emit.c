/*
 * calltree_emit.c - writing call trees as collapsed stacks (flamegraph.pl),
 * as speedscope JSON and as the flat node list of the HTML flame graph
 * (see calltree_emit.h for the formats).
 *
 * Writes go through stdio; errors are checked once at the end (ferror),
 * not at every fputs.
 */
#include "calltree_emit.h"

#include "base/base.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Fills path[0..depth] with the ids from the root's child down to `id` and
 * returns the number of entries. path must hold n->depth entries. */
static uint32_t path_to(const sw_calltree *t, uint32_t id, uint32_t *path)
{
    const sw_calltree_node *n = sw_calltree_get_node(t, id);
    uint32_t d = n->depth;
    for (uint32_t k = d; k > 0; k--) {
        path[k - 1] = id;
        id = n->parent;
        n = sw_calltree_get_node(t, id);
    }
    return d;
}

static uint32_t max_depth(const sw_calltree *t)
{
    uint32_t m = 0;
    for (size_t i = 0; i < sw_calltree_node_count(t); i++) {
        uint32_t d = sw_calltree_get_node(t, (uint32_t)i)->depth;
        if (d > m)
            m = d;
    }
    return m;
}

/* ---- collapsed ---- */

/* s with ';' written as ':' and line breaks as spaces, a run of plain
 * characters at a time. */
static void put_sanitised(FILE *f, const char *s)
{
    while (*s) {
        size_t k = strcspn(s, ";\n\r");
        fwrite(s, 1, k, f);
        s += k;
        if (*s) {
            putc(*s == ';' ? ':' : ' ', f);
            s++;
        }
    }
}

int sw_calltree_write_collapsed(const sw_calltree *t, FILE *f, int use_weights)
{
    const sw_functab *ft = sw_calltree_functab(t);
    uint32_t *path = malloc(((size_t)max_depth(t) + 1) * sizeof *path);
    if (!path)
        return SW_ENOMEM;
    for (size_t i = 1; i < sw_calltree_node_count(t); i++) {
        const sw_calltree_node *n = sw_calltree_get_node(t, (uint32_t)i);
        if (use_weights ? !n->self && !n->self_weight : !n->self)
            continue;
        uint32_t d = path_to(t, (uint32_t)i, path);
        for (uint32_t k = 0; k < d; k++) {
            const sw_func *fn = sw_functab_get(ft, sw_calltree_get_node(t, path[k])->func);
            if (k)
                putc(';', f);
            put_sanitised(f, fn ? fn->name : "?");
            fputs(" (", f);
            put_sanitised(f, fn ? fn->filename : "?");
            fprintf(f, ":%" PRId32 ")", fn ? fn->line : 0);
        }
        fprintf(f, " %" PRIu64 "\n", use_weights ? n->self_weight : n->self);
    }
    free(path);
    return fflush(f) != 0 || ferror(f) ? SW_EIO : SW_OK;
}

/* ---- speedscope JSON ---- */

/* Writes s as a JSON string; invalid UTF-8 becomes U+FFFD. */
static void put_json_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    putc('"', f);
    while (*s) {
        unsigned char c = *s;
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc(c, f);
            s++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            s++;
        } else {
            size_t k = sw_utf8_len(s);   /* stops at the NUL */
            if (k == 0) {
                fputs("\\ufffd", f);
                s++;
            } else {
                fwrite(s, 1, k, f);
                s += k;
            }
        }
    }
    putc('"', f);
}

/* The total of a profile (its endValue). */
static uint64_t profile_total(const sw_speedscope_profile *p, int use_counts)
{
    const sw_calltree_node *root = sw_calltree_get_node(p->tree, SW_CALLTREE_ROOT);
    return use_counts ? root->count - root->self : root->weight - root->self_weight;
}

static void write_profile(FILE *f, const sw_speedscope_profile *p, uint32_t *path, const char *unit,
                          int use_counts)
{
    const sw_calltree *t = p->tree;
    fputs("{\"type\":\"sampled\",\"name\":", f);
    put_json_string(f, p->name ? p->name : "");
    fputs(",\"unit\":", f);
    put_json_string(f, unit);
    /* endValue - startValue is the total weight of the samples. */
    fprintf(f, ",\"startValue\":0,\"endValue\":%" PRIu64 ",\"samples\":[", profile_total(p, use_counts));
    int first = 1;
    for (size_t i = 0; i < sw_calltree_node_count(t); i++) {
        const sw_calltree_node *n = sw_calltree_get_node(t, (uint32_t)i);
        if ((!n->self && !n->self_weight) || i == 0)
            continue;
        uint32_t d = path_to(t, (uint32_t)i, path);
        fputs(first ? "[" : ",[", f);
        first = 0;
        for (uint32_t k = 0; k < d; k++)
            fprintf(f, k ? ",%" PRIu32 : "%" PRIu32, sw_calltree_get_node(t, path[k])->func);
        putc(']', f);
    }
    fputs("],\"weights\":[", f);
    first = 1;
    for (size_t i = 1; i < sw_calltree_node_count(t); i++) {
        const sw_calltree_node *n = sw_calltree_get_node(t, (uint32_t)i);
        if (!n->self && !n->self_weight)
            continue;
        fprintf(f, first ? "%" PRIu64 : ",%" PRIu64, use_counts ? n->self : n->self_weight);
        first = 0;
    }
    fputs("]}", f);
}

/* The profile speedscope opens on: the main thread's (a name containing
 * "MainThread"), else the busiest (the largest total; the first of equals). */
static size_t active_profile(const sw_speedscope_profile *profiles, size_t n, int use_counts)
{
    for (size_t i = 0; i < n; i++)
        if (profiles[i].name && strstr(profiles[i].name, "MainThread"))
            return i;
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (profile_total(&profiles[i], use_counts) > profile_total(&profiles[best], use_counts))
            best = i;
    return best;
}

int sw_speedscope_write(FILE *f, const char *file_name, const sw_speedscope_profile *profiles, size_t n,
                        const char *unit, int use_counts, const char *exporter)
{
    if (n == 0)
        return SW_EARG;
    const sw_functab *ft = sw_calltree_functab(profiles[0].tree);
    uint32_t deepest = 0;
    for (size_t i = 0; i < n; i++) {
        if (sw_calltree_functab(profiles[i].tree) != ft)
            return SW_EARG;
        uint32_t d = max_depth(profiles[i].tree);
        if (d > deepest)
            deepest = d;
    }
    uint32_t *path = malloc(((size_t)deepest + 1) * sizeof *path);
    if (!path)
        return SW_ENOMEM;
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"name\":", f);
    put_json_string(f, file_name ? file_name : "profile");
    fputs(",\"exporter\":", f);
    put_json_string(f, exporter ? exporter : "stackwatch");
    fprintf(f, ",\"activeProfileIndex\":%zu,\"shared\":{\"frames\":[", active_profile(profiles, n, use_counts));
    for (uint32_t i = 0; i < sw_functab_count(ft); i++) {
        const sw_func *fn = sw_functab_get(ft, i);
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", f);
        put_json_string(f, fn->name);
        fputs(",\"file\":", f);
        put_json_string(f, fn->filename);
        fprintf(f, ",\"line\":%" PRId32 "}", fn->line);
    }
    fputs("]},\"profiles\":[", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n" : "\n", f);
        write_profile(f, &profiles[i], path, unit, use_counts);
    }
    fputs("]}\n", f);
    free(path);
    return fflush(f) != 0 || ferror(f) ? SW_EIO : SW_OK;
}

/* ---- the flame graph page's flat nodes ---- */

typedef struct flat {
    FILE *f;
    const uint32_t *frame;
    uint32_t nframes;
    uint32_t *order;         /* node id -> its index in pre-order */
    uint32_t next;
    int bad;
} flat;

static int flat_node(void *ud, const sw_calltree *t, uint32_t id, const sw_calltree_node *n)
{
    (void)t;
    flat *fl = ud;
    fl->order[id] = fl->next++;
    if (id == SW_CALLTREE_ROOT) {
        fputs("-1,-1", fl->f);
    } else {
        if (n->func >= fl->nframes)
            return fl->bad = 1;
        fprintf(fl->f, ",%" PRIu32 ",%" PRIu32, fl->order[n->parent], fl->frame[n->func]);
    }
    fprintf(fl->f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, n->count, n->self, n->weight, n->self_weight);
    return 0;
}

int sw_calltree_write_flat(const sw_calltree *t, FILE *f, const uint32_t *frame, uint32_t nframes)
{
    flat fl = {f, frame, nframes, malloc(sw_calltree_node_count(t) * sizeof *fl.order), 0, 0};
    if (!fl.order)
        return SW_ENOMEM;
    sw_calltree_walk(t, flat_node, &fl);
    free(fl.order);
    if (fl.bad)
        return SW_EARG;
    return fflush(f) != 0 || ferror(f) ? SW_EIO : SW_OK;
}
