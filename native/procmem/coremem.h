/*
 * coremem.h - the memory of a core file's process (`dump --core`): the
 * bytes the core holds (its PT_LOAD segments, elf/elfcore.h), and what the
 * core left out of the files the process had mapped (read-only code and
 * data: its NT_FILE note says which file and offset) from those files
 * here, each used only if its GNU build id equals the one the core holds
 * of it (the first page of each mapped ELF file is in the core). A file
 * of another machine, or rebuilt since, is refused with what differs;
 * exe (the Python that ran, `--exe`) stands for the core's executable,
 * and its folder and ../lib for the libraries (libpython).
 */
#ifndef SW_COREMEM_H
#define SW_COREMEM_H

#include "base/base.h"
#include "elf/elf.h"

typedef struct sw_coremem sw_coremem;

/* Opens the core at path (exe: NULL, or the python executable that ran).
 * Returns 0 with *out, or SW_EIO / SW_EFORMAT / SW_ENOMEM with err. */
int sw_coremem_open(const char *path, const char *exe, sw_coremem **out, char *err, size_t errlen);
void sw_coremem_free(sw_coremem *cm);

const sw_core *sw_coremem_core(const sw_coremem *cm);

/* Copies up to len bytes of the process's memory at addr: returns how
 * many, contiguous from addr. */
size_t sw_coremem_read(sw_coremem *cm, uint64_t addr, void *buf, size_t len);

/* The file here to read for the core's mapped file `path`: its own path,
 * or with exe the one standing for it; 0 with local filled, or SW_EIO
 * (none exists) / SW_EARG (its build id differs from the core's) with a
 * sentence in err. */
int sw_coremem_local(sw_coremem *cm, const char *path, char *local, size_t len, char *err, size_t errlen);

#endif
