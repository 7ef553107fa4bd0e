/*
 * exporters.c - the table of trace exporters (exporters.h) as data, and
 * the lookup by name.
 */
#include "exporters.h"

#include <stdio.h>
#include <string.h>

#define SW_X_EXPORTER_(name, fn, suffix, binary) {#name, fn, suffix, binary},
const sw_exporter sw_exporters[] = {SW_TRACE_EXPORTERS(SW_X_EXPORTER_)};
const size_t sw_exporter_count = sizeof sw_exporters / sizeof sw_exporters[0];

const sw_exporter *sw_exporter_find(const char *name)
{
    for (size_t i = 0; name && i < sw_exporter_count; i++)
        if (strcmp(sw_exporters[i].name, name) == 0)
            return &sw_exporters[i];
    return NULL;
}

void sw_exporter_names(char *buf, size_t len)
{
    size_t n = 0;
    if (len)
        buf[0] = 0;
    for (size_t i = 0; i < sw_exporter_count && n < len; i++) {
        int k = snprintf(buf + n, len - n, "%s%s", i ? ", " : "", sw_exporters[i].name);
        if (k < 0)
            break;
        n += (size_t)k;
    }
}
