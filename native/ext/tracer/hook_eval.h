/*
 * hook_eval.h - the PEP 523 frame-evaluation hook (hook_eval.c): the
 * tracer's exact record of every Python call, and the source of Python
 * frame events for the dispatch layer's other consumers.
 */
#ifndef SW_HOOK_EVAL_H
#define SW_HOOK_EVAL_H

/* Installs or removes the hook as a session recording calls (session_active) and the
 * dispatch layer (Python events wanted by other consumers; on 3.9-3.11
 * also the per-thread hooks it carries to new threads) need, with the
 * session's clock. Called by the switching owner (switch.c), with the GIL. */
void sw_hook_eval_sync(int session_active);

#endif
