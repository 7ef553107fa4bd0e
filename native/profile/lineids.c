/*
 * lineids.c - (function id, line) -> function id (lineids.h): an array of
 * (func_id << 32 | line, id) indexed by a base/hashtab.h table.
 */
#include "lineids.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef struct lineid {
    uint64_t key;            /* func_id << 32 | line */
    uint32_t id;
} lineid;

struct sw_lineids {
    lineid *ent;
    size_t n, cap;
    sw_hashtab index;        /* hash of a key -> its position in ent */
};

sw_lineids *sw_lineids_new(void)
{
    return calloc(1, sizeof(sw_lineids));
}

void sw_lineids_free(sw_lineids *m)
{
    if (!m)
        return;
    free(m->ent);
    sw_hashtab_free(&m->index);
    free(m);
}

/* Remembers key -> id, after a lookup of h that ended at pos; out of
 * memory, it is not remembered (and looked up again next time). */
static void remember(sw_lineids *m, uint64_t h, uint32_t pos, uint64_t key, uint32_t id)
{
    lineid *e = sw_array_grow(m->ent, &m->cap, m->n + 1, sizeof *e, 256);
    if (!e)
        return;
    m->ent = e;
    if (m->n >= SW_HT_NONE || sw_hashtab_add_after(&m->index, h, (uint32_t)m->n, pos) != SW_OK)
        return;
    m->ent[m->n++] = (lineid){key, id};
}

int sw_lineids_get(sw_lineids *m, sw_functab *ft, uint32_t func_id, int32_t line, uint32_t *id)
{
    const sw_func *f = sw_functab_get(ft, func_id);
    if (!f)
        return SW_EARG;
    if (line <= 0 || line == f->line) {
        *id = func_id;
        return SW_OK;
    }
    uint64_t key = (uint64_t)func_id << 32 | (uint32_t)line, h = sw_hash_u64(key);
    uint32_t pos;
    for (uint32_t i = sw_hashtab_first(&m->index, h, &pos); i != SW_HT_NONE; i = sw_hashtab_next(&m->index, h, &pos)) {
        if (m->ent[i].key == key) {
            *id = m->ent[i].id;
            return SW_OK;
        }
    }
    int rc = sw_functab_intern(ft, f->name, strlen(f->name), f->filename, strlen(f->filename), line, id);
    if (rc == SW_OK)
        remember(m, h, pos, key, *id);   /* (interning touched only ft) */
    return rc;
}
