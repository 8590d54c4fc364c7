/* The fast kernels: vectorised for the processor at run time and threaded
   over large tensors.  Their table (fast.c), their declarations and the
   run-time ISA selection they are compiled with. */
#ifndef KILN_CPU_FAST_H
#define KILN_CPU_FAST_H

#include "cpu/kernels.h"

/* Functions marked KILN_CLONES are compiled for AVX-512, AVX2+FMA and
   baseline x86-64; the loader picks the best for the processor (ifunc), so
   the binary runs on any x86-64 and no -march flag is global. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) &&         \
    !defined(KILN_NO_CLONES)
#define KILN_CLONES                                                            \
    __attribute__((                                                            \
        target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KILN_CLONES
#endif

/* Indexed by the op enum; NULL where an op has no fast version: the
   reference runs instead. */
extern const kiln_kernel_fn kiln_fast_kernels[KILN_OP_COUNT];

/* Ops with a fast kernel, each defined as kiln_fast_<OP> in a fast_*.c
   file (fused.c for FUSED) and listed in kiln_fast_kernels. */
#define KILN_FAST_OPS(X)                                                       \
    X(SELECT)                                                                  \
    X(SUM)                                                                     \
    X(RMAX)                                                                    \
    X(RESHAPE)                                                                 \
    X(STOPGRAD) X(ASSIGN) X(BROADCAST) X(PERMUTE) X(MATMUL) X(SLICE) X(PAD)    \
        X(MATMUL_ACC) X(SOFTMAX_CE) X(SOFTMAX_CE_GRAD)                         \
            X(FUSED) /* pooling group (cpu/fast_pool.c) */                     \
        X(MAX_POOL2D) X(MAX_POOL2D_GRAD) X(MAX_POOL2D_GATHER) X(RESAMPLE2D)    \
            X(RESAMPLE2D_GRAD) /* normalisation (cpu/fast_norm.c) */           \
        X(NORM_STATS) X(NORM) X(NORM_GRAD)                                     \
            X(NORM_PARAM_GRAD) /* indexing group (cpu/index_fast.c) */         \
        KILN_FAST_INDEX_OPS(                                                   \
            X) /* attention group: rms_norm (cpu/fast_rms_norm.c) */           \
        X(RMS_NORM) X(RMS_NORM_GRAD)
#define KILN_FAST_INDEX_OPS(X)                                                 \
    X(INDEX_SELECT)                                                            \
    X(INDEX_ADD) X(GATHER) X(SCATTER_ADD) X(CUMSUM) X(INT_ADD) X(INT_SUB)      \
        X(INT_MUL) X(INT_FLOOR_DIV) X(INT_MOD)

/* Permutes as a strided copy (cpu/fast_strided.c; the kernel of PERMUTE
   calls it for the permutes that are not a batched transpose). */
void kiln_fast_permute_strided(const kiln_node *n, void *o, const void *x);

#define KILN_FAST_DECLARE(OP)                                                  \
    void kiln_fast_##OP(const kiln_node *n, void *out, void *const *in);
KILN_FAST_OPS(KILN_FAST_DECLARE)
/* and every elementwise op of the table (cpu/fast_elementwise.c) */
#define KILN_UNARY(OP, ...) KILN_FAST_DECLARE(OP)
#define KILN_BINARY(OP, ...) KILN_FAST_DECLARE(OP)
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY
#undef KILN_FAST_DECLARE

/* Fast kernels that need scratch memory besides their output (the
   convolutions' im2col columns, cpu/conv_fast.c): bytes(n) says how much;
   whoever runs the kernel hands it that much, 64-byte aligned, so that a
   kernel never allocates (kiln_cpu_scratch_bytes, kiln_cpu_run_kernel). */
typedef struct kiln_scratch_kernel {
    void (*run)(const kiln_node *n, void *out, void *const *in, void *scratch);
    size_t (*bytes)(const kiln_node *n);
} kiln_scratch_kernel;
/* Indexed by the op enum; a row with run NULL has none. */
extern const kiln_scratch_kernel kiln_scratch_kernels[KILN_OP_COUNT];

/* X(OP, bytes): kiln_fast_<OP> and its scratch size function. */
#define KILN_SCRATCH_OPS(X)                                                    \
    X(CONV, kiln_conv_scratch_bytes)                                           \
    X(CONV_TRANSPOSE, kiln_conv_scratch_bytes)                                 \
    X(CONV_WGRAD, kiln_conv_scratch_bytes)                                     \
    /* attention group (cpu/fast_attention.c): score tiles */                  \
    X(ATTENTION, kiln_attention_scratch_bytes)                                 \
    X(ATTENTION_GRAD, kiln_attention_scratch_bytes)
#define KILN_SCRATCH_DECLARE(OP, bytes)                                        \
    void kiln_fast_##OP(const kiln_node *n, void *out, void *const *in,        \
                        void *scratch);
KILN_SCRATCH_OPS(KILN_SCRATCH_DECLARE)
#undef KILN_SCRATCH_DECLARE
size_t kiln_conv_scratch_bytes(const kiln_node *n);
size_t kiln_attention_scratch_bytes(const kiln_node *n);

#endif
