/*
 * common.c - English text for the core's SW_E* codes (common.h).
 */
#include "common.h"

const char *sw_strerror(int code)
{
    switch (code) {
    case SW_OK:       return "success";
    case SW_ENOMEM:   return "out of memory";
    case SW_EIO:      return "input/output error";
    case SW_EFORMAT:  return "not a valid stackwatch trace";
    case SW_ETRUNC:   return "the data ends in the middle of a record";
    case SW_ECRC:     return "checksum mismatch";
    case SW_EVERSION: return "unsupported trace format version";
    case SW_EARG:     return "invalid argument";
    case SW_ESTATE:   return "invalid state for this call";
    case SW_ECANCELED: return "stopped by the caller";
    default:          return "unknown error";
    }
}
