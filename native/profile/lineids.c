/*
 * lineids.c - (function id, line) -> function id (lineids.h): an
 * open-addressing table of 64-bit keys.
 */
#include "lineids.h"

#include <stdlib.h>
#include <string.h>

typedef struct slot {
    uint64_t key;            /* func_id << 32 | line, or 0 for empty (line 0 is never stored) */
    uint32_t id;
} slot;

struct sw_lineids {
    slot *slots;
    uint32_t nslots, n;
};

sw_lineids *sw_lineids_new(void)
{
    sw_lineids *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->nslots = 256;
    m->slots = calloc(m->nslots, sizeof *m->slots);
    if (!m->slots) {
        free(m);
        return NULL;
    }
    return m;
}

void sw_lineids_free(sw_lineids *m)
{
    if (!m)
        return;
    free(m->slots);
    free(m);
}

static uint32_t key_hash(uint64_t k)
{
    k ^= k >> 31;
    k *= 0x9e3779b97f4a7c15ull;
    k ^= k >> 29;
    return (uint32_t)k;
}

static int grow(sw_lineids *m)
{
    uint32_t ns = m->nslots * 2;
    slot *s = calloc(ns, sizeof *s);
    if (!s)
        return SW_ENOMEM;
    for (uint32_t i = 0; i < m->nslots; i++) {
        if (!m->slots[i].key)
            continue;
        uint32_t j = key_hash(m->slots[i].key) & (ns - 1);
        while (s[j].key)
            j = (j + 1) & (ns - 1);
        s[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = s;
    m->nslots = ns;
    return SW_OK;
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
    uint64_t key = (uint64_t)func_id << 32 | (uint32_t)line;
    uint32_t mask = m->nslots - 1, j = key_hash(key) & mask;
    for (; m->slots[j].key; j = (j + 1) & mask) {
        if (m->slots[j].key == key) {
            *id = m->slots[j].id;
            return SW_OK;
        }
    }
    uint32_t nid;
    int rc = sw_functab_intern(ft, f->name, strlen(f->name), f->filename, strlen(f->filename), line, &nid);
    if (rc != SW_OK)
        return rc;
    m->slots[j] = (slot){key, nid};
    m->n++;
    if ((uint64_t)m->n * 2 > m->nslots && grow(m) != SW_OK) {
        /* Full enough to stop: forget everything (ids stay valid in ft). */
        if ((uint64_t)m->n * 4 > (uint64_t)m->nslots * 3) {
            memset(m->slots, 0, (size_t)m->nslots * sizeof *m->slots);
            m->n = 0;
        }
    }
    *id = nid;
    return SW_OK;
}
