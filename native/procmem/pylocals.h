/*
 * pylocals.h - a frame's local variables read from a target's memory,
 * without running code in it (`stackwatch dump --locals`): the names from
 * the frame's code object, the values from the frame's own array, each
 * value read as itself when it is simple (None, bool, int, float, str,
 * bytes: exact types only, not subclasses) and otherwise named by its
 * type. A cell (a cell or free variable) gives what it holds; an unbound
 * variable (an empty slot or cell) is left out, as locals() leaves it out.
 * 3.9-3.13 (layout.h, "A frame's local variables").
 *
 * A frame runs no code of the module level or a class body in fast
 * locals: their variables are the module's or class's dict, not read
 * here (such frames have no locals). Every read is bounded and every
 * count and type checked; a target running on while it is read can give
 * values of a later instant than its stack, never a crash or a hang.
 */
#ifndef SW_PYLOCALS_H
#define SW_PYLOCALS_H

#include "layout.h"
#include "mem.h"
#include "pystr.h"

#define SW_PYLOCALS_MAX 512u          /* variables read per frame (the first ones) */
#define SW_PYVAL_INT_MAX_DIGITS 300u  /* longer ints (over ~2,700 decimal digits) are "other" */
#define SW_PYVAL_TYPE_NAME_MAX 128u

typedef enum {
    SW_PYVAL_OTHER = 0,      /* not a simple value: type_name and addr only */
    SW_PYVAL_NONE,
    SW_PYVAL_BOOL,           /* small: 0 or 1 */
    SW_PYVAL_INT,            /* negative, digits[ndigits] of shift bits each, least significant first */
    SW_PYVAL_FLOAT,          /* f */
    SW_PYVAL_STR,            /* data: UTF-8, len bytes; truncated if longer than SW_STR_MAX_CHARS */
    SW_PYVAL_BYTES,          /* data: len bytes; truncated if longer than SW_STR_MAX_CHARS */
    SW_PYVAL_UNREADABLE,     /* its memory (or its type's) could not be read */
} sw_pyval_kind;

typedef struct sw_pyval {
    uint32_t kind;           /* sw_pyval_kind */
    uint64_t addr;           /* the object */
    char type_name[SW_PYVAL_TYPE_NAME_MAX];   /* its type's tp_name (UTF-8), "" if unreadable */
    int negative;
    int truncated;
    uint64_t small;
    double f;
    uint32_t ndigits, shift;
    uint32_t digits[SW_PYVAL_INT_MAX_DIGITS];
    size_t len;
    char data[SW_STR_BUF];
} sw_pyval;

/* 0 if the layout describes what this file reads (every field present and
 * inside SW_LAYOUT_MAX_READ), else SW_EARG with err. Called once per
 * layout, before reading. */
int sw_pylocals_usable(const sw_py_layout *l, char *err, size_t errlen);

/* Called once per bound variable, in the code's order; v is valid during
 * the call only. Returns nonzero to stop. */
typedef int (*sw_pylocal_fn)(void *ud, const char *name, const sw_pyval *v);

/* The variables of the frame at frame (a _PyInterpreterFrame on 3.11+, a
 * PyFrameObject before) whose code object is code. Returns the number
 * given to fn, or SW_EIO (the names or the values could not be read) or
 * SW_EARG (they do not have a sane shape). */
int sw_pylocals_read(sw_mem *m, const sw_py_layout *l, uint64_t frame, uint64_t code, sw_pylocal_fn fn, void *ud);

#endif
