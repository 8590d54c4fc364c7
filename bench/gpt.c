/* Kiln's side of the language-model benchmarks (issue 12): the GPT of
 * tools/gpt.h, one measurement per run, printed as "RESULT <value> <unit>",
 * with the same arguments as bench/gpt.py, which does the same work in
 * PyTorch.
 *
 *   gpt step     BATCH THREADS   samples/s (sequences of 128 characters) of
 *                                compiled training steps: forward, backward,
 *                                gradient clipping and AdamW
 *   gpt generate THREADS         tokens/s of greedy generation at batch 1
 *                                with the key/value cache, positions 0 to
 *                                127 over and over
 *
 * The model: vocabulary 128, context 128, 4 layers, 4 heads, width 128,
 * the head tied to the token embedding.  KILN_BENCH_SECONDS sets the timed
 * duration (default 1); train's result is the median of bench/timing.h's
 * runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/gpt.h"
#include "kiln.h"
#include "timing.h"

static const gpt_config MODEL = {
    .vocab = 128, .ctx = 128, .layers = 4, .heads = 4, .width = 128, .tie = 1};

static void die(const char *what, const char *msg)
{
    bench_die("gpt", what, msg);
}

static void train(int batch, kiln_session *s)
{
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAMW);
    o.lr = 1e-3f;
    o.clip_norm = 1.0f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &o);
    kiln_graph *g = kiln_graph_new();
    int64_t t = MODEL.ctx;
    kiln_node *ids = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(batch, t));
    kiln_node *tgt = kiln_input(g, "targets", KILN_I32, KILN_SHAPE(batch * t));
    kiln_node *loss =
        kiln_softmax_cross_entropy(g, gpt_logits(g, &MODEL, ids, 0, NULL), tgt);
    kiln_node *outs[2] = {loss, kiln_optimizer_build_step(opt, g, loss)};
    kiln_node *ins[2] = {ids, tgt};
    kiln_function *f = kiln_compile(s, g, outs, 2, ins, 2);
    if (!f)
        die("compile", kiln_session_error(s));
    kiln_tensor *in[2] = {kiln_tensor_new(KILN_I32, KILN_SHAPE(batch, t)),
                          kiln_tensor_new(KILN_I32, KILN_SHAPE(batch * t))};
    kiln_tensor *out[2] = {kiln_tensor_new(KILN_F32, KILN_SCALAR), NULL};
    kiln_rng rng;
    kiln_rng_seed(&rng, 1);
    for (int i = 0; i < 2; i++)
        for (int64_t j = 0; j < batch * t; j++)
            kiln_tensor_i32(in[i])[j] =
                (int32_t)(kiln_rng_u32(&rng) % (uint32_t)MODEL.vocab);
    double sec = bench_time_fn(f, in, out, bench_seconds());
    printf("RESULT %.2f samples/s\n", batch / sec);
    for (int i = 0; i < 2; i++)
        kiln_tensor_free(in[i]);
    kiln_tensor_free(out[0]);
    kiln_graph_free(g);
    kiln_optimizer_free(opt);
}

/* Greedy: the step's graph keeps the largest logit alone (top_k 1). */
static void generate(kiln_session *s)
{
    gpt_kv kv;
    if (gpt_kv_init(&kv, s, &MODEL))
        die("generate", "out of memory");
    kv.top_k = 1;
    float best;
    int32_t token = 0;
    long tokens = 0;
    double budget = bench_seconds(), t0 = 0;
    for (int warm = 1;; warm = 0) {
        do {
            if (kv.len == MODEL.ctx)
                kv.len = 0;
            if (gpt_kv_feed(&kv, &token, 1, &best, &token) != KILN_OK)
                die("generate", gpt_kv_error(&kv));
            tokens++;
        } while (warm ? kv.len < MODEL.ctx : bench_now_s() - t0 < budget);
        if (!warm)
            break;
        tokens = 0;
        t0 = bench_now_s();
    }
    printf("RESULT %.1f tokens/s\n", (double)tokens / (bench_now_s() - t0));
    gpt_kv_free(&kv);
}

int main(int argc, char **argv)
{
    int gen = argc == 3 && !strcmp(argv[1], "generate");
    if (!gen && (argc != 4 || strcmp(argv[1], "step")))
        die("usage", "gpt step BATCH THREADS | gpt generate THREADS");
    kiln_session *s = kiln_session_new(
        &(kiln_session_options){.seed = 1, .threads = atoi(argv[argc - 1])});
    if (!s)
        die("session", kiln_last_error());
    if (gen) {
        /* the variables, initialised as for training */
        kiln_graph *g = kiln_graph_new();
        kiln_node *ids = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(1, 1));
        kiln_node *y = gpt_logits(g, &MODEL, ids, 0, NULL);
        if (!kiln_compile(s, g, &y, 1, &ids, 1))
            die("compile", kiln_session_error(s));
        kiln_graph_free(g);
        generate(s);
    } else {
        train(atoi(argv[2]), s);
    }
    kiln_session_free(s);
    return 0;
}
