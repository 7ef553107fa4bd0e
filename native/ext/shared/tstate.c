/*
 * tstate.c - the per-thread state of the extension and the session
 * generation that threads' keys take (tstate.h).
 */
#include "tstate.h"

__thread sw_tstate sw_T __attribute__((tls_model("initial-exec")));

uint64_t sw_tstate_session_gen;
