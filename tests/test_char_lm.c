/* The GPT of examples/gpt.h trained for 20 steps in Kiln gives PyTorch's 20
   losses within 1e-4 relative: same initial weights, same batches, AdamW
   with warm-up, cosine decay and clipping (tests/ref/make_char_lm_refs.py
   wrote the weights, the batches and PyTorch's losses). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../tools/gpt.h"
#include "kiln.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif
#define REF KILN_SOURCE_DIR "/tests/ref/char_lm/"

static const kiln_tensor *find(kiln_tensor_list *l, const char *name,
                               kiln_dtype dt)
{
    kiln_tensor *t = kiln_tensor_list_find(l, name);
    assert_non_null(t);
    assert_int_equal(kiln_tensor_dtype(t), dt);
    return t;
}

/* Trains as the script does, compiled (dynamic = 0) or on the dynamic path
   (dynamic = 1: kiln_forward, kiln_backward, kiln_optimizer_update on a
   graph rebuilt every step). */
static void train_and_compare(int dynamic)
{
    kiln_tensor_list *data = kiln_file_read(REF "data.npz");
    assert_non_null(data);
    const int32_t *cfg = kiln_tensor_i32(find(data, "config", KILN_I32));
    const float *hyper = kiln_tensor_f32(find(data, "hyper", KILN_F32));
    const int32_t *batches = kiln_tensor_i32(find(data, "batches", KILN_I32));
    const float *want = kiln_tensor_f32(find(data, "losses", KILN_F32));
    gpt_config c = {cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5]};
    int steps = cfg[6], warmup = cfg[7], b = 4, t = c.ctx;

    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_load(s, REF "weights.npz"), KILN_OK);
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAMW);
    o.lr = hyper[0];
    o.weight_decay = hyper[1];
    o.schedule = KILN_LR_COSINE;
    o.min_lr = hyper[2];
    o.clip_norm = hyper[3];
    o.warmup_steps = warmup;
    o.total_steps = steps - warmup;
    kiln_optimizer *opt = kiln_optimizer_new(s, &o);
    assert_non_null(opt);

    kiln_graph *g = kiln_graph_new();
    kiln_tensor *ids = kiln_tensor_new(KILN_I32, KILN_SHAPE(b, t));
    kiln_tensor *tgt = kiln_tensor_new(KILN_I32, KILN_SHAPE(b * t));
    kiln_tensor *loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_function *f = NULL;
    kiln_node *in_ids = NULL, *in_tgt = NULL, *l = NULL;
    double worst = 0;
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < b; i++)
            for (int j = 0; j < t; j++) {
                const int32_t *row =
                    batches + ((int64_t)step * b + i) * (t + 1);
                kiln_tensor_i32(ids)[i * t + j] = row[j];
                kiln_tensor_i32(tgt)[i * t + j] = row[j + 1];
            }
        if (!f || dynamic) {
            kiln_graph_clear(g);
            in_ids = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(b, t));
            in_tgt = kiln_input(g, "targets", KILN_I32, KILN_SHAPE(b * t));
            l = kiln_softmax_cross_entropy(
                g, gpt_logits(g, &c, in_ids, 0, NULL), in_tgt);
            assert_int_equal(kiln_graph_status(g), KILN_OK);
        }
        float got;
        if (dynamic) {
            assert_int_equal(kiln_feed(s, in_ids, ids), KILN_OK);
            assert_int_equal(kiln_feed(s, in_tgt, tgt), KILN_OK);
            assert_int_equal(kiln_backprop(s, g, l), KILN_OK);
            const float *v = kiln_node_value_f32(s, l);
            assert_non_null(v);
            kiln_tensor_f32(loss)[0] = v[0];
            assert_int_equal(kiln_optimizer_update(opt, g), KILN_OK);
        } else {
            if (!f) {
                kiln_node *outs[2] = {l, kiln_optimizer_build_step(opt, g, l)};
                kiln_node *ins[2] = {in_ids, in_tgt};
                f = kiln_compile(s, g, outs, 2, ins, 2);
                assert_non_null(f);
            }
            kiln_tensor *in[2] = {ids, tgt}, *out[2] = {loss, NULL};
            assert_int_equal(kiln_run(f, in, out), KILN_OK);
        }
        got = kiln_tensor_f32(loss)[0];
        double rel = fabs((double)got - want[step]) / fabs((double)want[step]);
        worst = rel > worst ? rel : worst;
        if (rel > 1e-4)
            fail_msg("step %d: loss %.7f, PyTorch %.7f (relative %.2g)", step,
                     got, want[step], rel);
    }
    printf("%s: 20 losses within %.2g relative of PyTorch's (%.4f -> %.4f)\n",
           dynamic ? "dynamic" : "compiled", worst, want[0], want[steps - 1]);
    kiln_tensor_free(ids);
    kiln_tensor_free(tgt);
    kiln_tensor_free(loss);
    kiln_graph_free(g);
    kiln_optimizer_free(opt);
    kiln_session_free(s);
    kiln_tensor_list_free(data);
}

static void test_compiled_matches_pytorch(void **state)
{
    (void)state;
    train_and_compare(0);
}

static void test_dynamic_matches_pytorch(void **state)
{
    (void)state;
    train_and_compare(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compiled_matches_pytorch),
        cmocka_unit_test(test_dynamic_matches_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
