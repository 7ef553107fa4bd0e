/*
 * render.h - the one entry point that renders call trees to an output
 * format in C: stackwatch._native.render_trees(format, trees, ...) for the
 * formats "collapsed", "speedscope" and "pprof" (native/profile's writers).
 * The Python registry of output formats (src/stackwatch/render/
 * formats.py) calls it for every source of trees: a running profiler, a
 * history, a profile file, a single CallTree; it also compresses pprof
 * output (this gives the bare Profile message). Includes Python.h.
 */
#ifndef SW_RENDER_H
#define SW_RENDER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds render_trees to the module. Returns 0, or -1 with an exception. */
int sw_render_add_to_module(PyObject *m);

#endif
