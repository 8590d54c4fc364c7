/* The exporter's window and normalisation ops: convolution (with its
   fused bias and relu), max and average pooling, and the three
   normalisations ONNX opset 17 has (batch norm in evaluation, layer norm,
   instance norm). */
#include <stdio.h>

#include "onnx/save.h"

/* strides, dilations and pads [begins..., ends...] of a window. */
static void window_attrs(sv_ctx *c, Onnx__NodeProto *p, const kiln_window *w,
                         int dilations)
{
    int64_t st[3], dl[3], pads[6];
    for (int k = 0; k < w->nd; k++) {
        st[k] = w->stride[k];
        dl[k] = w->dilation[k];
        pads[k] = w->pad_lo[k];
        pads[w->nd + k] = w->pad_hi[k];
    }
    sv_attr_ints(c, p, "strides", st, w->nd);
    sv_attr_ints(c, p, "pads", pads, 2 * w->nd);
    if (dilations)
        sv_attr_ints(c, p, "dilations", dl, w->nd);
}

/* conv(x, w[, b]) with the relu conv_fuse (or KILN_CONV_RELU) put in, and
   conv_transpose(x, w) (its bias is an add of its own). */
void sv_emit_conv(sv_ctx *c, const kiln_node *n)
{
    const kiln_window *w = &n->at.win;
    int conv = n->op == KILN_OP_CONV;
    const char *in[3] = {sv_name(c, n->in[0]), sv_name(c, n->in[1]),
                         n->n_in > 2 ? sv_name(c, n->in[2]) : NULL};
    int relu = conv && (w->flags & KILN_WINDOW_RELU);
    const char *y = relu ? sv_temp(c, n, "conv") : sv_name(c, n);
    Onnx__NodeProto *p =
        sv_op(c, conv ? "Conv" : "ConvTranspose", in, n->n_in, y);
    int64_t k[3], out_pad[3];
    for (int d = 0; d < w->nd; d++) {
        k[d] = n->in[1]->shape.d[2 + d];
        out_pad[d] = conv ? 0 : w->out_pad[d];
    }
    sv_attr_ints(c, p, "kernel_shape", k, w->nd);
    window_attrs(c, p, w, 1);
    sv_attr_int(c, p, "group", w->groups);
    if (!conv)
        sv_attr_ints(c, p, "output_padding", out_pad, w->nd);
    if (relu)
        sv_op1(c, "Relu", y, sv_name(c, n));
}

/* Reshape of x to shape s (concrete dims). */
static const char *reshape(sv_ctx *c, const kiln_node *n, const char *x,
                           kiln_shape s, const char *what, const char *out)
{
    int64_t v[KILN_MAX_DIMS];
    for (int k = 0; k < s.ndim; k++)
        v[k] = s.d[k];
    sv_op2(c, "Reshape", x, sv_ints(c, n, what, v, s.ndim), out);
    return out;
}

/* GlobalAveragePool, or AveragePool when the input splits evenly into
   the output's cells; NULL op when neither fits. */
static const char *adaptive(const kiln_node *n, kiln_window *w)
{
    kiln_shape in = n->in[0]->shape, out = n->shape;
    int nd = in.ndim;
    if (out.d[nd - 2] == 1 && out.d[nd - 1] == 1)
        return "GlobalAveragePool";
    *w = (kiln_window){.nd = 2};
    for (int k = 0; k < 2; k++) {
        int64_t i = in.d[nd - 2 + k], o = out.d[nd - 2 + k];
        if (!o || i % o)
            return NULL;
        w->kernel[k] = w->stride[k] = (int)(i / o);
        w->dilation[k] = 1;
    }
    return "AveragePool";
}

/* The ONNX op of a pool, and its window in *w; NULL when it has none. */
static const char *pool_op(const kiln_node *n, kiln_window *w)
{
    *w = n->at.win;
    if (n->op == KILN_OP_MAX_POOL2D)
        return "MaxPool";
    if (w->mode == KILN_RESAMPLE_AVG)
        return "AveragePool";
    if (w->mode == KILN_RESAMPLE_ADAPTIVE)
        return adaptive(n, w);
    return NULL;
}

/* max_pool2d and resample2d's pooling modes, on [N,C,H,W] or [C,H,W]
   (ONNX pools take a batch: one of 1 is added and taken away). */
void sv_emit_pool(sv_ctx *c, const kiln_node *n)
{
    kiln_window w;
    const char *op = pool_op(n, &w);
    kiln_shape in = n->in[0]->shape, out = n->shape;
    if (!op) {
        sv_node_problem(c, n, "%s has no ONNX opset 17 form",
                        n->op == KILN_OP_RESAMPLE2D
                            ? kiln_resample_mode_name(w.mode)
                            : "this window");
        return;
    }
    if (in.ndim == 3 && (in.sym || out.sym))
        sv_node_problem(c, n, "unbatched input with a symbolic dim");
    const char *x = sv_name(c, n->in[0]), *y = sv_name(c, n);
    if (in.ndim == 3) {
        x = reshape(c, n, x, KILN_SHAPE(1, in.d[0], in.d[1], in.d[2]), "4d",
                    sv_temp(c, n, "batched"));
        y = sv_temp(c, n, "pooled");
    }
    Onnx__NodeProto *p = sv_op1(c, op, x, y);
    if (op[0] != 'G') {
        int64_t k[2] = {w.kernel[0], w.kernel[1]};
        sv_attr_ints(c, p, "kernel_shape", k, 2);
        window_attrs(c, p, &w, n->op == KILN_OP_MAX_POOL2D);
        sv_attr_int(c, p, "ceil_mode", (w.flags & KILN_WINDOW_CEIL) != 0);
    }
    if (op[0] == 'A')
        sv_attr_int(c, p, "count_include_pad",
                    (w.flags & KILN_WINDOW_COUNT_PAD) != 0);
    if (in.ndim == 3)
        reshape(c, n, y, out, "3d", sv_name(c, n));
}

/* Layer norm's scale and bias cover every dim from the axis; Kiln's are
   per channel (the axis), broadcast over the dims after it. */
static const char *per_element(sv_ctx *c, const kiln_node *n,
                               const kiln_node *v, const char *what)
{
    kiln_shape x = n->shape, to = {0}, col = {0};
    int a = n->at.norm.axis;
    if (a == x.ndim - 1)
        return sv_name(c, v);
    for (int k = a; k < x.ndim; k++) {
        to.d[to.ndim] = x.d[k];
        col.d[col.ndim++] = k == a ? x.d[k] : 1;
        to.ndim++;
    }
    if (x.sym >> a)
        sv_node_problem(c, n, "normalises over the symbolic batch dim");
    char buf[32];
    snprintf(buf, sizeof buf, "%s_col", what);
    const char *r = reshape(c, n, sv_name(c, v), col, buf, sv_temp(c, n, buf));
    snprintf(buf, sizeof buf, "%s_full", what);
    int64_t s[KILN_MAX_DIMS];
    for (int k = 0; k < to.ndim; k++)
        s[k] = to.d[k];
    const char *e = sv_temp(c, n, buf);
    sv_op2(c, "Expand", r, sv_ints(c, n, buf, s, to.ndim), e);
    return e;
}

/* v [C] as [C, 1, ...] against the dims after the channel's. */
static const char *per_channel(sv_ctx *c, const kiln_node *n,
                               const kiln_node *v, const char *what)
{
    kiln_shape s = {.ndim = n->shape.ndim - 1};
    s.d[0] = n->shape.d[1];
    for (int k = 1; k < s.ndim; k++)
        s.d[k] = 1;
    return reshape(c, n, sv_name(c, v), s, what, sv_temp(c, n, what));
}

/* Group norm as PyTorch exports it: instance norm (unit scale, zero
   bias) of x seen as [N, G, rest], back to x's shape, then the
   per-channel affine. */
static void emit_group_norm(sv_ctx *c, const kiln_node *n, const sv_match *m)
{
    int g = n->at.norm.groups;
    kiln_shape x = n->shape;
    float *unit = kiln_arena_alloc(&c->arena, 2 * (size_t)g * sizeof *unit);
    if (!unit) {
        sv_problem(c, KILN_ERR_MEMORY, "out of memory");
        return;
    }
    for (int k = 0; k < g; k++)
        unit[k] = 1;
    int64_t grouped[3] = {0, g, -1}, back[KILN_MAX_DIMS] = {0};
    for (int k = 1; k < x.ndim; k++)
        back[k] = x.d[k];
    if (x.sym & ~1u)
        sv_node_problem(c, n, "a symbolic dim after the batch");
    const char *in[3] = {
        sv_temp(c, n, "grouped"),
        sv_init(c, "unit_scale", OX_FLOAT, KILN_SHAPE(g), unit),
        sv_init(c, "zero_bias", OX_FLOAT, KILN_SHAPE(g), unit + g)};
    sv_op2(c, "Reshape", sv_name(c, m->dep[0]),
           sv_ints(c, n, "groups", grouped, 3), in[0]);
    const char *normed = sv_temp(c, n, "normed"), *y = sv_temp(c, n, "y");
    sv_attr_float(c, sv_op(c, "InstanceNormalization", in, 3, normed),
                  "epsilon", n->at.norm.eps);
    sv_op2(c, "Reshape", normed, sv_ints(c, n, "shape", back, x.ndim), y);
    const char *scaled = sv_temp(c, n, "scaled");
    sv_op2(c, "Mul", y, per_channel(c, n, m->dep[1], "weight"), scaled);
    sv_op2(c, "Add", scaled, per_channel(c, n, m->dep[2], "bias"),
           sv_name(c, n));
}

void sv_emit_norm(sv_ctx *c, const kiln_node *n, const sv_match *m)
{
    if (m->kind == SV_GROUP_NORM) {
        emit_group_norm(c, n, m);
        return;
    }
    const char *in[5];
    for (int k = 0; k < m->n_dep; k++)
        in[k] = sv_name(c, m->dep[k]);
    const char *op = m->kind == SV_BATCH_NORM      ? "BatchNormalization"
                     : m->kind == SV_INSTANCE_NORM ? "InstanceNormalization"
                                                   : "LayerNormalization";
    if (m->kind == SV_LAYER_NORM) {
        in[1] = per_element(c, n, m->dep[1], "scale");
        in[2] = per_element(c, n, m->dep[2], "bias");
    }
    Onnx__NodeProto *p = sv_op(c, op, in, m->n_dep, sv_name(c, n));
    sv_attr_float(c, p, "epsilon", n->at.norm.eps);
    if (m->kind == SV_LAYER_NORM)
        sv_attr_int(c, p, "axis", n->at.norm.axis);
}
