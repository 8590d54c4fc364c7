/* Kernels of cumsum, prod and topk (cpu/scan.c). */
#ifndef KILN_CPU_SCAN_H
#define KILN_CPU_SCAN_H

#include "graph/graph.h"

void kiln_ref_CUMSUM(const kiln_node *n, void *out, void *const *in);
void kiln_ref_PROD(const kiln_node *n, void *out, void *const *in);
void kiln_ref_TOPK(const kiln_node *n, void *out, void *const *in);

#endif
