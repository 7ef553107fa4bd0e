/*
 * export.h - the former header of the trace exporters, kept only for the
 * files of native/ext that still include it: their declarations are in
 * export_chrome.h, export_perfetto.h and export_walk.h, and other rooms
 * include them through the room's public header, trace.h. Remove this file
 * once nothing includes it.
 */
#ifndef SW_EXPORT_H
#define SW_EXPORT_H

#include "trace.h"

#endif
