/* The exporter's leaves: inputs become graph inputs, variables and
   constants initializers (a variable's value from the session, or from an
   initialiser that needs no random draw), the run's mode the constant 0:
   the file is an inference graph. */
#include <stdlib.h>
#include <string.h>

#include "onnx/save.h"

/* A variable node of the same name written before n: the same storage. */
static const char *written_variable(const sv_ctx *c, const kiln_node *n)
{
    for (int id = 0; id < n->id; id++) {
        const kiln_node *v = c->g->nodes[id];
        if (c->need[id] && v->op == KILN_OP_VARIABLE && c->name[id] &&
            !strcmp(v->name, n->name))
            return c->name[id];
    }
    return NULL;
}

/* Fills out (numel f32) from an initialiser without randomness; -1 for
   the random ones. */
static int fixed_init(const kiln_init *in, float *out, int64_t numel)
{
    if (in->kind == KILN_INIT_VALUES && in->values) {
        memcpy(out, in->values, (size_t)numel * sizeof *out);
        return 0;
    }
    float v = in->kind == KILN_INIT_ONES    ? 1.0f
              : in->kind == KILN_INIT_VALUE ? (float)in->a
                                            : 0.0f;
    if (in->kind != KILN_INIT_ZEROS && in->kind != KILN_INIT_ONES &&
        in->kind != KILN_INIT_VALUE)
        return -1;
    for (int64_t k = 0; k < numel; k++)
        out[k] = v;
    return 0;
}

/* The session's value of variable n, checked against the node (*bad
   set, and the problem recorded, when they differ). */
static const void *session_value(sv_ctx *c, const kiln_node *n, int *bad)
{
    *bad = 0;
    int i = c->s ? kiln_session_find_variable(c->s, n->name) : -1;
    kiln_param_info info;
    if (i < 0 || kiln_session_variable_info(c->s, i, &info) != KILN_OK)
        return NULL;
    if (info.dtype != n->dtype || !kiln_shape_equal(info.shape, n->shape)) {
        char a[96], b[96];
        sv_node_problem(c, n, "the session holds it as %s%s, the graph as %s%s",
                        kiln_dtype_name(info.dtype),
                        kiln_shape_str(info.shape, a, sizeof a),
                        kiln_dtype_name(n->dtype),
                        kiln_shape_str(n->shape, b, sizeof b));
        *bad = 1;
        return NULL;
    }
    return info.data;
}

static void emit_variable(sv_ctx *c, const kiln_node *n)
{
    const char *same = written_variable(c, n);
    if (same) {
        c->name[n->id] = same;
        return;
    }
    int bad;
    const void *data = session_value(c, n, &bad);
    float *made = NULL;
    int64_t numel = kiln_shape_numel(n->shape);
    if (bad)
        return;
    if (!data && n->dtype == KILN_F32 &&
        (made = malloc((size_t)(numel ? numel : 1) * sizeof *made)) &&
        fixed_init(&n->at.init, made, numel) == 0)
        data = made;
    if (data)
        c->name[n->id] =
            sv_init(c, n->name, sv_onnx_type(n->dtype), n->shape, data);
    else
        sv_node_problem(c, n,
                        "no value: the session %s and its initialiser is "
                        "random",
                        c->s ? "does not hold it" : "is NULL");
    free(made);
}

static void emit_constant(sv_ctx *c, const kiln_node *n)
{
    char want[64];
    if (n->at.count.k)
        sv_node_problem(c, n, "its value depends on the symbolic batch size");
    if (n->shape.sym)
        sv_node_problem(c, n, "a constant shaped by the symbolic batch");
    snprintf(want, sizeof want, "constant_%d", n->id);
    c->name[n->id] = sv_init(c, n->name ? n->name : want,
                             sv_onnx_type(n->dtype), n->shape, n->at.data);
}

void sv_emit_leaf(sv_ctx *c, const kiln_node *n)
{
    int32_t zero = 0;
    switch (n->op) {
    case KILN_OP_INPUT: {
        Onnx__ValueInfoProto *vi =
            sv_value_info(c, sv_name(c, n), n->dtype, n->shape);
        Onnx__ValueInfoProto **more =
            realloc(c->inputs, (size_t)(c->n_inputs + 1) * sizeof *more);
        if (!vi || !more) {
            sv_problem(c, KILN_ERR_MEMORY, "out of memory");
            return;
        }
        c->inputs = more;
        c->inputs[c->n_inputs++] = vi;
        return;
    }
    case KILN_OP_VARIABLE:
        emit_variable(c, n);
        return;
    case KILN_OP_CONSTANT:
        emit_constant(c, n);
        return;
    default: /* the mode: evaluation */
        c->name[n->id] = sv_init(c, "mode", OX_INT32, KILN_SCALAR, &zero);
    }
}
