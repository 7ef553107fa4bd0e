/*
 * profile.h - the public header of native/profile, call trees and what
 * holds them: what other rooms include (never the files below one by one).
 *
 *   calltree.h        the function table and the call tree
 *   calltree_emit.h   collapsed stacks and speedscope JSON
 *   calltree_pprof.h  pprof profiles
 *   lineids.h         per-line function ids (lines mode)
 *   history.h         call trees over time
 *   aggregate.h       the live profile, fed by the sampler
 *   profile_file.h    profile files (.swprof)
 */
#ifndef SW_PROFILE_H
#define SW_PROFILE_H

#include "aggregate.h"
#include "calltree.h"
#include "calltree_emit.h"
#include "calltree_pprof.h"
#include "history.h"
#include "lineids.h"
#include "profile_file.h"

#endif
