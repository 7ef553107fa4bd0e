/*
 * stubs.c - libstackwatch_cyg_stubs.a, linked into an extension compiled
 * with -finstrument-functions (`python -m stackwatch config --ldflags`):
 * its __cyg_profile_func_enter/exit, hidden so that the extension's own
 * calls bind to them and not to glibc's empty ones, forward to the runtime
 * library (cyg.h) when stackwatch has loaded it, and do nothing otherwise.
 *
 * The runtime is found at run time, not linked: Python loads extensions
 * with RTLD_LOCAL, so stackwatch's are not visible to others. The stubs
 * look for it by its name among the loaded objects (dlopen RTLD_NOLOAD:
 * never loads it), at the first event and then again every 65536 events
 * while it is not loaded (an extension used before stackwatch is
 * imported).
 */
#define _GNU_SOURCE 1   /* clock_gettime, RTLD_NOLOAD */
#include <dlfcn.h>
#include <stdint.h>

#define SW_STUB __attribute__((visibility("hidden"), no_instrument_function))

typedef void (*sw_cyg_fn)(void *, void *);

static sw_cyg_fn enter_fn, exit_fn;
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
    __atomic_store_n(&exit_fn, ex, __ATOMIC_RELEASE);
    __atomic_store_n(&enter_fn, en, __ATOMIC_RELEASE);
    return 1;
}

SW_STUB void __cyg_profile_func_enter(void *fn, void *site)
{
    sw_cyg_fn f = __atomic_load_n(&enter_fn, __ATOMIC_ACQUIRE);
    if (__builtin_expect(f != 0, 1) || (sw_cyg_find() && (f = enter_fn)))
        f(fn, site);
}

SW_STUB void __cyg_profile_func_exit(void *fn, void *site)
{
    sw_cyg_fn f = __atomic_load_n(&exit_fn, __ATOMIC_ACQUIRE);
    if (__builtin_expect(f != 0, 1))
        f(fn, site);
}
