/* Prepared state: a matmul whose right operand is a 2-D constant (an
   inference graph's weight: ONNX initializers, kiln_constant) packs it
   once, when the compiled function is planned, instead of at every run;
   on the MLP 784-600-10 at batch 128 that copy was an eighth of the
   product's time.  So does a conv whose direct kernel packs its constant
   weights.  Only constants: a variable changes between runs
   (optimiser steps, loads), so its products pack it every time. */
#include <stdlib.h>

#include "cpu/gemm.h"
#include "cpu/prepared.h"

struct kiln_cpu_prepared {
    float *packed; /* op(b) in the kernel's panels */
};

/* p with floats of packed memory, or NULL when out of memory. */
static kiln_cpu_prepared *alloc_packed(int64_t floats)
{
    kiln_cpu_prepared *p = malloc(sizeof *p);
    size_t bytes = ((size_t)floats * sizeof(float) + 63) / 64 * 64;
    float *packed = aligned_alloc(64, bytes);
    if (!p || !packed) {
        free(p);
        free(packed);
        return NULL;
    }
    p->packed = packed;
    return p;
}

/* A convolution's constant weights packed for conv_rows or conv_lanes
   (the CNN's 32->64 layer: 200 KB at every run). */
static kiln_cpu_prepared *prepare_conv(const kiln_node *n)
{
    const kiln_node *w = n->in[1];
    if (w->op != KILN_OP_CONSTANT || n->dtype != KILN_F32)
        return NULL;
    int64_t floats = kiln_fast_conv_packed_floats(n);
    kiln_cpu_prepared *p = floats ? alloc_packed(floats) : NULL;
    if (p)
        kiln_fast_conv_pack(n, w->at.data, p->packed);
    return p;
}

kiln_cpu_prepared *kiln_cpu_prepare(const kiln_node *n)
{
    if (n->op == KILN_OP_CONV)
        return prepare_conv(n);
    if (n->op != KILN_OP_MATMUL || n->dtype != KILN_F32)
        return NULL;
    const kiln_node *b = n->in[1];
    if (b->op != KILN_OP_CONSTANT || b->shape.ndim != 2)
        return NULL;
    int tb = n->at.trans_b;
    int64_t cols = b->shape.d[tb ? 0 : 1], k = b->shape.d[tb ? 1 : 0];
    int64_t floats =
        kiln_cpu_gemm_packed_floats(kiln_fast_matmul_rows(n), cols, k);
    kiln_cpu_prepared *p = floats ? alloc_packed(floats) : NULL;
    if (p)
        kiln_cpu_gemm_pack_b(tb, cols, k, b->at.data, p->packed);
    return p;
}

void kiln_cpu_prepared_free(kiln_cpu_prepared *p)
{
    if (!p)
        return;
    free(p->packed);
    free(p);
}

void kiln_cpu_prepared_run(const kiln_cpu_prepared *p, const kiln_node *n,
                           void *out, void *const *in, void *scratch)
{
    if (n->op == KILN_OP_CONV)
        kiln_fast_conv_packed(n, out, in, scratch, p->packed);
    else
        kiln_fast_matmul_packed(n, out, in, p->packed);
}
