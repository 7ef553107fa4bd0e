/*
 * asyncio_layout.c - the generated asyncio tables, looked up by version
 * (see asyncio_layout.h).
 */
#include "asyncio_layout.h"

#include "asyncio_generated.h"

#define N_KNOWN (sizeof sw_asyncio_generated / sizeof sw_asyncio_generated[0])

int sw_asyncio_layout_known(uint32_t version_hex, sw_asyncio_layout *out)
{
    for (size_t i = 0; i < N_KNOWN; i++) {
        if ((sw_asyncio_generated[i].version_hex >> 16) == (version_hex >> 16)) {
            *out = sw_asyncio_generated[i];
            return SW_OK;
        }
    }
    return SW_EARG;
}
