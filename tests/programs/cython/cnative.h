/* cnative.h - the C functions of cnative.c that cynative.pyx calls. */
#ifndef CNATIVE_H
#define CNATIVE_H

/* x + 1 */
int c_leaf(int x);
/* cb(c_leaf(x)): a Cython function called back from native code */
int c_apply(int x, int (*cb)(int));

#endif
