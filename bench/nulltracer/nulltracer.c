/*
 * nulltracer - the floor of stackwatch's recording mechanism, for the
 * benchmark only (bench/README.md). It installs a PEP 523 frame-evaluation
 * hook that, on every frame entry and exit, reads the TSC and stores 16
 * bytes (the TSC and the frame's address, tagged entry/exit) into one fixed
 * ring buffer, then runs the frame with CPython's default evaluator. It
 * records nothing else, never allocates and never writes a file.
 *
 * It also exports the benchmark's two callgrind markers:
 * nulltracer_region(fn) and nulltracer_workload(fn) call fn() and return
 * its result; the benchmark counts instructions only inside the region
 * (by client requests, or by --toggle-collect=nulltracer_region when built
 * without valgrind's header) and reads the workload's inclusive cost.
 *
 * On 3.13 the harness also sets sys.monitoring PY_START/PY_RETURN local
 * events on every __init__ code object with mon_start/mon_return below as
 * callbacks: stackwatch's mechanism there (CPython pushes some __init__
 * frames without the hook), so the floor is of the same mechanism.
 *
 * Supports CPython 3.9 to 3.13 (the frame type handed to the hook is
 * PyFrameObject before 3.11, struct _PyInterpreterFrame from 3.11 on; we
 * only pass it through and take its address, so no internal header is
 * needed).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#  include <x86intrin.h>
#  define NT_TSC() __rdtsc()
#else
#  include <time.h>
static inline uint64_t nt_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#  define NT_TSC() nt_clock()
#endif

/* Callgrind client requests (no-ops outside valgrind), when the header is
 * there: the benchmark then runs valgrind with --instr-atstart=no, so that
 * interpreter start-up runs uninstrumented, and the region below switches
 * instrumentation and collection on and off itself. */
#if defined(__has_include)
#  if __has_include(<valgrind/callgrind.h>)
#    include <valgrind/callgrind.h>
#    define NT_CALLGRIND 1
#  endif
#endif
#ifndef NT_CALLGRIND
#  define NT_CALLGRIND 0
#endif

#if PY_VERSION_HEX < 0x03090000
#  error "nulltracer needs CPython 3.9 or newer"
#endif

#if PY_VERSION_HEX >= 0x030B0000
#  define NT_FRAME struct _PyInterpreterFrame
#else
#  define NT_FRAME PyFrameObject
#endif

typedef struct {
    uint64_t tsc;
    uint64_t tag; /* frame address | 1 on exit */
} nt_record_t;

#define NT_RING_LEN (1u << 16) /* 65536 records, 1 MiB */

static nt_record_t nt_ring[NT_RING_LEN];
static uint64_t nt_count;       /* records written since start() */
static int nt_installed;

/* The GIL is held in the hook, so a plain index is enough. */
static inline void nt_store(uintptr_t tag)
{
    nt_record_t *r = &nt_ring[nt_count & (NT_RING_LEN - 1)];
    r->tsc = NT_TSC();
    r->tag = (uint64_t)tag;
    nt_count++;
}

#if PY_VERSION_HEX >= 0x030D0000
/* 3.13: the frame the hook entered last (the init-gap callbacks below tell
 * a frame the hook saw from one CPython pushed inline). */
static void *nt_hook_frame;
#  define NT_NOTE_FRAME(f) (nt_hook_frame = (void *)(f))
#else
#  define NT_NOTE_FRAME(f) ((void)0)
#endif

static PyObject *nt_eval(PyThreadState *ts, NT_FRAME *f, int throwflag)
{
    NT_NOTE_FRAME(f);
    nt_store((uintptr_t)f);
    PyObject *res = _PyEval_EvalFrameDefault(ts, f, throwflag);
    nt_store((uintptr_t)f | 1u);
    return res;
}

static PyObject *nt_start(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (nt_installed || cur == (_PyFrameEvalFunction)nt_eval) {
        PyErr_SetString(PyExc_RuntimeError, "nulltracer is already started");
        return NULL;
    }
    if (cur != NULL && cur != (_PyFrameEvalFunction)_PyEval_EvalFrameDefault) {
        PyErr_SetString(PyExc_RuntimeError, "another frame evaluation hook is installed");
        return NULL;
    }
    nt_count = 0;
    _PyInterpreterState_SetEvalFrameFunc(interp, (_PyFrameEvalFunction)nt_eval);
    nt_installed = 1;
    Py_RETURN_NONE;
}

static PyObject *nt_stop(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!nt_installed) {
        PyErr_SetString(PyExc_RuntimeError, "nulltracer is not started");
        return NULL;
    }
    PyInterpreterState *interp = PyThreadState_Get()->interp;
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == (_PyFrameEvalFunction)nt_eval)
        _PyInterpreterState_SetEvalFrameFunc(interp, (_PyFrameEvalFunction)_PyEval_EvalFrameDefault);
    nt_installed = 0;
    return PyLong_FromUnsignedLongLong(nt_count);
}

static PyObject *nt_events(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(nt_count);
}

/* Reads the ring back. Besides letting a test look at what was recorded,
 * it makes the ring observable: without a reader, the compiler may (and
 * gcc -O2 does) drop the stores into it, and the floor would be too low. */
static PyObject *nt_ring_checksum(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    uint64_t sum = 0;
    for (size_t i = 0; i < NT_RING_LEN; i++)
        sum += nt_ring[i].tsc ^ nt_ring[i].tag;
    return PyLong_FromUnsignedLongLong(sum);
}

/* Markers for callgrind --toggle-collect. Not static, never inlined, and
 * with work after the call so the call is not turned into a tail jump. */
static volatile uintptr_t nt_sink;

__attribute__((noinline, visibility("default"))) PyObject *nulltracer_region(PyObject *fn)
{
#if NT_CALLGRIND
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_TOGGLE_COLLECT;
#endif
    PyObject *res = PyObject_CallNoArgs(fn);
    nt_sink = (uintptr_t)res;
#if NT_CALLGRIND
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_STOP_INSTRUMENTATION;
#endif
    return res;
}

__attribute__((noinline, visibility("default"))) PyObject *nulltracer_workload(PyObject *fn)
{
    PyObject *res = PyObject_CallNoArgs(fn);
    nt_sink = (uintptr_t)res;
    return res;
}

static PyObject *nt_region(PyObject *self, PyObject *fn)
{
    (void)self;
    return nulltracer_region(fn);
}

static PyObject *nt_workload(PyObject *self, PyObject *fn)
{
    (void)self;
    return nulltracer_workload(fn);
}

#if PY_VERSION_HEX >= 0x030D0000
/* The second half of stackwatch's mechanism on 3.13: sys.monitoring
 * PY_START / PY_RETURN as local events on the __init__ code objects (the
 * harness sets them up), because CALL_ALLOC_AND_ENTER_INIT pushes __init__
 * frames without the PEP 523 hook. The callbacks do the least that keeps
 * the trace exact: a frame the hook entered is skipped; any other is
 * stored and remembered, and its return stored. */
#define NT_GAP_MAX 256
static void *nt_gap[NT_GAP_MAX];
static unsigned nt_gap_depth;

static PyObject *nt_mon_start(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    (void)args;
    (void)n;
    void *f = PyThreadState_Get()->current_frame;
    if (nt_installed && f != nt_hook_frame && nt_gap_depth < NT_GAP_MAX) {
        nt_gap[nt_gap_depth++] = f;
        nt_store((uintptr_t)f);
    }
    Py_RETURN_NONE;
}

static PyObject *nt_mon_return(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    (void)self;
    (void)args;
    (void)n;
    void *f = PyThreadState_Get()->current_frame;
    if (nt_gap_depth && nt_gap[nt_gap_depth - 1] == f) {
        nt_gap_depth--;
        nt_store((uintptr_t)f | 1u);
    }
    Py_RETURN_NONE;
}
#endif

static PyMethodDef nt_methods[] = {
#if PY_VERSION_HEX >= 0x030D0000
    {"mon_start", (PyCFunction)(void (*)(void))nt_mon_start, METH_FASTCALL, "3.13 init gap: PY_START callback."},
    {"mon_return", (PyCFunction)(void (*)(void))nt_mon_return, METH_FASTCALL, "3.13 init gap: PY_RETURN / PY_UNWIND callback."},
#endif
    {"start", nt_start, METH_NOARGS, "Install the hook (records into a fixed ring)."},
    {"stop", nt_stop, METH_NOARGS, "Remove the hook; return the number of events recorded."},
    {"events", nt_events, METH_NOARGS, "Events recorded since the last start()."},
    {"ring_checksum", nt_ring_checksum, METH_NOARGS, "A checksum of the ring's contents."},
    {"region", nt_region, METH_O, "region(fn): call fn(); callgrind marker for the measured region."},
    {"workload", nt_workload, METH_O, "workload(fn): call fn(); callgrind marker for the workload alone."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef nt_module = {
    PyModuleDef_HEAD_INIT, "nulltracer",
    "Bench-only PEP 523 hook: rdtsc + 16-byte ring store per frame entry/exit.",
    -1, nt_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_nulltracer(void)
{
    PyObject *m = PyModule_Create(&nt_module);
    if (m && PyModule_AddIntConstant(m, "CALLGRIND_REQUESTS", NT_CALLGRIND) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
