/*
 * gen-layouts.c - prints, as one C initializer, the sw_py_layout of the
 * CPython whose headers it is compiled against: the extension's own
 * offsetof() code (native/ext/sampler/sampler_layout.c) run for that
 * version. scripts/gen-layouts.py compiles it once per installed version
 * and writes native/procmem/layouts_generated.h from the output.
 *
 * What is not an offset is left for the reader to fill for its target:
 * addresses (type objects, Py_None, _PyRuntime) become 1 ("the target's, found by
 * symbol"), and the tid offset inside glibc's struct pthread (machine-
 * specific) SW_NO_OFFSET.
 *
 * With the argument "pending" it prints the sw_pending_layout instead
 * (native/procmem/pending.h): where the main interpreter's pending-calls
 * queue and eval breaker are, for `stackwatch attach`.
 */
#define _GNU_SOURCE 1
#ifndef Py_BUILD_CORE
#  define Py_BUILD_CORE 1
#endif
#include <Python.h>
#include <internal/pycore_interp.h>
#if PY_VERSION_HEX >= 0x030D0000
#  include <internal/pycore_ceval.h>
#endif

#include "ext/sampler/sampler_layout.h"
#include "procmem/pending.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define POFF(field) ((uint32_t)offsetof(struct _pending_calls, field))

static void print_pending(void)
{
    struct _pending_calls q;
    sw_pending_layout p = {
        .version_hex = PY_VERSION_HEX,
        .interp_pending = (uint32_t)offsetof(PyInterpreterState, ceval.pending),
        .pending_size = (uint32_t)sizeof q,
        .pending_calls = POFF(calls),
        .ncalls = (uint32_t)(sizeof q.calls / sizeof q.calls[0]),
        .call_size = (uint32_t)sizeof q.calls[0],
        .call_func = (uint32_t)offsetof(__typeof__(q.calls[0]), func),
        .call_arg = (uint32_t)offsetof(__typeof__(q.calls[0]), arg),
        .pending_first = POFF(first),
#if PY_VERSION_HEX >= 0x030D0000
        .lock_kind = SW_PENDING_LOCK_MUTEX,
        .pending_lock = POFF(mutex),
        .count_kind = SW_PENDING_COUNT_N,
        .pending_count = POFF(npending),
        .pending_max = POFF(max),
        .call_flags = (uint32_t)offsetof(__typeof__(q.calls[0]), flags),
        .pending_last = POFF(next),
        .interp_eval_breaker = SW_NO_OFFSET,
        .tstate_eval_breaker = (uint32_t)offsetof(PyThreadState, eval_breaker),
        .eval_breaker_bits = (uint32_t)_PY_CALLS_TO_DO_BIT,
        .main_thread_only = 0,
#else
        .lock_kind = SW_PENDING_LOCK_SEM,
        .pending_lock = POFF(lock),
        .count_kind = SW_PENDING_COUNT_FLAG,
        .pending_count = POFF(calls_to_do),
        .pending_max = SW_NO_OFFSET,
        .call_flags = SW_NO_OFFSET,
        .pending_last = POFF(last),
        .interp_eval_breaker = (uint32_t)offsetof(PyInterpreterState, ceval.eval_breaker),
        .tstate_eval_breaker = SW_NO_OFFSET,
        /* Before 3.13 the eval breaker is one int that the handler
         * recomputes from the conditions: any nonzero value makes the next
         * check look at calls_to_do. */
        .eval_breaker_bits = 1,
        .main_thread_only = PY_VERSION_HEX < 0x030C0000,
#endif
    };
    printf("    {\n");
#define PRINT(name) printf("        .%s = 0x%llxu,\n", #name, (unsigned long long)p.name);
    SW_PENDING_LAYOUT_FIELDS(PRINT)
#undef PRINT
    printf("    },\n");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "pending") == 0) {
        print_pending();
        return 0;
    }
    sw_py_layout l;
    sw_sampler_layout_fill(&l);
    l.thread_tid = SW_NO_OFFSET;
    l.code_type = l.code_type != 0;
    l.str_type = l.str_type != 0;
    l.frame_type = l.frame_type != 0;
    l.none_addr = l.none_addr != 0;
    l.long_type = l.long_type != 0;
    l.bool_type = l.bool_type != 0;
    l.float_type = l.float_type != 0;
    l.bytes_type = l.bytes_type != 0;
    l.tuple_type = l.tuple_type != 0;
    l.cell_type = l.cell_type != 0;
    l.runtime_addr = l.runtime_addr != 0;
    printf("    {\n");
#define PRINT(name, bits) printf("        .%s = 0x%llxu,\n", #name, (unsigned long long)l.name);
    SW_PY_LAYOUT_FIELDS(PRINT)
#undef PRINT
    printf("    },\n");
    return 0;
}
