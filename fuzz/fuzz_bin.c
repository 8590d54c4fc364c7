/* kiln_bin_read on one Kiln .bin checkpoint. */
#include "fuzz_file.h"
#include "kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kiln_tensor_list_free(kiln_bin_read(fuzz_file(data, size)));
    return 0;
}
