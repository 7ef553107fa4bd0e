/*
 * target.h - the Python process being read: a live process by pid (later
 * this process through the same reader, and core files). It holds what
 * every reading of the target needs and that does not depend on a layout:
 * its memory reader (mem.h), the ELF file of the interpreter mapped in it
 * (the python executable or libpython, whichever defines _PyRuntime; read
 * through /proc/PID/root, so a process in a container is read from its own
 * files), that file's load bias from /proc/PID/maps, the address of
 * _PyRuntime and the target's Python version (Py_Version on 3.11+, the
 * PY_VERSION string in .rodata before). Support is decided by the
 * target's version, not the reader's.
 *
 * Opening fails with one sentence in err and a reason in *why, which the
 * caller can turn into its own error (the CLI: one line, exit 1).
 */
#ifndef SW_TARGET_H
#define SW_TARGET_H

#include "base/base.h"
#include "coremem.h"
#include "elf/elf.h"
#include "layout.h"
#include "mem.h"

typedef enum {
    SW_TARGET_FAILED = 1,       /* anything else (err says what) */
    SW_TARGET_NO_PROCESS,       /* no process with that pid */
    SW_TARGET_PERMISSION,       /* not allowed to read it (err says what grants it) */
    SW_TARGET_NOT_PYTHON,       /* no interpreter mapped in it */
    SW_TARGET_UNSUPPORTED,      /* its Python version cannot be read */
    SW_TARGET_SELF,             /* the reader's own process */
} sw_target_why;

#define SW_TARGET_PATH_MAX 512

typedef struct sw_target {
    int pid;
    sw_mem mem;                  /* open while the target is */
    sw_elf *python;              /* the ELF file that defines _PyRuntime */
    char python_path[SW_TARGET_PATH_MAX];   /* its path as the target sees it */
    uint64_t bias;               /* its load bias: address = symbol value + bias */
    uint64_t runtime_addr;       /* _PyRuntime in the target */
    uint32_t version_hex;        /* PY_VERSION_HEX of the target, 0 if unknown */
    int debug_offsets;           /* 1: _PyRuntime begins with _Py_DebugOffsets (3.13+) */
    sw_coremem *core;            /* a core file's process (owned), else NULL */
} sw_target;

/* Opens the live process pid. Returns 0, or a negative SW_E* code with the
 * reason in *why and a sentence in err. */
int sw_target_open_pid(sw_target *t, int pid, sw_target_why *why, char *err, size_t errlen);
void sw_target_close(sw_target *t);

/* Opens the process of the core file at core (exe: NULL, or the python
 * executable that ran, standing for the core's executable and showing
 * where its libraries are; coremem.h). pid is the core's process's. Same
 * returns as sw_target_open_pid (a file that is not a core: SW_EFORMAT). */
int sw_target_open_core(sw_target *t, const char *core, const char *exe, sw_target_why *why, char *err,
                        size_t errlen);

/* The address in the target of the interpreter's symbol name. 0, or
 * SW_EARG if the file does not define it. */
int sw_target_symbol(const sw_target *t, const char *name, uint64_t *addr);

/* The address in the target of its counter of code objects made, a
 * uint32_t that grows by one with each code object (and stays 0 once it
 * has run out): 3.12's _Py_next_func_version, a static of the interpreter
 * (.symtab: a stripped interpreter has none); 3.13's main interpreter's
 * func_state.next_version (l, bound to this target, and interp: its main
 * interpreter), each interpreter counting the code objects it makes, with
 * in *interps the address of the count of interpreters made
 * (interpreters.next_id, an int64_t; 3.12: 0). Earlier versions have
 * none, nor has a layout that does not place it: SW_EARG, as for a core
 * file. */
int sw_target_code_counter(const sw_target *t, const sw_py_layout *l, uint64_t interp, uint64_t *addr,
                           uint64_t *interps);

/* One line of /proc/PID/maps with a name (a file's path, "[vdso]", ...):
 * its range, permissions ("r-xp"), file offset and the name, pointing
 * into line (whose newline is cut). SW_EARG for a line without a name or
 * not of that form. */
typedef struct sw_maps_entry {
    uint64_t start, end, offset;
    char perms[8];
    const char *path;
} sw_maps_entry;
int sw_target_maps_line(char *line, sw_maps_entry *out);

/* "3.12.1" (with a release level and serial when not final) into buf. */
void sw_target_version_str(uint32_t version_hex, char *buf, size_t len);

/* Makes the layout l, which describes the target's version, fit this
 * target: the addresses it holds (the type objects, _PyRuntime) become
 * the target's, and *interp receives the address of its main interpreter.
 * Refuses (SW_EVERSION, *why SW_TARGET_UNSUPPORTED) a layout of another
 * version than the target's, or one that the target's build contradicts
 * (layout_facts.h: a debug or free-threaded build, moved fields; err says
 * what differs). Returns 0 or a negative SW_E* code with *why
 * and err. */
/* Checks the layout l against the target's build (layout_facts.h): 0, or
 * SW_EVERSION with what differs in diff. */
int sw_target_check_build(sw_target *t, const sw_py_layout *l, char *diff, size_t len);

int sw_target_bind_layout(sw_target *t, sw_py_layout *l, uint64_t *interp, sw_target_why *why, char *err,
                          size_t errlen);

#endif
