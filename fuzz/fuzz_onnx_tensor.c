/* kiln_onnx_tensor_read on one serialized TensorProto (the .pb files of
   ONNX's test data, and what `kiln run --input NAME=FILE.pb` reads). */
#include "fuzz_file.h"
#include "kiln.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int type = 0;
    kiln_tensor *t = kiln_onnx_tensor_read(fuzz_file(data, size), &type);
    /* a tensor read is whole: its data pointer covers its elements */
    if (t && kiln_tensor_numel(t) > 0 && !kiln_tensor_data(t))
        abort();
    kiln_tensor_free(t);
    return 0;
}
