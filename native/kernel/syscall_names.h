/*
 * syscall_names.h - the names of system calls by number (x86-64; generated
 * from the kernel headers by scripts/gen-syscall-names.py).
 */
#ifndef SW_SYSCALL_NAMES_H
#define SW_SYSCALL_NAMES_H

/* The name of system call nr ("write"), or NULL when it has none here
 * (an unknown number, or another architecture). */
const char *sw_syscall_name(long nr);

#endif
