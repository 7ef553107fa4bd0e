/*
 * symbols.c - native code addresses to function names (symbols.h).
 *
 * Per shared object (found with dladdr), the ELF file is read once by the
 * ELF room's bounded reader (elf/elf.h) and its function symbols
 * (.symtab, else .dynsym) copied into a sorted array. Addresses are cached; symbols are interned as sw_sample_code
 * entries by their start address, C++ names demangled (demangle.h). Both
 * are arrays indexed by base/hashtab.h tables. Source lines (sw_symbols_source; with sources on,
 * another process's or sw_symbols_new_lines', each symbol's and each address's) come from the object's DWARF line
 * tables (elf/dwarf_line.h), or its separate debug file's, read the first
 * time one is asked for.
 */
#define _GNU_SOURCE
#include "symbols.h"

#include "base/base.h"
#include "demangle.h"
#include "elf/elf.h"
#include "unwind.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OBJECTS 4096
#define PC_CACHE 12288u      /* addresses remembered; then forgotten all at once */
#define MAX_ENTRIES (1u << 20)

typedef struct fsym {
    uint64_t start, size;
    uint32_t name;           /* offset into names */
    uint32_t rank;           /* among aliases the highest is named (rank_of) */
} fsym;

typedef struct object {
    uint64_t base;           /* dli_fbase */
    uint64_t bias;           /* runtime address - file address */
    fsym *syms;
    uint32_t n;
    char *names;
    char *path;
    char *open_path;         /* to open it by from here ("" for the vDSO: no file) */
    char root[64];           /* what open_path adds before path (/proc/PID/root) */
    sw_dwarf_lines *lines;   /* its DWARF line tables, once asked for (NULL: none) */
    int lines_read;
} object;

typedef struct entry {
    sw_sample_code info;
    int is_eval;
    int by_fp;               /* its caller was found by frame pointers (unwind.h): named so */
    char *strings;
} entry;

typedef struct pc_ent {
    uint64_t pc;
    entry *e;
    int32_t line;            /* with sources: the line of pc, else 0 */
} pc_ent;

struct sw_symbols {
    object *objs;
    uint32_t nobjs, capobjs;
    pc_ent *pcs;             /* [PC_CACHE] addresses looked up */
    uint32_t npcs;
    sw_hashtab pc_index;     /* hash of a pc -> its position in pcs */
    entry **entries;         /* symbols, in order of first use */
    size_t nentries, capentries;
    sw_hashtab entry_index;  /* hash of a symbol's start -> its position in entries */
    entry unknown;           /* "?? [native]" of an address outside any object */
    sw_unwinder *remote;     /* another process's: its files name its addresses; NULL: this process */
    int sources;             /* symbols and addresses get their source lines when looked up */
    uint64_t lookups, misses;
};

/* ---- ELF ---- */

typedef struct elf_syms {
    fsym *syms;
    uint32_t n;
    char *names;
    uint64_t min_vaddr;
} elf_syms;

static int cmp_fsym(const void *a, const void *b)
{
    const fsym *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* Among aliases: a name without a leading underscore first (glibc's
 * public "select" over its "__select"), then global, weak, local. */
static uint32_t rank_of(const sw_elf_symbol *s)
{
    return (s->name[0] != '_') * 4u + (s->bind == STB_GLOBAL ? 2u : s->bind == STB_WEAK ? 1u : 0u);
}

/* 1 if e has a .symtab (its static functions). */
static int has_symtab(const sw_elf *e)
{
    sw_elf_symbol sy;
    for (size_t i = 0; i < sw_elf_symbol_count(e); i++)
        if (sw_elf_symbol_at(e, i, &sy) == SW_OK && !sy.dynamic)
            return 1;
    return 0;
}

/* The ELF file at path if it can be read and (crc_of_it) has that CRC. */
static sw_elf *open_debug(const char *path, const uint32_t *crc_of_it)
{
    sw_elf *d;
    char err[256];
    if (access(path, R_OK) != 0 || sw_elf_open(path, &d, err, sizeof err) != SW_OK)
        return NULL;
    if (crc_of_it && sw_elf_file_crc(d) != *crc_of_it) {
        sw_elf_free(d);   /* another build's */
        return NULL;
    }
    return d;
}

/* The separate debug file of e, read from path (which begins with root,
 * the target's /proc/PID/root or ""; NULL: e is no file), as gdb finds
 * it: by build id (Debian's and Fedora's debug packages:
 * /usr/lib/debug/.build-id/xx/rest.debug, under root), else by its
 * .gnu_debuglink name (beside the file, in .debug/ beside it, or under
 * /usr/lib/debug with the file's directory), whose CRC must be the one the
 * link gives. NULL if there is none. */
static sw_elf *debug_file(const sw_elf *e, const char *path, const char *root)
{
    char p[1024], hex[2 * 64 + 1];
    const unsigned char *id;
    size_t n = sw_elf_build_id(e, &id);
    sw_elf *d = NULL;
    if (n >= 2 && n <= 64) {
        for (size_t i = 0; i < n; i++)
            snprintf(hex + 2 * i, 3, "%02x", id[i]);
        snprintf(p, sizeof p, "%s/usr/lib/debug/.build-id/%.2s/%s.debug", root, hex, hex + 2);
        d = open_debug(p, NULL);
    }
    const char *name, *slash = path ? strrchr(path, '/') : NULL;
    uint32_t crc;
    size_t rl = strlen(root);
    if (d || !slash || sw_elf_debuglink(e, &name, &crc) != SW_OK || strncmp(path, root, rl) != 0)
        return d;
    int dir = (int)(slash - path);
    const char *const forms[] = {"%.*s/%s", "%.*s/.debug/%s", "%s/usr/lib/debug%.*s/%s"};
    for (size_t i = 0; i < 3 && !d; i++) {
        int len = i < 2 ? snprintf(p, sizeof p, forms[i], dir, path, name)
                        : snprintf(p, sizeof p, forms[i], root, dir - (int)rl, path + rl, name);
        if (len > 0 && (size_t)len < sizeof p && strcmp(p, path) != 0)
            d = open_debug(p, &crc);
    }
    return d;
}

/* 1 if s is a function symbol of the table chosen (.symtab, else .dynsym). */
static int wanted(const sw_elf_symbol *s, int dynamic)
{
    return (s->type == STT_FUNC || s->type == STT_GNU_IFUNC) && s->shndx != SHN_UNDEF && s->value &&
           s->dynamic == dynamic;
}

/* Reads the function symbols of the ELF file at path, or of the image
 * of image_len bytes when image is not NULL (the vDSO, read from the
 * target's memory), through the ELF room's bounded reader. 0 or -1. */
static int read_elf(const char *path, const unsigned char *image, size_t image_len, const char *root,
                    elf_syms *out)
{
    memset(out, 0, sizeof *out);
    sw_elf *e, *debug = NULL;
    char err[256];
    if ((image ? sw_elf_from_bytes(image, image_len, &e, err, sizeof err) : sw_elf_open(path, &e, err, sizeof err)) !=
        SW_OK)
        return -1;
    int rc = -1;
    size_t nseg, total = sw_elf_symbol_count(e);
    const sw_elf_segment *seg = sw_elf_segments(e, &nseg);
    out->min_vaddr = UINT64_MAX;
    for (size_t i = 0; i < nseg; i++)
        if (seg[i].vaddr < out->min_vaddr)
            out->min_vaddr = seg[i].vaddr;
    if (out->min_vaddr == UINT64_MAX)
        out->min_vaddr = 0;
    out->min_vaddr &= ~0xfffull;
    sw_elf_symbol sy;
    int dynamic = !has_symtab(e);   /* .dynsym only if the file has no .symtab (nor a debug file with one) */
    const sw_elf *src = e;
    if (dynamic && (debug = debug_file(e, image ? NULL : path, root)) && has_symtab(debug)) {
        src = debug;
        total = sw_elf_symbol_count(debug);
        dynamic = 0;
    }
    uint64_t names_len = 0, nf = 0;
    for (size_t i = 0; i < total; i++) {
        if (sw_elf_symbol_at(src, i, &sy) != SW_OK || !wanted(&sy, dynamic))
            continue;
        nf++;
        names_len += strlen(sy.name) + 1;
    }
    if (nf == 0 || nf > UINT32_MAX / 2 || names_len > UINT32_MAX)
        goto done;
    out->syms = malloc(nf * sizeof *out->syms);
    out->names = malloc(names_len);
    if (!out->syms || !out->names)
        goto done;
    uint32_t k = 0, pos = 0;
    for (size_t i = 0; i < total && k < nf; i++) {
        if (sw_elf_symbol_at(src, i, &sy) != SW_OK || !wanted(&sy, dynamic))
            continue;
        size_t len = strcspn(sy.name, "@");   /* without a version ("name@@GLIBC_2.17" in .symtab) */
        memcpy(out->names + pos, sy.name, len);
        out->names[pos + len] = 0;
        out->syms[k++] = (fsym){sy.value, sy.size, pos, rank_of(&sy)};
        pos += (uint32_t)len + 1;
    }
    out->n = k;
    qsort(out->syms, k, sizeof *out->syms, cmp_fsym);
    rc = 0;
done:
    sw_elf_free(debug);
    sw_elf_free(e);
    if (rc != 0) {
        free(out->syms);
        free(out->names);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

/* The symbol covering file address a, or NULL. A symbol of size 0 covers
 * up to the next one. */
static const fsym *find_sym(const fsym *syms, uint32_t n, uint64_t a)
{
    if (!n || a < syms[0].start)
        return NULL;
    uint32_t lo = 0, hi = n;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (syms[mid].start <= a)
            lo = mid;
        else
            hi = mid;
    }
    /* Several symbols may start at one address (aliases): the covering one
     * of the highest rank (sorted last: rank_of). */
    for (uint32_t i = lo + 1; i-- > 0 && syms[i].start == syms[lo].start;)
        if (syms[i].size == 0 || a - syms[i].start < syms[i].size)
            return &syms[i];
    return NULL;
}

const char *sw_symbols_elf_lookup(const char *path, uint64_t vaddr, char *out, size_t outlen)
{
    elf_syms es;
    if (read_elf(path, NULL, 0, "", &es) != 0)
        return NULL;
    const fsym *f = find_sym(es.syms, es.n, vaddr);
    const char *res = NULL;
    if (f && outlen) {
        snprintf(out, outlen, "%s", es.names + f->name);
        res = out;
    }
    free(es.syms);
    free(es.names);
    return res;
}

/* ---- the cache ---- */

sw_symbols *sw_symbols_new_remote(sw_unwinder *u)
{
    sw_symbols *s = sw_symbols_new_lines();
    if (s)
        s->remote = u;
    return s;
}

sw_symbols *sw_symbols_new_lines(void)
{
    sw_symbols *s = sw_symbols_new();
    if (s)
        s->sources = 1;
    return s;
}

sw_symbols *sw_symbols_new(void)
{
    sw_symbols *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->pcs = calloc(PC_CACHE, sizeof *s->pcs);
    if (!s->pcs || sw_hashtab_reserve(&s->pc_index, PC_CACHE) != SW_OK) {
        sw_symbols_free(s);
        return NULL;
    }
    s->unknown.info = (sw_sample_code){0, "??" SW_NATIVE_SUFFIX, "", 2 + (uint32_t)strlen(SW_NATIVE_SUFFIX), 0, 0,
                                       SW_NO_ID, NULL};
    return s;
}

void sw_symbols_free(sw_symbols *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->nobjs; i++) {
        free(s->objs[i].syms);
        free(s->objs[i].names);
        free(s->objs[i].path);
        free(s->objs[i].open_path);
        sw_dwarf_lines_free(s->objs[i].lines);
    }
    free(s->objs);
    for (size_t i = 0; i < s->nentries; i++) {
        free(s->entries[i]->strings);
        free(s->entries[i]);
    }
    free(s->entries);
    sw_hashtab_free(&s->entry_index);
    free(s->pcs);
    sw_hashtab_free(&s->pc_index);
    free(s);
}

/* The object at base, named path, read from open_path (or from image, the
 * vDSO's bytes, when not NULL); its load bias is bias, or (UINT64_MAX)
 * base less its first segment's address. */
static object *object_for(sw_symbols *s, uint64_t base, const char *path, const char *open_path,
                          const unsigned char *image, size_t image_len, uint64_t bias)
{
    for (uint32_t i = 0; i < s->nobjs; i++)
        if (s->objs[i].base == base && strcmp(s->objs[i].path, path ? path : "") == 0)
            return &s->objs[i];
    if (s->nobjs >= MAX_OBJECTS)
        return NULL;
    if (s->nobjs == s->capobjs) {
        uint32_t nc = s->capobjs ? s->capobjs * 2 : 16;
        object *no = realloc(s->objs, nc * sizeof *no);
        if (!no)
            return NULL;
        s->objs = no;
        s->capobjs = nc;
    }
    object *o = &s->objs[s->nobjs];
    memset(o, 0, sizeof *o);
    o->base = base;
    o->path = strdup(path ? path : "");
    o->open_path = strdup(open_path && !image ? open_path : "");
    if (!o->path || !o->open_path) {
        free(o->path);
        free(o->open_path);
        return NULL;
    }
    elf_syms es;
    /* The root the file is read under: what open_path adds before path. */
    char *root = o->root;
    size_t pl = path ? strlen(path) : 0, ol = open_path ? strlen(open_path) : 0;
    if (ol > pl && ol - pl < sizeof o->root && strcmp(open_path + ol - pl, path) == 0)
        snprintf(root, sizeof o->root, "%.*s", (int)(ol - pl), open_path);
    if ((image || (open_path && open_path[0])) && read_elf(open_path, image, image_len, root, &es) == 0) {
        o->syms = es.syms;
        o->n = es.n;
        o->names = es.names;
        o->bias = bias != UINT64_MAX ? bias : base - es.min_vaddr;
    } else {
        o->bias = bias != UINT64_MAX ? bias : base;
    }
    s->nobjs++;
    return o;
}

static int object_line(object *o, uint64_t addr, const char **file, uint32_t *line);

/* The entry for the symbol `name` starting at `start` in object `path`
 * (by_fp: its frames' callers found by frame pointers, a name of its own);
 * with s->sources and its object o's line tables, its source file and
 * line instead of the object, which becomes its library. */
static entry *intern(sw_symbols *s, uint64_t start, const char *name, const char *path, int by_fp, object *o)
{
    uint64_t h = sw_hash_u64(start ^ (uint64_t)by_fp);
    uint32_t pos;
    for (uint32_t i = sw_hashtab_first(&s->entry_index, h, &pos); i != SW_HT_NONE;
         i = sw_hashtab_next(&s->entry_index, h, &pos))
        if (s->entries[i]->info.addr == start && s->entries[i]->by_fp == by_fp)
            return s->entries[i];
    if (s->nentries >= MAX_ENTRIES)
        return &s->unknown;
    entry **v = sw_array_grow(s->entries, &s->capentries, s->nentries + 1, sizeof *v, 1024);
    if (!v)
        return NULL;
    s->entries = v;
    char *readable = sw_demangle(name);   /* a C++ name as c++filt shows it */
    if (readable)
        name = readable;
    entry *e = calloc(1, sizeof *e);
    const char *mark = by_fp ? SW_UNWIND_FP_MARK : "", *src = NULL;
    uint32_t line = 0;
    if (!(s->sources && o && strcmp(name, "??") != 0 && object_line(o, start, &src, &line) == SW_OK && line &&
          line <= INT32_MAX))
        src = NULL;
    const char *file = src ? src : path;
    size_t ml = strlen(mark), nl = strlen(name) + ml, sl = strlen(SW_NATIVE_SUFFIX), fl = strlen(file);
    size_t pl = src ? strlen(path) + 1 : 0;
    char *str = e ? malloc(nl + sl + fl + pl + 2) : NULL;
    if (!str || sw_hashtab_add(&s->entry_index, h, (uint32_t)s->nentries) != SW_OK) {
        free(str);
        free(e);
        free(readable);
        return NULL;
    }
    memcpy(str, name, nl - ml);
    memcpy(str + nl - ml, mark, ml);
    memcpy(str + nl, SW_NATIVE_SUFFIX, sl + 1);
    memcpy(str + nl + sl + 1, file, fl + 1);
    if (src)
        memcpy(str + nl + sl + fl + 2, path, pl);
    e->strings = str;
    e->info = (sw_sample_code){start, str, str + nl + sl + 1, (uint32_t)(nl + sl), (uint32_t)fl, (int32_t)line,
                               SW_NO_ID, src ? str + nl + sl + fl + 2 : NULL};
    e->is_eval = strncmp(name, "_PyEval_EvalFrameDefault", 24) == 0 && (name[24] == 0 || name[24] == '.');
    e->by_fp = by_fp;
    free(readable);
    s->entries[s->nentries++] = e;
    return e;
}

/* The object holding code address pc: in another process the file its
 * unwinder finds mapped there, in this one dladdr's (*di filled). NULL if
 * none (or out of memory). */
static object *object_at(sw_symbols *s, uint64_t pc, Dl_info *di)
{
    memset(di, 0, sizeof *di);
    if (s->remote) {
        sw_unwind_object_info f;
        if (sw_unwind_object(s->remote, pc, &f) != SW_OK)
            return NULL;
        return object_for(s, f.bias, f.path, f.open_path, f.image, f.image_len, f.bias);
    }
    if (!dladdr((void *)(uintptr_t)pc, di) || !di->dli_fbase)
        return NULL;
    return object_for(s, (uint64_t)(uintptr_t)di->dli_fbase, di->dli_fname, di->dli_fname, NULL, 0, UINT64_MAX);
}

static entry *resolve(sw_symbols *s, uint64_t pc, int by_fp)
{
    Dl_info di;
    object *o = object_at(s, pc, &di);
    if (o && pc >= o->bias) {
        const fsym *f = find_sym(o->syms, o->n, pc - o->bias);
        if (f)
            return intern(s, f->start + o->bias, o->names + f->name, o->path, by_fp, o);
    }
    const char *dl_path = di.dli_fname ? di.dli_fname : "";
    if (di.dli_sname && di.dli_saddr)
        return intern(s, (uint64_t)(uintptr_t)di.dli_saddr, di.dli_sname, dl_path, by_fp, o);
    if (!o && !di.dli_fbase)
        return &s->unknown;
    /* In an object, but no symbol covers it: one "??" per object. */
    s->misses++;
    return s->remote ? intern(s, o->bias, "??", o->path, by_fp, o)
                     : intern(s, (uint64_t)(uintptr_t)di.dli_fbase, "??", dl_path, by_fp, o);
}

/* The file and line of code address addr in object o, from its line
 * tables (or its separate debug file's), read once per object. */
static int object_line(object *o, uint64_t addr, const char **file, uint32_t *line)
{
    if (!o->lines_read && o->open_path[0]) {   /* once per object: a file without debug information has none */
        o->lines_read = 1;
        sw_elf *e, *debug;
        char err[256];
        if (sw_elf_open(o->open_path, &e, err, sizeof err) == SW_OK) {
            if (sw_elf_lines(e, &o->lines, err, sizeof err) != SW_OK) {
                o->lines = NULL;   /* stripped: its separate debug file's */
                if ((debug = debug_file(e, o->open_path, o->root)) &&
                    sw_elf_lines(debug, &o->lines, err, sizeof err) != SW_OK)
                    o->lines = NULL;
                sw_elf_free(debug);
            }
            sw_elf_free(e);
        }
    }
    if (!o->lines || addr < o->bias)
        return SW_EARG;
    return sw_dwarf_lines_find(o->lines, addr - o->bias, file, line);
}

int sw_symbols_source(sw_symbols *s, uint64_t addr, const char **file, uint32_t *line)
{
    Dl_info di;
    object *o = object_at(s, addr, &di);
    return o && o->path[0] ? object_line(o, addr, file, line) : SW_EARG;
}

sw_sample_code *sw_symbols_lookup(sw_symbols *s, uint64_t pc, int *is_eval)
{
    return sw_symbols_lookup_line(s, pc, 0, is_eval, NULL);
}

sw_sample_code *sw_symbols_lookup_marked(sw_symbols *s, uint64_t pc, int by_fp, int *is_eval)
{
    return sw_symbols_lookup_line(s, pc, by_fp, is_eval, NULL);
}

sw_sample_code *sw_symbols_lookup_line(sw_symbols *s, uint64_t pc, int by_fp, int *is_eval, int32_t *line)
{
    s->lookups++;
    by_fp = !!by_fp;
    uint64_t key = pc ^ (uint64_t)by_fp << 63;   /* (user addresses leave the top bit 0) */
    uint64_t h = sw_hash_u64(key);
    uint32_t pos;
    for (uint32_t i = sw_hashtab_first(&s->pc_index, h, &pos); i != SW_HT_NONE;
         i = sw_hashtab_next(&s->pc_index, h, &pos)) {
        if (s->pcs[i].pc == key) {
            *is_eval = s->pcs[i].e->is_eval;
            if (line)
                *line = s->pcs[i].line;
            return &s->pcs[i].e->info;
        }
    }
    entry *e = resolve(s, pc, by_fp);
    if (!e)
        return NULL;
    if (e == &s->unknown)
        s->misses++;
    /* The line of the address itself, where its symbol has lines. */
    const char *file;
    uint32_t at = 0;
    if (!(e->info.library && sw_symbols_source(s, pc, &file, &at) == SW_OK && at <= INT32_MAX))
        at = 0;
    int rc;
    s->pcs[s->npcs < PC_CACHE ? s->npcs : 0] = (pc_ent){key, e, (int32_t)at};
    if (s->npcs < PC_CACHE) {
        rc = sw_hashtab_add_after(&s->pc_index, h, s->npcs, pos);   /* reserved: cannot fail */
    } else {   /* full: forget every address (the symbols stay) */
        s->npcs = 0;
        sw_hashtab_clear(&s->pc_index);
        rc = sw_hashtab_add(&s->pc_index, h, 0);
    }
    if (rc == SW_OK)
        s->npcs++;
    *is_eval = e->is_eval;
    if (line)
        *line = (int32_t)at;
    return &e->info;
}

void sw_symbols_sources_later(sw_symbols *s, sw_symbols_source_fn fn, void *ud)
{
    for (size_t i = 0; i < s->nentries; i++) {
        entry *e = s->entries[i];
        const char *file;
        uint32_t line;
        Dl_info di;
        if (e->info.library || strncmp(e->info.name, "??", 2) == 0)
            continue;
        object *o = object_at(s, e->info.addr, &di);
        if (o && object_line(o, e->info.addr, &file, &line) == SW_OK && line && line <= INT32_MAX)
            fn(ud, &e->info, file, line);
    }
}

void sw_symbols_counts(const sw_symbols *s, uint64_t *objects, uint64_t *lookups, uint64_t *unknown)
{
    *objects = s->nobjs;
    *lookups = s->lookups;
    *unknown = s->misses;
}
