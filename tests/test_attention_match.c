/* The simplify pass's attention rewrite (passes/attention_match.c):
   softmax(q k^T / c + mask) v written out in primitives (as PyTorch's ONNX
   export of bench/gpt.py's decoder imports, or as kiln_softmax and
   kiln_matmul build it) becomes one fused attention op, with the values
   of the unsimplified graph and of the dynamic path; near misses (a mask
   that is not a constant or hides a whole row, a softmax over another
   axis, a probability used elsewhere, a training graph) stay as they
   are. */
#define _POSIX_C_SOURCE 200809L
#include "test_schedule.h"

#define ONNX_DIR KILN_TEST_REF_DIR "/onnx/"

/* The sizes of one case: q [b,h,tq,d], k [b,h,tk,d], v [b,h,tk,e]; h 0
   makes them 3-D ([b,t,.]). */
typedef struct dims {
    int64_t b, h, tq, tk, d, e;
} dims;

/* How a case writes attention out. */
typedef enum { NO_MASK, MASK, MASK_LEFT, DEAD_ROW, COMPUTED } mask_kind;
typedef struct form {
    int k_permuted; /* k^T as a permute (the export) or matmul's flag */
    int divide;     /* scores / sqrt(d) (the export), else * 0.3 or none */
    int scaled;
    mask_kind mask;
    int axis;   /* the softmax's */
    int shared; /* the probabilities are an output too */
} form;

static kiln_shape shape_of(const dims *s, int64_t t, int64_t w)
{
    return s->h ? KILN_SHAPE(s->b, s->h, t, w) : KILN_SHAPE(s->b, t, w);
}

/* A [tq, tk] constant: -1e9 above the diagonal (PyTorch's causal mask as
   bench/gpt.py builds it), values in [-1, 1) elsewhere; with dead_row,
   row 0 is all -inf. */
static kiln_node *mask_const(kiln_graph *g, const dims *s, int dead_row)
{
    float *m = malloc((size_t)(s->tq * s->tk) * sizeof *m);
    assert_non_null(m);
    kiln_rng r;
    kiln_rng_seed(&r, 9);
    for (int64_t i = 0; i < s->tq; i++)
        for (int64_t j = 0; j < s->tk; j++)
            m[i * s->tk + j] = dead_row && i == 0 ? -INFINITY
                               : j > i            ? -1e9f
                                       : (float)(2 * kiln_rng_uniform(&r) - 1);
    kiln_node *c = kiln_constant(g, KILN_F32, KILN_SHAPE(s->tq, s->tk), m);
    free(m);
    return c;
}

/* k^T as an explicit permute of its last two axes. */
static kiln_node *transposed(kiln_graph *g, kiln_node *k)
{
    int nd = kiln_node_shape(k).ndim;
    return nd == 4 ? kiln_permute(g, k, (const int[]){0, 1, 3, 2})
                   : kiln_permute(g, k, (const int[]){0, 2, 1});
}

/* softmax(q k^T * scale + mask) v as f says; *extra: the probabilities
   when they are an output too. */
static kiln_node *build(kiln_graph *g, kiln_node *const *qkv, const dims *s,
                        const form *f, kiln_node **extra)
{
    kiln_node *sc = f->k_permuted
                        ? kiln_matmul(g, qkv[0], transposed(g, qkv[1]), 0, 0)
                        : kiln_matmul(g, qkv[0], qkv[1], 0, 1);
    if (f->divide)
        sc = kiln_div(g, sc, kiln_scalar(g, sqrtf((float)s->d)));
    else if (f->scaled)
        sc = kiln_scale(g, sc, 0.3f);
    unsigned last = 1u << (kiln_node_shape(sc).ndim - 1);
    if (f->mask == MASK || f->mask == DEAD_ROW)
        sc = kiln_add(g, sc, mask_const(g, s, f->mask == DEAD_ROW));
    else if (f->mask == MASK_LEFT)
        sc = kiln_add(g, mask_const(g, s, 0), sc);
    else if (f->mask == COMPUTED) /* from q: not a constant */
        sc = kiln_add(g, sc, kiln_sum(g, qkv[0], last, 1));
    kiln_node *p = kiln_softmax(g, sc, f->axis);
    if (f->shared)
        *extra = p;
    return kiln_matmul(g, p, qkv[2], 0, 0);
}

/* Compiles form (simplify on or off, or on the dynamic path when dynamic)
   and runs it on feed; returns whether the schedule holds an attention
   kernel; out[0] the output, out[1] the extra output if any. */
static int run_form(const form *fm, const dims *s, kiln_tensor *const *feed,
                    int simplify, int dynamic, kiln_tensor **out)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *qkv[3], *extra = NULL;
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        qkv[i] = kiln_input(g, names[i], KILN_F32, kiln_tensor_shape(feed[i]));
    kiln_node *outs[2] = {build(g, qkv, s, fm, &extra), NULL};
    outs[1] = extra;
    int n_out = extra ? 2 : 1, found = 0;
    th_assert_graph_ok(g);
    kiln_session *ses = kiln_session_new(NULL);
    if (dynamic) {
        th_forward(ses, g, outs, n_out, qkv, feed, 3, out);
    } else {
        kiln_compile_options o = kiln_compile_defaults();
        o.simplify = simplify;
        kiln_function *f = kiln_compile_ex(ses, g, outs, n_out, qkv, 3, &o);
        if (!f)
            fail_msg("kiln_compile_ex: %s", kiln_session_error(ses));
        for (int i = 0; i < n_out; i++)
            assert_non_null(out[i] = kiln_function_new_output(f, i));
        assert_int_equal(kiln_run(f, feed, out), KILN_OK);
        found = th_schedule_has(f, "attention");
    }
    kiln_session_free(ses);
    kiln_graph_free(g);
    return found;
}

static void check_form(form fm, int matches, const char *what)
{
    const dims cases[] = {
        {1, 4, 16, 16, 8, 8}, {2, 3, 5, 7, 3, 6},     {1, 1, 1, 1, 1, 1},
        {2, 0, 9, 9, 5, 4},   {1, 2, 70, 70, 32, 32}, {1, 1, 131, 131, 3, 5},
    };
    kiln_rng r;
    kiln_rng_seed(&r, 7);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const dims *s = &cases[c];
        if (fm.mask != NO_MASK && fm.mask != COMPUTED && s->tq != s->tk)
            continue; /* the causal masks are square */
        kiln_tensor *feed[3] = {th_rand(&r, shape_of(s, s->tq, s->d), -2, 2),
                                th_rand(&r, shape_of(s, s->tk, s->d), -2, 2),
                                th_rand(&r, shape_of(s, s->tk, s->e), -2, 2)};
        kiln_tensor *got[2] = {0}, *want[2] = {0}, *dyn[2] = {0};
        assert_int_equal(run_form(&fm, s, feed, 1, 0, got), matches);
        assert_int_equal(run_form(&fm, s, feed, 0, 0, want), 0);
        run_form(&fm, s, feed, 1, 1, dyn);
        int n = got[1] ? 2 : 1;
        for (int i = 0; i < n; i++) {
            int64_t numel = kiln_tensor_numel(want[i]);
            th_assert_shape(kiln_tensor_shape(got[i]),
                            kiln_tensor_shape(want[i]));
            th_assert_close_f(what, kiln_tensor_f32(got[i]),
                              kiln_tensor_f32(want[i]), numel, 1e-5, 1e-6);
            th_assert_close_f(what, kiln_tensor_f32(dyn[i]),
                              kiln_tensor_f32(want[i]), numel, 1e-5, 1e-6);
            kiln_tensor_free(got[i]);
            kiln_tensor_free(want[i]);
            kiln_tensor_free(dyn[i]);
        }
        for (int i = 0; i < 3; i++)
            kiln_tensor_free(feed[i]);
    }
}

/* PyTorch's ONNX export of bench/gpt.py's attention. */
static const form EXPORT = {1, 1, 0, MASK, -1, 0};

static void test_forms_match(void **state)
{
    (void)state;
    check_form(EXPORT, 1, "ONNX export's form");
    check_form((form){0, 0, 1, NO_MASK, -1, 0}, 1, "scaled, k^T as a flag");
    check_form((form){0, 0, 0, NO_MASK, -1, 0}, 1, "no scale, no mask");
    check_form((form){0, 0, 0, MASK_LEFT, -1, 0}, 1, "mask on the left");
}

static void test_near_misses_stay(void **state)
{
    (void)state;
    check_form((form){0, 0, 0, DEAD_ROW, -1, 0}, 0, "a row all -inf");
    check_form((form){0, 0, 0, COMPUTED, -1, 0}, 0, "a computed mask");
    check_form((form){0, 0, 0, NO_MASK, -2, 0}, 0, "softmax over queries");
    check_form((form){0, 0, 0, NO_MASK, -1, 1}, 0, "probabilities shared");
}

/* A training graph: the softmax's nodes feed the gradient too, so the
   rewrite leaves them; the gradient equals the unsimplified one. */
static void test_training_graph_stays(void **state)
{
    (void)state;
    const dims s = {2, 2, 6, 6, 4, 4};
    kiln_rng r;
    kiln_rng_seed(&r, 8);
    kiln_tensor *feed[3] = {th_rand(&r, shape_of(&s, 6, 4), -2, 2),
                            th_rand(&r, shape_of(&s, 6, 4), -2, 2),
                            th_rand(&r, shape_of(&s, 6, 4), -2, 2)};
    kiln_tensor *res[2][2];
    const char *names[3] = {"q", "k", "v"};
    for (int simplify = 0; simplify < 2; simplify++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *qkv[3];
        for (int i = 0; i < 3; i++)
            qkv[i] =
                kiln_input(g, names[i], KILN_F32, kiln_tensor_shape(feed[i]));
        kiln_node *y = build(g, qkv, &s, &EXPORT, NULL);
        kiln_rng wr; /* the loss weights, the same both times */
        kiln_rng_seed(&wr, 3);
        kiln_node *w = th_normal_const(g, &wr, shape_of(&s, 6, 4));
        kiln_node *loss = kiln_sum(g, kiln_mul(g, y, w), 0xf, 0);
        kiln_node *outs[2] = {y, kiln_grad(g, loss, qkv[0])};
        th_assert_graph_ok(g);
        kiln_session *ses = kiln_session_new(NULL);
        kiln_compile_options o = kiln_compile_defaults();
        o.simplify = simplify;
        kiln_function *f = kiln_compile_ex(ses, g, outs, 2, qkv, 3, &o);
        assert_non_null(f);
        assert_false(th_schedule_has(f, "attention"));
        for (int i = 0; i < 2; i++)
            res[simplify][i] = kiln_function_new_output(f, i);
        assert_int_equal(kiln_run(f, feed, res[simplify]), KILN_OK);
        kiln_session_free(ses);
        kiln_graph_free(g);
    }
    th_assert_outputs_close_free("training graph", res[1], res[0], 2, 1e-5,
                                 1e-6);
    for (int i = 0; i < 3; i++)
        kiln_tensor_free(feed[i]);
}

/* PyTorch's export of the decoder (tests/ref/make_torch_onnx.py; its
   values against PyTorch's are tests/test_onnx.c's) reaches the fused
   op, once per layer, with the unsimplified graph's values. */
static void test_torch_export_reaches_it(void **state)
{
    (void)state;
    kiln_tensor *res[2];
    for (int simplify = 0; simplify < 2; simplify++) {
        kiln_graph *g = kiln_graph_new();
        kiln_onnx_model *m = NULL;
        assert_int_equal(kiln_onnx_load(g, ONNX_DIR "torch_gpt.onnx", NULL, &m),
                         KILN_OK);
        kiln_node *x = kiln_onnx_input(m, 0), *y = kiln_onnx_output(m, 0);
        kiln_tensor *ids = kiln_tensor_new(KILN_I32, kiln_node_shape(x));
        for (int64_t i = 0; i < kiln_tensor_numel(ids); i++)
            kiln_tensor_i32(ids)[i] = (int32_t)(i * 7 % 64);
        kiln_session *ses = kiln_session_new(NULL);
        kiln_compile_options o = kiln_compile_defaults();
        o.simplify = simplify;
        o.inference = 1;
        kiln_function *f = kiln_compile_ex(ses, g, &y, 1, &x, 1, &o);
        assert_non_null(f);
        assert_int_equal(th_schedule_has(f, "attention"), simplify);
        res[simplify] = kiln_function_new_output(f, 0);
        assert_int_equal(kiln_run(f, &ids, &res[simplify]), KILN_OK);
        kiln_tensor_free(ids);
        kiln_session_free(ses);
        kiln_onnx_free(m);
        kiln_graph_free(g);
    }
    th_assert_outputs_close_free("torch_gpt", &res[1], &res[0], 1, 1e-5, 1e-5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms_match),
        cmocka_unit_test(test_near_misses_stay),
        cmocka_unit_test(test_training_graph_stays),
        cmocka_unit_test(test_torch_export_reaches_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
