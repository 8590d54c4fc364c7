/* Gradients: kiln_gradcheck (central differences) on every differentiable
   op over random shapes with broadcasting and size-1 dims, three seeds each;
   second-order gradients; and the autodiff API (kiln_grads,
   kiln_backprop_node, broadcast reduction, stop_gradient, independence). */
#include "test_helpers.h"

#define EPS 1e-3
#define TOL 1e-2
#define SEEDS 3
#define MAXIN 3

/* ------------------------------------------------------------ shapes */

static int rdim(kiln_rng *r, int lo, int hi)
{
    return lo + (int)(kiln_rng_u32(r) % (uint32_t)(hi - lo + 1));
}

/* A shape generator fills s[0..MAXIN-1] for one seed; p are case params. */
typedef void (*shape_fn)(kiln_rng *r, const int *p, kiln_shape *s);

/* One random shape of 0 to 3 dims of size 1 to 4, for every operand. */
static void sh_any(kiln_rng *r, const int *p, kiln_shape *s)
{
    (void)p;
    kiln_shape a = {.ndim = rdim(r, 0, 3)};
    for (int i = 0; i < a.ndim; i++)
        a.d[i] = rdim(r, 1, 4);
    for (int k = 0; k < MAXIN; k++)
        s[k] = a;
}

/* A random 3-D shape (sizes 1 to 4) for every operand. */
static void sh_3d(kiln_rng *r, const int *p, kiln_shape *s)
{
    (void)p;
    kiln_shape a = KILN_SHAPE(rdim(r, 1, 4), rdim(r, 1, 4), rdim(r, 2, 4));
    for (int k = 0; k < MAXIN; k++)
        s[k] = a;
}

/* Operands that broadcast together: a random 1-3 dim output shape; each
   operand drops some leading dims and has some dims set to 1. */
static void sh_bcast(kiln_rng *r, const int *p, kiln_shape *s)
{
    (void)p;
    kiln_shape out = {.ndim = rdim(r, 1, 3)};
    for (int i = 0; i < out.ndim; i++)
        out.d[i] = rdim(r, 2, 4);
    for (int k = 0; k < MAXIN; k++) {
        int drop = rdim(r, 0, out.ndim);
        s[k].ndim = out.ndim - drop;
        for (int i = 0; i < s[k].ndim; i++)
            s[k].d[i] = rdim(r, 0, 2) == 0 ? 1 : out.d[i + drop];
    }
}

/* matmul operands; p = {trans_a, trans_b, batch mode}: 0 none, 1 the same
   batch [B], 2 broadcasting batches [B,1] and [C]. */
static void sh_mat(kiln_rng *r, const int *p, kiln_shape *s)
{
    int64_t m = rdim(r, 1, 4), k = rdim(r, 1, 4), n = rdim(r, 1, 4);
    int64_t B = rdim(r, 2, 3), C = rdim(r, 2, 3);
    kiln_shape a = KILN_SHAPE(p[0] ? k : m, p[0] ? m : k);
    kiln_shape b = KILN_SHAPE(p[1] ? n : k, p[1] ? k : n);
    kiln_shape ab = {.ndim = p[2] == 0 ? 0 : p[2] == 1 ? 1 : 2, .d = {B, 1}};
    kiln_shape bb = {.ndim = p[2] == 0 ? 0 : 1, .d = {p[2] == 1 ? B : C}};
    s[0] = s[1] = (kiln_shape){0};
    for (int i = 0; i < ab.ndim; i++)
        s[0].d[s[0].ndim++] = ab.d[i];
    for (int i = 0; i < bb.ndim; i++)
        s[1].d[s[1].ndim++] = bb.d[i];
    s[0].d[s[0].ndim++] = a.d[0];
    s[0].d[s[0].ndim++] = a.d[1];
    s[1].d[s[1].ndim++] = b.d[0];
    s[1].d[s[1].ndim++] = b.d[1];
}

/* nGraph dot contracting p[0] axes: a [m.., k..], b [k.., n..]. */
static void sh_dot(kiln_rng *r, const int *p, kiln_shape *s)
{
    int n = p[0];
    s[0] = (kiln_shape){.ndim = rdim(r, 1, 2)};
    s[1] = (kiln_shape){.ndim = 0};
    for (int i = 0; i < s[0].ndim; i++)
        s[0].d[i] = rdim(r, 1, 3);
    for (int i = 0; i < n; i++)
        s[0].d[s[0].ndim++] = s[1].d[s[1].ndim++] = rdim(r, 1, 3);
    for (int i = rdim(r, 1, 2); i > 0; i--)
        s[1].d[s[1].ndim++] = rdim(r, 1, 3);
}

/* affine: x [m,k], w [k,n], b [n]. */
static void sh_affine(kiln_rng *r, const int *p, kiln_shape *s)
{
    (void)p;
    int64_t m = rdim(r, 1, 4), k = rdim(r, 1, 4), n = rdim(r, 1, 4);
    s[0] = KILN_SHAPE(m, k);
    s[1] = KILN_SHAPE(k, n);
    s[2] = KILN_SHAPE(n);
}

/* concat along axis p[0] of 3-D operands that differ only there. */
static void sh_concat(kiln_rng *r, const int *p, kiln_shape *s)
{
    kiln_shape a = KILN_SHAPE(rdim(r, 1, 3), rdim(r, 1, 3), rdim(r, 1, 3));
    for (int k = 0; k < MAXIN; k++) {
        s[k] = a;
        s[k].d[p[0]] = rdim(r, 0, 3);
    }
}

/* A random 2-D [N, C] shape with C >= 2 (losses over classes). */
static void sh_nc(kiln_rng *r, const int *p, kiln_shape *s)
{
    (void)p;
    kiln_shape a = KILN_SHAPE(rdim(r, 1, 4), rdim(r, 2, 5));
    for (int k = 0; k < MAXIN; k++)
        s[k] = a;
}

/* ------------------------------------------------------------ builders */

typedef kiln_node *(*build_fn)(kiln_graph *g, kiln_node **x, const int *p);

#define BUILD(fname, expr)                                                     \
    static kiln_node *fname(kiln_graph *g, kiln_node **x, const int *p)        \
    {                                                                          \
        (void)p;                                                               \
        return (expr);                                                         \
    }
#define SH(x) kiln_node_shape(x)

/* b_<name> for every elementwise op of the table. */
#define KILN_UNARY(OP, name, ...) BUILD(b_##name, kiln_##name(g, x[0]))
#define KILN_BINARY(OP, name, ...) BUILD(b_##name, kiln_##name(g, x[0], x[1]))
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY

BUILD(b_sign_gated, kiln_mul(g, kiln_sign(g, x[0]), x[0]))
BUILD(b_gelu, kiln_gelu(g, x[0]))
BUILD(b_gelu_erf, kiln_gelu_erf(g, x[0]))
BUILD(b_scale, kiln_scale(g, x[0], -1.7f))
BUILD(b_cast, kiln_cast(g, x[0], KILN_F32))
BUILD(b_mul3, kiln_mul(g, kiln_mul(g, x[0], x[1]), x[0]))
/* comparisons have no gradient: the mask only gates x[0] */
BUILD(b_lt_gated, kiln_mul(g, x[0], kiln_lt(g, x[0], x[1])))
BUILD(b_ge_gated, kiln_mul(g, x[1], kiln_ge(g, x[0], x[1])))
BUILD(b_select, kiln_select(g, kiln_gt(g, x[0], kiln_scalar(g, 0)), x[1], x[2]))
BUILD(b_sum, kiln_sum(g, x[0], (unsigned)p[0], p[1]))
BUILD(b_mean, kiln_mean(g, x[0], (unsigned)p[0], p[1]))
BUILD(b_rmax, kiln_reduce_max(g, x[0], (unsigned)p[0], p[1]))
BUILD(b_rmax_sq, kiln_mul(g, kiln_reduce_max(g, x[0], (unsigned)p[0], p[1]),
                          kiln_reduce_max(g, x[0], (unsigned)p[0], p[1])))
BUILD(b_reshape, kiln_reshape(g, x[0], KILN_SHAPE(-1, SH(x[0]).d[2])))
BUILD(b_permute, kiln_permute(g, x[0], p))
BUILD(b_transpose, kiln_transpose(g, x[0]))
/* [d0,d1,d2] -> reshape [d0, d1*d2, 1] -> broadcast_to [3, d0, d1*d2, 2] */
BUILD(b_broadcast_to,
      kiln_broadcast_to(
          g,
          kiln_reshape(g, x[0],
                       KILN_SHAPE(SH(x[0]).d[0], SH(x[0]).d[1] * SH(x[0]).d[2],
                                  1)),
          KILN_SHAPE(3, SH(x[0]).d[0], SH(x[0]).d[1] * SH(x[0]).d[2], 2)))
/* nGraph broadcast [d0,d1,d2] -> [2,d0,d1,3,d2] */
BUILD(b_broadcast, kiln_broadcast(g, x[0],
                                  KILN_SHAPE(2, SH(x[0]).d[0], SH(x[0]).d[1], 3,
                                             SH(x[0]).d[2]),
                                  KILN_AXIS(0) | KILN_AXIS(3)))
BUILD(b_concat, kiln_concat(g, x, 3, p[0] - 3))
BUILD(b_matmul, kiln_matmul(g, x[0], x[1], p[0], p[1]))
/* (op(a) op(b))^2 elementwise, so second derivatives are not constant */
BUILD(b_mm_sq, kiln_mul(g, kiln_matmul(g, x[0], x[1], p[0], p[1]),
                        kiln_matmul(g, x[0], x[1], p[0], p[1])))
BUILD(b_dot, kiln_dot(g, x[0], x[1], p[0]))
BUILD(b_softmax, kiln_softmax(g, x[0], p[0]))
BUILD(b_log_softmax, kiln_log_softmax(g, x[0], p[0]))
BUILD(b_affine, kiln_affine(g, x[0], x[1], x[2]))
BUILD(b_bce, kiln_binary_cross_entropy(g, x[0], x[1]))

static kiln_node *b_slice(kiln_graph *g, kiln_node **x, const int *p)
{
    (void)p;
    kiln_shape s = SH(x[0]);
    int64_t start[3] = {s.d[0] > 1, 0, -2}, stop[3] = {s.d[0], -1, s.d[2]};
    if (s.d[1] == 1)
        stop[1] = 1;
    return kiln_slice(g, x[0], start, stop);
}

static kiln_node *b_pad(kiln_graph *g, kiln_node **x, const int *p)
{
    (void)p;
    int64_t lo[3] = {1, 0, 2}, hi[3] = {0, 2, 1};
    return kiln_mul(g, kiln_pad(g, x[0], lo, hi, 0.7f),
                    kiln_pad(g, x[0], hi, lo, -0.3f));
}

/* Labels 0..C-1 spread over the rows, as a constant. */
static kiln_node *labels(kiln_graph *g, kiln_shape nc)
{
    int32_t lab[8];
    for (int i = 0; i < nc.d[0]; i++)
        lab[i] = (int32_t)((3 * i + 1) % nc.d[1]);
    return kiln_constant(g, KILN_I32, KILN_SHAPE(nc.d[0]), lab);
}

static kiln_node *b_cross_entropy(kiln_graph *g, kiln_node **x, const int *p)
{
    (void)p;
    kiln_node *oh = kiln_one_hot(g, labels(g, SH(x[0])), (int)SH(x[0]).d[1]);
    return kiln_cross_entropy(g, x[0], oh, kiln_scalar(g, (float)SH(x[0]).d[0]),
                              -5.0f);
}

static kiln_node *b_softmax_ce(kiln_graph *g, kiln_node **x, const int *p)
{
    (void)p;
    return kiln_softmax_cross_entropy(g, x[0], labels(g, SH(x[0])));
}

/* ------------------------------------------------------------ cases */

enum { D_UNI, D_AWAY, D_DISTINCT };

typedef struct gcase {
    const char *name;
    int n_in;
    shape_fn shapes;
    double lo, hi;
    int dom; /* D_UNI: uniform [lo,hi); D_AWAY: |x| in [lo,hi); D_DISTINCT:
                every element of every operand distinct, spread over
                [lo,hi) (no ties for max/min) */
    build_fn build;
    int p[4];
    int order; /* 2: check the gradient of sum(grad * R2) */
} gcase;

#define U1(nm, lo, hi, dom)                                                    \
    {                                                                          \
#nm, 1, sh_any, lo, hi, dom, b_##nm, {0 }, 1                           \
    }
#define B2(nm, lo, hi, dom)                                                    \
    {                                                                          \
#nm, 2, sh_bcast, lo, hi, dom, b_##nm, {0 }, 1                         \
    }
#define R3(nm, dom, mask, kd)                                                  \
    {                                                                          \
#nm "_" #mask "_" #kd, 1, sh_3d, -2, 2, dom, b_##nm, {mask, kd }, 1    \
    }
#define MMC(ta, tb, mode)                                                      \
    {                                                                          \
        "matmul_" #ta #tb "_" #mode, 2, sh_mat, -2, 2, D_UNI, b_matmul,        \
            {ta, tb, mode}, 1                                                  \
    }

static const gcase cases[] = {
    U1(sign_gated, 0.1, 2, D_AWAY),
    U1(gelu, -3, 3, D_UNI),
    U1(gelu_erf, -3, 3, D_UNI),
    U1(scale, -2, 2, D_UNI),
    U1(cast, -2, 2, D_UNI),
    B2(lt_gated, -2, 2, D_DISTINCT),
    B2(ge_gated, -2, 2, D_DISTINCT),
    {"select", 3, sh_bcast, 0.2, 2, D_AWAY, b_select, {0}, 1},
    R3(sum, D_UNI, 1, 0),
    R3(sum, D_UNI, 2, 1),
    R3(sum, D_UNI, 5, 0),
    R3(sum, D_UNI, 6, 1),
    R3(sum, D_UNI, 255, 0),
    R3(sum, D_UNI, 255, 1),
    R3(mean, D_UNI, 2, 0),
    R3(mean, D_UNI, 5, 1),
    R3(mean, D_UNI, 255, 0),
    R3(rmax, D_DISTINCT, 1, 0),
    R3(rmax, D_DISTINCT, 4, 1),
    R3(rmax, D_DISTINCT, 5, 0),
    R3(rmax, D_DISTINCT, 255, 0),
    {"reshape", 1, sh_3d, -2, 2, D_UNI, b_reshape, {0}, 1},
    {"permute_201", 1, sh_3d, -2, 2, D_UNI, b_permute, {2, 0, 1}, 1},
    {"permute_102", 1, sh_3d, -2, 2, D_UNI, b_permute, {1, 0, 2}, 1},
    {"transpose", 1, sh_3d, -2, 2, D_UNI, b_transpose, {0}, 1},
    {"broadcast_to", 1, sh_3d, -2, 2, D_UNI, b_broadcast_to, {0}, 1},
    {"broadcast", 1, sh_3d, -2, 2, D_UNI, b_broadcast, {0}, 1},
    {"slice", 1, sh_3d, -2, 2, D_UNI, b_slice, {0}, 1},
    {"pad", 1, sh_3d, -2, 2, D_UNI, b_pad, {0}, 1},
    {"concat_0", 3, sh_concat, -2, 2, D_UNI, b_concat, {0}, 1},
    {"concat_2", 3, sh_concat, -2, 2, D_UNI, b_concat, {2}, 1},
    MMC(0, 0, 0),
    MMC(0, 1, 0),
    MMC(1, 0, 0),
    MMC(1, 1, 0),
    MMC(0, 0, 1),
    MMC(0, 1, 1),
    MMC(1, 0, 1),
    MMC(1, 1, 1),
    MMC(0, 0, 2),
    MMC(0, 1, 2),
    MMC(1, 0, 2),
    MMC(1, 1, 2),
    {"dot_0", 2, sh_dot, -2, 2, D_UNI, b_dot, {0}, 1},
    {"dot_1", 2, sh_dot, -2, 2, D_UNI, b_dot, {1}, 1},
    {"dot_2", 2, sh_dot, -2, 2, D_UNI, b_dot, {2}, 1},
    {"softmax_0", 1, sh_3d, -3, 3, D_UNI, b_softmax, {0}, 1},
    {"softmax_m1", 1, sh_3d, -3, 3, D_UNI, b_softmax, {-1}, 1},
    {"log_softmax_1", 1, sh_3d, -3, 3, D_UNI, b_log_softmax, {1}, 1},
    {"log_softmax_m1", 1, sh_3d, -3, 3, D_UNI, b_log_softmax, {-1}, 1},
    {"affine", 3, sh_affine, -2, 2, D_UNI, b_affine, {0}, 1},
    {"cross_entropy", 1, sh_nc, 0.05, 1, D_UNI, b_cross_entropy, {0}, 1},
    {"softmax_ce", 1, sh_nc, -3, 3, D_UNI, b_softmax_ce, {0}, 1},
    {"bce", 2, sh_any, 0.05, 0.95, D_UNI, b_bce, {0}, 1},
    /* second order: the gradient graph is itself differentiated */
    {"tanh_2nd", 1, sh_any, -2, 2, D_UNI, b_tanh, {0}, 2},
    {"sigmoid_2nd", 1, sh_any, -3, 3, D_UNI, b_sigmoid, {0}, 2},
    {"sin_2nd", 1, sh_any, -3, 3, D_UNI, b_sin, {0}, 2},
    {"exp_2nd", 1, sh_any, -2, 2, D_UNI, b_exp, {0}, 2},
    {"mul_2nd", 2, sh_bcast, -2, 2, D_UNI, b_mul3, {0}, 2},
    {"div_2nd", 2, sh_bcast, 0.5, 2, D_AWAY, b_div, {0}, 2},
    {"log_2nd", 1, sh_any, 0.3, 3, D_UNI, b_log, {0}, 2},
    {"sqrt_2nd", 1, sh_any, 0.3, 3, D_UNI, b_sqrt, {0}, 2},
    {"pow_2nd", 2, sh_bcast, 0.5, 2, D_UNI, b_pow, {0}, 2},
    {"erf_2nd", 1, sh_any, -2, 2, D_UNI, b_erf, {0}, 2},
    {"gelu_2nd", 1, sh_any, -3, 3, D_UNI, b_gelu, {0}, 2},
    {"softmax_2nd", 1, sh_3d, -2, 2, D_UNI, b_softmax, {1}, 2},
    {"log_softmax_2nd", 1, sh_3d, -2, 2, D_UNI, b_log_softmax, {-1}, 2},
    {"rmax_2nd", 1, sh_3d, -2, 2, D_DISTINCT, b_rmax_sq, {2, 0}, 2},
    {"matmul_2nd_00", 2, sh_mat, -2, 2, D_UNI, b_mm_sq, {0, 0, 1}, 2},
    {"matmul_2nd_11", 2, sh_mat, -2, 2, D_UNI, b_mm_sq, {1, 1, 2}, 2},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* Every elementwise op of the table with a gradient, on its row's domain;
   order 0 marks the ops without one (skipped). */
#define UNI(lo, hi) lo, hi, D_UNI
#define AWAY(lo, hi) lo, hi, D_AWAY
#define DISTINCT(lo, hi) lo, hi, D_DISTINCT
#define ORDER_D(...) 1
#define ORDER_D2(...) 1
#define ORDER_RULE 1
#define ORDER_NONE 0
#define KILN_UNARY(OP, name, f, grad, dom, doc)                                \
    {#name, 1, sh_any, dom, b_##name, {0}, ORDER_##grad},
#define KILN_BINARY(OP, name, f, grad, dom, doc)                               \
    {#name, 2, sh_bcast, dom, b_##name, {0}, ORDER_##grad},
static const gcase table_cases[] = {
#include "graph/elementwise.def"
};
#undef KILN_UNARY
#undef KILN_BINARY
#define N_TABLE ((int)(sizeof table_cases / sizeof table_cases[0]))

/* ------------------------------------------------------------ runner */

/* Random values for the n operands of shapes s, in the case's domain. */
static void fill_values(kiln_rng *r, const gcase *c, const kiln_shape *s,
                        float **v)
{
    int64_t total = 0, at = 0;
    for (int k = 0; k < c->n_in; k++) {
        assert_non_null(v[k] = malloc((size_t)kiln_shape_numel(s[k]) * 4 + 4));
        total += kiln_shape_numel(s[k]);
    }
    for (int k = 0; k < c->n_in; k++) {
        for (int64_t i = 0; i < kiln_shape_numel(s[k]); i++, at++) {
            double u = kiln_rng_uniform(r);
            if (c->dom == D_DISTINCT)
                u = ((double)at + 0.5) / (double)total;
            double x = c->lo + (c->hi - c->lo) * u;
            v[k][i] =
                (float)(c->dom == D_AWAY && kiln_rng_uniform(r) < 0.5 ? -x : x);
        }
    }
    if (c->dom != D_DISTINCT)
        return;
    for (int64_t i = total - 1; i > 0; i--) { /* shuffle across operands */
        int64_t j = (int64_t)(kiln_rng_u32(r) % (uint32_t)(i + 1)), a = i,
                b = j;
        int ka = 0, kb = 0;
        while (a >= kiln_shape_numel(s[ka]))
            a -= kiln_shape_numel(s[ka++]);
        while (b >= kiln_shape_numel(s[kb]))
            b -= kiln_shape_numel(s[kb++]);
        float t = v[ka][a];
        v[ka][a] = v[kb][b];
        v[kb][b] = t;
    }
}

/* sum(y * R) for a random normal constant R of y's shape. */
static kiln_node *rsum(kiln_graph *g, kiln_rng *r, kiln_node *y)
{
    kiln_node *c = th_normal_const(g, r, kiln_node_shape(y));
    return kiln_sum(g, kiln_mul(g, y, c), KILN_ALL_AXES, 0);
}

/* The loss of case c over variables x: sum(op * R), or for order 2 the sum
   over operands of sum(d loss1 / d x_k * R2_k). */
static kiln_node *case_loss(kiln_graph *g, kiln_rng *r, const gcase *c,
                            kiln_node **x)
{
    kiln_node *loss = rsum(g, r, c->build(g, x, c->p));
    if (c->order == 1)
        return loss;
    kiln_node *gr[MAXIN], *l2 = NULL;
    assert_int_equal(kiln_grads(g, loss, NULL, x, c->n_in, gr), KILN_OK);
    for (int k = 0; k < c->n_in; k++) {
        kiln_node *t = rsum(g, r, gr[k]);
        l2 = l2 ? kiln_add(g, l2, t) : t;
    }
    return l2;
}

static void gradcheck_seed(const gcase *c, uint64_t seed)
{
    static const char *names[MAXIN] = {"x0", "x1", "x2"};
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    kiln_shape s[MAXIN];
    float *v[MAXIN];
    c->shapes(&r, c->p, s);
    fill_values(&r, c, s, v);
    kiln_session *ss = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x[MAXIN];
    for (int k = 0; k < c->n_in; k++)
        x[k] =
            kiln_variable(g, names[k], KILN_F32, s[k], kiln_init_values(v[k]));
    kiln_node *loss = case_loss(g, &r, c, x);
    th_assert_graph_ok(g);
    kiln_gradcheck_result res;
    if (kiln_gradcheck(ss, g, loss, x, c->n_in, NULL, NULL, 0, EPS, TOL,
                       &res) != KILN_OK) {
        char b[96];
        fail_msg("%s seed %llu, x%d %s: %s (abs err %.3g)", c->name,
                 (unsigned long long)seed, res.worst_node,
                 kiln_shape_str(s[res.worst_node], b, sizeof b),
                 kiln_session_error(ss), res.max_abs_err);
    }
    for (int k = 0; k < c->n_in; k++)
        free(v[k]);
    kiln_graph_free(g);
    kiln_session_free(ss);
}

static void test_gradcheck_case(void **state)
{
    const gcase *c = *state;
    for (uint64_t seed = 1; seed <= SEEDS; seed++)
        gradcheck_seed(c, seed * 7919 + (uint64_t)(c - cases));
}

/* ------------------------------------------------------------ API tests */

/* An input (fed tensor) as a wrt node, next to a variable. */
static void test_gradcheck_input_wrt(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3, 4));
    kiln_node *w = kiln_variable(g, "w", KILN_F32, KILN_SHAPE(4),
                                 kiln_init_uniform(-1, 1));
    kiln_node *loss = rsum(g, &r, kiln_tanh(g, kiln_mul(g, x, w)));
    kiln_tensor *xt = th_rand(&r, KILN_SHAPE(3, 4), -2, 2);
    kiln_node *wrt[2] = {x, w};
    if (kiln_gradcheck(s, g, loss, wrt, 2, &x, &xt, 1, EPS, TOL, NULL) !=
        KILN_OK)
        fail_msg("%s", kiln_session_error(s));
    kiln_tensor_free(xt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* d2/dx2 of sum(f(x)) against closed forms. */
static double d2_tanh(double x)
{
    double t = tanh(x);
    return -2 * t * (1 - t * t);
}
static double d2_sigmoid(double x)
{
    double s = 1 / (1 + exp(-x));
    return s * (1 - s) * (1 - 2 * s);
}
static double d2_sin(double x)
{
    return -sin(x);
}
static double d2_exp(double x)
{
    return exp(x);
}

static void check_second_derivative(kiln_node *(*f)(kiln_graph *, kiln_node *),
                                    double (*d2)(double), const char *what)
{
    float xv[6] = {-2.0f, -0.7f, -0.1f, 0.0f, 0.4f, 1.5f};
    double want[6];
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_variable(g, "x", KILN_F32, KILN_SHAPE(2, 3), kiln_init_values(xv));
    kiln_node *g1 = kiln_grad(g, kiln_sum(g, f(g, x), KILN_ALL_AXES, 0), x);
    kiln_node *g2 = kiln_grad(g, kiln_sum(g, g1, KILN_ALL_AXES, 0), x);
    kiln_tensor *t = th_eval(s, g, g2);
    th_assert_shape(kiln_tensor_shape(t), KILN_SHAPE(2, 3));
    for (int i = 0; i < 6; i++)
        want[i] = d2(xv[i]);
    th_assert_close(what, kiln_tensor_f32(t), want, 6, 1e-4, 1e-5);
    kiln_tensor_free(t);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_second_derivative_closed_form(void **state)
{
    (void)state;
    check_second_derivative(kiln_tanh, d2_tanh, "tanh''");
    check_second_derivative(kiln_sigmoid, d2_sigmoid, "sigmoid''");
    check_second_derivative(kiln_sin, d2_sin, "sin''");
    check_second_derivative(kiln_exp, d2_exp, "exp''");
}

/* Three variables with shared intermediates: a [3,4], b [3,4], c [4]. */
static kiln_node *shared_loss(kiln_graph *g, kiln_rng *r, kiln_node **v)
{
    v[0] = kiln_variable(g, "a", KILN_F32, KILN_SHAPE(3, 4),
                         kiln_init_normal(0, 1));
    v[1] = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(3, 4),
                         kiln_init_normal(0, 1));
    v[2] =
        kiln_variable(g, "c", KILN_F32, KILN_SHAPE(4), kiln_init_normal(0, 1));
    kiln_node *h = kiln_tanh(g, kiln_add(g, kiln_mul(g, v[0], v[1]), v[2]));
    return rsum(g, r, kiln_mul(g, h, kiln_sigmoid(g, kiln_mul(g, h, v[0]))));
}

/* kiln_grads of several wrt nodes equals separate kiln_grad calls, and
   shares nodes (builds fewer than the separate calls together). */
static void test_grads_several_match_separate(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 11);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *v[3], *outs[6];
    kiln_node *loss = shared_loss(g, &r, v);
    int n0 = kiln_graph_node_count(g);
    assert_int_equal(kiln_grads(g, loss, NULL, v, 3, outs), KILN_OK);
    int n_joint = kiln_graph_node_count(g) - n0;
    for (int i = 0; i < 3; i++)
        outs[3 + i] = kiln_grad(g, loss, v[i]);
    int n_sep = kiln_graph_node_count(g) - n0 - n_joint;
    assert_true(n_joint < n_sep);
    kiln_tensor *t[6];
    th_run(s, g, outs, 6, NULL, NULL, 0, t);
    for (int i = 0; i < 3; i++) {
        th_assert_shape(kiln_tensor_shape(t[i]), kiln_node_shape(v[i]));
        th_assert_close_f("grads vs grad", kiln_tensor_f32(t[i]),
                          kiln_tensor_f32(t[3 + i]), kiln_tensor_numel(t[i]),
                          1e-6, 1e-7);
    }
    for (int i = 0; i < 6; i++)
        kiln_tensor_free(t[i]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* Gradients with respect to an intermediate node and its input together:
   h = tanh(x), y = sum(h*h*R): dy/dh = 2hR, dy/dx = 2hR(1-h^2). */
static void test_grad_wrt_intermediate(void **state)
{
    (void)state;
    float xv[4] = {-1.5f, -0.2f, 0.3f, 1.1f}, rv[4] = {0.5f, -2.0f, 1.0f, 3.0f};
    double wh[4], wx[4];
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_variable(g, "x", KILN_F32, KILN_SHAPE(4), kiln_init_values(xv));
    kiln_node *h = kiln_tanh(g, x);
    kiln_node *R = kiln_constant(g, KILN_F32, KILN_SHAPE(4), rv);
    kiln_node *y =
        kiln_sum(g, kiln_mul(g, kiln_mul(g, h, h), R), KILN_ALL_AXES, 0);
    kiln_node *xs[2] = {h, x}, *gr[2];
    assert_int_equal(kiln_grads(g, y, NULL, xs, 2, gr), KILN_OK);
    kiln_tensor *t[2];
    th_run(s, g, gr, 2, NULL, NULL, 0, t);
    for (int i = 0; i < 4; i++) {
        double th = tanh(xv[i]);
        wh[i] = 2 * th * rv[i];
        wx[i] = wh[i] * (1 - th * th);
    }
    th_assert_close("dy/dh", kiln_tensor_f32(t[0]), wh, 4, 1e-5, 1e-6);
    th_assert_close("dy/dx", kiln_tensor_f32(t[1]), wx, 4, 1e-5, 1e-6);
    kiln_tensor_free(t[0]);
    kiln_tensor_free(t[1]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* backprop_node(y, delta, x) on a non-scalar y equals grad(sum(y*delta), x),
   also for an operand y broadcasts. */
static void test_backprop_node_delta(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 12);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *a = kiln_variable(g, "a", KILN_F32, KILN_SHAPE(3, 4),
                                 kiln_init_normal(0, 1));
    kiln_node *b =
        kiln_variable(g, "b", KILN_F32, KILN_SHAPE(4), kiln_init_normal(0, 1));
    kiln_node *y = kiln_mul(g, kiln_tanh(g, a), b);
    kiln_tensor *dt = th_rand(&r, KILN_SHAPE(3, 4), -1, 1);
    kiln_node *delta =
        kiln_constant(g, KILN_F32, KILN_SHAPE(3, 4), kiln_tensor_f32(dt));
    kiln_node *ref = kiln_sum(g, kiln_mul(g, y, delta), KILN_ALL_AXES, 0);
    kiln_node *outs[4] = {kiln_backprop_node(g, y, delta, a),
                          kiln_backprop_node(g, y, delta, b),
                          kiln_grad(g, ref, a), kiln_grad(g, ref, b)};
    kiln_tensor *t[4];
    th_run(s, g, outs, 4, NULL, NULL, 0, t);
    th_assert_shape(kiln_tensor_shape(t[1]), KILN_SHAPE(4));
    for (int i = 0; i < 2; i++)
        th_assert_close_f("backprop_node", kiln_tensor_f32(t[i]),
                          kiln_tensor_f32(t[2 + i]), kiln_tensor_numel(t[i]),
                          1e-6, 1e-7);
    for (int i = 0; i < 4; i++)
        kiln_tensor_free(t[i]);
    kiln_tensor_free(dt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* y = a*b + a + s with a [3,1], b [4], s [], c [1,4] (y += c): the
   gradients have the operands' shapes and sum R over the broadcast axes. */
static void test_broadcast_grad_reduces(void **state)
{
    (void)state;
    float av[3] = {0.5f, -1.0f, 2.0f}, bv[4] = {1.0f, -2.0f, 0.25f, 3.0f};
    float rv[12], sv = 0.3f, cv[4] = {0};
    for (int i = 0; i < 12; i++)
        rv[i] = (float)(i % 5) - 1.5f;
    kiln_session *ss = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *v[4] = {
        kiln_variable(g, "a", KILN_F32, KILN_SHAPE(3, 1), kiln_init_values(av)),
        kiln_variable(g, "b", KILN_F32, KILN_SHAPE(4), kiln_init_values(bv)),
        kiln_variable(g, "s", KILN_F32, KILN_SCALAR, kiln_init_values(&sv)),
        kiln_variable(g, "c", KILN_F32, KILN_SHAPE(1, 4),
                      kiln_init_values(cv))};
    kiln_node *y = kiln_add(g, kiln_add(g, kiln_mul(g, v[0], v[1]), v[0]),
                            kiln_add(g, v[2], v[3]));
    kiln_node *R = kiln_constant(g, KILN_F32, KILN_SHAPE(3, 4), rv);
    kiln_node *loss = kiln_sum(g, kiln_mul(g, y, R), KILN_ALL_AXES, 0);
    kiln_node *gr[4];
    assert_int_equal(kiln_grads(g, loss, NULL, v, 4, gr), KILN_OK);
    for (int k = 0; k < 4; k++)
        th_assert_shape(kiln_node_shape(gr[k]), kiln_node_shape(v[k]));
    kiln_tensor *t[4];
    th_run(ss, g, gr, 4, NULL, NULL, 0, t);
    double ga[3] = {0}, gb[4] = {0}, gs = 0, gc[4] = {0};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            double rr = rv[i * 4 + j];
            ga[i] += rr * (bv[j] + 1);
            gb[j] += rr * av[i];
            gs += rr;
            gc[j] += rr;
        }
    th_assert_close("d/da", kiln_tensor_f32(t[0]), ga, 3, 1e-6, 1e-6);
    th_assert_close("d/db", kiln_tensor_f32(t[1]), gb, 4, 1e-6, 1e-6);
    th_assert_close("d/ds", kiln_tensor_f32(t[2]), &gs, 1, 1e-6, 1e-6);
    th_assert_close("d/dc", kiln_tensor_f32(t[3]), gc, 4, 1e-6, 1e-6);
    for (int i = 0; i < 4; i++)
        kiln_tensor_free(t[i]);
    kiln_graph_free(g);
    kiln_session_free(ss);
}

/* d/dx sum(x * stop(x)) = stop(x) (not 2x); d/dx sum(stop(x)) = 0. */
static void test_stop_gradient_blocks(void **state)
{
    (void)state;
    float xv[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    double want1[4], want2[4] = {0};
    for (int i = 0; i < 4; i++)
        want1[i] = xv[i];
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_variable(g, "x", KILN_F32, KILN_SHAPE(4), kiln_init_values(xv));
    kiln_node *sx = kiln_stop_gradient(g, x);
    kiln_node *outs[2] = {
        kiln_grad(g, kiln_sum(g, kiln_mul(g, x, sx), KILN_ALL_AXES, 0), x),
        kiln_grad(g, kiln_sum(g, sx, KILN_ALL_AXES, 0), x)};
    kiln_tensor *t[2];
    th_run(s, g, outs, 2, NULL, NULL, 0, t);
    th_assert_close("x*stop(x)", kiln_tensor_f32(t[0]), want1, 4, 0, 0);
    th_assert_close("stop(x)", kiln_tensor_f32(t[1]), want2, 4, 0, 0);
    kiln_tensor_free(t[0]);
    kiln_tensor_free(t[1]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* A y that does not depend on x (built before or after y, or reached only
   through argmax / one_hot) has a zero gradient of x's shape. */
static void test_independent_grad_is_zero(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *a = kiln_variable(g, "a", KILN_F32, KILN_SHAPE(2, 3),
                                 kiln_init_normal(0, 1));
    kiln_node *b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(3, 2),
                                 kiln_init_normal(0, 1));
    kiln_node *y = kiln_sum(g, kiln_exp(g, a), KILN_ALL_AXES, 0);
    kiln_node *oh = kiln_one_hot(g, kiln_argmax(g, b, 1), 2);
    kiln_node *y2 = kiln_sum(g, oh, KILN_ALL_AXES, 0);
    kiln_node *c =
        kiln_variable(g, "c", KILN_F32, KILN_SHAPE(5), kiln_init_normal(0, 1));
    kiln_node *outs[3] = {kiln_grad(g, y, b), kiln_grad(g, y, c),
                          kiln_grad(g, y2, b)};
    kiln_tensor *t[3];
    th_run(s, g, outs, 3, NULL, NULL, 0, t);
    for (int i = 0; i < 3; i++) {
        th_assert_shape(kiln_tensor_shape(t[i]),
                        kiln_node_shape(i == 1 ? c : b));
        for (int64_t j = 0; j < kiln_tensor_numel(t[i]); j++)
            assert_true(kiln_tensor_f32(t[i])[j] == 0.0f);
        kiln_tensor_free(t[i]);
    }
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* Empty dimensions: matmul with k = 0 and an empty operand broadcast
   against a size-1 dim; the loss also depends on a non-empty c. */
static void test_gradcheck_empty_dims(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 14);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *v[4] = {kiln_variable(g, "a", KILN_F32, KILN_SHAPE(2, 0),
                                     kiln_init_normal(0, 1)),
                       kiln_variable(g, "b", KILN_F32, KILN_SHAPE(0, 3),
                                     kiln_init_normal(0, 1)),
                       kiln_variable(g, "c", KILN_F32, KILN_SHAPE(1, 3),
                                     kiln_init_normal(0, 1)),
                       kiln_variable(g, "e", KILN_F32, KILN_SHAPE(0, 1),
                                     kiln_init_normal(0, 1))};
    kiln_node *y =
        kiln_add(g, kiln_matmul(g, v[0], v[1], 0, 0), kiln_exp(g, v[2]));
    kiln_node *z = kiln_mul(g, v[3], v[2]); /* [0,3] */
    kiln_node *loss = kiln_add(g, rsum(g, &r, y), rsum(g, &r, z));
    if (kiln_gradcheck(s, g, loss, v, 4, NULL, NULL, 0, EPS, TOL, NULL) !=
        KILN_OK)
        fail_msg("%s", kiln_session_error(s));
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* Dynamic kiln_backprop gives the same variable gradients as kiln_grads. */
static void test_dynamic_backward_matches(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 13);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_node *v[3], *gr[3];
    kiln_node *loss = shared_loss(g, &r, v);
    assert_int_equal(kiln_grads(g, loss, NULL, v, 3, gr), KILN_OK);
    kiln_tensor *t[3];
    th_run(s, g, gr, 3, NULL, NULL, 0, t);
    if (kiln_backprop(s, g, loss) != KILN_OK)
        fail_msg("kiln_backprop: %s", kiln_session_error(s));
    for (int i = 0; i < 3; i++) {
        kiln_tensor *d = kiln_node_grad(s, v[i]);
        assert_non_null(d);
        th_assert_close_f("dynamic", kiln_tensor_f32(d), kiln_tensor_f32(t[i]),
                          kiln_tensor_numel(d), 1e-6, 1e-7);
        kiln_tensor_free(d);
        kiln_tensor_free(t[i]);
    }
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    static const struct CMUnitTest api[] = {
        cmocka_unit_test(test_gradcheck_input_wrt),
        cmocka_unit_test(test_second_derivative_closed_form),
        cmocka_unit_test(test_grads_several_match_separate),
        cmocka_unit_test(test_grad_wrt_intermediate),
        cmocka_unit_test(test_backprop_node_delta),
        cmocka_unit_test(test_broadcast_grad_reduces),
        cmocka_unit_test(test_stop_gradient_blocks),
        cmocka_unit_test(test_independent_grad_is_zero),
        cmocka_unit_test(test_gradcheck_empty_dims),
        cmocka_unit_test(test_dynamic_backward_matches),
    };
    int n_api = (int)(sizeof api / sizeof api[0]);
    struct CMUnitTest *tests =
        calloc((size_t)(N_CASES + N_TABLE + n_api), sizeof *tests);
    assert_non_null(tests);
    int n = 0;
    for (int i = 0; i < N_CASES; i++)
        tests[n++] = (struct CMUnitTest){cases[i].name, test_gradcheck_case,
                                         NULL, NULL, (void *)&cases[i]};
    for (int i = 0; i < N_TABLE; i++)
        if (table_cases[i].order)
            tests[n++] =
                (struct CMUnitTest){table_cases[i].name, test_gradcheck_case,
                                    NULL, NULL, (void *)&table_cases[i]};
    memcpy(tests + n, api, sizeof api);
    int rc = _cmocka_run_group_tests("grad", tests, (size_t)n + (size_t)n_api,
                                     NULL, NULL);
    free(tests);
    return rc;
}
