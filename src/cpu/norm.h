/* Kernels of the normalisation and dropout ops (ops.def): the reference
   loops (norm_ref.c, dropout.c) that define them and the fast, threaded
   versions (norm_fast.c). */
#ifndef KILN_CPU_NORM_H
#define KILN_CPU_NORM_H

#include "cpu/kernels.h"

void kiln_ref_norm_stats(const kiln_node *n, void *out, void *const *in);
void kiln_ref_norm(const kiln_node *n, void *out, void *const *in);
void kiln_ref_norm_grad(const kiln_node *n, void *out, void *const *in);
void kiln_ref_norm_param_grad(const kiln_node *n, void *out, void *const *in);
void kiln_ref_dropout(const kiln_node *n, void *out, void *const *in);

/* Run-time checks: batch norm in training needs more than one value per
   channel (its unbiased variance divides by count - 1), as in PyTorch.
   KILN_OK, or KILN_ERR_ARG with why in msg. */
kiln_status kiln_cpu_check_norm(const kiln_node *n, void *const *in, char *msg,
                                size_t len);

#endif
