/*
 * hookerr.c - the first error a hook met, kept for the session's report
 * (hookerr.h).
 */
#include "hookerr.h"

#include <stdio.h>

static int recorded;
static char message[256];

void sw_hook_error(const char *what)
{
    if (recorded)
        return;
    recorded = 1;
    snprintf(message, sizeof message, "%s", what);
}

void sw_hook_error_reset(void)
{
    recorded = 0;
    message[0] = 0;
}

const char *sw_hook_error_message(void)
{
    return recorded ? message : NULL;
}
