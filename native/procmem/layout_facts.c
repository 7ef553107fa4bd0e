/*
 * layout_facts.c - a layout checked against the target's own type objects
 * and build marks (see layout_facts.h).
 */
#include "layout_facts.h"

#include <stdarg.h>
#include <stdio.h>

/* Appends one difference to err, "; " between two. */
static void say(char *err, size_t errlen, size_t *at, const char *fmt, ...)
{
    if (*at + 3 >= errlen)
        return;
    if (*at) {
        err[(*at)++] = ';';
        err[(*at)++] = ' ';
        err[*at] = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err + *at, errlen - *at, fmt, ap);
    va_end(ap);
    if (n > 0)
        *at = *at + (size_t)n >= errlen ? errlen - 1 : *at + (size_t)n;
}

int sw_layout_check_facts(sw_mem *m, const sw_py_layout *l, sw_symbol_fn symbol, const void *ud,
                          unsigned *checked, char *err, size_t errlen)
{
    static const struct { const char *symbol, *what; } marks[] = {
        {"_Py_NegativeRefcount", "a debug build (it defines _Py_NegativeRefcount: Py_REF_DEBUG)"},
        {"_Py_PrintReferences", "objects linked in a list of all objects (_Py_PrintReferences: Py_TRACE_REFS)"},
        {"_Py_MergeZeroLocalRefcount", "a free-threaded build (_Py_MergeZeroLocalRefcount: Py_GIL_DISABLED)"},
    };
    /* Each type's instance size as the layout implies it: the offset of
     * a field its reader uses, plus what follows it (SW_NO_OFFSET: the
     * layout does not say). */
    const int objects = l->frames_kind == SW_FRAMES_OBJECTS;
    const struct { const char *type; uint32_t field, plus; const char *field_name; } sizes[] = {
        {"PyLong_Type", l->long_digits, 0, "int digits"},
        {"PyFloat_Type", l->float_value, 8, "float value"},
        {"PyTuple_Type", l->tuple_items, 0, "tuple items"},
        {"PyBytes_Type", l->bytes_data, 1, "bytes data"},
        {"PyUnicode_Type", l->str_legacy_data, 8, "str data pointer"},
        {"PyCell_Type", l->cell_ref, 8, "cell contents"},
        {"PyFrame_Type", objects ? l->frame_localsplus : SW_NO_OFFSET, 8, "frame localsplus"},
        {"PyCode_Type", objects ? SW_NO_OFFSET : l->code_code, 0, "code instructions"},
    };
    size_t at = 0;
    unsigned ok = 0;
    uint64_t addr, type_type;
    err[0] = 0;
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (symbol(ud, marks[i].symbol, &addr) == 0)
            say(err, errlen, &at, "%s", marks[i].what);
    if (symbol(ud, "PyType_Type", &type_type) != 0)
        type_type = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t basicsize;
        uint64_t ob_type;
        if (sizes[i].field == SW_NO_OFFSET || l->type_basicsize == SW_NO_OFFSET ||
            symbol(ud, sizes[i].type, &addr) != 0)
            continue;
        if (type_type && sw_mem_read_u64(m, addr + l->ob_type, &ob_type) == SW_OK) {
            if (ob_type != type_type) {
                say(err, errlen, &at, "%s's type is not PyType_Type at offset %u (another object header)",
                    sizes[i].type, l->ob_type);
                break;   /* then no other field of it can be trusted */
            }
            ok++;
        }
        if (sw_mem_read(m, addr + l->type_basicsize, &basicsize, sizeof basicsize) != SW_OK)
            continue;
        uint64_t want = (uint64_t)sizes[i].field + sizes[i].plus;
        if ((uint64_t)basicsize != want)
            say(err, errlen, &at, "%s.tp_basicsize is %lld where the layout says %llu (%s at %u)", sizes[i].type,
                (long long)basicsize, (unsigned long long)want, sizes[i].field_name, sizes[i].field);
        else
            ok++;
    }
    *checked = ok;
    return at ? SW_EVERSION : SW_OK;
}
