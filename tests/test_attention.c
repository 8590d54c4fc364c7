/* The attention group against PyTorch: scaled dot-product attention (with
   causal, additive and boolean masks, 3-D and 4-D inputs), the head
   reshapes and rms_norm.  tests/ref/make_attn_refs.py wrote one file per
   case in tests/ref/attention/: the arguments, the inputs and an upstream
   gradient dy, and torch's outputs and gradients (for rms_norm also its
   grad-of-grad).  Each case runs compiled and dynamically, with the
   reference and the fast kernels; then gradchecks, fast against reference
   kernels on random shapes, fully masked rows, errors and a symbolic
   batch. */
#define _POSIX_C_SOURCE 200809L

#include "test_refs.h"

#define RTOL 1e-5
#define ATOL 2e-6

/* ------------------------------------------------------------ ref files */

/* A case: the op and the numbers of its "params" line, its tensors. */
typedef struct attn_case {
    char op[32];
    double prm[3];
    ref_file t;
} attn_case;

/* Attention: in q, k, v, [mask], dy; out y, dq, dk, dv. */
static int build_attention(kiln_graph *g, const attn_case *c, kiln_node **in,
                           kiln_node **out)
{
    kiln_attention_options o = {.causal = (int)c->prm[0],
                                .scale = (float)c->prm[1]};
    kiln_node *mask = c->prm[2] != 0 ? in[3] : NULL;
    out[0] =
        kiln_scaled_dot_product_attention(g, in[0], in[1], in[2], mask, &o);
    if (kiln_grads(g, out[0], in[c->t.n_in - 1], in, 3, &out[1]) != KILN_OK)
        fail_msg("attention: %s", kiln_graph_error(g));
    return 4;
}

/* rms_norm: in x, [w], dy, v; out y, dx, [dw], gx, gdy. */
static int build_rms_norm(kiln_graph *g, const attn_case *c, kiln_node **in,
                          kiln_node **out)
{
    int weight = (int)c->prm[2], n = 1;
    kiln_node *dy = in[1 + weight], *v = in[2 + weight];
    out[0] = kiln_rms_norm(g, in[0], (int)c->prm[0], weight ? in[1] : NULL,
                           (float)c->prm[1]);
    if (kiln_grads(g, out[0], dy, in, 1 + weight, &out[1]) != KILN_OK)
        fail_msg("rms_norm: %s", kiln_graph_error(g));
    n += 1 + weight;
    kiln_node *wrt[2] = {in[0], dy};
    kiln_node *gg = kiln_sum(g, kiln_mul(g, out[1], v), KILN_ALL_AXES, 0);
    if (kiln_grads(g, gg, NULL, wrt, 2, &out[n]) != KILN_OK)
        fail_msg("rms_norm grad of grad: %s", kiln_graph_error(g));
    return n + 2;
}

static void run_case(const char *name, const attn_case *c, int reference,
                     int dynamic)
{
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_set_reference_kernels(s, reference), KILN_OK);
    kiln_graph *g = kiln_graph_new();
    kiln_node *in[6], *out[6];
    kiln_tensor *feeds[6], *got[6] = {0};
    for (int i = 0; i < c->t.n_in; i++) {
        in[i] = kiln_input(g, c->t.in[i].name, c->t.in[i].dt, c->t.in[i].shape);
        feeds[i] = ref_tensor_new(&c->t.in[i]);
    }
    int n = !strcmp(c->op, "attention") ? build_attention(g, c, in, out)
                                        : build_rms_norm(g, c, in, out);
    th_assert_graph_ok(g);
    assert_int_equal(n, c->t.n_out);
    if (dynamic)
        th_forward(s, g, out, n, in, feeds, c->t.n_in, got);
    else
        th_run(s, g, out, n, in, feeds, c->t.n_in, got);
    for (int i = 0; i < n; i++) {
        char what[300];
        snprintf(what, sizeof what, "%s %s %s %s", name,
                 reference ? "reference" : "fast",
                 dynamic ? "dynamic" : "compiled", c->t.out[i].name);
        th_assert_shape(kiln_tensor_shape(got[i]), c->t.out[i].shape);
        th_assert_close(what, kiln_tensor_f32(got[i]), c->t.out[i].v,
                        kiln_tensor_numel(got[i]), RTOL, ATOL);
        kiln_tensor_free(got[i]);
    }
    for (int i = 0; i < c->t.n_in; i++)
        kiln_tensor_free(feeds[i]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* One file of tests/ref/attention, four ways. */
static void check_case(const char *name, void *ctx)
{
    (void)ctx;
    attn_case c;
    ref_file_load("attention", name, &c.t);
    assert_int_equal(sscanf(c.t.params, "params %31s %lf %lf %lf", c.op,
                            &c.prm[0], &c.prm[1], &c.prm[2]),
                     4);
    for (int k = 0; k < 4; k++)
        run_case(name, &c, k & 1, k >> 1);
    ref_file_free(&c.t);
}

static void test_pytorch_cases(void **state)
{
    (void)state;
    assert_true(ref_each_file("attention", check_case, NULL) >= 15);
}

/* ------------------------------------------------------------ gradchecks */

/* Attention configurations: k selects causal, the mask and the rank. */
enum { N_CONFIGS = 6 };

/* A boolean padding mask [B,1,1,Tk] ([B,1,Tk] for 3-D inputs): batch b
   sees its first tk - b keys. */
static kiln_node *padding_mask(kiln_graph *g, int64_t b, int64_t tk, int nd)
{
    int32_t *m = calloc((size_t)(b * tk), sizeof *m);
    assert_non_null(m);
    for (int64_t i = 0; i < b; i++)
        for (int64_t j = 0; j < tk - i; j++)
            m[i * tk + j] = 1;
    kiln_shape s = nd == 3 ? KILN_SHAPE(b, 1, tk) : KILN_SHAPE(b, 1, 1, tk);
    kiln_node *c = kiln_constant(g, KILN_I32, s, m);
    free(m);
    return c;
}

static kiln_node *config_attention(kiln_graph *g, kiln_rng *r, kiln_node **qkv,
                                   int k)
{
    kiln_attention_options o = {.causal = k == 1 || k == 4};
    kiln_shape q = kiln_node_shape(qkv[0]), kk = kiln_node_shape(qkv[1]);
    int nd = q.ndim;
    int64_t tq = q.d[nd - 2], tk = kk.d[nd - 2];
    kiln_node *mask = NULL;
    if (k == 2) /* additive, broadcast over heads */
        mask = th_normal_const(g, r,
                               nd == 3 ? KILN_SHAPE(q.d[0], tq, tk)
                                       : KILN_SHAPE(q.d[0], 1, tq, tk));
    if (k == 3 || k == 4)
        mask = padding_mask(g, q.d[0], tk, nd);
    if (k == 5)
        o.scale = 0.7f;
    return kiln_scaled_dot_product_attention(g, qkv[0], qkv[1], qkv[2], mask,
                                             &o);
}

static void gradcheck_attention(int k, uint64_t seed)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    int64_t tq = 3 + (int64_t)(seed % 3), tk = k == 1 ? tq : 4;
    kiln_shape sh[3] = {KILN_SHAPE(2, 2, tq, 3), KILN_SHAPE(2, 2, tk, 3),
                        KILN_SHAPE(2, 2, tk, 2)};
    kiln_node *in[3];
    kiln_tensor *t[3];
    for (int i = 0; i < 3; i++) {
        in[i] = kiln_input(g, "qkv", KILN_F32, sh[i]);
        t[i] = th_rand(&r, sh[i], -1.5, 1.5);
    }
    kiln_node *y = config_attention(g, &r, in, k);
    kiln_node *loss =
        kiln_sum(g, kiln_mul(g, y, th_normal_const(g, &r, kiln_node_shape(y))),
                 KILN_ALL_AXES, 0);
    th_assert_graph_ok(g);
    kiln_gradcheck_result res;
    if (kiln_gradcheck(s, g, loss, in, 3, in, t, 3, 1e-3, 1e-2, &res) !=
        KILN_OK)
        fail_msg("config %d seed %llu: %s (abs err %.3g)", k,
                 (unsigned long long)seed, kiln_session_error(s),
                 res.max_abs_err);
    for (int i = 0; i < 3; i++)
        kiln_tensor_free(t[i]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* rms_norm over the last nd dims of a [3,4,5] x with a weight, checked for
   x and the weight; and its gradient's gradient for x and dy. */
static void gradcheck_rms_norm(int nd, uint64_t seed)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_shape sh = KILN_SHAPE(3, 4, 5), ws = KILN_SHAPE(5);
    if (nd == 2)
        ws = KILN_SHAPE(4, 5);
    kiln_node *in[3] = {kiln_input(g, "x", KILN_F32, sh),
                        kiln_input(g, "w", KILN_F32, ws),
                        kiln_input(g, "dy", KILN_F32, sh)};
    kiln_tensor *t[3] = {th_rand(&r, sh, -2, 2), th_rand(&r, ws, -2, 2),
                         th_rand(&r, sh, -2, 2)};
    kiln_node *y = kiln_rms_norm(g, in[0], nd, in[1], 1e-3f), *dx;
    kiln_node *loss = kiln_sum(g, kiln_mul(g, y, th_normal_const(g, &r, sh)),
                               KILN_ALL_AXES, 0);
    assert_int_equal(kiln_grads(g, y, in[2], in, 1, &dx), KILN_OK);
    kiln_node *loss2 = kiln_sum(g, kiln_mul(g, dx, th_normal_const(g, &r, sh)),
                                KILN_ALL_AXES, 0);
    th_assert_graph_ok(g);
    kiln_gradcheck_result res;
    kiln_node *wrt2[2] = {in[0], in[2]};
    if (kiln_gradcheck(s, g, loss, in, 2, in, t, 3, 1e-3, 1e-2, &res) !=
            KILN_OK ||
        kiln_gradcheck(s, g, loss2, wrt2, 2, in, t, 3, 1e-3, 1e-2, &res) !=
            KILN_OK)
        fail_msg("rms_norm nd %d: %s (abs err %.3g)", nd, kiln_session_error(s),
                 res.max_abs_err);
    for (int i = 0; i < 3; i++)
        kiln_tensor_free(t[i]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_gradcheck(void **state)
{
    (void)state;
    for (int k = 0; k < N_CONFIGS; k++)
        for (uint64_t seed = 1; seed <= 2; seed++)
            gradcheck_attention(k, seed + 10 * (uint64_t)k);
    gradcheck_rms_norm(1, 3);
    gradcheck_rms_norm(2, 4);
}

/* ------------------------------------------------------------ fast kernels */

/* y, dq, dk, dv of config k on q [b,h,tq,d], k and v [b,h,tk,d or e]
   (h 0: 3-D, [b,tq,d]...). */
static void run_kernels(int k, const int64_t *dims, int reference,
                        uint64_t seed, kiln_tensor **got)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    kiln_session *s = kiln_session_new(NULL);
    kiln_session_set_reference_kernels(s, reference);
    kiln_session_set_threads(s, 2);
    kiln_graph *g = kiln_graph_new();
    int64_t b = dims[0], h = dims[1], tq = dims[2], tk = dims[3], d = dims[4],
            e = dims[5];
    kiln_shape sh[4] = {KILN_SHAPE(b, h, tq, d), KILN_SHAPE(b, h, tk, d),
                        KILN_SHAPE(b, h, tk, e), KILN_SHAPE(b, h, tq, e)};
    for (int i = 0; h == 0 && i < 4; i++) /* drop the head axis */
        sh[i] = KILN_SHAPE(b, sh[i].d[2], sh[i].d[3]);
    kiln_node *in[4];
    kiln_tensor *t[4];
    for (int i = 0; i < 4; i++) {
        in[i] = kiln_input(g, "in", KILN_F32, sh[i]);
        t[i] = th_rand(&r, sh[i], -2, 2);
    }
    kiln_node *out[4];
    out[0] = config_attention(g, &r, in, k);
    assert_int_equal(kiln_grads(g, out[0], in[3], in, 3, &out[1]), KILN_OK);
    th_run(s, g, out, 4, in, t, 4, got);
    for (int i = 0; i < 4; i++)
        kiln_tensor_free(t[i]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* The fast kernels sum in float, in tiles, where the reference sums in
   double: dK and dQ are sums with cancellation, so an element is compared
   within 1e-4 of itself plus 2e-5 of its tensor's largest magnitude. */
static void assert_fast_close_free(const char *what, kiln_tensor **fast,
                                   kiln_tensor **ref)
{
    for (int i = 0; i < 4; i++) {
        const float *w = kiln_tensor_f32(ref[i]);
        double big = 0;
        for (int64_t j = 0; j < kiln_tensor_numel(ref[i]); j++)
            big = fabs(w[j]) > big ? fabs(w[j]) : big;
        th_assert_outputs_close_free(what, &fast[i], &ref[i], 1, 1e-4,
                                     2e-5 * big + 1e-7);
    }
}

/* Shapes across several 64 x 128 tiles with odd remainders, tq < tk and
   tq > tk, size-1 and empty dims, 3-D (h 0) and 4-D, every config. */
static void test_fast_matches_reference(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 99);
    static const int64_t fixed[][6] = {
        {1, 1, 1, 1, 1, 1},      {2, 3, 17, 33, 8, 5},   {1, 2, 64, 64, 64, 64},
        {1, 1, 130, 70, 16, 16}, {2, 1, 5, 200, 3, 7},   {1, 2, 0, 4, 4, 4},
        {2, 0, 193, 257, 9, 4},  {1, 1, 300, 129, 5, 3}, {3, 0, 7, 0, 2, 2},
    };
    enum { N_FIXED = sizeof fixed / sizeof fixed[0] };
    for (int t = 0; t < N_FIXED + 8; t++) {
        int64_t dims[6];
        for (int i = 0; i < 6; i++)
            dims[i] = t < N_FIXED ? fixed[t][i]
                      : i == 0    ? 1 + kiln_rng_u32(&r) % 3
                      : i == 1    ? kiln_rng_u32(&r) % 3
                      : i < 4     ? 1 + kiln_rng_u32(&r) % 150
                                  : 1 + kiln_rng_u32(&r) % 70;
        for (int k = 0; k < N_CONFIGS; k++) {
            kiln_tensor *fast[4], *ref[4];
            run_kernels(k, dims, 0, (uint64_t)t, fast);
            run_kernels(k, dims, 1, (uint64_t)t, ref);
            char what[64];
            snprintf(what, sizeof what, "config %d shape %d", k, t);
            assert_fast_close_free(what, fast, ref);
        }
    }
}

/* rms_norm over the last nd dims of x and its gradient (dx from dy),
   fast or reference kernels. */
static void run_rms_norm(kiln_shape sh, int nd, int reference,
                         kiln_tensor **got)
{
    kiln_rng r;
    kiln_rng_seed(&r, (uint64_t)(sh.d[0] * 31 + nd));
    kiln_session *s = kiln_session_new(NULL);
    kiln_session_set_reference_kernels(s, reference);
    kiln_session_set_threads(s, 2);
    kiln_graph *g = kiln_graph_new();
    kiln_node *in[2] = {kiln_input(g, "x", KILN_F32, sh),
                        kiln_input(g, "dy", KILN_F32, sh)};
    kiln_tensor *t[2] = {th_rand(&r, sh, -2, 2), th_rand(&r, sh, -2, 2)};
    kiln_node *out[2] = {kiln_rms_norm(g, in[0], nd, NULL, 1e-5f)};
    assert_int_equal(kiln_grads(g, out[0], in[1], in, 1, &out[1]), KILN_OK);
    th_run(s, g, out, 2, in, t, 2, got);
    for (int i = 0; i < 2; i++)
        kiln_tensor_free(t[i]);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* Rows of 1, of odd lengths below and above the vector width, and enough
   rows to split over the pool. */
static void test_fast_rms_norm_matches_reference(void **state)
{
    (void)state;
    const kiln_shape shapes[] = {KILN_SHAPE(1, 1, 1), KILN_SHAPE(3, 4, 5),
                                 KILN_SHAPE(7, 1, 33), KILN_SHAPE(2, 300, 257),
                                 KILN_SHAPE(0, 3, 4)};
    for (int i = 0; i < 5; i++)
        for (int nd = 1; nd <= 2; nd++) {
            kiln_tensor *fast[2], *ref[2];
            run_rms_norm(shapes[i], nd, 0, fast);
            run_rms_norm(shapes[i], nd, 1, ref);
            char what[64];
            snprintf(what, sizeof what, "rms_norm shape %d nd %d", i, nd);
            th_assert_outputs_close_free(what, fast, ref, 2, 1e-5, 1e-6);
        }
}

/* ------------------------------------------------------------ masked rows */

/* A batch whose boolean mask hides every key: its output rows are 0 and it
   passes no gradient (PyTorch gives NaN); the other batch is unaffected. */
static void masked_rows(int reference)
{
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    kiln_session *s = kiln_session_new(NULL);
    kiln_session_set_reference_kernels(s, reference);
    kiln_graph *g = kiln_graph_new();
    kiln_shape sh = KILN_SHAPE(2, 1, 3, 4);
    kiln_node *in[4];
    kiln_tensor *t[4];
    for (int i = 0; i < 4; i++) {
        in[i] = kiln_input(g, "in", KILN_F32, sh);
        t[i] = th_rand(&r, sh, -1, 1);
    }
    int32_t m[2] = {1, 0};
    kiln_node *mask = kiln_constant(g, KILN_I32, KILN_SHAPE(2, 1, 1, 1), m);
    kiln_node *out[4];
    out[0] =
        kiln_scaled_dot_product_attention(g, in[0], in[1], in[2], mask, NULL);
    assert_int_equal(kiln_grads(g, out[0], in[3], in, 3, &out[1]), KILN_OK);
    kiln_tensor *got[4];
    th_run(s, g, out, 4, in, t, 4, got);
    for (int i = 0; i < 4; i++) {
        const float *v = kiln_tensor_f32(got[i]);
        for (int j = 0; j < 12; j++) {
            assert_true(isfinite(v[j]));
            assert_true(v[j] != 0.0f); /* batch 0 sees every key */
            assert_true(v[12 + j] == 0.0f);
        }
        kiln_tensor_free(got[i]);
        kiln_tensor_free(t[i]);
    }
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_fully_masked_rows(void **state)
{
    (void)state;
    masked_rows(1);
    masked_rows(0);
}

/* ------------------------------------------------------------ heads */

/* split_heads then merge_heads is the identity; split_heads puts element
   [b, t, h*D + d] at [b, h, t, d]. */
static void test_heads(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 8);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_shape sh = KILN_SHAPE(2, 3, 8);
    kiln_node *x = kiln_input(g, "x", KILN_F32, sh);
    kiln_node *out[2] = {kiln_split_heads(g, x, 4), NULL};
    out[1] = kiln_merge_heads(g, out[0]);
    th_assert_shape(kiln_node_shape(out[0]), KILN_SHAPE(2, 4, 3, 2));
    kiln_tensor *t = th_rand(&r, sh, -1, 1), *got[2];
    th_run(s, g, out, 2, &x, &t, 1, got);
    const float *xv = kiln_tensor_f32(t), *sv = kiln_tensor_f32(got[0]);
    for (int b = 0; b < 2; b++)
        for (int tt = 0; tt < 3; tt++)
            for (int h = 0; h < 4; h++)
                for (int d = 0; d < 2; d++)
                    assert_true(sv[((b * 4 + h) * 3 + tt) * 2 + d] ==
                                xv[(b * 3 + tt) * 8 + h * 2 + d]);
    th_assert_close_f("merge", kiln_tensor_f32(got[1]), xv, 48, 0, 0);
    for (int i = 0; i < 2; i++)
        kiln_tensor_free(got[i]);
    kiln_tensor_free(t);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* ------------------------------------------------------------ errors */

typedef kiln_node *(*bad_fn)(kiln_graph *g, kiln_node *x);

#define BAD(name, expr)                                                        \
    static kiln_node *name(kiln_graph *g, kiln_node *x)                        \
    {                                                                          \
        (void)x;                                                               \
        return (expr);                                                         \
    }
/* x is f32 [2,3,4,5] */
#define IN(...) kiln_input(g, "t", KILN_F32, KILN_SHAPE(__VA_ARGS__))
#define SDPA(q, k, v, m) kiln_scaled_dot_product_attention(g, q, k, v, m, NULL)
BAD(bad_depth, SDPA(x, IN(2, 3, 6, 4), IN(2, 3, 6, 7), NULL))
BAD(bad_heads, SDPA(x, IN(2, 1, 6, 5), IN(2, 1, 6, 7), NULL))
BAD(bad_keys, SDPA(x, IN(2, 3, 6, 5), IN(2, 3, 7, 5), NULL))
BAD(bad_rank, SDPA(x, IN(2, 3, 5), IN(2, 3, 5), NULL))
BAD(bad_mask, SDPA(x, x, x, IN(2, 3, 4, 3)))
BAD(bad_mask_rank, SDPA(x, x, x, IN(1, 2, 3, 4, 4)))
BAD(bad_mask_dtype, SDPA(x, x, x, kiln_cast(g, x, KILN_U8)))
BAD(bad_dtype, SDPA(kiln_cast(g, x, KILN_I32), x, x, NULL))
BAD(bad_split, kiln_split_heads(g, IN(2, 3, 10), 4))
BAD(bad_merge, kiln_merge_heads(g, IN(2, 3, 10)))
BAD(bad_ndims, kiln_rms_norm(g, x, 5, NULL, 1e-5f))
BAD(bad_weight, kiln_rms_norm(g, x, 2, IN(5, 4), 1e-5f))

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        bad_fn fn;
        kiln_status st;
        const char *msg;
    } cases[] = {
        {bad_depth, KILN_ERR_SHAPE,
         "kiln_scaled_dot_product_attention: q [2,3,4,5], k [2,3,6,4], v "
         "[2,3,6,7]: expected [B,H,Tq,D], [B,H,Tk,D] and [B,H,Tk,E]"},
        {bad_heads, KILN_ERR_SHAPE, "k [2,1,6,5], v [2,1,6,7]: expected"},
        {bad_keys, KILN_ERR_SHAPE, "k [2,3,6,5], v [2,3,7,5]: expected"},
        {bad_rank, KILN_ERR_SHAPE,
         "kiln_scaled_dot_product_attention: q [2,3,4,5], k [2,3,5], v "
         "[2,3,5]: expected all 4-D [B,H,T,D] or all 3-D [B,T,D]"},
        {bad_mask, KILN_ERR_SHAPE,
         "kiln_scaled_dot_product_attention: mask [2,3,4,3] does not "
         "broadcast to [B,H,Tq,Tk] = [2,3,4,4]"},
        {bad_mask_rank, KILN_ERR_SHAPE, "mask [1,2,3,4,4] does not broadcast"},
        {bad_mask_dtype, KILN_ERR_DTYPE, ""},
        {bad_dtype, KILN_ERR_DTYPE, "kiln_scaled_dot_product_attention"},
        {bad_split, KILN_ERR_SHAPE,
         "kiln_split_heads: x [2,3,10]: expected [B,T,H*D] with H = 4"},
        {bad_merge, KILN_ERR_SHAPE,
         "kiln_merge_heads: x [2,3,10]: expected [B,H,T,D]"},
        {bad_ndims, KILN_ERR_ARG,
         "kiln_rms_norm: x [2,3,4,5]: ndims 5 outside [1, 4]"},
        {bad_weight, KILN_ERR_SHAPE,
         "kiln_rms_norm: weight [5,4] is not x [2,3,4,5]'s last 2 dims"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *x = IN(2, 3, 4, 5);
        kiln_node *y = cases[i].fn(g, x);
        assert_non_null(y);
        assert_int_equal(kiln_graph_status(g), cases[i].st);
        th_expect_graph_error(g, cases[i].msg);
        kiln_graph_free(g);
    }
    /* NULL graph, NULL operand */
    assert_null(
        kiln_scaled_dot_product_attention(NULL, NULL, NULL, NULL, NULL, NULL));
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = IN(2, 3, 4, 5);
    assert_non_null(SDPA(x, NULL, x, NULL));
    th_expect_graph_error(g, "kiln_scaled_dot_product_attention");
    kiln_graph_free(g);
}

/* ------------------------------------------------------------ symbolic */

/* Causal self-attention with heads and an rms_norm on a symbolic batch:
   one compiled function runs batches 3 and 2, each sample's values (and
   gradients) independent of the batch. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    kiln_graph *g = kiln_graph_new();
    kiln_node *x =
        kiln_input_sym(g, "x", KILN_F32, KILN_SHAPE(3, 5, 8), KILN_AXIS(0));
    kiln_node *h = kiln_split_heads(g, kiln_rms_norm(g, x, 1, NULL, 1e-5f), 2);
    kiln_attention_options o = {.causal = 1};
    kiln_node *a = kiln_scaled_dot_product_attention(g, h, h, h, NULL, &o);
    kiln_node *y = kiln_merge_heads(g, a);
    assert_int_equal(kiln_node_shape(y).sym, 1u);
    th_assert_shape(kiln_node_shape(y), KILN_SHAPE(3, 5, 8));
    kiln_node *dx =
        kiln_grad(g, kiln_sum(g, kiln_mul(g, y, y), KILN_ALL_AXES, 0), x);
    assert_int_equal(kiln_node_shape(dx).sym, 1u);
    kiln_session *s = kiln_session_new(NULL);
    kiln_node *outs[2] = {y, dx};
    kiln_function *f = kiln_compile(s, g, outs, 2, &x, 1);
    if (!f)
        fail_msg("kiln_compile: %s", kiln_session_error(s));
    kiln_tensor *x3 = th_rand(&r, KILN_SHAPE(3, 5, 8), -1, 1);
    kiln_tensor *x2 = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 5, 8));
    memcpy(kiln_tensor_f32(x2), kiln_tensor_f32(x3), 2 * 40 * sizeof(float));
    kiln_tensor *o3[2], *o2[2];
    for (int i = 0; i < 2; i++) {
        o3[i] = kiln_tensor_new(KILN_F32, KILN_SHAPE(3, 5, 8));
        o2[i] = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 5, 8));
    }
    if (kiln_run(f, &x3, o3) != KILN_OK || kiln_run(f, &x2, o2) != KILN_OK)
        fail_msg("kiln_run: %s", kiln_session_error(s));
    for (int i = 0; i < 2; i++) {
        th_assert_close_f(i ? "dx" : "y", kiln_tensor_f32(o2[i]),
                          kiln_tensor_f32(o3[i]), 80, 1e-6, 1e-7);
        kiln_tensor_free(o3[i]);
        kiln_tensor_free(o2[i]);
    }
    kiln_tensor_free(x3);
    kiln_tensor_free(x2);
    kiln_graph_free(g);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_cases),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_fast_rms_norm_matches_reference),
        cmocka_unit_test(test_fully_masked_rows),
        cmocka_unit_test(test_heads),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_symbolic_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
