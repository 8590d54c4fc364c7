/* Scan, unrolled over its scan axis (the length is static): opsets 9 on
   with any input and output axes and directions, and opset 8's batch form
   (each batch entry scanned on its own). */
#include <stdlib.h>
#include <string.h>

#include "onnx/control.h"

/* Scan's per-step slice of x at index along axis, the axis removed. */
static kiln_node *step_slice(ox_ctx *c, kiln_node *x, int axis, int64_t index)
{
    kiln_shape s = kiln_node_shape(x), r = s;
    int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS];
    memcpy(hi, s.d, sizeof hi);
    lo[axis] = index;
    hi[axis] = index + 1;
    r.ndim = s.ndim - 1;
    for (int k = axis; k < r.ndim; k++)
        r.d[k] = s.d[k + 1];
    return kiln_reshape(c->g, kiln_slice(c->g, x, lo, hi), r);
}

/* What one Scan runs: states and scan inputs in, per attribute axes and
   directions (already checked). */
typedef struct scan_plan {
    int states, ins, outs; /* state, scan input and scan output counts */
    int64_t len;
    kiln_node *x[OX_MAX_IO];
    int x_type[OX_MAX_IO], in_axis[OX_MAX_IO], in_rev[OX_MAX_IO];
    int64_t out_axis[OX_MAX_IO]; /* as given: the ranks come with the body */
    int out_rev[OX_MAX_IO];
} scan_plan;

/* Runs the body len times from the states in v (replaced by the final
   ones); the scan outputs stacked into y, their types into y_type. */
static int scan_run(ox_ctx *c, const ox_node *n, const Onnx__GraphProto *gp,
                    const scan_plan *p, flow *v, kiln_node **y, int *y_type)
{
    kiln_node **steps =
        calloc((size_t)(p->outs ? p->outs : 1) * (size_t)p->len, sizeof *steps);
    if (!steps)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    int bad = 0;
    for (int64_t t = 0; !bad && t < p->len; t++) {
        flow in[OX_MAX_IO], out[OX_MAX_IO];
        for (int k = 0; k < p->states; k++)
            in[k] = v[k];
        for (int j = 0; j < p->ins; j++)
            in[p->states + j] =
                (flow){step_slice(c, p->x[j], p->in_axis[j],
                                  p->in_rev[j] ? p->len - 1 - t : t),
                       p->x_type[j], NULL};
        bad = ox_run_body(c, n, gp, in, p->states + p->ins, out,
                          p->states + p->outs);
        for (int k = 0; !bad && k < p->states; k++) {
            ox_flows_free(&v[k], 1);
            v[k] = out[k];
            out[k].known = NULL;
        }
        for (int j = 0; !bad && j < p->outs; j++) {
            steps[j * p->len + t] = out[p->states + j].node;
            y_type[j] = out[p->states + j].type;
        }
        if (!bad)
            ox_flows_free(out, p->states + p->outs);
    }
    for (int j = 0; !bad && j < p->outs; j++)
        bad = !(y[j] = ox_stack_steps(c, n, steps + j * p->len, (int)p->len,
                                      p->out_axis[j], p->out_rev[j]));
    free(steps);
    return bad ? -1 : 0;
}

/* count ints of attribute name into out (0 each when absent); axes are
   normalised against ranks[k] (NULL for directions, which must be 0 or
   1). */
static int scan_ints(ox_ctx *c, const ox_node *n, const char *name, int count,
                     const int *ranks, int *out)
{
    const int64_t *v;
    int64_t got;
    if (ox_attr_ints(c, n, name, &v, &got))
        return -1;
    if (v && got != count)
        return ox_problem(c, n, KILN_ERR_ARG, "%s has %lld entries, want %d",
                          name, (long long)got, count),
               -1;
    for (int k = 0; k < count; k++) {
        int64_t a = v ? v[k] : 0;
        out[k] = ranks ? ox_axis(c, n, a, ranks[k]) : (int)(a != 0);
        if (out[k] < 0 || (!ranks && a != 0 && a != 1))
            return ranks ? -1
                         : (ox_problem(c, n, KILN_ERR_ARG, "%s must be 0 or 1",
                                       name),
                            -1);
    }
    return 0;
}

/* scan_output_axes as given (0 each when absent). */
static int out_axes(ox_ctx *c, const ox_node *n, int count, int64_t *out)
{
    const int64_t *v;
    int64_t got;
    if (ox_attr_ints(c, n, "scan_output_axes", &v, &got))
        return -1;
    if (v && got != count)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "scan_output_axes has %lld entries, want %d",
                          (long long)got, count),
               -1;
    for (int k = 0; k < count; k++)
        out[k] = v ? v[k] : 0;
    return 0;
}

/* Scan of opset 8 for batch entry b: the states' and scan inputs' slices
   b (the scan inputs then scanned on their axis 0) run through the body;
   final states into st[k * nb + b], scan outputs into sc[j * nb + b]. */
static int scan8_entry(ox_ctx *c, const ox_node *n, const Onnx__GraphProto *gp,
                       scan_plan *p, int64_t b, int64_t nb, kiln_node **st,
                       kiln_node **sc, int *types)
{
    flow v[OX_MAX_IO];
    kiln_node *y[OX_MAX_IO];
    for (int k = 0; k < p->states; k++)
        v[k] = (flow){step_slice(c, ox_in(c, n, 1 + k), 0, b),
                      ox_in_type(n, 1 + k), NULL};
    for (int j = 0; j < p->ins; j++) {
        p->x[j] = step_slice(c, ox_in(c, n, 1 + p->states + j), 0, b);
        p->x_type[j] = ox_in_type(n, 1 + p->states + j);
    }
    int bad = scan_run(c, n, gp, p, v, y, types + p->states);
    for (int k = 0; !bad && k < p->states; k++) {
        st[k * nb + b] = v[k].node;
        types[k] = v[k].type;
    }
    for (int j = 0; !bad && j < p->outs; j++)
        sc[j * nb + b] = y[j];
    ox_flows_free(v, p->states);
    return bad;
}

/* Scan of opset 8, the batch form: input 0 sequence_lens (not supported
   when given), then states [B, ...] and scan inputs [B, T, ...] (attribute
   directions); each batch entry is scanned on its own and the results are
   stacked on axis 0. */
static int conv_scan8(ox_ctx *c, ox_node *n, const Onnx__GraphProto *gp,
                      int64_t m)
{
    scan_plan p = {.ins = (int)m, .states = n->n_in - 1 - (int)m};
    p.outs = n->n_out - p.states;
    if (n->n_in > 0 && n->in[0])
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "sequence_lens"), -1;
    if (m < 1 || p.states < 0 || p.outs < 0)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "num_scan_inputs %lld with %d inputs and %d outputs",
                          (long long)m, n->n_in, n->n_out),
               -1;
    if (scan_ints(c, n, "directions", p.ins, NULL, p.in_rev))
        return -1;
    kiln_shape s0 = kiln_node_shape(ox_in(c, n, 1));
    int64_t nb = s0.ndim ? s0.d[0] : 0;
    for (int k = 1; k < n->n_in; k++) {
        kiln_shape s = kiln_node_shape(ox_in(c, n, k));
        int scan = k > p.states;
        int64_t len = scan && s.ndim > 1 ? s.d[1] : 0;
        if (s.ndim < 1 + scan || s.d[0] != nb ||
            (scan && p.len && len != p.len))
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "input %d: want [%lld%s, ...]", k, (long long)nb,
                              scan ? ", steps" : ""),
                   -1;
        if (scan)
            p.len = len;
    }
    if (nb < 1 || p.len < 1 || nb * p.len > OX_MAX_UNROLL)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "%lld x %lld steps: 1 to %d are unrolled",
                          (long long)nb, (long long)p.len, OX_MAX_UNROLL),
               -1;
    int total = p.states + p.outs, types[OX_MAX_IO], bad = 0;
    kiln_node **all =
        calloc((size_t)(total ? total : 1) * (size_t)nb, sizeof *all);
    if (!all)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    for (int64_t b = 0; !bad && b < nb; b++)
        bad = scan8_entry(c, n, gp, &p, b, nb, all, all + p.states * nb, types);
    for (int k = 0; !bad && k < total; k++) {
        n->out[k] = ox_stack_steps(c, n, all + k * nb, (int)nb, 0, 0);
        n->out_type[k] = types[k];
        bad = !n->out[k];
    }
    free(all);
    return bad ? -1 : 0;
}

/* Scan of opsets 9 on: states, then num_scan_inputs inputs scanned along
   their axes; outputs the final states, then the stacked scan outputs. */
int ox_conv_scan(ox_ctx *c, ox_node *n)
{
    const Onnx__GraphProto *gp = ox_graph_attr(c, n, "body");
    int64_t m;
    scan_plan p = {0};
    if (!gp || ox_attr_int(c, n, "num_scan_inputs", 0, &m))
        return -1;
    if (c->opset < 9)
        return conv_scan8(c, n, gp, m);
    p.ins = (int)m;
    p.states = n->n_in - p.ins;
    p.outs = n->n_out - p.states;
    if (m < 1 || p.states < 0 || p.outs < 0)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "num_scan_inputs %lld with %d inputs and %d outputs",
                          (long long)m, n->n_in, n->n_out),
               -1;
    int in_rank[OX_MAX_IO];
    for (int j = 0; j < p.ins; j++) {
        p.x[j] = ox_in(c, n, p.states + j);
        p.x_type[j] = ox_in_type(n, p.states + j);
        in_rank[j] = kiln_node_shape(p.x[j]).ndim;
    }
    if (scan_ints(c, n, "scan_input_axes", p.ins, in_rank, p.in_axis) ||
        scan_ints(c, n, "scan_input_directions", p.ins, NULL, p.in_rev))
        return -1;
    for (int j = 0; j < p.ins; j++) {
        int64_t len = kiln_node_shape(p.x[j]).d[p.in_axis[j]];
        if (j && len != p.len)
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "scan inputs of %lld and %lld steps",
                              (long long)p.len, (long long)len),
                   -1;
        p.len = len;
    }
    if (p.len < 1 || p.len > OX_MAX_UNROLL)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "%lld steps: 1 to %d are unrolled", (long long)p.len,
                          OX_MAX_UNROLL),
               -1;
    flow v[OX_MAX_IO];
    for (int k = 0; k < p.states; k++)
        v[k] = (flow){ox_in(c, n, k), ox_in_type(n, k),
                      ox_host_dup(n->in[k] ? n->in[k]->known : NULL)};
    kiln_node *y[OX_MAX_IO];
    int y_type[OX_MAX_IO];
    int bad =
        out_axes(c, n, p.outs, p.out_axis) ||
        scan_ints(c, n, "scan_output_directions", p.outs, NULL, p.out_rev) ||
        scan_run(c, n, gp, &p, v, y, y_type);
    for (int k = 0; !bad && k < p.states; k++) {
        n->out[k] = v[k].node;
        n->out_type[k] = v[k].type;
    }
    for (int j = 0; !bad && j < p.outs; j++) {
        n->out[p.states + j] = y[j];
        n->out_type[p.states + j] = y_type[j];
    }
    ox_flows_free(v, p.states);
    return bad ? -1 : 0;
}
