# cython: profile=True, language_level=3
# cynative.pyx - the Cython module of tests/py/tracer/test_cython.py that
# calls native functions built with stackwatch's hooks (cnative.c), one of
# which calls back into this module:
#
#   outer(n) -> for i < n: c_apply(i, inner) -> c_leaf(i)
#                                            -> inner(i + 1) -> c_leaf(i + 1)

cdef extern from "cnative.h":
    int c_leaf(int x)
    int c_apply(int x, int (*cb)(int) noexcept)


cdef int inner(int x) noexcept:
    return c_leaf(x) * 2


def outer(int n):
    total = 0
    for i in range(n):
        total += c_apply(i, inner)
    return total
