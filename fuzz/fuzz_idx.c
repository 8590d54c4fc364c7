/* kiln_idx_read on one IDX file as given: plain, or gzip when the input
   starts with the gzip magic. */
#include "fuzz_file.h"
#include "kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kiln_tensor_free(kiln_idx_read(fuzz_file(data, size), KILN_F32));
    return 0;
}
