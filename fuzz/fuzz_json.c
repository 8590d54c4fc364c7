/* The safetensors header's JSON parser on any text: validate and skip one
   value, then require the end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_cursor c;
    json_init(&c, (const char *)data, size);
    if (json_skip(&c) == 0)
        json_finish(&c);
    /* a failure always says where */
    if (c.err[0] && !strstr(c.err, " at byte "))
        abort();
    return 0;
}
