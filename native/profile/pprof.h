/*
 * pprof.h - the former header of the pprof writer, kept only for the files
 * of native/ext that still include it: its declarations are in
 * calltree_pprof.h, and other rooms include them through the room's public
 * header, profile.h. Remove this file once nothing includes it.
 */
#ifndef SW_PPROF_H
#define SW_PPROF_H

#include "profile.h"

#endif
