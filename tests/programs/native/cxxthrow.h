/* cxxthrow.h - what cxxthrow.cpp calls of cxxthrow_c.c. */
#ifndef CXXTHROW_H
#define CXXTHROW_H

#ifdef __cplusplus
extern "C" {
#endif
/* Calls itself n times, then at_bottom() (which throws, from C++). */
void through(int n, void (*at_bottom)(void));
#ifdef __cplusplus
}
#endif

#endif
