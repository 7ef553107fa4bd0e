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
 */
#define _GNU_SOURCE
#include "ext/sampler/sampler_layout.h"

#include <stdio.h>

int main(void)
{
    sw_py_layout l;
    sw_sampler_layout_fill(&l);
    l.thread_tid = SW_NO_OFFSET;
    l.code_type = l.code_type != 0;
    l.str_type = l.str_type != 0;
    l.frame_type = l.frame_type != 0;
    l.none_addr = l.none_addr != 0;
    l.runtime_addr = l.runtime_addr != 0;
    printf("    {\n");
#define PRINT(name, bits) printf("        .%s = 0x%llxu,\n", #name, (unsigned long long)l.name);
    SW_PY_LAYOUT_FIELDS(PRINT)
#undef PRINT
    printf("    },\n");
    return 0;
}
