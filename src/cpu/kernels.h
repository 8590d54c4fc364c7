/* The reference kernels: one function per op, indexed by the op enum
   (ref.c).  They define what every op computes. */
#ifndef KILN_CPU_KERNELS_H
#define KILN_CPU_KERNELS_H

#include "graph/graph.h"

/* Computes node n into out from its inputs' buffers in[0..n_in-1].  Shapes
   come from the node and its inputs; buffers are contiguous row-major. */
typedef void (*kiln_kernel_fn)(const kiln_node *n, void *out, void *const *in);

/* NULL for leaves, whose buffers are bound, not computed. */
extern const kiln_kernel_fn kiln_ref_kernels[KILN_OP_COUNT];

#endif
