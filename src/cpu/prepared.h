/* State a node's fast kernel computes once and reuses at every run of a
   compiled function (prepared.c): a matrix product's constant right
   operand packed into the AVX-512 kernel's panels, a convolution's
   constant weights packed for its direct kernels. */
#ifndef KILN_CPU_PREPARED_H
#define KILN_CPU_PREPARED_H

#include "graph/graph.h"

typedef struct kiln_cpu_prepared kiln_cpu_prepared;

/* What node n's fast kernel can keep between runs, computed now from its
   constant inputs (whose values never change), or NULL when there is
   nothing to keep (or no memory for it: the kernel then runs without). */
kiln_cpu_prepared *kiln_cpu_prepare(const kiln_node *n);
/* Frees p (NULL: nothing). */
void kiln_cpu_prepared_free(kiln_cpu_prepared *p);
/* Runs n's fast kernel with p, what kiln_cpu_prepare(n) returned, and
   its scratch: the same floats as without p. */
void kiln_cpu_prepared_run(const kiln_cpu_prepared *p, const kiln_node *n,
                           void *out, void *const *in, void *scratch);

/* The matmul kernel's side (fast_matmul.c): the rows of each product it
   makes for n, and the kernel reading op(b) from packed as well. */
int64_t kiln_fast_matmul_rows(const kiln_node *n);
void kiln_fast_matmul_packed(const kiln_node *n, void *o, void *const *in,
                             const float *packed);

/* The conv kernel's side (conv_fast.c): the floats of n's weights packed
   for its direct kernel (0: its kernel packs none), packing them from w,
   and the kernel reading them from packed. */
int64_t kiln_fast_conv_packed_floats(const kiln_node *n);
void kiln_fast_conv_pack(const kiln_node *n, const float *w, float *packed);
void kiln_fast_conv_packed(const kiln_node *n, void *out, void *const *in,
                           void *scratch, const float *packed);

#endif
