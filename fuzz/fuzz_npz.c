/* kiln_npz_read and kiln_file_info on one .npz archive. */
#include "fuzz_file.h"
#include "kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    kiln_tensor_list_free(kiln_npz_read(path));
    kiln_file_info(path, fuzz_null());
    return 0;
}
