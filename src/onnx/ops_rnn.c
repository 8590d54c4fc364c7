/* The recurrent layers RNN, GRU and LSTM, unrolled over the sequence into
   Kiln ops (the sequence length is fixed when loading), so that they run
   on both execution paths and are differentiable like any graph.  The
   input projection of every step is one matrix product over the whole
   sequence; each step then multiplies the previous hidden state by R.
   sequence_lens masks the steps past each batch entry's length: the state
   stops changing there and Y is zero, which gives ONNX's semantics in
   both directions (a reverse pass starts at each sequence's own end). */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

enum { SIMPLE, GRU, LSTM };
enum { MAX_ACTS = 3 };

typedef struct act {
    char name[24];
    float alpha, beta;
} act;

typedef struct rnn {
    int kind, gates, dirs, reverse, layout, lbr, input_forget;
    int64_t hidden, seq, batch;
    float clip; /* 0: none */
    act acts[2][MAX_ACTS];
    kiln_node *x, *lens; /* x as [seq, batch, input]; lens f32 [batch, 1] */
} rnn;

/* A [1, ...] node without its leading axis. */
static kiln_node *drop_lead(kiln_graph *g, kiln_node *x)
{
    kiln_shape s = kiln_node_shape(x), r = {0};
    r.ndim = s.ndim - 1;
    for (int k = 1; k < s.ndim; k++)
        r.d[k - 1] = s.d[k];
    r.sym = s.sym >> 1;
    return kiln_reshape(g, x, r);
}

/* x[lo:hi) along axis (every other axis whole). */
static kiln_node *take(kiln_graph *g, kiln_node *x, int axis, int64_t lo,
                       int64_t hi)
{
    kiln_shape s = kiln_node_shape(x);
    int64_t start[KILN_MAX_DIMS] = {0}, stop[KILN_MAX_DIMS];
    if (axis < 0 || axis >= s.ndim) /* x poisoned: the graph's error */
        return x;
    for (int k = 0; k < s.ndim; k++)
        stop[k] = s.d[k];
    start[axis] = lo;
    stop[axis] = hi;
    return kiln_slice(g, x, start, stop);
}

static kiln_node *apply(kiln_graph *g, const act *a, kiln_node *x, float clip)
{
    if (clip > 0)
        x = kiln_clamp(g, x, -clip, clip);
    const char *f = a->name;
    if (!strcmp(f, "Sigmoid"))
        return kiln_sigmoid(g, x);
    if (!strcmp(f, "Tanh"))
        return kiln_tanh(g, x);
    if (!strcmp(f, "Relu"))
        return kiln_relu(g, x);
    if (!strcmp(f, "LeakyRelu"))
        return kiln_leaky_relu(g, x, a->alpha);
    if (!strcmp(f, "Elu"))
        return kiln_elu(g, x, a->alpha);
    if (!strcmp(f, "Softplus"))
        return kiln_softplus(g, x);
    if (!strcmp(f, "Softsign"))
        return kiln_div(g, x, kiln_add(g, kiln_scalar(g, 1), kiln_abs(g, x)));
    if (!strcmp(f, "HardSigmoid"))
        return kiln_clamp(
            g, kiln_add(g, kiln_scale(g, x, a->alpha), kiln_scalar(g, a->beta)),
            0, 1);
    if (!strcmp(f, "Affine"))
        return kiln_add(g, kiln_scale(g, x, a->alpha), kiln_scalar(g, a->beta));
    /* ScaledTanh */
    return kiln_scale(g, kiln_tanh(g, kiln_scale(g, x, a->beta)), a->alpha);
}

/* An activation's default alpha and beta (those of the ONNX op of its
   name); 0 when it takes none, -1 when Kiln does not know the name. */
static int act_defaults(act *a)
{
    static const struct {
        const char *name;
        int params;
        float alpha, beta;
    } known[] = {
        {"Sigmoid", 0, 0, 0},   {"Tanh", 0, 0, 0},
        {"Relu", 0, 0, 0},      {"Softplus", 0, 0, 0},
        {"Softsign", 0, 0, 0},  {"LeakyRelu", 1, 0.01f, 0},
        {"Elu", 1, 1.0f, 0},    {"HardSigmoid", 2, 0.2f, 0.5f},
        {"Affine", 2, 1.0f, 0}, {"ScaledTanh", 2, 1.0f, 1.0f},
    };
    for (size_t k = 0; k < sizeof known / sizeof *known; k++)
        if (!strcmp(a->name, known[k].name)) {
            a->alpha = known[k].alpha;
            a->beta = known[k].beta;
            return known[k].params;
        }
    return -1;
}

/* The activations attribute (defaults by kind), with activation_alpha and
   activation_beta consumed in order by the activations that take them. */
static int read_acts(ox_ctx *c, const ox_node *n, rnn *r)
{
    static const char *defaults[3][MAX_ACTS] = {
        {"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    int per = r->kind == SIMPLE ? 1 : r->kind == GRU ? 2 : 3;
    const Onnx__AttributeProto *a = ox_attr(n, "activations");
    const float *al = NULL, *be = NULL;
    size_t n_al = 0, n_be = 0, ia = 0, ib = 0;
    const Onnx__AttributeProto *pa = ox_attr(n, "activation_alpha"),
                               *pb = ox_attr(n, "activation_beta");
    if (pa)
        al = pa->floats, n_al = pa->n_floats;
    if (pb)
        be = pb->floats, n_be = pb->n_floats;
    if (a && a->n_strings != (size_t)(per * r->dirs))
        return ox_problem(c, n, KILN_ERR_ARG,
                          "%zu activations, want %d per direction",
                          a->n_strings, per),
               -1;
    for (int d = 0; d < r->dirs; d++)
        for (int k = 0; k < per; k++) {
            act *t = &r->acts[d][k];
            const ProtobufCBinaryData *s = a ? &a->strings[d * per + k] : NULL;
            size_t len = s ? (s->len < sizeof t->name ? s->len : 0) : 0;
            if (s) {
                memcpy(t->name, s->data, len);
                t->name[len] = 0;
            } else
                strcpy(t->name, defaults[r->kind][k]);
            int params = act_defaults(t);
            if (params < 0)
                return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "activation '%s'",
                                  t->name),
                       -1;
            if (params >= 1 && ia < n_al)
                t->alpha = al[ia++];
            if (params >= 2 && ib < n_be)
                t->beta = be[ib++];
        }
    return 0;
}

/* Attributes and the layout of X. */
static int read_spec(ox_ctx *c, const ox_node *n, rnn *r)
{
    char dir[24];
    int64_t hidden, layout, lbr, forget;
    if (ox_attr_string(c, n, "direction", "forward", dir, sizeof dir) ||
        ox_attr_int(c, n, "hidden_size", 0, &hidden) ||
        ox_attr_int(c, n, "layout", 0, &layout) ||
        ox_attr_int(c, n, "linear_before_reset", 0, &lbr) ||
        ox_attr_int(c, n, "input_forget", 0, &forget) ||
        ox_attr_float(c, n, "clip", 0, &r->clip))
        return -1;
    r->dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    r->reverse = !strcmp(dir, "reverse");
    if (r->dirs == 1 && !r->reverse && strcmp(dir, "forward"))
        return ox_problem(c, n, KILN_ERR_ARG, "direction '%s'", dir), -1;
    if ((layout != 0 && layout != 1) || r->clip < 0 || !(r->clip == r->clip))
        return ox_problem(c, n, KILN_ERR_ARG, "bad layout or clip"), -1;
    r->layout = (int)layout;
    r->lbr = lbr != 0;
    r->input_forget = forget != 0;
    kiln_node *x = ox_f32(c, n, 0);
    if (!x || kiln_node_shape(x).ndim != 3)
        return ox_problem(c, n, KILN_ERR_SHAPE, "X must be 3-D"), -1;
    kiln_shape s = kiln_node_shape(x);
    int sa = r->layout ? 1 : 0;
    if (s.sym >> sa & 1u)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "a symbolic sequence length (the layer is unrolled)"),
               -1;
    r->x = r->layout ? kiln_permute(c->g, x, (const int[]){1, 0, 2}) : x;
    r->seq = s.d[sa];
    r->batch = s.d[1 - sa];
    r->hidden = hidden;
    return read_acts(c, n, r);
}

/* Checks a node's shape against want (ndim dims); -1 recorded otherwise. */
static int check_shape(ox_ctx *c, const ox_node *n, kiln_node *x,
                       const char *what, int ndim, const int64_t *want)
{
    kiln_shape s = kiln_node_shape(x);
    int ok = x && s.ndim == ndim;
    for (int k = 0; ok && k < ndim; k++)
        ok = s.d[k] == want[k];
    if (!ok) {
        char got[96], w[96];
        kiln_shape ws = {.ndim = ndim};
        memcpy(ws.d, want, (size_t)ndim * sizeof *want);
        ox_problem(c, n, KILN_ERR_SHAPE, "%s has shape %s, want %s", what,
                   x ? kiln_shape_str(s, got, sizeof got) : "(none)",
                   kiln_shape_str(ws, w, sizeof w));
        return -1;
    }
    return 0;
}

/* One direction's operands: W [G*H, I], R [G*H, H], the biases Wb and Rb
   [1, G*H] (NULL without B), the peepholes P [1, 3H] (NULL without) and
   the initial state h, c [batch, H]. */
typedef struct dir_w {
    kiln_node *w, *r, *wb, *rb, *p, *h, *c;
    /* sliced once, not per step: the peepholes i, o, f; GRU's R and Rb
       for the z and r gates and for the h gate */
    kiln_node *pi, *po, *pf, *rzr, *rh, *rbzr, *rbh;
} dir_w;

/* Input k of direction d: in[k][d], without its leading axis. */
static kiln_node *part(kiln_graph *g, kiln_node *x, int d)
{
    return x ? drop_lead(g, take(g, x, 0, d, d + 1)) : NULL;
}

static kiln_node *cols(kiln_graph *g, kiln_node *x, int k, int64_t h)
{
    return take(g, x, kiln_node_shape(x).ndim - 1, k * h, (k + 1) * h);
}

/* Checks every input's shape; in[k] are the node's inputs as f32. */
static int check_inputs(ox_ctx *c, const ox_node *n, rnn *r, kiln_node **in)
{
    kiln_shape xs = kiln_node_shape(r->x), rs = kiln_node_shape(in[2]);
    int64_t gh, D = r->dirs, B = r->batch;
    if (!in[1] || !in[2])
        return ox_problem(c, n, KILN_ERR_IO, "W and R are required"), -1;
    if (!r->hidden && rs.ndim == 3)
        r->hidden = rs.d[2];
    /* bounded first: gates * hidden, 2 gh, 3 hidden stay in int64 */
    if (r->hidden <= 0 || r->hidden > KILN_MAX_NUMEL)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "hidden_size %lld: must be positive, at most 2^40",
                          (long long)r->hidden),
               -1;
    gh = r->gates * r->hidden;
    if (check_shape(c, n, in[1], "W", 3, (int64_t[]){D, gh, xs.d[2]}) ||
        check_shape(c, n, in[2], "R", 3, (int64_t[]){D, gh, r->hidden}) ||
        (in[3] && check_shape(c, n, in[3], "B", 2, (int64_t[]){D, 2 * gh})) ||
        (in[4] && check_shape(c, n, in[4], "sequence_lens", 1, &B)) ||
        (in[5] && check_shape(c, n, in[5], "initial_h", 3,
                              (int64_t[]){D, B, r->hidden})) ||
        (in[6] && check_shape(c, n, in[6], "initial_c", 3,
                              (int64_t[]){D, B, r->hidden})) ||
        (in[7] &&
         check_shape(c, n, in[7], "P", 2, (int64_t[]){D, 3 * r->hidden})))
        return -1;
    return 0;
}

static void dir_operands(kiln_graph *g, const rnn *r, kiln_node **in, int d,
                         dir_w *w)
{
    int64_t gh = r->gates * r->hidden;
    kiln_shape hs = KILN_SHAPE(r->batch, r->hidden);
    w->w = part(g, in[1], d);
    w->r = part(g, in[2], d);
    kiln_node *b = part(g, in[3], d);
    w->wb = b ? kiln_reshape(g, take(g, b, 0, 0, gh), KILN_SHAPE(1, gh)) : NULL;
    w->rb = b ? kiln_reshape(g, take(g, b, 0, gh, 2 * gh), KILN_SHAPE(1, gh))
              : NULL;
    kiln_node *p = part(g, in[7], d);
    w->p = p ? kiln_reshape(g, p, KILN_SHAPE(1, 3 * r->hidden)) : NULL;
    w->h = in[5] ? part(g, in[5], d) : ox_fill(g, hs, 0);
    w->c = in[6] ? part(g, in[6], d) : ox_fill(g, hs, 0);
    int64_t H = r->hidden;
    w->pi = w->p ? cols(g, w->p, 0, H) : NULL;
    w->po = w->p ? cols(g, w->p, 1, H) : NULL;
    w->pf = w->p ? cols(g, w->p, 2, H) : NULL;
    if (r->kind == GRU) {
        w->rzr = take(g, w->r, 0, 0, 2 * H);
        w->rh = take(g, w->r, 0, 2 * H, 3 * H);
        w->rbzr = w->rb ? cols(g, w->rb, 0, 2 * H) : NULL;
        w->rbh = w->rb ? cols(g, w->rb, 2, H) : NULL;
    }
}

static kiln_node *add_opt(kiln_graph *g, kiln_node *a, kiln_node *b)
{
    return b ? kiln_add(g, a, b) : a;
}

static kiln_node *mul_opt(kiln_graph *g, kiln_node *a, kiln_node *b)
{
    return a ? kiln_mul(g, a, b) : NULL;
}

/* The LSTM cell (gates i, o, f, c): the new h and *cell. */
static kiln_node *lstm_step(kiln_graph *g, const rnn *r, const dir_w *w,
                            const act *a, kiln_node *pre, kiln_node **cell)
{
    int64_t H = r->hidden;
    kiln_node *pi = w->pi, *po = w->po, *pf = w->pf;
    kiln_node *i =
        apply(g, &a[0], add_opt(g, cols(g, pre, 0, H), mul_opt(g, pi, *cell)),
              r->clip);
    kiln_node *f =
        r->input_forget
            ? kiln_sub(g, kiln_scalar(g, 1), i)
            : apply(g, &a[0],
                    add_opt(g, cols(g, pre, 2, H), mul_opt(g, pf, *cell)),
                    r->clip);
    kiln_node *cand = apply(g, &a[1], cols(g, pre, 3, H), r->clip);
    *cell = kiln_add(g, kiln_mul(g, f, *cell), kiln_mul(g, i, cand));
    kiln_node *o =
        apply(g, &a[0], add_opt(g, cols(g, pre, 1, H), mul_opt(g, po, *cell)),
              r->clip);
    return kiln_mul(g, o, apply(g, &a[2], *cell, 0));
}

/* The GRU cell (gates z, r, h) from the projected input xw. */
static kiln_node *gru_step(kiln_graph *g, const rnn *r, const dir_w *w,
                           const act *a, kiln_node *xw, kiln_node *h)
{
    int64_t H = r->hidden;
    kiln_node *rh = w->rh, *rbh = w->rbh;
    kiln_node *hr = add_opt(g, kiln_matmul(g, h, w->rzr, 0, 1), w->rbzr);
    kiln_node *z = apply(
        g, &a[0], kiln_add(g, cols(g, xw, 0, H), cols(g, hr, 0, H)), r->clip);
    kiln_node *reset = apply(
        g, &a[0], kiln_add(g, cols(g, xw, 1, H), cols(g, hr, 1, H)), r->clip);
    kiln_node *rec =
        r->lbr
            ? kiln_mul(g, reset, add_opt(g, kiln_matmul(g, h, rh, 0, 1), rbh))
            : add_opt(g, kiln_matmul(g, kiln_mul(g, reset, h), rh, 0, 1), rbh);
    kiln_node *cand =
        apply(g, &a[1], kiln_add(g, cols(g, xw, 2, H), rec), r->clip);
    return kiln_add(g, cand, kiln_mul(g, z, kiln_sub(g, h, cand)));
}

/* Runs one direction over the sequence: ys[t] gets step t's output as
   [1, 1, batch, H] (in time order), *h and *cell the final state. */
static void run_dir(kiln_graph *g, const rnn *r, const dir_w *w, const act *a,
                    int reverse, kiln_node **ys, kiln_node **h,
                    kiln_node **cell)
{
    kiln_node *xw = add_opt(g, kiln_matmul(g, r->x, w->w, 0, 1), w->wb);
    *h = w->h;
    *cell = w->c;
    for (int64_t k = 0; k < r->seq; k++) {
        int64_t t = reverse ? r->seq - 1 - k : k;
        kiln_node *xt = drop_lead(g, take(g, xw, 0, t, t + 1)), *nh,
                  *nc = *cell;
        if (r->kind == GRU)
            nh = gru_step(g, r, w, a, xt, *h);
        else {
            kiln_node *pre = add_opt(
                g, kiln_add(g, xt, kiln_matmul(g, *h, w->r, 0, 1)), w->rb);
            nh = r->kind == LSTM ? lstm_step(g, r, w, a, pre, &nc)
                                 : apply(g, &a[0], pre, r->clip);
        }
        kiln_node *y = nh;
        if (r->lens) { /* 1 while t < the entry's length, else 0 */
            kiln_node *m = kiln_lt(g, kiln_scalar(g, (float)t), r->lens);
            *h = kiln_add(g, *h, kiln_mul(g, m, kiln_sub(g, nh, *h)));
            *cell = kiln_add(g, *cell, kiln_mul(g, m, kiln_sub(g, nc, *cell)));
            y = kiln_mul(g, m, nh);
        } else {
            *h = nh;
            *cell = nc;
        }
        ys[t] = kiln_reshape(g, y, KILN_SHAPE(1, 1, r->batch, r->hidden));
    }
}

/* Steps Kiln unrolls at most: each is a few dozen nodes. */
#define MAX_STEPS 10000

/* Y [seq, dirs, batch, H], Y_h and Y_c [dirs, batch, H] (batch first with
   layout 1). */
static void set_outputs(ox_ctx *c, ox_node *n, const rnn *r, kiln_node **ys,
                        kiln_node **hs, kiln_node **cs)
{
    kiln_graph *g = c->g;
    kiln_node *per_dir[2], *y;
    for (int d = 0; d < r->dirs; d++) {
        per_dir[d] = kiln_concat(g, ys + d * r->seq, (int)r->seq, 0);
        hs[d] = kiln_reshape(g, hs[d], KILN_SHAPE(1, r->batch, r->hidden));
        cs[d] = kiln_reshape(g, cs[d], KILN_SHAPE(1, r->batch, r->hidden));
    }
    y = kiln_concat(g, per_dir, r->dirs, 1);
    kiln_node *yh = kiln_concat(g, hs, r->dirs, 0),
              *yc = kiln_concat(g, cs, r->dirs, 0);
    if (r->layout) {
        y = kiln_permute(g, y, (const int[]){2, 0, 1, 3});
        yh = kiln_permute(g, yh, (const int[]){1, 0, 2});
        yc = kiln_permute(g, yc, (const int[]){1, 0, 2});
    }
    kiln_node *outs[3] = {y, yh, yc};
    for (int k = 0; k < 3 && k < n->n_out; k++) {
        n->out[k] = outs[k];
        n->out_type[k] = OX_FLOAT;
    }
}

static int conv_rnn(ox_ctx *c, ox_node *n)
{
    const char *op = n->p->op_type;
    rnn r = {.kind = !strcmp(op, "LSTM")  ? LSTM
                     : !strcmp(op, "GRU") ? GRU
                                          : SIMPLE};
    r.gates = r.kind == LSTM ? 4 : r.kind == GRU ? 3 : 1;
    if (read_spec(c, n, &r))
        return -1;
    if (r.seq < 1 || r.seq > MAX_STEPS || kiln_node_shape(r.x).sym)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "a sequence of %lld steps (Kiln unrolls 1 to %d, of "
                          "fixed batch)",
                          (long long)r.seq, MAX_STEPS),
               -1;
    kiln_node *in[8] = {0};
    int inputs = r.kind == LSTM ? 8 : 6;
    for (int k = 1; k < inputs && k < n->n_in; k++)
        in[k] = n->in[k] ? ox_f32(c, n, k) : NULL;
    if (check_inputs(c, n, &r, in))
        return -1;
    if (in[4])
        r.lens = kiln_reshape(c->g, in[4], KILN_SHAPE(r.batch, 1));
    kiln_node **ys = calloc((size_t)(r.seq * r.dirs), sizeof *ys);
    if (!ys)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    kiln_node *hs[2], *cs[2];
    for (int d = 0; d < r.dirs; d++) {
        dir_w w = {0};
        dir_operands(c->g, &r, in, d, &w);
        run_dir(c->g, &r, &w, r.acts[d], d == 1 || r.reverse, ys + d * r.seq,
                &hs[d], &cs[d]);
    }
    set_outputs(c, n, &r, ys, hs, cs);
    free(ys);
    return 0;
}

#define RNN_ATTRS                                                              \
    "activations,activation_alpha,activation_beta,clip,direction,hidden_size," \
    "layout"

const ox_op ox_rnn_ops[] = {
    {"RNN", conv_rnn, RNN_ATTRS},
    {"GRU", conv_rnn, RNN_ATTRS ",linear_before_reset"},
    {"LSTM", conv_rnn, RNN_ATTRS ",input_forget"},
    {NULL, NULL, NULL},
};
