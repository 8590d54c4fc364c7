/* Kiln's side of the CNN benchmarks (issue 11): one measurement per run,
 * printed as "RESULT <value> <unit>", with the same arguments as
 * bench/cnn.py, which does the same work in PyTorch.
 *
 *   cnn train    BATCH THREADS   samples/s of compiled Adam steps of the
 *                                MNIST CNN
 *   cnn resblock BATCH THREADS   samples/s of forward+backward of a residual
 *                                block (conv 3x3 64->64, batch norm, relu,
 *                                twice, plus the skip) on 32x32 inputs
 *   cnn infer    BATCH THREADS   latency (us) of the MNIST CNN's forward
 *
 * The MNIST CNN: conv 1->32 5x5 pad 2, relu, maxpool 2, conv 32->64 5x5
 * pad 2, relu, maxpool 2, fc 3136->512, relu, fc 512->10, softmax
 * cross-entropy.  KILN_BENCH_SECONDS sets the timed duration (default 1);
 * the result is the median of bench/timing.h's runs.
 * Also prints "GFLOPS <value> GFLOP/s": the convolutions' and dense layers'
 * multiply-adds per second (forward only for infer).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "timing.h"

static void die(const char *what, const char *msg)
{
    bench_die("cnn", what, msg);
}

static kiln_node *var(kiln_graph *g, const char *name, kiln_shape s,
                      int64_t fan_in)
{
    double lim = 1.0 / sqrt((double)fan_in);
    return kiln_variable(g, name, KILN_F32, s, kiln_init_uniform(-lim, lim));
}

/* The MNIST CNN's logits for x [batch, 1, 28, 28]. */
static kiln_node *mnist_cnn(kiln_graph *g, kiln_node *x)
{
    const kiln_conv_params pad2 = {.padding = {2, 2}};
    const int two[2] = {2, 2};
    kiln_node *h =
        kiln_conv2d(g, x, var(g, "c0.W", KILN_SHAPE(32, 1, 5, 5), 25),
                    var(g, "c0.b", KILN_SHAPE(32), 25), &pad2);
    h = kiln_max_pool2d(g, kiln_relu(g, h), two, NULL, NULL, NULL, 0);
    h = kiln_conv2d(g, h, var(g, "c1.W", KILN_SHAPE(64, 32, 5, 5), 800),
                    var(g, "c1.b", KILN_SHAPE(64), 800), &pad2);
    h = kiln_max_pool2d(g, kiln_relu(g, h), two, NULL, NULL, NULL, 0);
    h = kiln_flatten(g, h, 1, -1);
    h = kiln_relu(g,
                  kiln_affine(g, h, var(g, "f0.W", KILN_SHAPE(3136, 512), 3136),
                              var(g, "f0.b", KILN_SHAPE(512), 3136)));
    return kiln_affine(g, h, var(g, "f1.W", KILN_SHAPE(512, 10), 512),
                       var(g, "f1.b", KILN_SHAPE(10), 512));
}

/* Multiply-adds x 2 of one image through the MNIST CNN, forward. */
static double mnist_cnn_flops(void)
{
    return 2.0 * (28 * 28 * 32 * 25.0 + 14 * 14 * 64 * 800.0 + 3136 * 512.0 +
                  512 * 10.0);
}

/* conv 3x3 64->64 (no bias), batch norm, with running statistics; the
   trained variables go to params[0..2] */
static kiln_node *conv_bn(kiln_graph *g, kiln_node *x, int k,
                          kiln_node **params)
{
    const kiln_conv_params pad1 = {.padding = {1, 1}};
    char n[4][16];
    snprintf(n[0], 16, "c%d.W", k);
    snprintf(n[1], 16, "bn%d.gamma", k);
    snprintf(n[2], 16, "bn%d.beta", k);
    snprintf(n[3], 16, "bn%d.mean", k);
    kiln_node *w = var(g, n[0], KILN_SHAPE(64, 64, 3, 3), 576);
    kiln_node *gamma =
        kiln_variable(g, n[1], KILN_F32, KILN_SHAPE(64), kiln_init_value(1));
    kiln_node *beta =
        kiln_variable(g, n[2], KILN_F32, KILN_SHAPE(64), kiln_init_zeros());
    kiln_node *mean = kiln_node_set_trainable(
        kiln_variable(g, n[3], KILN_F32, KILN_SHAPE(64), kiln_init_zeros()), 0);
    snprintf(n[3], 16, "bn%d.var", k);
    kiln_node *vr = kiln_node_set_trainable(
        kiln_variable(g, n[3], KILN_F32, KILN_SHAPE(64), kiln_init_value(1)),
        0);
    params[0] = w;
    params[1] = gamma;
    params[2] = beta;
    return kiln_batch_norm(g, kiln_conv2d(g, x, w, NULL, &pad1), gamma, beta,
                           mean, vr, 0.1f, 1e-5f);
}

static void fill(kiln_tensor *t, uint64_t seed)
{
    kiln_rng r;
    kiln_rng_seed(&r, seed);
    if (kiln_tensor_dtype(t) == KILN_I32) {
        for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
            kiln_tensor_i32(t)[i] = (int32_t)(kiln_rng_u32(&r) % 10);
        return;
    }
    for (int64_t i = 0; i < kiln_tensor_numel(t); i++)
        kiln_tensor_f32(t)[i] = (float)kiln_rng_uniform(&r);
}

typedef struct bench {
    kiln_session *s;
    kiln_graph *g;
    kiln_optimizer *opt;
    kiln_function *f;
    kiln_tensor *in[2], *out[2];
} bench;

static void bench_free(bench *b)
{
    for (int i = 0; i < 2; i++) {
        kiln_tensor_free(b->in[i]);
        kiln_tensor_free(b->out[i]);
    }
    kiln_optimizer_free(b->opt);
    kiln_graph_free(b->g);
    kiln_session_free(b->s);
}

static void bench_init(bench *b)
{
    memset(b, 0, sizeof *b);
    kiln_session_options so = {.seed = 1};
    b->s = kiln_session_new(&so);
    b->g = kiln_graph_new();
}

static void compile(bench *b, kiln_node **outs, int n_out, kiln_node **ins,
                    int n_in)
{
    b->f = kiln_compile(b->s, b->g, outs, n_out, ins, n_in);
    if (!b->f)
        die("compile", kiln_session_error(b->s));
    if (getenv("KILN_BENCH_PRINT"))
        kiln_function_print(b->f, stderr);
    for (int i = 0; i < n_in; i++) {
        b->in[i] =
            kiln_tensor_new(kiln_node_dtype(ins[i]), kiln_node_shape(ins[i]));
        fill(b->in[i], 7 + (uint64_t)i);
    }
    b->out[0] = kiln_function_new_output(b->f, 0);
}

static int cmd_train(int batch)
{
    bench b;
    bench_init(&b);
    kiln_node *x = kiln_input(b.g, "X", KILN_F32, KILN_SHAPE(batch, 1, 28, 28));
    kiln_node *y = kiln_input(b.g, "Y", KILN_I32, KILN_SHAPE(batch));
    kiln_node *loss = kiln_softmax_cross_entropy(b.g, mnist_cnn(b.g, x), y);
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAM);
    if (!(b.opt = kiln_optimizer_new(b.s, &o)))
        die("optimizer", kiln_session_error(b.s));
    kiln_node *outs[2] = {loss, kiln_optimizer_build_step(b.opt, b.g, loss)};
    kiln_node *ins[2] = {x, y};
    compile(&b, outs, 2, ins, 2);
    double sec = bench_time_fn(b.f, b.in, b.out, bench_seconds());
    printf("RESULT %.1f samples/s\n", batch / sec);
    printf("GFLOPS %.1f GFLOP/s\n", 3 * mnist_cnn_flops() * batch / sec / 1e9);
    fprintf(stderr, "loss after the runs: %g\n", kiln_tensor_f32(b.out[0])[0]);
    bench_free(&b);
    return 0;
}

static int cmd_resblock(int batch)
{
    bench b;
    bench_init(&b);
    kiln_node *x =
        kiln_input(b.g, "X", KILN_F32, KILN_SHAPE(batch, 64, 32, 32));
    kiln_node *params[6];
    kiln_node *h = kiln_relu(b.g, conv_bn(b.g, x, 0, params));
    h = kiln_relu(b.g, kiln_add(b.g, conv_bn(b.g, h, 1, params + 3), x));
    kiln_node *loss = kiln_sum(b.g, h, 0xfu, 0); /* axes 0 to 3 */
    /* every gradient a training step needs, and the input's */
    kiln_node *outs[8] = {loss, kiln_grad(b.g, loss, x)};
    kiln_node *ins[1] = {x};
    for (int i = 0; i < 6; i++)
        outs[2 + i] = kiln_grad(b.g, loss, params[i]);
    compile(&b, outs, 8, ins, 1);
    kiln_tensor *res[8] = {b.out[0]};
    for (int i = 1; i < 8; i++)
        res[i] = kiln_function_new_output(b.f, i);
    double sec = bench_time_fn(b.f, b.in, res, bench_seconds());
    printf("RESULT %.1f samples/s\n", batch / sec);
    printf("GFLOPS %.1f GFLOP/s\n",
           3 * 2 * 2.0 * 32 * 32 * 64 * 576 * batch / sec / 1e9);
    for (int i = 1; i < 8; i++)
        kiln_tensor_free(res[i]);
    bench_free(&b);
    return 0;
}

static int cmd_infer(int batch)
{
    bench b;
    bench_init(&b);
    kiln_node *x = kiln_input(b.g, "X", KILN_F32, KILN_SHAPE(batch, 1, 28, 28));
    kiln_node *logits = mnist_cnn(b.g, x);
    compile(&b, &logits, 1, &x, 1);
    double sec = bench_time_fn(b.f, b.in, b.out, bench_seconds());
    printf("RESULT %.2f us\n", sec * 1e6);
    printf("GFLOPS %.1f GFLOP/s\n", mnist_cnn_flops() * batch / sec / 1e9);
    bench_free(&b);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: cnn train|resblock|infer BATCH THREADS\n");
        return 2;
    }
    int batch = atoi(argv[2]), threads = atoi(argv[3]);
    if (batch < 1 || threads < 1)
        die("arguments", "BATCH and THREADS must be positive");
    kiln_set_num_threads(threads);
    if (!strcmp(argv[1], "train"))
        return cmd_train(batch);
    if (!strcmp(argv[1], "resblock"))
        return cmd_resblock(batch);
    if (!strcmp(argv[1], "infer"))
        return cmd_infer(batch);
    die("unknown command", argv[1]);
    return 2;
}
