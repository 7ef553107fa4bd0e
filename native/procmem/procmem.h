/*
 * procmem.h - the public header of native/procmem, reading a Python
 * process's memory: what other rooms include (never the files below one by
 * one).
 *
 *   layout.h        where CPython keeps what a stack reader needs
 *   layouts_known.h the layouts of known releases (generated from their headers)
 *   debug_offsets.h a 3.13 layout from the target's _Py_DebugOffsets
 *   mem.h           fault-safe, bounded reads of a process's memory
 *   pystr.h         str objects to UTF-8
 *   linetable.h     line tables decoded
 *   codecache.h     code objects by address
 *   pystack.h       interpreter -> thread states -> frames
 *   pylocals.h      a frame's local variables
 *   nativestack.h   a thread's native stack, captured in a signal handler
 *   symbols.h       native code addresses to function names
 *   nativemerge.h   native and Python frames as one stack
 *   threadstate.h   what each OS thread is doing, and its CPU time
 *   sampler_loop.h  the sampling thread
 *   target.h        the process read: its interpreter file, _PyRuntime, version
 *   coremem.h       the memory of a core file's process
 */
#ifndef SW_PROCMEM_H
#define SW_PROCMEM_H

#include "codecache.h"
#include "coremem.h"
#include "debug_offsets.h"
#include "freeze.h"
#include "layout.h"
#include "layouts_known.h"
#include "linetable.h"
#include "mem.h"
#include "nativemerge.h"
#include "nativestack.h"
#include "pending.h"
#include "pylocals.h"
#include "pyobj.h"
#include "pystack.h"
#include "pystr.h"
#include "sampler_loop.h"
#include "symbols.h"
#include "target.h"
#include "threadnames.h"
#include "threadstate.h"

#endif
