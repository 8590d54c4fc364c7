/* The exporter's one-to-one ops: elementwise, reductions, products,
   casts and indexing, and the leaves.  Kiln's comparisons give 0/1 floats
   where ONNX gives bools, and its index results are i32 where ONNX gives
   int64: a Cast after each keeps the file's types Kiln's. */
#include <string.h>

#include "onnx/save.h"

static const struct {
    kiln_op op;
    const char *onnx;
} same_ops[] = {
    {KILN_OP_NEG, "Neg"},
    {KILN_OP_ABS, "Abs"},
    {KILN_OP_SIGN, "Sign"},
    {KILN_OP_EXP, "Exp"},
    {KILN_OP_LOG, "Log"},
    {KILN_OP_SOFTPLUS, "Softplus"},
    {KILN_OP_FLOOR, "Floor"},
    {KILN_OP_CEIL, "Ceil"},
    {KILN_OP_ROUND, "Round"},
    {KILN_OP_SQRT, "Sqrt"},
    {KILN_OP_SIN, "Sin"},
    {KILN_OP_COS, "Cos"},
    {KILN_OP_TANH, "Tanh"},
    {KILN_OP_SIGMOID, "Sigmoid"},
    {KILN_OP_RELU, "Relu"},
    {KILN_OP_ERF, "Erf"},
    {KILN_OP_ADD, "Add"},
    {KILN_OP_SUB, "Sub"},
    {KILN_OP_MUL, "Mul"},
    {KILN_OP_DIV, "Div"},
    {KILN_OP_POW, "Pow"},
    {KILN_OP_MAX, "Max"},
    {KILN_OP_MIN, "Min"},
    {KILN_OP_INT_ADD, "Add"},
    {KILN_OP_INT_SUB, "Sub"},
    {KILN_OP_INT_MUL, "Mul"},
    {KILN_OP_CONCAT, "Concat"},
    {KILN_OP_INDEX_SELECT, "Gather"},
    {KILN_OP_GATHER, "GatherElements"},
};

static const struct {
    kiln_op op;
    const char *onnx;
} compare_ops[] = {
    {KILN_OP_LT, "Less"},    {KILN_OP_LE, "LessOrEqual"},
    {KILN_OP_GT, "Greater"}, {KILN_OP_GE, "GreaterOrEqual"},
    {KILN_OP_EQ, "Equal"},
};

/* The operands' value names (at most OX_MAX_IO... of them: Kiln's
   variadic concat is bounded by the caller's array, copied here). */
static const char **operands(sv_ctx *c, const kiln_node *n)
{
    const char **in =
        kiln_arena_alloc(&c->arena, (size_t)(n->n_in + 1) * sizeof *in);
    if (!in) {
        sv_problem(c, KILN_ERR_MEMORY, "out of memory");
        return NULL;
    }
    for (int k = 0; k < n->n_in; k++)
        in[k] = sv_name(c, n->in[k]);
    return in;
}

/* A node with n's operands and the ONNX op's name; axis attribute for
   concat and the index ops. */
static int emit_same(sv_ctx *c, const kiln_node *n)
{
    for (size_t k = 0; k < sizeof same_ops / sizeof *same_ops; k++) {
        if (same_ops[k].op != n->op)
            continue;
        const char **in = operands(c, n);
        Onnx__NodeProto *p =
            in ? sv_op(c, same_ops[k].onnx, in, n->n_in, sv_name(c, n)) : NULL;
        if (kiln_op_table[n->op].attrs & KILN_ATTR_AXIS)
            sv_attr_int(c, p, "axis", n->at.axis);
        return 1;
    }
    return 0;
}

static const char *cast(sv_ctx *c, const char *x, int to, const char *out)
{
    sv_attr_int(c, sv_op1(c, "Cast", x, out), "to", to);
    return out;
}

static int emit_compare(sv_ctx *c, const kiln_node *n)
{
    for (size_t k = 0; k < sizeof compare_ops / sizeof *compare_ops; k++) {
        if (compare_ops[k].op != n->op)
            continue;
        const char *b = sv_temp(c, n, "bool");
        sv_op2(c, compare_ops[k].onnx, sv_name(c, n->in[0]),
               sv_name(c, n->in[1]), b);
        cast(c, b, OX_FLOAT, sv_name(c, n));
        return 1;
    }
    return 0;
}

/* select(cond, a, b): Where reads a bool; Kiln takes cond != 0. */
static void emit_select(sv_ctx *c, const kiln_node *n)
{
    const char *cond =
        cast(c, sv_name(c, n->in[0]), OX_BOOL, sv_temp(c, n, "cond"));
    const char *in[3] = {cond, sv_name(c, n->in[1]), sv_name(c, n->in[2])};
    sv_op(c, "Where", in, 3, sv_name(c, n));
}

/* silu(x) = x * sigmoid(x), the formula Kiln's kernel computes. */
static void emit_silu(sv_ctx *c, const kiln_node *n)
{
    const char *x = sv_name(c, n->in[0]), *s = sv_temp(c, n, "sigmoid");
    sv_op1(c, "Sigmoid", x, s);
    sv_op2(c, "Mul", x, s, sv_name(c, n));
}

/* The axes of a reduction mask, in order. */
static int mask_axes(unsigned mask, int64_t *axes)
{
    int n = 0;
    for (int k = 0; k < KILN_MAX_DIMS; k++)
        if (mask >> k & 1u)
            axes[n++] = k;
    return n;
}

/* sum, reduce_max and prod; ReduceSum takes its axes as an input from
   opset 13, the others as an attribute until opset 18. */
static void emit_reduce(sv_ctx *c, const kiln_node *n)
{
    int64_t axes[KILN_MAX_DIMS];
    int count = mask_axes(n->at.axes, axes);
    const char *x = sv_name(c, n->in[0]);
    Onnx__NodeProto *p;
    if (!count) {
        sv_op1(c, "Identity", x, sv_name(c, n));
        return;
    }
    if (n->op == KILN_OP_SUM)
        p = sv_op2(c, "ReduceSum", x, sv_ints(c, n, "axes", axes, count),
                   sv_name(c, n));
    else {
        p = sv_op1(c, n->op == KILN_OP_RMAX ? "ReduceMax" : "ReduceProd", x,
                   sv_name(c, n));
        sv_attr_ints(c, p, "axes", axes, count);
    }
    sv_attr_int(c, p, "keepdims", n->at.keepdims != 0);
}

static void emit_argmax(sv_ctx *c, const kiln_node *n)
{
    const char *i64 = sv_temp(c, n, "index");
    Onnx__NodeProto *p = sv_op1(c, "ArgMax", sv_name(c, n->in[0]), i64);
    sv_attr_int(c, p, "axis", n->at.axis);
    sv_attr_int(c, p, "keepdims", n->at.keepdims != 0);
    cast(c, i64, OX_INT32, sv_name(c, n));
}

/* The last two dims of x swapped, for a batched product with a trans
   flag (Gemm takes the flags for 2-D operands). */
static const char *swap_last(sv_ctx *c, const kiln_node *n, int i)
{
    int64_t perm[KILN_MAX_DIMS];
    int nd = n->in[i]->shape.ndim;
    for (int k = 0; k < nd; k++)
        perm[k] = k;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    const char *t = sv_temp(c, n, i ? "b_t" : "a_t");
    sv_attr_ints(c, sv_op1(c, "Transpose", sv_name(c, n->in[i]), t), "perm",
                 perm, nd);
    return t;
}

static void emit_matmul(sv_ctx *c, const kiln_node *n)
{
    int ta = n->at.trans_a, tb = n->at.trans_b;
    const char *a = sv_name(c, n->in[0]), *b = sv_name(c, n->in[1]);
    if (!ta && !tb) {
        sv_op2(c, "MatMul", a, b, sv_name(c, n));
        return;
    }
    if (n->in[0]->shape.ndim == 2 && n->in[1]->shape.ndim == 2) {
        Onnx__NodeProto *p = sv_op2(c, "Gemm", a, b, sv_name(c, n));
        sv_attr_int(c, p, "transA", ta != 0);
        sv_attr_int(c, p, "transB", tb != 0);
        return;
    }
    sv_op2(c, "MatMul", ta ? swap_last(c, n, 0) : a,
           tb ? swap_last(c, n, 1) : b, sv_name(c, n));
}

static void emit_cumsum(sv_ctx *c, const kiln_node *n)
{
    int64_t axis = n->at.axis;
    sv_op2(c, "CumSum", sv_name(c, n->in[0]),
           sv_init(c, "axis", OX_INT64, KILN_SCALAR, &axis), sv_name(c, n));
}

/* topk's i32 indices: TopK's second output, cast. */
static void emit_topk(sv_ctx *c, const kiln_node *n)
{
    int64_t k = n->at.depth;
    const char *in[2] = {sv_name(c, n->in[0]), sv_ints(c, n, "k", &k, 1)};
    Onnx__NodeProto *p = sv_op(c, "TopK", in, 2, sv_temp(c, n, "values"));
    const char *idx = sv_temp(c, n, "index");
    char **outs = kiln_arena_alloc(&c->arena, 2 * sizeof *outs);
    if (!p || !outs || !idx) {
        sv_problem(c, KILN_ERR_MEMORY, "out of memory");
        return;
    }
    outs[0] = p->output[0];
    outs[1] = (char *)idx;
    p->output = outs;
    p->n_output = 2;
    sv_attr_int(c, p, "axis", n->at.axis);
    cast(c, idx, OX_INT32, sv_name(c, n));
}

/* rms_norm: x / sqrt(mean(x^2 over its axes) + eps); ONNX has no
   RMSNormalization before opset 23. */
static void emit_rms_norm(sv_ctx *c, const kiln_node *n)
{
    int64_t axes[KILN_MAX_DIMS];
    float eps = n->at.value;
    const char *x = sv_name(c, n->in[0]), *sq = sv_temp(c, n, "square");
    const char *ms = sv_temp(c, n, "mean_square"), *d = sv_temp(c, n, "rms");
    sv_op2(c, "Mul", x, x, sq);
    int count = mask_axes(n->at.axes, axes);
    Onnx__NodeProto *p = sv_op1(c, "ReduceMean", sq, ms);
    sv_attr_ints(c, p, "axes", axes, count);
    sv_attr_int(c, p, "keepdims", 1);
    const char *shifted = sv_temp(c, n, "shifted");
    sv_op2(c, "Add", ms, sv_init(c, "eps", OX_FLOAT, KILN_SCALAR, &eps),
           shifted);
    sv_op1(c, "Sqrt", shifted, d);
    sv_op2(c, "Div", x, d, sv_name(c, n));
}

/* The ops of save_move.c and save_nn.c, or 0 when none fits. */
static int emit_other(sv_ctx *c, const kiln_node *n)
{
    switch (n->op) {
    case KILN_OP_RESHAPE:
    case KILN_OP_PERMUTE:
    case KILN_OP_BROADCAST:
    case KILN_OP_SLICE:
    case KILN_OP_PAD:
        sv_emit_move(c, n);
        return 1;
    case KILN_OP_CONV:
    case KILN_OP_CONV_TRANSPOSE:
        sv_emit_conv(c, n);
        return 1;
    case KILN_OP_MAX_POOL2D:
    case KILN_OP_RESAMPLE2D:
        sv_emit_pool(c, n);
        return 1;
    default:
        return 0;
    }
}

/* Rounding to float16 / bfloat16 held in f32: a Cast there and back. */
static void emit_round_to(sv_ctx *c, const kiln_node *n)
{
    int to = n->op == KILN_OP_ROUND_F16 ? OX_FLOAT16 : OX_BFLOAT16;
    cast(c, cast(c, sv_name(c, n->in[0]), to, sv_temp(c, n, "narrow")),
         OX_FLOAT, sv_name(c, n));
}

static void emit_op(sv_ctx *c, const kiln_node *n)
{
    if (emit_same(c, n) || emit_compare(c, n) || emit_other(c, n))
        return;
    switch (n->op) {
    case KILN_OP_SELECT:
        emit_select(c, n);
        return;
    case KILN_OP_SILU:
        emit_silu(c, n);
        return;
    case KILN_OP_ROUND_F16:
    case KILN_OP_ROUND_BF16:
        emit_round_to(c, n);
        return;
    case KILN_OP_SUM:
    case KILN_OP_RMAX:
    case KILN_OP_PROD:
        emit_reduce(c, n);
        return;
    case KILN_OP_ARGMAX:
        emit_argmax(c, n);
        return;
    case KILN_OP_MATMUL:
        emit_matmul(c, n);
        return;
    case KILN_OP_CAST:
        cast(c, sv_name(c, n->in[0]), sv_onnx_type(n->dtype), sv_name(c, n));
        return;
    case KILN_OP_RMS_NORM:
        emit_rms_norm(c, n);
        return;
    case KILN_OP_CUMSUM:
        emit_cumsum(c, n);
        return;
    case KILN_OP_TOPK:
        emit_topk(c, n);
        return;
    case KILN_OP_INT_MOD: /* the divisor's sign, as Kiln's */
        sv_attr_int(c,
                    sv_op2(c, "Mod", sv_name(c, n->in[0]), sv_name(c, n->in[1]),
                           sv_name(c, n)),
                    "fmod", 0);
        return;
    default:
        sv_node_problem(c, n, "no ONNX opset 17 equivalent");
    }
}

/* Softmax and LogSoftmax over one axis (opset 13 and later). */
static void emit_softmax(sv_ctx *c, const kiln_node *n, const sv_match *m)
{
    Onnx__NodeProto *p =
        sv_op1(c, m->kind == SV_SOFTMAX ? "Softmax" : "LogSoftmax",
               sv_name(c, m->dep[0]), sv_name(c, n));
    sv_attr_int(c, p, "axis", m->axis);
}

void sv_emit(sv_ctx *c, const kiln_node *n)
{
    const sv_match *m = &c->match[n->id];
    switch (m->kind) {
    case SV_LEAF:
        sv_emit_leaf(c, n);
        return;
    case SV_OP:
        emit_op(c, n);
        return;
    case SV_ALIAS: /* inference: dropout is the identity */
        if (c->name[n->id])
            sv_op1(c, "Identity", sv_name(c, n->in[0]), sv_name(c, n));
        else
            c->name[n->id] = sv_name(c, n->in[0]);
        return;
    case SV_SOFTMAX:
    case SV_LOG_SOFTMAX:
        emit_softmax(c, n, m);
        return;
    case SV_UNSUPPORTED:
        sv_node_problem(c, n,
                        "batch norm without running statistics (or statistics "
                        "of another tensor) has no ONNX opset 17 form");
        return;
    default:
        sv_emit_norm(c, n, m);
        return;
    }
}
