/*
 * demangle.c - C++ names through libstdc++'s __cxa_demangle, found at
 * run time (demangle.h): the library is looked up once (pthread_once),
 * and each thread's stack bounds once (pthread_getattr_np), so that a
 * name is handed to the demangler only where the thread's stack can hold
 * what the demangler puts there, and only with few enough back-references
 * that what it builds in memory stays bounded.
 */
#define _GNU_SOURCE
#include "demangle.h"

#include "demangle_rust.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static pthread_once_t found_once = PTHREAD_ONCE_INIT;
static cxa_demangle_fn cxa_demangle;

static void find_demangler(void)
{
    /* The process's own libstdc++ if it has one loaded, else loaded here
     * (kept for the life of the process: its code is what we call). */
    void *lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib)
        lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
    if (lib)
        cxa_demangle = (cxa_demangle_fn)(uintptr_t)dlsym(lib, "__cxa_demangle");
}

int sw_demangle_available(void)
{
    pthread_once(&found_once, find_demangler);
    return cxa_demangle != NULL;
}

/* The lowest usable address of the calling thread's stack (above its
 * guard), once per thread; 0 if unknown. */
static _Thread_local uintptr_t stack_low;
static _Thread_local int stack_known;

static uintptr_t stack_floor(void)
{
    if (!stack_known) {
        stack_known = 1;
        pthread_attr_t attr;
        void *addr;
        size_t size, guard = 0;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr) {
                pthread_attr_getguardsize(&attr, &guard);
                stack_low = (uintptr_t)addr + guard;
            }
            pthread_attr_destroy(&attr);
        }
    }
    return stack_low;
}

/* How many back-references name holds: 'S' or 'T', then digits and
 * capitals (a sequence id or a parameter number, none at all), then '_'.
 * (Source names are not skipped: a count too high only keeps a name
 * mangled.) */
static size_t back_references(const char *name)
{
    size_t n = 0;
    for (const char *p = name; *p; p++) {
        if (*p != 'S' && *p != 'T')
            continue;
        const char *q = p + 1;
        while ((*q >= '0' && *q <= '9') || (*q >= 'A' && *q <= 'Z'))
            q++;
        n += *q == '_';
    }
    return n;
}

char *sw_demangle(const char *name)
{
    if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
        return NULL;
    char here;
    uintptr_t low = stack_floor(), sp = (uintptr_t)&here;
    size_t left = !low || sp < low ? 0 : sp - low;
    if (left < SW_RUST_DEMANGLE_STACK)
        return NULL;
    if (name[1] == 'R')
        return sw_demangle_rust(name);   /* Rust's v0 mangling: our own parser */
    char *rust = sw_demangle_rust_legacy(name);   /* Rust's older mangling, a C++ name to libstdc++ */
    if (rust || left < SW_DEMANGLE_STACK || strnlen(name, SW_DEMANGLE_MAX + 1) > SW_DEMANGLE_MAX ||
        back_references(name) > SW_DEMANGLE_MAX_REFS || !sw_demangle_available())
        return rust;
    int status = -1;
    char *out = cxa_demangle(name, NULL, NULL, &status);
    if (status != 0 || !out || !out[0] || strnlen(out, SW_DEMANGLE_OUT_MAX + 1) > SW_DEMANGLE_OUT_MAX) {
        free(out);
        return NULL;
    }
    return out;
}
