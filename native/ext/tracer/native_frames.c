/*
 * native_frames.c - the tracer's side of the native-function runtime
 * (native_frames.h). Each thread gets an sw_cyg_thread (freed when the
 * thread exits, reset at each session it attaches to) pointing at its
 * buffer, the session's clock and generation, its busy mark and the
 * callbacks below, and hands it to libstackwatch_cyg.so, which writes the
 * native frames' events itself. The runtime is loaded (RTLD_LOCAL) from
 * _native's own folder, where the package installs it, the first time a
 * thread attaches (without it no native function is recorded); then the
 * stubs of every object already loaded (an extension used before) are
 * given its entry points (cyg/stubs.c).
 *
 * define(), called by the runtime with the GIL held (it records nothing
 * without it) the first time a thread meets a function: one code id per
 * function address and session, from the session's ids as every code's,
 * of kind SW_CODE_NATIVE, named after the symbol covering the address
 * ("name [native]", .symtab included: static functions too; C++ names
 * demangled) by the profiler's symbol reader (procmem/symbols.c), with the source file and
 * line of its first instruction where the object has DWARF line tables
 * (.debug_line, as addr2line gives them), else the object's path as file
 * and line 0. A
 * function the session's --native-include / --native-exclude leave out
 * gets no id: its frames are not recorded (its callees' are).
 */
#include "native_frames.h"

#include "ext/dispatch/dispatch.h"
#include "ext/dispatch/lttng_events.h"
#include "ext/shared/globs.h"
#include "ext/shared/hookerr.h"
#include "ext/tracer/session.h"

#include "base/base.h"
#include "cyg/cyg.h"
#include "procmem/procmem.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sw_symbols *symbols;
static uint64_t table_gen;      /* the session the table below is of */
static uint64_t *addrs;         /* function addresses, by position */
static uint32_t *ids;
/* Where each function is (its code's name, file, line), for `run --lttng`. */
typedef struct fn_where {
    char *name, *file;
    uint32_t line;
} fn_where;
static fn_where *wheres;
static uint32_t n, cap;
static sw_hashtab index_;       /* hash of an address -> its position */
static char **include, **exclude;   /* the session's filters, or NULL */

int sw_native_frames_filters(PyObject *inc, PyObject *exc)
{
    char **i = NULL, **e = NULL;
    if (sw_globs_copy(inc, "native_include", &i) < 0)
        return -1;
    if (sw_globs_copy(exc, "native_exclude", &e) < 0) {
        sw_globs_free(i);
        return -1;
    }
    sw_globs_free(include);
    sw_globs_free(exclude);
    include = i;
    exclude = e;
    return 0;
}

/* Whether the filters keep the function named name ("symbol [native]",
 * as shown: a C++ symbol demangled) in the object at path. */
static int kept(const char *name, const char *path)
{
    if (!include && !exclude)
        return 1;
    char symbol[512];
    const char *cut = strstr(name, " [native]");
    snprintf(symbol, sizeof symbol, "%.*s", cut ? (int)(cut - name) : (int)strlen(name), name);
    const char *base = strrchr(path, '/');
    const char *names[] = {symbol, base ? base + 1 : path, path};
    return sw_globs_keep(include, exclude, names, 3);
}

static void table_reset(void)
{
    sw_hashtab_free(&index_);
    for (uint32_t i = 0; i < n; i++) {
        free(wheres[i].name);
        free(wheres[i].file);
    }
    free(addrs);
    free(ids);
    free(wheres);
    addrs = NULL;
    ids = NULL;
    wheres = NULL;
    n = cap = 0;
    sw_symbols_free(symbols);
    symbols = NULL;
}

static uint32_t define(void *fn)
{
    if (!sw_S.gen)
        return SW_CYG_SKIP;
    if (table_gen != sw_S.gen) {
        table_reset();
        table_gen = sw_S.gen;
    }
    uint64_t key = (uint64_t)(uintptr_t)fn;
    uint32_t at = sw_hashtab_get_u64(&index_, addrs, key);
    if (at != SW_HT_NONE)
        return ids[at];
    if (n == cap) {
        uint32_t c = cap ? cap * 2 : 256;
        uint64_t *a = realloc(addrs, c * sizeof *a);
        if (a)
            addrs = a;
        uint32_t *d = a ? realloc(ids, c * sizeof *d) : NULL;
        if (d)
            ids = d;
        fn_where *w = d ? realloc(wheres, c * sizeof *w) : NULL;
        if (!w)
            return SW_CYG_SKIP;
        wheres = w;
        cap = c;
    }
    if (!symbols && !(symbols = sw_symbols_new()))
        return SW_CYG_SKIP;
    int is_eval = 0;
    sw_sample_code *c = sw_symbols_lookup(symbols, key, &is_eval);
    uint32_t id = sw_S.next_code;
    const char *file = c ? c->filename : NULL;
    uint32_t line = 0;
    if (c && sw_symbols_source(symbols, c->addr, &file, &line) != SW_OK) {
        file = c->filename;
        line = 0;
    }
    if (!c || id > SW_ID_MASK || !kept(c->name, c->filename) ||
        sw_writer_define_code(sw_S.w, id, SW_CODE_NATIVE, c->name, c->name, file, line) != 0)
        id = SW_CYG_SKIP;
    else
        sw_S.next_code++;
    addrs[n] = key;
    ids[n] = id;
    wheres[n] = (fn_where){NULL, NULL, line};
    if (id != SW_CYG_SKIP) {
        wheres[n].name = strdup(c->name);
        wheres[n].file = file ? strdup(file) : NULL;
    }
    if (sw_hashtab_add(&index_, sw_hash_u64(key), n) == 0)
        n++;
    else {
        free(wheres[n].name);
        free(wheres[n].file);
    }
    return id;
}

/* The runtime's emit (cyg.h), GIL held: a recorded entry or exit of fn
 * to LTTng-UST, named as the trace names it. */
static void emit(int exit, void *fn)
{
    uint32_t at = sw_hashtab_get_u64(&index_, addrs, (uint64_t)(uintptr_t)fn);
    if (at != SW_HT_NONE)
        sw_lttng_emit_native(exit, wheres[at].name, wheres[at].file, (int)wheres[at].line, fn);
}

typedef void (*set_thread_fn)(sw_cyg_thread *);

/* The paths of the loaded objects (dl_iterate_phdr's callback). */
typedef struct paths {
    char **p;
    size_t n, cap;
} paths;

static int note_path(struct dl_phdr_info *info, size_t size, void *ud)
{
    (void)size;
    paths *ps = ud;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 64;
        char **p = realloc(ps->p, cap * sizeof *p);
        if (!p)
            return 1;
        ps->p = p;
        ps->cap = cap;
    }
    if ((ps->p[ps->n] = strdup(info->dlpi_name)))
        ps->n++;
    return 0;
}

/* Gives the runtime's entry points to the stubs of every loaded object
 * (their stackwatch_cyg_slots; most objects have none). */
static void fill_slots(void *runtime_handle)
{
    sw_cyg_fn en = (sw_cyg_fn)(uintptr_t)dlsym(runtime_handle, "stackwatch_cyg_enter");
    sw_cyg_fn ex = (sw_cyg_fn)(uintptr_t)dlsym(runtime_handle, "stackwatch_cyg_exit");
    if (!en || !ex)
        return;
    paths ps = {0};
    dl_iterate_phdr(note_path, &ps);   /* (no dlopen while it holds the loader's lock) */
    for (size_t i = 0; i < ps.n; i++) {
        void *h = dlopen(ps.p[i], RTLD_LAZY | RTLD_NOLOAD);
        sw_cyg_slots *s = h ? dlsym(h, "stackwatch_cyg_slots") : NULL;
        if (s) {
            __atomic_store_n(&s->exit, ex, __ATOMIC_RELEASE);
            __atomic_store_n(&s->enter, en, __ATOMIC_RELEASE);
        }
        if (h)
            dlclose(h);
        free(ps.p[i]);
    }
    free(ps.p);
}

/* The runtime's stackwatch_cyg_set_thread, loading the library the first
 * time (NULL: not there). */
static set_thread_fn runtime(void)
{
    static int tried;
    static set_thread_fn set;
    if (tried)
        return set;
    tried = 1;
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)(uintptr_t)sw_native_frames_attach, &info) || !info.dli_fname)
        return NULL;
    const char *slash = strrchr(info.dli_fname, '/');
    int dir = slash ? (int)(slash - info.dli_fname) : 0;
    if (snprintf(path, sizeof path, "%.*s%slibstackwatch_cyg.so", dir, info.dli_fname, slash ? "/" : "") >=
        (int)sizeof path)
        return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h)
        set = (set_thread_fn)(uintptr_t)dlsym(h, "stackwatch_cyg_set_thread");
    if (set)
        fill_slots(h);
    return set;
}

void sw_native_frames_attach(sw_tracer_thread *t)
{
    set_thread_fn set_thread = runtime();
    if (!set_thread)
        return;
    sw_cyg_thread *c = t->cyg;
    if (!c && !(c = t->cyg = calloc(1, sizeof *c))) {
        sw_hook_error("out of memory recording native functions");
        return;
    }
    set_thread(NULL);
    memset(c, 0, sizeof *c);
    c->tb = t->tb;
    c->clock = &sw_S.clock;
    c->live = &sw_S.gen;
    c->gen = sw_S.gen;
    c->busy = &sw_T.calls_off;
    c->current = _PyThreadState_UncheckedGet;
    c->me = PyThreadState_Get();
    c->make_room = sw_tbuf_make_room;
    c->define = define;
    c->emit_on = &sw_D.lttng;
    c->emit = emit;
    set_thread(c);
}

void sw_native_frames_detach(sw_tracer_thread *t)
{
    if (!t->cyg)
        return;   /* (else the runtime was loaded: runtime() is not loading it now) */
    set_thread_fn set_thread = runtime();
    set_thread(NULL);
    free(t->cyg);
    t->cyg = NULL;
}
