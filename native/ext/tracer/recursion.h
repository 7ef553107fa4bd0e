/*
 * recursion.h - keeping traced programs within their C stack (recursion.c):
 * each thread's stack guard, and on 3.12+ a bonus on its C-recursion
 * budget while the hook runs its frames. See docs/architecture.md,
 * "Recursion and the C stack".
 */
#ifndef SW_RECURSION_H
#define SW_RECURSION_H

#include "ext/tracer/session.h"

/* The bonuses, with the GIL held, except forget_self (thread exit, under
 * sw_S.lock). take_back takes every bonus back from the threads still
 * alive (the hook goes): a thread deep in hooked calls keeps the part its
 * stack uses. */
void sw_recursion_bonus_give(PyThreadState *ts);
void sw_recursion_bonus_forget_self(void);
void sw_recursion_bonus_take_back(void);

/* A thread the hook runs frames for: its stack guard and (3.12+) its
 * C-recursion bonus, once until the bonuses are taken back. */
void sw_recursion_attach_slow(sw_tracer_thread *t);
static inline void sw_recursion_attach(sw_tracer_thread *t)
{
    if (t->recursion_gen != sw_S.recursion_gen)
        sw_recursion_attach_slow(t);
}

/* The lowest address a hooked call may start at on this thread (0 if its
 * stack is unknown); *handler_guard gets the same for stackwatch's own
 * frames. */
uintptr_t sw_stack_guard_of_this_thread(uintptr_t *handler_guard);

/* The current stack pointer, for the C-stack guard: one instruction on
 * x86-64 (__builtin_frame_address would force a frame pointer on every
 * hooked call). */
static inline uintptr_t sw_stack_pointer(void)
{
#if defined(__x86_64__)
    uintptr_t sp;
    __asm__("mov %%rsp, %0" : "=r"(sp));
    return sp;
#else
    return (uintptr_t)__builtin_frame_address(0);
#endif
}

#endif
