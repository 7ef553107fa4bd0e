/*
 * demangle.h - C++ symbol names made readable, as c++filt prints them:
 * the one place stackwatch demangles (symbols.c names every native frame
 * through it: profiles, traces' native functions and every export).
 *
 * The demangler is libstdc++'s own (__cxa_demangle, the code c++filt
 * runs), found at run time: libstdc++.so.6 if the process has it loaded,
 * else loaded once (RTLD_LOCAL); stackwatch has no link-time dependency
 * on it. Without libstdc++ names stay as the object files give them.
 */
#ifndef SW_DEMANGLE_H
#define SW_DEMANGLE_H

#include <stddef.h>

/* The longest name demangled: libstdc++'s demangler refuses longer ones
 * (since GCC 9, its stack bound), and so does c++filt. */
#define SW_DEMANGLE_MAX 1024

/* Stack the calling thread must have left to demangle: the demangler
 * keeps arrays of 72 bytes a character on the stack and recurses once a
 * nesting level (384 KiB measured for 1,000 nested pointers). */
#define SW_DEMANGLE_STACK (1024u * 1024u)

/* The readable form of name, a C++ (Itanium ABI) mangled name ("_Z..."),
 * in a new string for the caller to free; NULL (nothing allocated) when
 * name is no mangled C++ name, is malformed, is longer than
 * SW_DEMANGLE_MAX, when the calling thread has less than
 * SW_DEMANGLE_STACK of stack left, when libstdc++ is not found or memory
 * runs out. Any bytes are safe. Thread-safe; not for signal handlers. */
char *sw_demangle(const char *name);

/* 1 if the demangler was found (libstdc++'s), 0 if names stay mangled. */
int sw_demangle_available(void);

#endif
