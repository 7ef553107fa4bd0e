/*
 * objects.h - object-lifetime events of instances of Python classes
 * (objects.c): new_start / new_done / delete_start / delete_done, from
 * wrapped slots of every Python class while some consumer wants them.
 */
#ifndef SW_OBJECTS_H
#define SW_OBJECTS_H

#include "ext/tracer/frame_compat.h"

/* Wraps the slots of every Python class (on), or restores every slot
 * wrapped (off); nothing when already so. Called by the switching owner
 * with the GIL. Never raises (a failure is a warning). */
void sw_objects_sync(int on);

/* Adds _objects_state() to the module. Returns 0, or -1 with an exception
 * set. */
int sw_objects_add_to_module(PyObject *m);

#endif
