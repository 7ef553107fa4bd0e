/*
 * cxxthrow_c.c - the C part of tests/programs/native/cxxthrow.cpp: frames
 * compiled as C (no -fexceptions), so a C++ exception unwinds them without
 * their __cyg_profile_func_exit (C++ frames call it from their cleanups).
 */
#include "cxxthrow.h"

void through(int n, void (*at_bottom)(void))
{
    if (n == 0)
        at_bottom();
    else
        through(n - 1, at_bottom);
}
