/* If, Loop and Scan: their bodies are subgraphs, converted in a scope of
   their own (outer names stay visible) once per use, so control flow
   becomes straight-line Kiln ops that differentiate like any others.

   - If: a condition known while loading converts only its branch; else
     both branches are converted and each output is a select between them
     (their shapes must agree).
   - Loop: unrolled over a trip count known while loading.  When the
     condition is known at every step, the loop stops where it says; when it
     is not, every step is built and a running flag keeps the carried values
     of the steps that would not have run (scan outputs then need a known
     condition: their length would depend on the data).
   - Scan (ops_scan.c): unrolled over the scan axis (its length is
     static). */
#include <stdlib.h>
#include <string.h>

#include "onnx/control.h"

void ox_flows_free(flow *f, int n)
{
    for (int k = 0; k < n; k++) {
        ox_host_free(f[k].known);
        free(f[k].known);
        f[k].known = NULL;
    }
}

const Onnx__GraphProto *ox_graph_attr(ox_ctx *c, const ox_node *n,
                                      const char *name)
{
    const Onnx__AttributeProto *a = ox_attr(n, name);
    if (!a || a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !a->g)
        return ox_problem(c, n, KILN_ERR_ARG, "attribute '%s' must be a graph",
                          name),
               NULL;
    return a->g;
}

/* Converts body gp once with its inputs bound to in[0..n_in) and reads
   its n_out outputs into out (known values copied).  -1 when the body has
   other counts or any of its nodes failed (recorded). */
int ox_run_body(ox_ctx *c, const ox_node *n, const Onnx__GraphProto *gp,
                const flow *in, int n_in, flow *out, int n_out)
{
    if ((int)gp->n_input != n_in || (int)gp->n_output != n_out)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "the body has %zu inputs and %zu outputs, want %d "
                          "and %d",
                          gp->n_input, gp->n_output, n_in, n_out),
               -1;
    c->bodies += 1 + (int64_t)gp->n_node;
    if (c->depth >= OX_MAX_DEPTH || c->bodies > OX_MAX_BODY_NODES)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "subgraphs nested over %d deep, or unrolled past "
                          "%lld nodes",
                          OX_MAX_DEPTH, (long long)OX_MAX_BODY_NODES),
               -1;
    c->depth++;
    int mark = c->n_vals, before = c->n_problems;
    for (int k = 0; k < n_in; k++)
        ox_bind(c, gp->input[k]->name, in[k].node, in[k].type,
                ox_host_dup(in[k].known));
    ox_convert_body(c, gp);
    int ok = c->n_problems == before;
    for (int k = 0; k < n_out; k++) {
        const ox_value *v = ox_lookup(c, gp->output[k]->name);
        out[k] = (flow){v ? v->node : NULL, v ? v->type : 0,
                        v ? ox_host_dup(v->known) : NULL};
        if (ok && (!v || (!v->node && !v->known))) {
            ox_problem(c, n, KILN_ERR_IO, "body output '%s' is not defined",
                       gp->output[k]->name ? gp->output[k]->name : "");
            ok = 0;
        }
    }
    ox_scope_pop(c, mark);
    c->depth--;
    if (!ok)
        ox_flows_free(out, n_out);
    return ok ? 0 : -1;
}

/* A known condition's truth: 1, 0, or -1 when it is not known. */
static int known_truth(const ox_host *h)
{
    if (!h || h->numel != 1)
        return -1;
    return h->f ? h->f[0] != 0 : h->i[0] != 0;
}

static int conv_if(ox_ctx *c, ox_node *n)
{
    const Onnx__GraphProto *br[2] = {ox_graph_attr(c, n, "then_branch"),
                                     ox_graph_attr(c, n, "else_branch")};
    if (!br[0] || !br[1] || !n->in[0])
        return -1;
    int truth = known_truth(n->in[0]->known), no = n->n_out;
    if (truth >= 0) { /* only the branch taken */
        flow out[OX_MAX_IO];
        if (ox_run_body(c, n, br[!truth], NULL, 0, out, no))
            return -1;
        for (int k = 0; k < no; k++) {
            n->out[k] = out[k].node;
            n->out_type[k] = out[k].type;
            n->out_known[k] = out[k].known;
        }
        return 0;
    }
    flow a[OX_MAX_IO], b[OX_MAX_IO];
    if (ox_run_body(c, n, br[0], NULL, 0, a, no))
        return -1;
    if (ox_run_body(c, n, br[1], NULL, 0, b, no))
        return ox_flows_free(a, no), -1;
    kiln_node *cond = ox_f32(c, n, 0);
    for (int k = 0; k < no; k++) {
        kiln_node *y =
            kiln_select(c->g, cond, kiln_cast(c->g, a[k].node, KILN_F32),
                        kiln_cast(c->g, b[k].node, KILN_F32));
        n->out[k] = kiln_cast(c->g, y, kiln_node_dtype(a[k].node));
        n->out_type[k] = a[k].type;
    }
    ox_flows_free(a, no);
    ox_flows_free(b, no);
    return 0;
}

/* The stacked per-step values of a scan output: [steps, ...] (reversed
   when rev), moved to axis. */
kiln_node *ox_stack_steps(ox_ctx *c, const ox_node *n, kiln_node **steps,
                          int count, int64_t axis, int rev)
{
    kiln_graph *g = c->g;
    kiln_shape s = kiln_node_shape(steps[0]), one = s;
    if (s.ndim >= KILN_MAX_DIMS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "scan output of %d dims: stacked it would have "
                          "more than %d",
                          s.ndim, KILN_MAX_DIMS),
               NULL;
    one.ndim = s.ndim + 1;
    one.d[0] = 1;
    memcpy(one.d + 1, s.d, (size_t)s.ndim * sizeof *s.d);
    for (int k = 0; k < count; k++)
        steps[k] = kiln_reshape(g, steps[k], one);
    if (rev)
        for (int k = 0; k < count / 2; k++) {
            kiln_node *t = steps[k];
            steps[k] = steps[count - 1 - k];
            steps[count - 1 - k] = t;
        }
    kiln_node *y = count == 1 ? steps[0] : kiln_concat(g, steps, count, 0);
    axis = ox_axis(c, n, axis, one.ndim);
    if (axis <= 0)
        return axis < 0 ? NULL : y;
    int perm[KILN_MAX_DIMS];
    for (int k = 0, at = 1; k < one.ndim; k++)
        perm[k] = k == axis ? 0 : at++;
    return kiln_permute(g, y, perm);
}

/* A known true condition (bools are held as floats 0 / 1). */
static ox_host *known_true(void)
{
    ox_host *h = calloc(1, sizeof *h);
    if (h && !(h->f = malloc(sizeof *h->f))) {
        free(h);
        return NULL;
    }
    if (h) {
        h->type = OX_BOOL;
        h->shape = KILN_SCALAR;
        h->numel = 1;
        h->f[0] = 1;
    }
    return h;
}

/* Loop's step inputs: the iteration number and the condition as the
   body sees them (known when they are). */
static void step_inputs(ox_ctx *c, int64_t i, kiln_node *run, flow *in)
{
    int32_t i32 = (int32_t)i;
    float one = 1;
    in[0] = (flow){kiln_constant(c->g, KILN_I32, KILN_SCALAR, &i32), OX_INT64,
                   ox_host_ints(KILN_SCALAR, &i)};
    in[1] = run ? (flow){run, OX_BOOL, NULL}
                : (flow){kiln_constant(c->g, KILN_F32, KILN_SCALAR, &one),
                         OX_BOOL, known_true()};
}

/* The trip count (-1 when absent); -2 (recorded) when unusable. */
static int64_t trip_count(ox_ctx *c, const ox_node *n)
{
    if (!n->in[0])
        return -1;
    const ox_host *h = n->in[0]->known;
    if (!h || !h->i || h->numel != 1)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "the trip count M must be known while loading"),
               -2;
    if (h->i[0] < 0 || h->i[0] > OX_MAX_UNROLL)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "trip count %lld: at most %d steps are unrolled",
                          (long long)h->i[0], OX_MAX_UNROLL),
               -2;
    return h->i[0];
}

typedef struct loop_state {
    int carried, scans, steps;
    flow v[OX_MAX_IO]; /* the carried values */
    kiln_node **scan;  /* [scans][OX_MAX_UNROLL] per-step outputs */
    int scan_type[OX_MAX_IO];
    kiln_node *run; /* the running flag when the condition is data */
} loop_state;

/* One step of the body: out as run_body gives it.  Takes the new carried
   values (selected by the running flag when there is one); 1 when the loop
   goes on, 0 when it stops, -1 (recorded) on failure. */
static int loop_step(ox_ctx *c, const ox_node *n, loop_state *L, flow *out)
{
    kiln_graph *g = c->g;
    int more = known_truth(out[0].known);
    if (L->run || more < 0) {
        if (L->scans)
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                              "scan outputs of a Loop whose condition is not "
                              "known while loading"),
                   -1;
        for (int k = 0; k < L->carried; k++) {
            kiln_node *v = out[1 + k].node;
            if (L->run)
                v = kiln_cast(g,
                              kiln_select(g, L->run, kiln_cast(g, v, KILN_F32),
                                          kiln_cast(g, L->v[k].node, KILN_F32)),
                              kiln_node_dtype(v));
            ox_flows_free(&L->v[k], 1);
            L->v[k] = (flow){v, out[1 + k].type, NULL};
        }
        kiln_node *cond =
            kiln_reshape(g, kiln_cast(g, out[0].node, KILN_F32), KILN_SCALAR);
        L->run = L->run ? kiln_mul(g, L->run, cond) : cond;
        more = 1;
    } else
        for (int k = 0; k < L->carried; k++) {
            ox_flows_free(&L->v[k], 1);
            L->v[k] = out[1 + k];
            out[1 + k].known = NULL;
        }
    for (int j = 0; j < L->scans; j++) {
        L->scan[j * OX_MAX_UNROLL + L->steps] = out[1 + L->carried + j].node;
        L->scan_type[j] = out[1 + L->carried + j].type;
    }
    L->steps++;
    return more;
}

static int loop_body(ox_ctx *c, const ox_node *n, const Onnx__GraphProto *gp,
                     int64_t trips, loop_state *L)
{
    int go = 1;
    for (int64_t i = 0; go == 1 && (trips < 0 || i < trips); i++) {
        if (i == OX_MAX_UNROLL)
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                              "the loop runs past %d steps", OX_MAX_UNROLL),
                   -1;
        flow in[OX_MAX_IO], out[OX_MAX_IO];
        step_inputs(c, i, L->run, in);
        for (int k = 0; k < L->carried; k++)
            in[2 + k] = L->v[k];
        int bad = ox_run_body(c, n, gp, in, 2 + L->carried, out,
                              1 + L->carried + L->scans);
        ox_flows_free(in, 2);
        if (bad)
            return -1;
        go = loop_step(c, n, L, out);
        ox_flows_free(out, 1 + L->carried + L->scans);
        if (go < 0)
            return -1;
    }
    return 0;
}

static int conv_loop(ox_ctx *c, ox_node *n)
{
    const Onnx__GraphProto *gp = ox_graph_attr(c, n, "body");
    loop_state L = {.carried = n->n_in - 2};
    L.scans = n->n_out - L.carried;
    if (!gp)
        return -1;
    if (L.carried < 0 || L.scans < 0)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "%d inputs and %d outputs: want M, cond, the "
                          "carried values, and at least as many outputs",
                          n->n_in, n->n_out),
               -1;
    int64_t trips = trip_count(c, n);
    int truth = n->in[1] ? known_truth(n->in[1]->known) : 1;
    if (trips == -2)
        return -1;
    if (trips < 0 && truth < 0)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "a Loop with neither a trip count nor a condition "
                          "known while loading"),
               -1;
    if (truth < 0)
        L.run = kiln_reshape(c->g, ox_f32(c, n, 1), KILN_SCALAR);
    L.scan =
        calloc((size_t)(L.scans ? L.scans : 1) * OX_MAX_UNROLL, sizeof *L.scan);
    if (!L.scan)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    for (int k = 0; k < L.carried; k++)
        L.v[k] = (flow){ox_in(c, n, 2 + k), ox_in_type(n, 2 + k),
                        ox_host_dup(n->in[2 + k] ? n->in[2 + k]->known : NULL)};
    int bad = truth == 0 ? 0 : loop_body(c, n, gp, trips, &L);
    if (!bad && L.scans && L.steps == 0)
        bad = (ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "scan outputs of a loop that runs no step"),
               -1);
    for (int k = 0; !bad && k < L.carried; k++) {
        n->out[k] = L.v[k].node;
        n->out_type[k] = L.v[k].type;
        n->out_known[k] = L.v[k].known;
        L.v[k].known = NULL;
    }
    for (int j = 0; !bad && j < L.scans; j++) {
        n->out[L.carried + j] =
            ox_stack_steps(c, n, L.scan + j * OX_MAX_UNROLL, L.steps, 0, 0);
        n->out_type[L.carried + j] = L.scan_type[j];
        bad = !n->out[L.carried + j];
    }
    ox_flows_free(L.v, L.carried);
    free(L.scan);
    return bad ? -1 : 0;
}

const ox_op ox_control_ops[] = {
    {"If", conv_if, "else_branch,then_branch"},
    {"Loop", conv_loop, "body"},
    {"Scan", ox_conv_scan,
     "body,directions,num_scan_inputs,scan_input_axes,scan_input_directions,"
     "scan_output_axes,scan_output_directions"},
    {NULL, NULL, NULL},
};
