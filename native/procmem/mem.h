/*
 * mem.h - reading the memory of a process (the own one or another) without
 * ever faulting: a bad or unmapped address makes a read fail, it does not
 * crash the reader. Linux only.
 *
 * The reads use process_vm_readv(2); where that is not permitted (some
 * container seccomp profiles) they fall back to pread(2) on /proc/PID/mem.
 * The memory of a core file's process is read the same way
 * (sw_mem_open_core, coremem.h). An sw_mem is used by one thread at a time.
 */
#ifndef SW_MEM_H
#define SW_MEM_H

#include "base/base.h"

#include <sys/uio.h>

struct sw_coremem;

typedef struct sw_mem {
    int pid;
    int fd;                 /* /proc/PID/mem when falling back, else -1 */
    struct sw_coremem *core;   /* a core's process (not owned), else NULL */
    uint64_t reads;         /* system calls made */
    uint64_t failed;        /* reads that failed */
    int refusing;           /* while set, every read fails at once (counted in refused) */
    uint64_t refused;
} sw_mem;

/* One element of a batched read. */
typedef struct sw_mem_req {
    uint64_t addr;
    void *buf;
    size_t len;
    int ok;                 /* set by sw_mem_readv: 1 if all len bytes were read */
} sw_mem_req;

/* Prepares reading process `pid` and checks that it works by reading
 * probe_len bytes at probe_addr (an address known to be readable). Returns
 * 0, or SW_EIO with the reason in err. */
int sw_mem_open(sw_mem *m, int pid, uint64_t probe_addr, size_t probe_len, char *err, size_t errlen);
void sw_mem_close(sw_mem *m);

/* Reads the memory of the process of a core file (core stays the
 * caller's, and must outlive m). Writes are refused. */
void sw_mem_open_core(sw_mem *m, struct sw_coremem *core);

/* Reads exactly len bytes at addr. Returns 0, or SW_EIO if any byte could
 * not be read (buf is then undefined). */
int sw_mem_read(sw_mem *m, uint64_t addr, void *buf, size_t len);

/* Reads the 64-bit word (a pointer, a size) at addr: 0 or SW_EIO. */
int sw_mem_read_u64(sw_mem *m, uint64_t addr, uint64_t *value);

/* Reads up to len bytes at addr and returns how many were read (0 if the
 * first byte is unreadable). For reading an object of unknown size. */
size_t sw_mem_read_upto(sw_mem *m, uint64_t addr, void *buf, size_t len);

/* Performs n reads, in few system calls, in order; sets each request's
 * ok. Consecutive requests in ascending order less than a page apart are
 * read as one range of the target (mem.c). Returns the number of requests
 * that succeeded. */
size_t sw_mem_readv(sw_mem *m, sw_mem_req *reqs, size_t n);

/* A batch of reads made by someone else in one process_vm_readv: the
 * thread whose memory it is, in a signal handler (nativestack.h
 * sw_nstack_read), where nothing may allocate. sw_mem_plan_make lays
 * out requests (as sw_mem_readv would, ranges less than a page apart
 * coalesced) into the iovecs `out` points into p; after the call,
 * sw_mem_plan_done sets each request's ok from the bytes it returned.
 * A plan is the process's own memory or another's alike (m's pid). */
typedef struct sw_mem_plan sw_mem_plan;
typedef struct sw_mem_iov {
    struct iovec *local, *remote;
    unsigned long nlocal, nremote;
} sw_mem_iov;
sw_mem_plan *sw_mem_plan_new(void);
void sw_mem_plan_free(sw_mem_plan *p);
/* SW_OK; SW_EARG if the requests need more than one system call;
 * SW_ESTATE if m does not read with process_vm_readv (a core, the
 * /proc/PID/mem fallback) or is refusing. */
int sw_mem_plan_make(sw_mem *m, sw_mem_req *reqs, size_t n, sw_mem_plan *p, sw_mem_iov *out);
/* got: what process_vm_readv returned. The number of requests ok, or -1
 * if the call stopped in a request with others after it, left unread. */
long sw_mem_plan_done(sw_mem *m, sw_mem_req *reqs, size_t n, const sw_mem_plan *p, long got);

/* Writes len bytes at addr with process_vm_writev (the only write into a
 * target: pending.c's, while its threads are frozen). 0 or SW_EIO. */
int sw_mem_write(sw_mem *m, uint64_t addr, const void *buf, size_t len);

#endif
