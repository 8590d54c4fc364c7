/* The exporter's movement ops.  Their Kiln attributes hold sizes at the
   batch the graph was built at; a dimension that follows the symbolic
   batch is written so that ONNX derives it from the input at run time
   (0 or -1 in Reshape's shape, 1 in Expand's, an open end in Slice's). */
#include <stdint.h>

#include "onnx/save.h"

/* Reshape's target: a symbolic dim where the input has the symbolic one
   at the same axis copies it (0), one other is inferred (-1). */
static void emit_reshape(sv_ctx *c, const kiln_node *n)
{
    kiln_shape in = n->in[0]->shape, out = n->shape;
    int64_t v[KILN_MAX_DIMS];
    int inferred = 0, zero = 0;
    for (int k = 0; k < out.ndim; k++)
        zero |= out.d[k] == 0;
    if (in.sym && !out.sym)
        sv_node_problem(c, n,
                        "merges the symbolic batch dim with others: the "
                        "result does not follow the batch");
    for (int k = 0; k < out.ndim; k++) {
        v[k] = out.d[k];
        if (!(out.sym >> k & 1u))
            continue;
        if (!zero && k < in.ndim && (in.sym >> k & 1u))
            v[k] = 0;
        else if (!inferred && !zero)
            v[k] = -1, inferred = 1;
        else
            sv_node_problem(c, n, "cannot write its symbolic dims");
    }
    Onnx__NodeProto *p =
        sv_op2(c, "Reshape", sv_name(c, n->in[0]),
               sv_ints(c, n, "shape", v, out.ndim), sv_name(c, n));
    if (zero)
        sv_attr_int(c, p, "allowzero", 1);
}

static void emit_permute(sv_ctx *c, const kiln_node *n)
{
    int64_t perm[KILN_MAX_DIMS];
    for (int k = 0; k < n->shape.ndim; k++)
        perm[k] = n->at.perm[k];
    sv_attr_ints(c, sv_op1(c, "Transpose", sv_name(c, n->in[0]), sv_name(c, n)),
                 "perm", perm, n->shape.ndim);
}

/* Expand broadcasts like numpy: 1 keeps the input's (symbolic) dim. */
static void emit_broadcast(sv_ctx *c, const kiln_node *n)
{
    kiln_shape in = n->in[0]->shape, out = n->shape;
    int64_t v[KILN_MAX_DIMS];
    for (int k = 0; k < out.ndim; k++) {
        int j = k - (out.ndim - in.ndim);
        v[k] = out.d[k];
        if (!(out.sym >> k & 1u))
            continue;
        if (j >= 0 && (in.sym >> j & 1u))
            v[k] = 1;
        else
            sv_node_problem(c, n, "broadcasts along the symbolic batch dim");
    }
    sv_op2(c, "Expand", sv_name(c, n->in[0]),
           sv_ints(c, n, "shape", v, out.ndim), sv_name(c, n));
}

/* Slice over the axes it narrows. */
static void emit_slice(sv_ctx *c, const kiln_node *n)
{
    kiln_shape in = n->in[0]->shape, out = n->shape;
    int64_t starts[KILN_MAX_DIMS], ends[KILN_MAX_DIMS], axes[KILN_MAX_DIMS];
    int count = 0;
    for (int k = 0; k < in.ndim; k++) {
        if (n->at.lo[k] == 0 && out.d[k] == in.d[k])
            continue;
        if (in.sym >> k & 1u)
            sv_node_problem(c, n, "slices the symbolic batch dim");
        starts[count] = n->at.lo[k];
        ends[count] = n->at.lo[k] + out.d[k];
        axes[count++] = k;
    }
    if (!count) {
        sv_op1(c, "Identity", sv_name(c, n->in[0]), sv_name(c, n));
        return;
    }
    const char *in4[4] = {
        sv_name(c, n->in[0]), sv_ints(c, n, "starts", starts, count),
        sv_ints(c, n, "ends", ends, count), sv_ints(c, n, "axes", axes, count)};
    sv_op(c, "Slice", in4, 4, sv_name(c, n));
}

/* Constant padding: pads are [begins..., ends...], the value a scalar of
   the input's type. */
static void emit_pad(sv_ctx *c, const kiln_node *n)
{
    kiln_shape in = n->in[0]->shape, out = n->shape;
    int64_t pads[2 * KILN_MAX_DIMS];
    for (int k = 0; k < in.ndim; k++) {
        pads[k] = n->at.lo[k];
        pads[in.ndim + k] = out.d[k] - in.d[k] - n->at.lo[k];
    }
    float f = n->at.value;
    int32_t i = (int32_t)n->at.value;
    char want[64];
    snprintf(want, sizeof want, "value_%d", n->id);
    const char *value =
        sv_init(c, want, sv_onnx_type(n->dtype), KILN_SCALAR,
                n->dtype == KILN_I32 ? (const void *)&i : (const void *)&f);
    const char *in3[3] = {sv_name(c, n->in[0]),
                          sv_ints(c, n, "pads", pads, 2 * in.ndim), value};
    sv_op(c, "Pad", in3, 3, sv_name(c, n));
}

void sv_emit_move(sv_ctx *c, const kiln_node *n)
{
    switch (n->op) {
    case KILN_OP_RESHAPE:
        emit_reshape(c, n);
        break;
    case KILN_OP_PERMUTE:
        emit_permute(c, n);
        break;
    case KILN_OP_BROADCAST:
        emit_broadcast(c, n);
        break;
    case KILN_OP_SLICE:
        emit_slice(c, n);
        break;
    default:
        emit_pad(c, n);
    }
}
