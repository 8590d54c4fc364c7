/* Generation with the key/value cache (gpt_kv_feed in tools/gpt.c) gives
   the logits of a full re-run of the whole prefix: token by token, after a
   prompt fed at once, after a prompt fed in pieces (queries that see cached
   and new keys), with the head tied or not, and after the window slides. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../tools/gpt.h"
#include "kiln.h"

enum { N = 12 }; /* tokens of the test sequence, == the context */

static const int32_t TOKENS[N] = {3, 17, 0, 9, 9, 14, 2, 19, 5, 11, 7, 1};

static gpt_config config(int tie)
{
    return (gpt_config){.vocab = 20,
                        .ctx = N,
                        .layers = 2,
                        .heads = 2,
                        .width = 16,
                        .tie = tie};
}

/* A session whose variables are the decoder's, random (norm weights and
   biases too, so that a mixed-up parameter shows). */
static kiln_session *random_model(const gpt_config *c)
{
    kiln_session *s = kiln_session_new(&(kiln_session_options){.seed = 7});
    kiln_graph *g = kiln_graph_new();
    kiln_node *ids = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(1, 1));
    kiln_node *out = gpt_logits(g, c, ids, 0, NULL);
    assert_non_null(kiln_compile(s, g, &out, 1, &ids, 1));
    kiln_rng rng;
    kiln_rng_seed(&rng, 3);
    for (int i = 0; i < kiln_session_num_variables(s); i++) {
        kiln_param_info p;
        assert_int_equal(kiln_session_variable_info(s, i, &p), KILN_OK);
        int64_t n = 1;
        for (int d = 0; d < p.shape.ndim; d++)
            n *= p.shape.d[d];
        for (int64_t j = 0; j < n; j++)
            ((float *)p.data)[j] = (float)(0.3 * kiln_rng_normal(&rng));
    }
    kiln_graph_free(g);
    return s;
}

/* The logits [len, vocab] of a full run on tokens[0 .. len). */
static void full_run(kiln_session *s, const gpt_config *c,
                     const int32_t *tokens, int len, float *out)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *ids = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(1, len));
    kiln_node *y = gpt_logits(g, c, ids, 0, NULL);
    kiln_tensor *t = kiln_tensor_new(KILN_I32, KILN_SHAPE(1, len));
    memcpy(kiln_tensor_i32(t), tokens, (size_t)len * sizeof *tokens);
    assert_int_equal(kiln_feed(s, ids, t), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    memcpy(out, kiln_node_value_f32(s, y),
           (size_t)len * (size_t)c->vocab * sizeof *out);
    kiln_tensor_free(t);
    kiln_graph_free(g);
}

static double max_diff(const float *a, const float *b, int n)
{
    double worst = 0;
    for (int i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    return worst;
}

/* Feeds TOKENS in the pieces given (sizes summing to N) and checks the
   logits after each piece against the full run's row of its last token. */
static void check_pieces(int tie, const int *pieces, int n_pieces)
{
    gpt_config c = config(tie);
    kiln_session *s = random_model(&c);
    float full[N * 20], got[20];
    full_run(s, &c, TOKENS, N, full);
    gpt_kv kv;
    assert_int_equal(gpt_kv_init(&kv, s, &c), 0);
    int at = 0;
    for (int p = 0; p < n_pieces; p++) {
        assert_int_equal(gpt_kv_feed(&kv, TOKENS + at, pieces[p], got, NULL),
                         KILN_OK);
        at += pieces[p];
        assert_int_equal(kv.len, at);
        double d = max_diff(got, full + (at - 1) * c.vocab, c.vocab);
        if (d > 2e-5)
            fail_msg("position %d: cached logits differ by %g", at - 1, d);
    }
    /* the window is full: one more token does not fit */
    assert_int_equal(gpt_kv_feed(&kv, TOKENS, 1, got, NULL), KILN_ERR_ARG);
    assert_int_equal(kv.len, N);
    gpt_kv_free(&kv);
    kiln_session_free(s);
}

static void test_token_by_token(void **state)
{
    (void)state;
    int ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1;
    check_pieces(1, ones, N);
    check_pieces(0, ones, N);
}

static void test_prompt_then_tokens(void **state)
{
    (void)state;
    static const int prompt[] = {5, 1, 1, 1, 1, 1, 1, 1};
    check_pieces(1, prompt, 8);
}

/* Pieces longer than one after cached positions: a causal mask over the
   new queries and all keys. */
static void test_pieces_after_cache(void **state)
{
    (void)state;
    static const int pieces[] = {3, 4, 1, 4};
    check_pieces(0, pieces, 4);
}

/* Starting again from the last positions (as char_lm does when the window
   is full) gives the full run of those positions alone. */
static void test_window_restart(void **state)
{
    (void)state;
    gpt_config c = config(1);
    kiln_session *s = random_model(&c);
    float full[N * 20], got[20];
    gpt_kv kv;
    assert_int_equal(gpt_kv_init(&kv, s, &c), 0);
    assert_int_equal(gpt_kv_feed(&kv, TOKENS, N, got, NULL), KILN_OK);
    kv.len = 0;
    assert_int_equal(gpt_kv_feed(&kv, TOKENS + 6, 5, got, NULL), KILN_OK);
    assert_int_equal(gpt_kv_feed(&kv, TOKENS + 11, 1, got, NULL), KILN_OK);
    full_run(s, &c, TOKENS + 6, 6, full);
    assert_true(max_diff(got, full + 5 * c.vocab, c.vocab) < 2e-5);
    assert_int_equal(gpt_kv_feed(&kv, TOKENS, 0, got, NULL), KILN_ERR_ARG);
    gpt_kv_free(&kv);
    kiln_session_free(s);
}

/* With top_k the step gives the k largest logits, largest first, and their
   ids; without, every logit and the ids 0 .. vocab - 1. */
static void test_top_k(void **state)
{
    (void)state;
    gpt_config c = config(0);
    kiln_session *s = random_model(&c);
    float full[N * 20], all[20], top[5];
    int32_t all_ids[20], top_ids[5];
    gpt_kv a, b;
    assert_int_equal(gpt_kv_init(&a, s, &c), 0);
    assert_int_equal(gpt_kv_init(&b, s, &c), 0);
    b.top_k = 5;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(gpt_kv_feed(&a, TOKENS + i, 1, all, all_ids), KILN_OK);
        assert_int_equal(gpt_kv_feed(&b, TOKENS + i, 1, top, top_ids), KILN_OK);
    }
    full_run(s, &c, TOKENS, 4, full);
    for (int v = 0; v < c.vocab; v++)
        assert_int_equal(all_ids[v], v);
    for (int j = 0; j < 5; j++) {
        int rank = 0; /* logits above this one */
        for (int v = 0; v < c.vocab; v++)
            rank += all[v] > all[top_ids[j]];
        assert_int_equal(rank, j);
        assert_true(fabs(top[j] - full[3 * c.vocab + top_ids[j]]) < 2e-5);
    }
    gpt_kv_free(&a);
    gpt_kv_free(&b);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_by_token),
        cmocka_unit_test(test_prompt_then_tokens),
        cmocka_unit_test(test_pieces_after_cache),
        cmocka_unit_test(test_window_restart),
        cmocka_unit_test(test_top_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
