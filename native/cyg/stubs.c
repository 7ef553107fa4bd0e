/*
 * stubs.c - libstackwatch_cyg_stubs.a, linked into an extension compiled
 * with -finstrument-functions (`python -m stackwatch config --ldflags`):
 * its __cyg_profile_func_enter/exit, hidden so that the extension's own
 * calls bind to them and not to glibc's empty ones, forward to the runtime
 * library (cyg.h) when stackwatch has loaded it, and do nothing otherwise.
 *
 * The runtime is found at run time, not linked: Python loads extensions
 * with RTLD_LOCAL, so stackwatch's are not visible to others. Its entry
 * points land in the extension's stackwatch_cyg_slots (exported: the one
 * symbol the stubs add to it) either way round: at the extension's first
 * event the stubs look for the runtime among the loaded objects by its
 * name (dlopen RTLD_NOLOAD: never loads it), and when stackwatch loads the
 * runtime later it fills the slots of every object loaded by then
 * (native/ext/tracer/native_frames.c). A miss is looked for again every
 * 65536 events as well.
 */
#define _GNU_SOURCE 1   /* RTLD_NOLOAD */
#include "cyg/cyg.h"

#include <dlfcn.h>

#define SW_STUB __attribute__((visibility("hidden"), no_instrument_function))

__attribute__((visibility("default"))) sw_cyg_slots stackwatch_cyg_slots;
static unsigned misses;

static __attribute__((no_instrument_function)) int sw_cyg_find(void)
{
    if (misses++ & 0xffff)
        return 0;
    void *h = dlopen("libstackwatch_cyg.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    sw_cyg_fn en = (sw_cyg_fn)(uintptr_t)dlsym(h, "stackwatch_cyg_enter");
    sw_cyg_fn ex = (sw_cyg_fn)(uintptr_t)dlsym(h, "stackwatch_cyg_exit");
    /* (The handle is kept: the runtime stays loaded while its functions
     * may be called.) */
    if (!en || !ex)
        return 0;
    __atomic_store_n(&stackwatch_cyg_slots.exit, ex, __ATOMIC_RELEASE);
    __atomic_store_n(&stackwatch_cyg_slots.enter, en, __ATOMIC_RELEASE);
    return 1;
}

SW_STUB void __cyg_profile_func_enter(void *fn, void *site)
{
    sw_cyg_fn f = __atomic_load_n(&stackwatch_cyg_slots.enter, __ATOMIC_ACQUIRE);
    if (__builtin_expect(f != 0, 1) || (sw_cyg_find() && (f = stackwatch_cyg_slots.enter)))
        f(fn, site);
}

SW_STUB void __cyg_profile_func_exit(void *fn, void *site)
{
    sw_cyg_fn f = __atomic_load_n(&stackwatch_cyg_slots.exit, __ATOMIC_ACQUIRE);
    if (__builtin_expect(f != 0, 1))
        f(fn, site);
}
