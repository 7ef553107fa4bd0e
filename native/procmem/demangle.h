/*
 * demangle.h - C++ symbol names made readable, as c++filt prints them
 * (but for libstdc++'s abbreviations, which stay short: "Ss" is
 * std::string, "Si" std::istream, where c++filt spells out their
 * templates):
 * the one place stackwatch demangles (symbols.c names every native frame
 * through it: profiles, traces' native functions and every export).
 *
 * Rust names of the v0 mangling ("_R...") go to demangle_rust.h's
 * parser (rustc-demangle's short form: c++filt's text without the crates'
 * disambiguators); legacy Rust names ("_ZN...17h<hash>E") are C++ names.
 *
 * The C++ demangler is libstdc++'s own (__cxa_demangle, the code c++filt
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

/* The most back-references ("S_", "S<id>_", "T_", "T<n>_") a name
 * demangled may hold. Each prints a whole earlier part again, so a name of
 * a few hundred bytes can stand for gigabytes of text (c++filt takes 0.7 s
 * and 35 MB for one of 214 bytes, twice as long for each 10 more), all of
 * it built in memory by the demangler. A part printed k times costs k
 * references, so each reference multiplies the text by at most 3^(1/3)
 * (1.45): with 16, at most about 400 times the text of the name's other
 * parts (under 10 KiB for 1,024 bytes): a few MB. Of real names, 0.24% of
 * libLLVM-15's 39,391 C++ symbols and 0.7% of libclang-cpp 14's 28,955
 * hold more (they stay mangled), none of libstdc++'s. */
#define SW_DEMANGLE_MAX_REFS 16

/* The longest readable form kept: a longer one is no name to show. */
#define SW_DEMANGLE_OUT_MAX (16u * 1024u)

/* Stack the calling thread must have left to demangle a C++ name (a Rust
 * one: SW_RUST_DEMANGLE_STACK): the demangler
 * keeps arrays of 72 bytes a character on the stack and recurses once a
 * nesting level (384 KiB measured for 1,000 nested pointers). */
#define SW_DEMANGLE_STACK (1024u * 1024u)

/* The readable form of name, a C++ (Itanium ABI) mangled name ("_Z...")
 * or a v0 Rust one ("_R...": sw_demangle_rust, its own bounds; on a
 * thread with SW_RUST_DEMANGLE_STACK of stack left),
 * in a new string for the caller to free; NULL (nothing allocated) when
 * name is no mangled C++ name, is malformed, is longer than
 * SW_DEMANGLE_MAX, holds more than SW_DEMANGLE_MAX_REFS back-references,
 * demangles to more than SW_DEMANGLE_OUT_MAX bytes, when the calling thread has less than
 * SW_DEMANGLE_STACK of stack left, when libstdc++ is not found or memory
 * runs out. Any bytes are safe. Thread-safe; not for signal handlers. */
char *sw_demangle(const char *name);

/* 1 if the demangler was found (libstdc++'s), 0 if names stay mangled. */
int sw_demangle_available(void);

#endif
