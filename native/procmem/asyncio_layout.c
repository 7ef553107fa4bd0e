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

void sw_asyncio_bind_objects(const sw_asyncio_layout *a, sw_py_layout *l)
{
    if (l->managed_kind != SW_MANAGED_NONE || a->keys_size == SW_NO_OFFSET)
        return;
    l->module_dict = a->module_dict;
    l->keys_size = a->keys_size;
    l->keys_nentries = a->keys_nentries;
    l->keys_indices = a->keys_indices;
    l->entry_size = a->entry_size;
    l->entry_key = a->entry_key;
    l->entry_value = a->entry_value;
    l->values_values = 0;   /* ma_values is the array of values itself */
    l->managed_kind = SW_MANAGED_DICTOFFSET;
}
