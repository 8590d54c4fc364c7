/* The fast kernel table: every op with a fast kernel (KILN_FAST_OPS in
   fast.h, and every elementwise op); NULL rows run the reference kernel. */
#include "cpu/fast.h"

const kiln_kernel_fn kiln_fast_kernels[KILN_OP_COUNT] = {
#define KILN_FAST_ROW(OP) [KILN_OP_##OP] = kiln_fast_##OP,
    KILN_FAST_OPS(KILN_FAST_ROW)
#define KILN_UNARY(OP, ...) KILN_FAST_ROW(OP)
#define KILN_BINARY(OP, ...) KILN_FAST_ROW(OP)
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY
#undef KILN_FAST_ROW
};

const kiln_scratch_kernel kiln_scratch_kernels[KILN_OP_COUNT] = {
#define KILN_SCRATCH_ROW(OP, bytes) [KILN_OP_##OP] = {kiln_fast_##OP, bytes},
    KILN_SCRATCH_OPS(KILN_SCRATCH_ROW)
#undef KILN_SCRATCH_ROW
};
