/* kiln_idx_read through the gzip path: the input is an IDX file's content,
   gzip-compressed here, so the mutations reach the IDX header and data
   rather than breaking the deflate stream. */
#include <zlib.h>

#include "fuzz_file.h"
#include "kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    z_stream z = {0};
    if (size > (1u << 20) ||
        deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    uLong cap = deflateBound(&z, (uLong)size);
    unsigned char *gz = malloc(cap);
    if (!gz)
        abort();
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)size;
    z.next_out = gz;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    const char *path = fuzz_file(gz, z.total_out);
    deflateEnd(&z);
    free(gz);
    kiln_tensor_free(kiln_idx_read(path, KILN_I32));
    return 0;
}
