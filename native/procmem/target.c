/*
 * target.c - a Python process found and prepared for reading: its maps,
 * the interpreter's ELF file, _PyRuntime, its version (see target.h).
 */
#define _GNU_SOURCE
#include "target.h"
#include "layout_facts.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_MAPS 65536u          /* lines of /proc/PID/maps looked at */
#define MAX_CANDIDATES 8u        /* files that may be the interpreter */

typedef struct mapping {
    uint64_t start, offset;
} mapping;

typedef struct candidate {
    char path[SW_TARGET_PATH_MAX];
    mapping maps[16];            /* its first mappings */
    unsigned nmaps;
} candidate;

static void permission_help(int pid, const char *what, char *err, size_t errlen)
{
    char yama[160] = "";
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int scope = 0;
    if (f) {
        if (fscanf(f, "%d", &scope) == 1 && scope > 0)
            snprintf(yama, sizeof yama, "; Yama's ptrace_scope is %d: 'sysctl kernel.yama.ptrace_scope=0' allows it",
                     scope);
        fclose(f);
    }
    snprintf(err, errlen,
             "permission denied reading process %d (%s): reading a process needs the right to ptrace it: run "
             "stackwatch as the target's user or as root with CAP_SYS_PTRACE (a container: 'docker run "
             "--cap-add=SYS_PTRACE'); a non-dumpable target (setuid, or prctl(PR_SET_DUMPABLE, 0)) needs "
             "CAP_SYS_PTRACE even as root%s",
             pid, what, yama);
}

/* 1 if the basename of path looks like an interpreter's file. */
static int interpreter_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return strncmp(b, "libpython", 9) == 0 || strncmp(b, "python", 6) == 0;
}

/* Adds a mapping of file to the candidates, if its name is an
 * interpreter's. */
static void add_candidate(candidate *c, unsigned *nc, const char *file, uint64_t start, uint64_t offset)
{
    if (!interpreter_name(file) || strlen(file) >= SW_TARGET_PATH_MAX)
        return;
    unsigned k = 0;
    while (k < *nc && strcmp(c[k].path, file) != 0)
        k++;
    if (k == *nc) {
        if (*nc == MAX_CANDIDATES)
            return;
        memset(&c[k], 0, sizeof c[k]);
        snprintf(c[k].path, sizeof c[k].path, "%s", file);
        (*nc)++;
    }
    if (c[k].nmaps < sizeof c[k].maps / sizeof c[k].maps[0])
        c[k].maps[c[k].nmaps++] = (mapping){start, offset};
}

int sw_target_maps_line(char *line, sw_maps_entry *out)
{
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n')
        line[--n] = 0;
    unsigned long long start, end, offset, inode;
    char perms[8];
    int pos = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %*s %llu %n", &start, &end, perms, &offset, &inode, &pos) < 5 || !pos ||
        !line[pos] || end <= start)
        return SW_EARG;
    *out = (sw_maps_entry){start, end, offset, {0}, line + pos};
    memcpy(out->perms, perms, sizeof perms);
    return SW_OK;
}

/* Reads /proc/PID/maps: the files that may hold the interpreter, with
 * their mappings. Returns 0, or an error with why. */
static int read_maps(int pid, candidate *c, unsigned *nc, sw_target_why *why, char *err, size_t errlen)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    FILE *f = fopen(path, "re");
    char line[SW_TARGET_PATH_MAX + 128];
    int e = errno;
    if (f && !fgets(line, sizeof line, f)) {
        e = ferror(f) ? errno : 0;
        fclose(f);
        f = NULL;
        if (e == 0) {
            *why = SW_TARGET_NO_PROCESS;   /* a process that has exited has no mappings */
            snprintf(err, errlen, "process %d has no memory mappings (it has exited, or is a kernel thread)", pid);
            return SW_EIO;
        }
    }
    if (!f) {
        if (e == EACCES || e == EPERM) {
            *why = SW_TARGET_PERMISSION;
            permission_help(pid, "its memory map", err, errlen);
        } else if (e == ENOENT || e == ESRCH) {
            *why = SW_TARGET_NO_PROCESS;
            snprintf(err, errlen, "no process with pid %d", pid);
        } else {
            *why = SW_TARGET_FAILED;
            snprintf(err, errlen, "%s: %s", path, strerror(e));
        }
        return SW_EIO;
    }
    *nc = 0;
    unsigned lines = 0;
    do {
        sw_maps_entry m;
        if (sw_target_maps_line(line, &m) == SW_OK && m.path[0] == '/')
            add_candidate(c, nc, m.path, m.start, m.offset);
    } while (++lines < MAX_MAPS && fgets(line, sizeof line, f));
    fclose(f);
    return SW_OK;
}

/* The load bias of file e mapped as c: a PT_LOAD segment mapped from its
 * page-aligned file offset gives it. 0 if found, else -1. */
static int load_bias(const sw_elf *e, const candidate *c, uint64_t *bias)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    size_t n;
    const sw_elf_segment *seg = sw_elf_segments(e, &n);
    for (size_t i = 0; i < n; i++) {
        for (unsigned k = 0; k < c->nmaps; k++) {
            if (c->maps[k].offset == (seg[i].offset & ~(page - 1))) {
                *bias = c->maps[k].start - (seg[i].vaddr & ~(page - 1));
                return 0;
            }
        }
    }
    return -1;
}

/* Parses "3.10.13" (optionally followed by a1, b2, rc1) into a version
 * hex; 0 if it is not one. */
static uint32_t parse_version(const char *s, size_t len)
{
    unsigned major = 0, minor = 0, micro = 0, serial = 0, level = 0xF;
    char rel[4] = "";
    char buf[32];
    if (len >= sizeof buf)
        return 0;
    memcpy(buf, s, len);
    buf[len] = 0;
    int n = 0;
    if (sscanf(buf, "%u.%u.%u%n", &major, &minor, &micro, &n) != 3 || major != 3 || minor > 99 || micro > 99)
        return 0;
    if (buf[n]) {
        if (sscanf(buf + n, "%3[abrc]%u", rel, &serial) != 2 || serial > 15)
            return 0;
        level = strcmp(rel, "a") == 0 ? 0xA : strcmp(rel, "b") == 0 ? 0xB : strcmp(rel, "rc") == 0 ? 0xC : 0;
        if (!level)
            return 0;
    }
    return (major << 24) | (minor << 16) | (micro << 8) | (level << 4) | serial;
}

/* Before 3.11 no symbol holds the version: the PY_VERSION literal that
 * Py_GetVersion() formats ("3.10.13") is in .rodata, NUL-terminated, but
 * the linker may have merged it into the tail of a longer string (a path
 * ending in it). So: "3.MINOR.MICRO" then NUL, after a byte that is not a
 * digit or a dot, MINOR being the one in the file's name ("python3.10",
 * "libpython3.10.so") when it has one. */
static uint32_t version_from_rodata(const sw_elf *e, const char *path)
{
    const char *b = strrchr(path, '/');
    const char *py = strstr(b ? b + 1 : path, "python3.");
    unsigned want = 0;
    if (py && sscanf(py + 8, "%u", &want) != 1)
        want = 0;
    size_t len;
    const unsigned char *d = sw_elf_section(e, ".rodata", &len, NULL);
    for (size_t i = 1; d && i + 6 < len; i++) {
        if (d[i] != '3' || d[i + 1] != '.' || d[i - 1] == '.' || (d[i - 1] >= '0' && d[i - 1] <= '9'))
            continue;
        size_t j = i;
        while (j < len && j - i < 16 && d[j] && (d[j] == '.' || (d[j] >= '0' && d[j] <= '9') || d[j] == 'a' ||
                                                  d[j] == 'b' || d[j] == 'r' || d[j] == 'c'))
            j++;
        uint32_t v = j < len && d[j] == 0 ? parse_version((const char *)d + i, j - i) : 0;
        if (v && (!want || ((v >> 16) & 0xFF) == want))
            return v;
    }
    return 0;
}

static uint32_t target_version(const sw_elf *e, const char *path)
{
    sw_elf_symbol s;
    uint64_t v;
    if (sw_elf_find_symbol(e, "Py_Version", &s) == SW_OK && sw_elf_read_vaddr(e, s.value, &v, sizeof v) == SW_OK &&
        (v >> 24) == 3)
        return (uint32_t)v;
    return version_from_rodata(e, path);
}

void sw_target_version_str(uint32_t v, char *buf, size_t len)
{
    if (!v) {
        snprintf(buf, len, "an unknown version");
        return;
    }
    unsigned level = (v >> 4) & 0xF;
    const char *rel = level == 0xA ? "a" : level == 0xB ? "b" : level == 0xC ? "rc" : "";
    if (*rel)
        snprintf(buf, len, "%u.%u.%u%s%u", v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF, rel, v & 0xF);
    else
        snprintf(buf, len, "%u.%u.%u", v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF);
}

/* Finds the interpreter among the candidates: the first file that
 * defines _PyRuntime. A live process's files are read through
 * /proc/PID/root; a core's, from the file here that stands for each
 * (coremem.h: the same build id). */
static int find_interpreter(sw_target *t, candidate *c, unsigned nc, sw_target_why *why, char *err, size_t errlen)
{
    char unusable[SW_TARGET_PATH_MAX * 3 + 256] = "";
    for (unsigned k = 0; k < nc; k++) {
        char path[SW_TARGET_PATH_MAX * 2 + 32];
        char why_not[SW_TARGET_PATH_MAX * 3 + 128];
        if (t->core) {
            if (sw_coremem_local(t->core, c[k].path, path, sizeof path, why_not, sizeof why_not) != SW_OK) {
                if (!unusable[0])
                    snprintf(unusable, sizeof unusable, "%s", why_not);
                continue;
            }
        } else {
            snprintf(path, sizeof path, "/proc/%d/root%s", t->pid, c[k].path);
        }
        sw_elf *e;
        int rc = sw_elf_open(path, &e, why_not, sizeof why_not);
        if (rc == SW_EIO && (errno == EACCES || errno == EPERM)) {
            *why = SW_TARGET_PERMISSION;
            permission_help(t->pid, "its files through /proc/PID/root", err, errlen);
            return SW_EIO;
        }
        if (rc == SW_ENOMEM) {
            *why = SW_TARGET_FAILED;
            snprintf(err, errlen, "out of memory");
            return rc;
        }
        sw_elf_symbol s;
        if (rc != SW_OK)
            continue;
        if (sw_elf_find_symbol(e, "_PyRuntime", &s) != SW_OK || load_bias(e, &c[k], &t->bias) != 0) {
            sw_elf_free(e);
            continue;
        }
        t->python = e;
        snprintf(t->python_path, sizeof t->python_path, "%s", c[k].path);
        t->runtime_addr = s.value + t->bias;
        t->version_hex = target_version(e, c[k].path);
        char cookie[8];
        t->debug_offsets = sw_elf_read_vaddr(e, s.value, cookie, sizeof cookie) == SW_OK &&
                           memcmp(cookie, "xdebugpy", 8) == 0;
        return SW_OK;
    }
    *why = SW_TARGET_NOT_PYTHON;
    if (t->core && unusable[0]) {
        *why = SW_TARGET_FAILED;
        snprintf(err, errlen, "%s: name the Python that ran with --exe", unusable);
    } else if (t->core) {
        snprintf(err, errlen, "the core's process (pid %d, %s) is not a Python process (no python executable or "
                 "libpython defining _PyRuntime was mapped in it)", t->pid, sw_core_command(sw_coremem_core(t->core)));
    } else {
        snprintf(err, errlen, "process %d is not a Python process (no python executable or libpython defining "
                 "_PyRuntime is mapped in it)", t->pid);
    }
    return SW_EARG;
}

int sw_target_open_pid(sw_target *t, int pid, sw_target_why *why, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->pid = pid;
    t->mem.fd = -1;
    *why = SW_TARGET_FAILED;
    if (pid <= 0) {
        *why = SW_TARGET_NO_PROCESS;
        snprintf(err, errlen, "no process with pid %d", pid);
        return SW_EARG;
    }
    if (pid == (int)getpid()) {
        *why = SW_TARGET_SELF;
        snprintf(err, errlen, "process %d is stackwatch's own process: give the pid of another Python process",
                 pid);
        return SW_EARG;
    }
    candidate *c = calloc(MAX_CANDIDATES, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    unsigned nc = 0;
    int rc = read_maps(pid, c, &nc, why, err, errlen);
    if (rc == SW_OK)
        rc = find_interpreter(t, c, nc, why, err, errlen);
    free(c);
    if (rc != SW_OK)
        return rc;
    /* One read tells whether the memory itself is readable, and why not. */
    uint64_t word;
    struct iovec local = {&word, sizeof word}, remote = {(void *)(uintptr_t)t->runtime_addr, sizeof word};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof word && (errno == EPERM || errno == EACCES)) {
        *why = SW_TARGET_PERMISSION;
        permission_help(pid, "its memory", err, errlen);
        sw_target_close(t);
        return SW_EIO;
    }
    if (sw_mem_open(&t->mem, pid, t->runtime_addr, sizeof word, err, errlen) != SW_OK) {
        *why = errno == ESRCH ? SW_TARGET_NO_PROCESS : errno == EACCES || errno == EPERM ? SW_TARGET_PERMISSION
                                                                                           : SW_TARGET_FAILED;
        if (*why == SW_TARGET_PERMISSION)
            permission_help(pid, "its memory", err, errlen);
        sw_elf_free(t->python);
        t->python = NULL;
        return SW_EIO;
    }
    return SW_OK;
}

int sw_target_open_core(sw_target *t, const char *core, const char *exe, sw_target_why *why, char *err,
                        size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->mem.fd = -1;
    *why = SW_TARGET_FAILED;
    int rc = sw_coremem_open(core, exe, &t->core, err, errlen);
    if (rc != SW_OK)
        return rc;
    const sw_core *c = sw_coremem_core(t->core);
    t->pid = sw_core_pid(c);
    candidate *cand = calloc(MAX_CANDIDATES, sizeof *cand);
    if (!cand) {
        sw_target_close(t);
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    unsigned nc = 0;
    size_t nf;
    const sw_core_file *f = sw_core_files(c, &nf);
    for (size_t i = 0; i < nf; i++)
        add_candidate(cand, &nc, f[i].path, f[i].start, f[i].offset);
    rc = find_interpreter(t, cand, nc, why, err, errlen);
    free(cand);
    if (rc != SW_OK) {
        sw_target_close(t);
        return rc;
    }
    sw_mem_open_core(&t->mem, t->core);
    uint64_t word;
    if (sw_mem_read(&t->mem, t->runtime_addr, &word, sizeof word) != SW_OK) {
        snprintf(err, errlen, "%s: the core does not hold the interpreter's _PyRuntime (a core cut short?)", core);
        sw_target_close(t);
        return SW_EIO;
    }
    return SW_OK;
}

void sw_target_close(sw_target *t)
{
    sw_mem_close(&t->mem);
    sw_coremem_free(t->core);
    t->core = NULL;
    sw_elf_free(t->python);
    t->python = NULL;
}

int sw_target_symbol(const sw_target *t, const char *name, uint64_t *addr)
{
    sw_elf_symbol s;
    if (!t->python || sw_elf_find_symbol(t->python, name, &s) != SW_OK)
        return SW_EARG;
    *addr = s.value + t->bias;
    return SW_OK;
}

int sw_target_code_counter(const sw_target *t, const sw_py_layout *l, uint64_t interp, uint64_t *addr,
                           uint64_t *interps)
{
    *interps = 0;
    if (t->core)
        return SW_EARG;
    if ((t->version_hex >> 16) == 0x030cu)
        return sw_target_symbol(t, "_Py_next_func_version", addr);
    if (l->interp_code_counter == SW_NO_OFFSET || l->runtime_interp_next_id == SW_NO_OFFSET || !interp ||
        !t->runtime_addr)
        return SW_EARG;
    *addr = interp + l->interp_code_counter;
    *interps = t->runtime_addr + l->runtime_interp_next_id;
    return SW_OK;
}

/* The target's address of a type object, or 0 (then not checked). */
static uint64_t type_addr(const sw_target *t, const char *name, uint64_t host_value)
{
    uint64_t a = 0;
    if (!host_value || sw_target_symbol(t, name, &a) != SW_OK)
        return 0;
    return a;
}

static int symbol_of(const void *target, const char *name, uint64_t *addr)
{
    return sw_target_symbol(target, name, addr);
}

int sw_target_check_build(sw_target *t, const sw_py_layout *l, char *diff, size_t len)
{
    unsigned checked;
    return sw_layout_check_facts(&t->mem, l, symbol_of, t, &checked, diff, len);
}

int sw_target_bind_layout(sw_target *t, sw_py_layout *l, uint64_t *interp, sw_target_why *why, char *err,
                          size_t errlen)
{
    char tv[32], lv[32];
    sw_target_version_str(t->version_hex, tv, sizeof tv);
    sw_target_version_str(l->version_hex, lv, sizeof lv);
    if (!t->version_hex || (t->version_hex >> 8) != (l->version_hex >> 8)) {
        *why = SW_TARGET_UNSUPPORTED;
        snprintf(err, errlen, "process %d runs Python %s, but the layout given is of Python %s", t->pid, tv, lv);
        return SW_EVERSION;
    }
    char diff[512];
    if (sw_target_check_build(t, l, diff, sizeof diff) != SW_OK) {
        *why = SW_TARGET_UNSUPPORTED;
        snprintf(err, errlen, "process %d runs a build of Python %s that its layout does not describe: %s", t->pid,
                 tv, diff);
        return SW_EVERSION;
    }
    l->code_type = type_addr(t, "PyCode_Type", l->code_type);
    l->str_type = type_addr(t, "PyUnicode_Type", l->str_type);
    l->frame_type = type_addr(t, "PyFrame_Type", l->frame_type);
    l->none_addr = type_addr(t, "_Py_NoneStruct", l->none_addr);
    l->long_type = type_addr(t, "PyLong_Type", l->long_type);
    l->bool_type = type_addr(t, "PyBool_Type", l->bool_type);
    l->float_type = type_addr(t, "PyFloat_Type", l->float_type);
    l->bytes_type = type_addr(t, "PyBytes_Type", l->bytes_type);
    l->tuple_type = type_addr(t, "PyTuple_Type", l->tuple_type);
    l->cell_type = type_addr(t, "PyCell_Type", l->cell_type);
    if (l->runtime_addr)
        l->runtime_addr = t->runtime_addr;
    *interp = 0;
    if (l->runtime_interp_main == SW_NO_OFFSET ||
        sw_mem_read(&t->mem, t->runtime_addr + l->runtime_interp_main, interp, sizeof *interp) != SW_OK ||
        !*interp) {
        *why = SW_TARGET_FAILED;
        snprintf(err, errlen, "process %d: its main interpreter cannot be read (not started yet, or finalized)",
                 t->pid);
        return SW_EIO;
    }
    return SW_OK;
}
