/*
 * asynciotree.c - the asyncio tasks of a target, read from its memory
 * (see asynciotree.h).
 *
 * A suspended coroutine's frame keeps what it awaits on top of its value
 * stack (CPython's _PyGen_yf reads the same slot): following that slot
 * from coroutine to coroutine gives a task's coroutine stack, outermost
 * first, down to the future its innermost coroutine awaits.
 */
#include "asynciotree.h"
#include "asyncio_layout.h"
#include "base/base.h"
#include "pyobj.h"
#include "pystr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STACK_SLOTS (1u << 20)   /* a value stack deeper than this is not believed */
#define MAX_SET_SLOTS (1u << 21)     /* nor a set of more slots (32 MiB of entries; a set of
                                        SW_AIO_MAX_TASKS tasks has 2^18) */

#define TYPE_CACHE 64u       /* type names remembered (by address, direct-mapped) */
#define TYPE_NAME_KEPT 64u   /* ... when this short (those compared here are) */

typedef struct reader {
    sw_mem *m;
    const sw_py_layout *l;
    sw_asyncio_layout a;
    sw_codecache *codes;
    uint64_t task_type, future_type, coro_type;   /* type objects of the target */
    uint64_t loop, loop_thread;                   /* the last loop asked about */
    uint64_t *tasks;                              /* found in the sets */
    size_t ntasks;
    uint64_t subclass;                            /* the last type found a subclass of Task */
    struct {
        uint64_t type;
        char name[TYPE_NAME_KEPT];
    } names[TYPE_CACHE];                          /* tp_name of types read, by address */
    char s[SW_STR_BUF];                           /* a str read */
} reader;

static uint64_t u64_at(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int32_t i32_at(const unsigned char *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The tp_name of the type object at t into tn (cap bytes), read once per
 * type for the short names (the callers' checks make a read of an object's
 * type and a compare, not three reads). 0, or an error. */
static int type_name(reader *r, uint64_t t, char *tn, size_t cap)
{
    size_t k = (size_t)(sw_hash_u64(t) % TYPE_CACHE);
    if (t && r->names[k].type == t) {
        snprintf(tn, cap, "%s", r->names[k].name);
        return SW_OK;
    }
    int rc = sw_pytype_name(r->m, r->l, t, tn, cap);
    if (rc == SW_OK && t && strlen(tn) < TYPE_NAME_KEPT) {
        r->names[k].type = t;
        memcpy(r->names[k].name, tn, strlen(tn) + 1);
    }
    return rc;
}

/* The tp_name of obj's type is name: 1, else 0. */
static int type_named(reader *r, uint64_t obj, const char *name, uint64_t *type)
{
    char tn[SW_AIO_NAME_MAX];
    uint64_t t;
    if (sw_pyobj_type(r->m, r->l, obj, &t) != SW_OK || type_name(r, t, tn, sizeof tn) != SW_OK)
        return 0;
    if (type)
        *type = t;
    return strcmp(tn, name) == 0;
}

/* An attribute of a Python subclass of Future (gather's): in the dict
 * Future keeps at fut_dict, or a managed one. */
static int future_attr(reader *r, uint64_t obj, const char *name, uint64_t *value)
{
    uint64_t dict;
    if (r->a.fut_dict == SW_NO_OFFSET)
        return sw_pyobj_attr(r->m, r->l, obj, name, value);
    if (sw_mem_read_u64(r->m, obj + r->a.fut_dict, &dict) != SW_OK)
        return SW_EIO;
    return dict ? sw_pydict_get(r->m, r->l, dict, name, value) : SW_EARG;
}

/* The type named `name` in the module dict and its tp_basicsize: it must
 * be the table's (want_name, want_size). */
static int check_type(reader *r, uint64_t dict, const char *name, const char *want_name, uint32_t want_size,
                      uint64_t *type, char *err, size_t errlen)
{
    char tn[SW_AIO_NAME_MAX];
    uint64_t size;
    if (sw_pydict_get(r->m, r->l, dict, name, type) != SW_OK ||
        sw_pytype_name(r->m, r->l, *type, tn, sizeof tn) != SW_OK ||
        sw_mem_read_u64(r->m, *type + r->l->type_basicsize, &size) != SW_OK) {
        snprintf(err, errlen, "_asyncio.%s cannot be read", name);
        return SW_EIO;
    }
    if (strcmp(tn, want_name) != 0 || size != want_size) {
        uint32_t v = r->a.version_hex;
        snprintf(err, errlen, "asyncio's %s of this Python is %s of %llu bytes, not %s of %u as in %u.%u.%u's table",
                 name, tn, (unsigned long long)size, want_name, want_size, v >> 24, (v >> 16) & 0xFF,
                 (v >> 8) & 0xFF);
        return SW_EARG;
    }
    return SW_OK;
}

#define MAX_BASES 32   /* base classes followed up from a type */

/* The object at obj is a task: its type is _asyncio.Task or a subclass. */
static int is_task(reader *r, uint64_t obj)
{
    uint64_t type;
    if (!obj || sw_pyobj_type(r->m, r->l, obj, &type) != SW_OK || !type)
        return 0;
    if (type == r->task_type || type == r->subclass)
        return 1;
    uint64_t base = type;
    for (int i = 0; i < MAX_BASES && base; i++) {
        if (sw_mem_read_u64(r->m, base + r->a.type_base, &base) != SW_OK)
            return 0;
        if (base == r->task_type) {
            r->subclass = type;
            return 1;
        }
    }
    return 0;
}

/* Adds the task (or, weak, the object of the weakref) in a set entry. */
static int add_from_set(reader *r, uint64_t set, int weak)
{
    unsigned char h[SW_LAYOUT_MAX_READ];
    uint32_t need = (r->a.set_mask > r->a.set_table ? r->a.set_mask : r->a.set_table) + 8u;
    if (sw_mem_read(r->m, set, h, need) != SW_OK)
        return SW_EIO;
    uint64_t mask = u64_at(h + r->a.set_mask), table = u64_at(h + r->a.set_table);
    if (mask >= MAX_SET_SLOTS || (mask & (mask + 1)) || !table)
        return SW_EARG;
    size_t n = (size_t)mask + 1, esize = r->a.set_entry_size;
    unsigned char *e = malloc(n * esize);
    if (!e)
        return SW_ENOMEM;
    if (sw_mem_read(r->m, table, e, n * esize) != SW_OK) {
        free(e);
        return SW_EIO;
    }
    for (size_t i = 0; i < n && r->ntasks < SW_AIO_MAX_TASKS; i++) {
        uint64_t key = u64_at(e + i * esize + r->a.set_entry_key), task = key;
        if (!key)
            continue;
        if (weak && (!type_named(r, key, r->a.weakref_type, NULL) ||
                     sw_mem_read_u64(r->m, key + r->a.weakref_object, &task) != SW_OK))
            continue;   /* the dummy of a removed entry, or a dead reference */
        if (is_task(r, task))
            r->tasks[r->ntasks++] = task;   /* (else a removed entry's dummy) */
    }
    free(e);
    return SW_OK;
}

/* The tasks of asyncio.tasks' sets into r->tasks, sorted, each once. */
static int find_tasks(reader *r, uint64_t tasks_dict, char *err, size_t errlen)
{
    static const char *const names[] = {"_all_tasks", "_scheduled_tasks", "_eager_tasks"};
    int any = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint64_t set, data;
        if (sw_pydict_get(r->m, r->l, tasks_dict, names[i], &set) != SW_OK)
            continue;
        int rc, weak = !type_named(r, set, r->a.set_type, NULL);
        if (weak)   /* a WeakSet: its set of weak references, `data` */
            rc = sw_pyobj_attr(r->m, r->l, set, "data", &data) == SW_OK && type_named(r, data, r->a.set_type, NULL)
                     ? add_from_set(r, data, 1)
                     : SW_EARG;
        else
            rc = add_from_set(r, set, 0);
        if (rc != SW_OK) {
            snprintf(err, errlen, "asyncio.tasks.%s cannot be read", names[i]);
            return rc;
        }
        any = 1;
    }
    if (!any) {
        snprintf(err, errlen, "asyncio.tasks has none of the task sets this reader knows");
        return SW_EARG;
    }
    return SW_OK;
}

/* The name of the task: its str, or an int n (a name not asked for yet,
 * 3.12+) as get_name() makes it: "Task-n". 0 or SW_EARG. */
static int read_name(reader *r, uint64_t name, char *out, size_t cap)
{
    uint64_t n;
    int negative;
    if (sw_pystr_read(r->m, r->l, name, r->s) >= 0)
        sw_utf8_copy_cut(out, cap, r->s);
    else if (sw_pylong_read(r->m, r->l, name, &n, &negative) == SW_OK && !negative)
        snprintf(out, cap, "Task-%llu", (unsigned long long)n);
    else
        return SW_EARG;   /* neither: not read whole (or the table does not fit) */
    return SW_OK;
}

/* The frame of the coroutine: its code and line, and what it awaits (the
 * top of its value stack). 0, or an error. */
static int read_coro(reader *r, uint64_t coro, const sw_sample_code **code, int32_t *line, uint64_t *awaited,
                     int *running)
{
    const sw_py_layout *l = r->l;
    unsigned char f[SW_LAYOUT_MAX_READ], c[SW_LAYOUT_MAX_READ];
    uint64_t frame, base;
    if (r->a.coro_frame_kind == SW_CORO_FRAME_POINTER) {
        if (sw_mem_read_u64(r->m, coro + r->a.coro_frame, &frame) != SW_OK || !frame)
            return SW_EIO;
        base = frame;
    } else {
        frame = coro + r->a.coro_localsplus - l->frame_localsplus;
        base = coro;
    }
    if (sw_mem_read(r->m, frame, f, l->frame_size) != SW_OK)
        return SW_EIO;
    if (l->frame_owner != SW_NO_OFFSET && f[l->frame_owner] != l->owner_generator)
        return SW_EARG;   /* not a coroutine's own frame: the table does not fit */
    /* 3.11+: only a suspended coroutine's stack top is what it awaits (a
     * running one's frames are on its thread's stack); the state byte is
     * negative while created or suspended, FRAME_EXECUTING (0) and up after */
    int suspended = 1;
    *running = 0;
    if (l->gen_state_back != SW_NO_OFFSET && l->frame_owner != SW_NO_OFFSET) {
        int8_t state;
        if (sw_mem_read(r->m, frame - l->gen_state_back, &state, 1) != SW_OK)
            return SW_EIO;
        suspended = state < (int8_t)(uint8_t)l->gen_executing;
        *running = state == (int8_t)(uint8_t)l->gen_executing;
    } else if (l->frame_state != SW_NO_OFFSET) {
        /* 3.9/3.10: the frame object's f_executing / f_state (the stack
         * top below is then empty, and not followed) */
        *running = f[l->frame_state] <= 7 && (l->frame_running & (1u << f[l->frame_state]));
    }
    uint64_t code_addr = u64_at(f + l->frame_code);
    if (!code_addr || sw_mem_read(r->m, code_addr, c, l->code_size) != SW_OK)
        return SW_EIO;
    sw_sample_code *info = sw_codecache_get(r->codes, r->m, l, code_addr, c, 0);
    if (!info)
        return SW_EARG;
    uint64_t instr = l->frame_lasti != SW_NO_OFFSET ? (uint64_t)(uint32_t)i32_at(f + l->frame_lasti)
                                                    : u64_at(f + l->frame_instr);
    *code = info;
    *line = sw_codecache_line(r->codes, info, r->m, l, instr);
    /* Strings (and line table) just read: their code object must be seen
     * alive and unchanged after them (codecache.h). */
    if (!sw_codecache_settled(info) &&
        (sw_mem_read(r->m, code_addr, c, l->code_size) != SW_OK || !sw_codecache_settle(r->codes, l, info, c)))
        return SW_EIO;
    /* the top slot of the value stack */
    unsigned char s[16];
    uint64_t slot;
    *awaited = 0;
    if (!suspended)
        return SW_OK;
    if (sw_mem_read(r->m, base + r->a.frame_stack_top, s, 8) != SW_OK)
        return SW_EIO;
    if (r->a.frame_stack_kind == SW_STACK_POINTER) {
        if (!u64_at(s))
            return SW_OK;   /* 3.9: no stack pointer while the frame runs */
        slot = u64_at(s) - 8;
    } else {
        int32_t used = i32_at(s);
        uint64_t from = base + r->a.frame_stack_base;
        if (r->a.frame_stack_kind == SW_STACK_DEPTH_OVER_BASE && sw_mem_read_u64(r->m, from, &from) != SW_OK)
            return SW_EIO;
        if (used <= 0 || (uint32_t)used > MAX_STACK_SLOTS)
            return SW_OK;   /* empty: not started, or running (3.10) */
        slot = from + 8u * (uint32_t)(used - 1);
    }
    if (sw_mem_read_u64(r->m, slot, awaited) != SW_OK)
        *awaited = 0;
    return SW_OK;
}

/* The task's coroutine stack, innermost first. */
static int read_stack(reader *r, uint64_t coro, sw_aio_task *t)
{
    const sw_sample_code *codes[SW_AIO_MAX_STACK];
    int32_t lines[SW_AIO_MAX_STACK];
    uint32_t n = 0;
    t->running = 0;
    while (coro && n < SW_AIO_MAX_STACK) {
        uint64_t type, next = 0;
        if (sw_pyobj_type(r->m, r->l, coro, &type) != SW_OK)
            return SW_EIO;
        if (type != r->coro_type) {
            if (r->coro_type || !type_named(r, coro, r->a.coroutine_type, NULL))
                break;   /* not a coroutine: what the innermost one awaits */
            uint64_t size;
            if (sw_mem_read_u64(r->m, type + r->l->type_basicsize, &size) != SW_OK || size != r->a.coro_size)
                return SW_EARG;
            r->coro_type = type;
        }
        int running, rc = read_coro(r, coro, &codes[n], &lines[n], &next, &running);
        if (rc != SW_OK)
            return rc;
        t->running |= running;
        n++;
        coro = next;
    }
    t->depth = n;
    for (uint32_t i = 0; i < n; i++) {
        t->codes[i] = codes[n - 1 - i];
        t->lines[i] = lines[n - 1 - i];
    }
    return SW_OK;
}

/* gather's future: the children of its list _children. */
static void read_children(reader *r, uint64_t gathering, sw_aio_task *t)
{
    unsigned char h[64];
    uint64_t list;
    t->nchildren = 0;
    if (future_attr(r, gathering, "_children", &list) != SW_OK || !type_named(r, list, r->a.list_type, NULL) ||
        sw_mem_read(r->m, list, h, r->a.list_items + 8u) != SW_OK)
        return;
    uint64_t n = u64_at(h + r->a.list_size), items = u64_at(h + r->a.list_items);
    if (n > SW_AIO_MAX_CHILDREN)
        n = SW_AIO_MAX_CHILDREN;
    if (n && sw_mem_read(r->m, items, t->children, n * 8) == SW_OK)
        t->nchildren = (uint32_t)n;
}

/* The task of the TaskGroup whose _on_task_done is the task's first done
 * callback, or 0. */
static uint64_t group_parent(reader *r, const unsigned char *task)
{
    uint64_t cb = u64_at(task + r->a.fut_callback0), group, parent;
    if (!cb || !type_named(r, cb, r->a.method_type, NULL) ||
        sw_mem_read_u64(r->m, cb + r->a.method_self, &group) != SW_OK || !type_named(r, group, "TaskGroup", NULL) ||
        sw_pyobj_attr(r->m, r->l, group, "_parent_task", &parent) != SW_OK)
        return 0;
    return is_task(r, parent) ? parent : 0;
}

#define MAX_CALLBACKS 16u   /* done callbacks of a task looked into */
#define MAX_HELD 8u         /* items of a partial's args or a closure looked at */

/* Up to max items of the tuple at tuple into items; their number (0 if
 * it is not a tuple or cannot be read). */
static uint32_t tuple_items(reader *r, uint64_t tuple, uint64_t *items, uint32_t max)
{
    uint64_t n;
    if (!tuple || !type_named(r, tuple, r->a.tuple_type, NULL) ||
        sw_mem_read_u64(r->m, tuple + r->a.tuple_size, &n) != SW_OK)
        return 0;
    if (n > max)
        n = max;
    return n && sw_mem_read(r->m, tuple + r->a.tuple_items, items, n * 8) == SW_OK ? (uint32_t)n : 0;
}

/* Adds to t->refs what the done callback cb holds: a functools.partial's
 * arguments (wait_for's partial(_release_waiter, waiter)), a function's
 * closure cells (wait's _on_completion, shield's _inner_done_callback). */
static void callback_refs(reader *r, uint64_t cb, sw_aio_task *t)
{
    char tn[SW_AIO_NAME_MAX];
    uint64_t type, held[MAX_HELD], x;
    uint32_t n = 0;
    if (!cb || sw_pyobj_type(r->m, r->l, cb, &type) != SW_OK || type_name(r, type, tn, sizeof tn) != SW_OK)
        return;
    if (strcmp(tn, r->a.partial_type) == 0) {
        if (sw_mem_read_u64(r->m, cb + r->a.partial_args, &x) == SW_OK)
            n = tuple_items(r, x, held, MAX_HELD);
    } else if (strcmp(tn, r->a.function_type) == 0) {
        if (sw_mem_read_u64(r->m, cb + r->a.function_closure, &x) == SW_OK)
            n = tuple_items(r, x, held, MAX_HELD);
        uint32_t k = 0;
        for (uint32_t i = 0; i < n; i++)   /* the cells' objects */
            if (type_named(r, held[i], r->a.cell_type, NULL) &&
                sw_mem_read_u64(r->m, held[i] + r->a.cell_ref, &x) == SW_OK && x)
                held[k++] = x;
        n = k;
    }
    for (uint32_t i = 0; i < n && t->nrefs < SW_AIO_MAX_REFS; i++)
        if (held[i])
            t->refs[t->nrefs++] = held[i];
}

/* The objects the task's done callbacks hold into t->refs: its first
 * callback's, then those of the (callback, context) tuples of its list. */
static void read_refs(reader *r, const unsigned char *task, sw_aio_task *t)
{
    t->nrefs = 0;
    callback_refs(r, u64_at(task + r->a.fut_callback0), t);
    uint64_t list = u64_at(task + r->a.fut_callbacks), n, at, items[MAX_CALLBACKS], pair[2];
    if (!list || !type_named(r, list, r->a.list_type, NULL) ||
        sw_mem_read_u64(r->m, list + r->a.list_size, &n) != SW_OK ||
        sw_mem_read_u64(r->m, list + r->a.list_items, &at) != SW_OK)
        return;
    if (n > MAX_CALLBACKS)
        n = MAX_CALLBACKS;
    if (!n || sw_mem_read(r->m, at, items, n * 8) != SW_OK)
        return;
    for (uint64_t i = 0; i < n; i++)
        if (tuple_items(r, items[i], pair, 2) >= 1)
            callback_refs(r, pair[0], t);
}

/* The thread running the loop (its _thread_id), 0 if none. */
static uint64_t loop_thread(reader *r, uint64_t loop)
{
    if (loop == r->loop)
        return r->loop_thread;
    uint64_t id, ident = 0;
    int negative;
    if (sw_pyobj_attr(r->m, r->l, loop, "_thread_id", &id) != SW_OK ||
        sw_pylong_read(r->m, r->l, id, &ident, &negative) != SW_OK || negative)
        ident = 0;   /* None: not running */
    r->loop = loop;
    r->loop_thread = ident;
    return ident;
}

static int read_task(reader *r, uint64_t addr, sw_aio_task *t, int *pending)
{
    unsigned char h[SW_LAYOUT_MAX_READ];
    if (sw_mem_read(r->m, addr, h, r->a.task_size) != SW_OK)
        return SW_EIO;
    *pending = i32_at(h + r->a.fut_state) == (int32_t)r->a.fut_state_pending;
    if (!*pending)
        return SW_OK;
    t->addr = addr;
    t->loop = u64_at(h + r->a.fut_loop);
    t->loop_thread = loop_thread(r, t->loop);
    int rc = read_name(r, u64_at(h + r->a.task_name), t->name, sizeof t->name);
    if (rc == SW_OK)
        rc = read_stack(r, u64_at(h + r->a.task_coro), t);
    if (rc != SW_OK)
        return rc;
    t->waiter = u64_at(h + r->a.task_fut_waiter);
    t->waiter_type[0] = 0;
    t->nchildren = 0;
    t->awaits = SW_AIO_AWAITS_NOTHING;
    uint64_t wtype;
    if (t->waiter && sw_pyobj_type(r->m, r->l, t->waiter, &wtype) == SW_OK) {
        type_name(r, wtype, t->waiter_type, sizeof t->waiter_type);
        if (is_task(r, t->waiter)) {
            t->awaits = SW_AIO_AWAITS_TASK;
        } else if (strcmp(t->waiter_type, "_GatheringFuture") == 0) {
            t->awaits = SW_AIO_AWAITS_GATHER;
            read_children(r, t->waiter, t);
        } else {
            t->awaits = SW_AIO_AWAITS_FUTURE;
        }
    }
    t->group_parent = group_parent(r, h);
    read_refs(r, h, t);
    return SW_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* sys.modules[name]'s dict into *dict: 0, or SW_EARG (not imported). */
static int module_dict(reader *r, uint64_t interp, const char *name, uint64_t *dict)
{
    uint64_t modules, mod;
    if (sw_mem_read_u64(r->m, interp + r->l->interp_modules, &modules) != SW_OK)
        return SW_EIO;
    int rc = sw_pydict_get(r->m, r->l, modules, name, &mod);
    if (rc != SW_OK)
        return rc;
    return sw_mem_read_u64(r->m, mod + r->l->module_dict, dict);
}

int sw_aio_read(sw_mem *m, const sw_py_layout *target_layout, uint64_t interp, sw_codecache *codes,
                sw_aio_task_fn fn, void *ud, sw_aio_stats *stats, char *err, size_t errlen)
{
    sw_py_layout objects = *target_layout, *l = &objects;
    reader r = {.m = m, .l = l, .codes = codes};
    memset(stats, 0, sizeof *stats);
    uint32_t v = l->version_hex;
    if (sw_asyncio_layout_known(v, &r.a) != SW_OK) {
        snprintf(err, errlen, "asyncio tasks of Python %u.%u are not known to this stackwatch (3.9-3.13)", v >> 24,
                 (v >> 16) & 0xFF);
        return SW_EARG;
    }
    sw_asyncio_bind_objects(&r.a, l);
    int rc = sw_pyobj_usable(l, err, errlen);
    if (rc != SW_OK)
        return rc;
    if (r.a.task_size > SW_LAYOUT_MAX_READ || r.a.fut_state + 4 > r.a.task_size ||
        r.a.task_fut_waiter + 8 > r.a.task_size || r.a.task_coro + 8 > r.a.task_size ||
        r.a.task_name + 8 > r.a.task_size || r.a.fut_loop + 8 > r.a.task_size ||
        r.a.fut_callback0 + 8 > r.a.task_size || r.a.fut_callbacks + 8 > r.a.task_size ||
        r.a.set_entry_key + 8 > r.a.set_entry_size ||
        r.a.type_base + 8 > SW_LAYOUT_MAX_READ ||
        r.a.list_items + 8 > 64 || r.a.list_size + 8 > 64 || r.a.frame_stack_top + 8 > SW_LAYOUT_MAX_READ ||
        (r.a.coro_frame_kind == SW_CORO_FRAME_EMBEDDED && r.a.coro_localsplus < l->frame_localsplus)) {
        snprintf(err, errlen, "the asyncio table of Python %u.%u is inconsistent", v >> 24, (v >> 16) & 0xFF);
        return SW_EARG;
    }
    uint64_t tasks_dict, aio_dict;
    if (module_dict(&r, interp, "asyncio.tasks", &tasks_dict) == SW_EARG)
        return 0;   /* asyncio is not imported: no tasks */
    if (module_dict(&r, interp, "_asyncio", &aio_dict) != SW_OK) {
        snprintf(err, errlen, "the asyncio modules cannot be read (sys.modules, asyncio.tasks or _asyncio)");
        return SW_EIO;
    }
    if ((rc = check_type(&r, aio_dict, "Task", r.a.task_type, r.a.task_size, &r.task_type, err, errlen)) != SW_OK ||
        (rc = check_type(&r, aio_dict, "Future", r.a.future_type, r.a.future_size, &r.future_type, err, errlen)) !=
            SW_OK)
        return rc;
    r.tasks = malloc(SW_AIO_MAX_TASKS * sizeof *r.tasks);
    sw_aio_task *t = malloc(sizeof *t);
    if (!r.tasks || !t) {
        free(r.tasks);
        free(t);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    rc = find_tasks(&r, tasks_dict, err, errlen);
    int given = 0;
    if (rc == SW_OK) {
        qsort(r.tasks, r.ntasks, sizeof *r.tasks, cmp_u64);
        for (size_t i = 0; i < r.ntasks; i++) {
            if (i && r.tasks[i] == r.tasks[i - 1])
                continue;
            stats->found++;
            int pending;
            if (read_task(&r, r.tasks[i], t, &pending) != SW_OK) {
                stats->unreadable++;
                continue;
            }
            if (pending && (given++, fn(ud, t)))
                break;
        }
    }
    free(t);
    free(r.tasks);
    return rc == SW_OK ? given : rc;
}
