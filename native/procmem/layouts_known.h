/*
 * layouts_known.h - the layouts of the CPython releases stackwatch knows
 * without being built for them (layouts_generated.h, generated from each
 * release's headers by scripts/gen-layouts.py), so that a reader running
 * on one Python reads a process of another. A table's addresses are
 * placeholders (1 = "present") that target.h's binding replaces with the
 * target's; its thread_tid (an offset in glibc's struct pthread) is
 * SW_NO_OFFSET, for the reader to fill from its own machine.
 */
#ifndef SW_LAYOUTS_KNOWN_H
#define SW_LAYOUTS_KNOWN_H

#include "base/base.h"
#include "layout.h"

/* The layout of release version_hex (major.minor.micro must match; the
 * release level and serial are ignored), copied into *out. 0, or SW_EARG
 * if it is not known. */
int sw_layout_known(uint32_t version_hex, sw_py_layout *out);

/* The layout of a known release of the same minor version as version_hex
 * (the base over which 3.13's debug offsets are read). 0 or SW_EARG. */
int sw_layout_known_minor(uint32_t version_hex, sw_py_layout *out);

/* The known releases, as "3.9.18, 3.10.13, ..." into buf. */
void sw_layout_known_list(char *buf, size_t len);

#endif
