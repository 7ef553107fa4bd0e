/*
 * kernel.h - the public header of native/kernel: kernel events of this
 * process (C11, no Python.h; uses base only). Other rooms include this
 * header, never the files below one by one.
 *
 *   perf_syscalls.h   the system calls of this process's threads, read from
 *                     the raw_syscalls tracepoints through perf_event_open
 *                     rings by a thread of its own
 *   syscall_names.h   system call names by number (generated, x86-64)
 */
#ifndef SW_KERNEL_H
#define SW_KERNEL_H

#include "perf_syscalls.h"
#include "syscall_names.h"

#endif
