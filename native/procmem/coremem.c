/*
 * coremem.c - a core file's process memory (see coremem.h).
 */
#define _GNU_SOURCE
#include "coremem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEAD 4096u               /* bytes of a file's start holding its build id */
#define PATH_MAX_ 1024u
#define FD_UNTRIED (-2)

struct sw_coremem {
    sw_core *core;
    char *exe;                   /* or NULL */
    int *fds;                    /* [nfiles] the file of each mapping: an fd, -1 (none usable) or FD_UNTRIED */
};

int sw_coremem_open(const char *path, const char *exe, sw_coremem **out, char *err, size_t errlen)
{
    *out = NULL;
    sw_coremem *cm = calloc(1, sizeof *cm);
    if (!cm) {
        snprintf(err, errlen, "out of memory");
        return SW_ENOMEM;
    }
    int rc = sw_core_open(path, &cm->core, err, errlen);
    size_t n = 0;
    if (rc == SW_OK) {
        sw_core_files(cm->core, &n);
        cm->fds = malloc((n ? n : 1) * sizeof *cm->fds);
        cm->exe = exe ? strdup(exe) : NULL;
        if (!cm->fds || (exe && !cm->exe)) {
            snprintf(err, errlen, "out of memory");
            rc = SW_ENOMEM;
        }
    }
    if (rc != SW_OK) {
        sw_coremem_free(cm);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        cm->fds[i] = FD_UNTRIED;
    *out = cm;
    return SW_OK;
}

void sw_coremem_free(sw_coremem *cm)
{
    if (!cm)
        return;
    size_t n = 0;
    if (cm->core)
        sw_core_files(cm->core, &n);
    for (size_t i = 0; cm->fds && i < n; i++)
        if (cm->fds[i] >= 0)
            close(cm->fds[i]);
    free(cm->fds);
    free(cm->exe);
    sw_core_free(cm->core);
    free(cm);
}

const sw_core *sw_coremem_core(const sw_coremem *cm)
{
    return cm->core;
}

/* The build id of the file mapped as path, from the first page of its
 * mapping at offset 0 in the core: its length, 0 if the core lacks it. */
static size_t core_build_id(sw_coremem *cm, const char *path, unsigned char *id)
{
    size_t n;
    const sw_core_file *f = sw_core_files(cm->core, &n);
    unsigned char head[HEAD];
    for (size_t i = 0; i < n; i++) {
        if (f[i].offset != 0 || strcmp(f[i].path, path) != 0)
            continue;
        size_t got = sw_core_read(cm->core, f[i].start, head, sizeof head);
        return sw_elf_build_id_in_head(head, got, id, SW_ELF_MAX_BUILD_ID);
    }
    return 0;
}

static size_t file_build_id(const char *path, unsigned char *id)
{
    unsigned char head[HEAD];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = pread(fd, head, sizeof head, 0);
    close(fd);
    return got > 0 ? sw_elf_build_id_in_head(head, (size_t)got, id, SW_ELF_MAX_BUILD_ID) : 0;
}

static void hex(const unsigned char *id, size_t n, char *out)
{
    for (size_t i = 0; i < n && i < SW_ELF_MAX_BUILD_ID; i++)
        snprintf(out + 2 * i, 3, "%02x", id[i]);
    out[2 * (n < SW_ELF_MAX_BUILD_ID ? n : SW_ELF_MAX_BUILD_ID)] = 0;
}

int sw_coremem_local(sw_coremem *cm, const char *path, char *local, size_t len, char *err, size_t errlen)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char cand[4][PATH_MAX_];
    int nc = 0;
    if (cm->exe) {
        size_t nf;
        const sw_core_file *f = sw_core_files(cm->core, &nf);
        /* The executable is the first file mapped (the lowest address). */
        if (nf && strcmp(f[0].path, path) == 0)
            snprintf(cand[nc++], PATH_MAX_, "%s", cm->exe);
        const char *slash = strrchr(cm->exe, '/');
        int dir = slash ? (int)(slash - cm->exe) : 1;
        const char *d = slash ? cm->exe : ".";
        snprintf(cand[nc++], PATH_MAX_, "%.*s/%s", dir, d, base);
        snprintf(cand[nc++], PATH_MAX_, "%.*s/../lib/%s", dir, d, base);
    }
    snprintf(cand[nc++], PATH_MAX_, "%s", path);
    unsigned char want[SW_ELF_MAX_BUILD_ID], have[SW_ELF_MAX_BUILD_ID];
    size_t nw = core_build_id(cm, path, want);
    char differs[PATH_MAX_ + 2 * SW_ELF_MAX_BUILD_ID + 64] = "";
    for (int i = 0; i < nc; i++) {
        if (access(cand[i], R_OK) != 0)
            continue;
        size_t nh = file_build_id(cand[i], have);
        if (nw && (nh != nw || memcmp(have, want, nw) != 0)) {
            if (!differs[0]) {
                char h[2 * SW_ELF_MAX_BUILD_ID + 1];
                hex(have, nh, h);
                snprintf(differs, sizeof differs, "%.1000s has build id %s", cand[i], nh ? h : "(none)");
            }
            continue;
        }
        snprintf(local, len, "%s", cand[i]);
        return SW_OK;
    }
    char w[2 * SW_ELF_MAX_BUILD_ID + 1];
    hex(want, nw, w);
    if (differs[0]) {
        snprintf(err, errlen, "the core's %s (build id %s) is not the file here: %s", path, w, differs);
        return SW_EARG;
    }
    snprintf(err, errlen, "the core's %s is not here", path);
    return SW_EIO;
}

/* The fd of mapping i's file, opened once; -1 if none is usable. */
static int file_fd(sw_coremem *cm, size_t i, const sw_core_file *f)
{
    if (cm->fds[i] != FD_UNTRIED)
        return cm->fds[i];
    char local[PATH_MAX_], err[PATH_MAX_ + 256];
    cm->fds[i] = sw_coremem_local(cm, f->path, local, sizeof local, err, sizeof err) == SW_OK
                     ? open(local, O_RDONLY | O_CLOEXEC)
                     : -1;
    return cm->fds[i];
}

size_t sw_coremem_read(sw_coremem *cm, uint64_t addr, void *buf, size_t len)
{
    size_t done = 0, n;
    const sw_core_file *f = sw_core_files(cm->core, &n);
    while (done < len) {
        size_t got = sw_core_read(cm->core, addr + done, (char *)buf + done, len - done);
        done += got;
        if (done == len)
            break;
        /* Not in the core: from the file mapped there, if any. */
        uint64_t at = addr + done;
        size_t i = 0;
        while (i < n && !(f[i].start <= at && at < f[i].end))
            i++;
        if (i == n)
            break;
        int fd = file_fd(cm, i, &f[i]);
        uint64_t want = f[i].end - at < len - done ? f[i].end - at : len - done;
        ssize_t r = fd >= 0 ? pread(fd, (char *)buf + done, (size_t)want, (off_t)(f[i].offset + (at - f[i].start))) : -1;
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    return done;
}
