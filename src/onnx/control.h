/* What If and Loop (ops_control.c) share with Scan (ops_scan.c): values
   passed into and out of bodies, a body's conversion, and stacking the
   per-step values of scan outputs. */
#ifndef KILN_ONNX_CONTROL_H
#define KILN_ONNX_CONTROL_H

#include "onnx/onnx_internal.h"

/* The most body copies one node may unroll into; the most nodes all
   bodies of a model may convert to (nested loops multiply); the deepest
   nesting of bodies. */
#define OX_MAX_UNROLL 1024
#define OX_MAX_BODY_NODES ((int64_t)1 << 16)
#define OX_MAX_DEPTH 32

/* A value passed into or out of a body. */
typedef struct flow {
    kiln_node *node;
    int type;
    ox_host *known; /* owned */
} flow;

/* Frees the known values of f[0..n). */
void ox_flows_free(flow *f, int n);
/* Graph attribute name of n; NULL (recorded) when absent or not a graph. */
const Onnx__GraphProto *ox_graph_attr(ox_ctx *c, const ox_node *n,
                                      const char *name);
/* Converts body gp once with its inputs bound to in[0..n_in) and reads
   its n_out outputs into out (known values copied); -1 (recorded) when the
   body has other counts or any of its nodes failed. */
int ox_run_body(ox_ctx *c, const ox_node *n, const Onnx__GraphProto *gp,
                const flow *in, int n_in, flow *out, int n_out);
/* The count per-step values stacked on a new axis 0 (reversed when rev),
   that axis then moved to axis (negative counts from the end); NULL
   (recorded) for a bad axis. */
kiln_node *ox_stack_steps(ox_ctx *c, const ox_node *n, kiln_node **steps,
                          int count, int64_t axis, int rev);
/* Scan (ops_scan.c). */
int ox_conv_scan(ox_ctx *c, ox_node *n);

#endif
