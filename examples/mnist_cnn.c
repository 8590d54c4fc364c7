/* A LeNet-style convolutional network trained on MNIST: two blocks of
 * convolution, relu and max pooling, then two dense layers.
 *
 *   X [N,784] -> reshape [N,1,28,28]
 *   -> conv 5x5 1->32 pad 2, relu, max pool 2   [N,32,14,14]
 *   -> conv 5x5 32->64 pad 2, relu, max pool 2  [N,64,7,7]
 *   -> flatten [N,3136] -> dense 512, relu -> dense 10 -> softmax CE
 *
 * Adam (lr 1e-3), batch 128, PyTorch's default initialisation (uniform in
 * +-1/sqrt(fan_in)); one compiled function runs forward, backward and the
 * update.  The batch axis is symbolic, so the evaluation function compiled
 * from the same graph runs the test set in batches of 1000.  Prints the
 * running loss every 100 steps and "Test accuracy: A" after every epoch;
 * three epochs pass 0.99.
 *
 * Flags: --epochs N (3), --steps N (stop each epoch after N steps, for
 * tests), --lr X (0.001), --seed N (1), --threads N (0: all cores),
 * --data DIR (data/mnist), --target A (stop once the test accuracy reaches
 * A and print "Reached A test accuracy in T s", the time of training and
 * evaluation so far: bench/run's time-to-accuracy case).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

enum { BATCH = 128, EVAL = 1000, CLASSES = 10 };

typedef struct options {
    int epochs, steps, seed, threads;
    float lr, target;
    const char *data;
} options;

typedef struct net {
    kiln_node *x, *y, *logits, *loss;
} net;

/* A trainable tensor initialised as PyTorch does for a layer of fan_in
   inputs. */
static kiln_node *param(kiln_graph *g, const char *name, kiln_shape shape,
                        int64_t fan_in)
{
    double lim = 1.0 / sqrt((double)fan_in);
    return kiln_variable(g, name, KILN_F32, shape,
                         kiln_init_uniform(-lim, lim));
}

/* conv 5x5 (pad 2) from c_in to c_out channels, relu, max pool 2x2. */
static kiln_node *conv_block(kiln_graph *g, kiln_node *h, int k, int c_in,
                             int c_out)
{
    char wn[16], bn[16];
    snprintf(wn, sizeof wn, "conv%d.W", k);
    snprintf(bn, sizeof bn, "conv%d.b", k);
    int64_t fan_in = (int64_t)c_in * 25;
    kiln_node *w = param(g, wn, KILN_SHAPE(c_out, c_in, 5, 5), fan_in);
    kiln_node *b = param(g, bn, KILN_SHAPE(c_out), fan_in);
    kiln_conv_params p = {.padding = {2, 2}};
    int two[2] = {2, 2};
    h = kiln_relu(g, kiln_conv2d(g, h, w, b, &p));
    return kiln_max_pool2d(g, h, two, NULL, NULL, NULL, 0);
}

static kiln_node *dense(kiln_graph *g, kiln_node *h, int k, int64_t in,
                        int64_t out)
{
    char wn[16], bn[16];
    snprintf(wn, sizeof wn, "fc%d.W", k);
    snprintf(bn, sizeof bn, "fc%d.b", k);
    return kiln_affine(g, h, param(g, wn, KILN_SHAPE(in, out), in),
                       param(g, bn, KILN_SHAPE(out), in));
}

static net build(kiln_graph *g)
{
    net m;
    m.x =
        kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(BATCH, 784), KILN_AXIS(0));
    m.y = kiln_input_sym(g, "Y", KILN_I32, KILN_SHAPE(BATCH), KILN_AXIS(0));
    kiln_node *h = kiln_reshape(g, m.x, KILN_SHAPE(BATCH, 1, 28, 28));
    h = conv_block(g, h, 0, 1, 32);
    h = conv_block(g, h, 1, 32, 64);
    h = kiln_flatten(g, h, 1, -1);
    h = kiln_relu(g, dense(g, h, 0, 64 * 7 * 7, 512));
    m.logits = dense(g, h, 1, 512, CLASSES);
    m.loss = kiln_softmax_cross_entropy(g, m.logits, m.y);
    return m;
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.epochs = 3, .seed = 1, .lr = 1e-3f, .data = "data/mnist"};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 0;
        int num = v && end != v && !*end;
        if (!v)
            return fprintf(stderr, "mnist_cnn: %s needs a value\n", a), 0;
        if (!strcmp(a, "--data"))
            o->data = v;
        else if (!strcmp(a, "--lr") && (o->lr = strtof(v, &end)) > 0 && !*end)
            continue;
        else if (!strcmp(a, "--target") && (o->target = strtof(v, &end)) > 0 &&
                 o->target <= 1 && !*end)
            continue;
        else if (!strcmp(a, "--epochs") && num && n >= 1 && n <= 1000)
            o->epochs = (int)n;
        else if (!strcmp(a, "--steps") && num && n >= 1)
            o->steps = (int)(n < 1000000 ? n : 1000000);
        else if (!strcmp(a, "--seed") && num && n >= 0)
            o->seed = (int)(n < 1000000000 ? n : 1000000000);
        else if (!strcmp(a, "--threads") && num && n >= 0 && n <= 1024)
            o->threads = (int)n;
        else
            return fprintf(stderr, "mnist_cnn: bad option %s %s\n", a, v), 0;
    }
    return 1;
}

/* Share of the test images whose largest logit is their label, or -1. */
static double accuracy(kiln_function *f, const kiln_dataset *test)
{
    int64_t correct = 0, n = test->count;
    float *logits = malloc(EVAL * CLASSES * sizeof *logits);
    const int32_t *labels = kiln_tensor_i32(test->labels);
    for (int64_t at = 0; logits && at < n; at += EVAL) {
        int64_t rows = n - at < EVAL ? n - at : EVAL;
        kiln_tensor *x =
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(rows, 784),
                             kiln_tensor_f32(test->images) + at * 784);
        kiln_tensor *z =
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(rows, CLASSES), logits);
        kiln_status st = x && z ? kiln_run(f, &x, &z) : KILN_ERR_MEMORY;
        kiln_tensor_free(x);
        kiln_tensor_free(z);
        if (st != KILN_OK) {
            free(logits);
            return -1;
        }
        for (int64_t i = 0; i < rows; i++) {
            const float *r = logits + i * CLASSES;
            int best = 0;
            for (int k = 1; k < CLASSES; k++)
                best = r[k] > r[best] ? k : best;
            correct += best == labels[at + i];
        }
    }
    free(logits);
    return logits ? (double)correct / (double)n : -1;
}

typedef struct run {
    kiln_session *s;
    kiln_graph *g;
    kiln_optimizer *opt;
    kiln_function *train, *eval;
    kiln_batcher *batches;
    kiln_tensor *xb, *yb, *loss;
    kiln_dataset train_set, test_set;
} run;

static void run_free(run *r)
{
    kiln_tensor_free(r->xb);
    kiln_tensor_free(r->yb);
    kiln_tensor_free(r->loss);
    kiln_batcher_free(r->batches);
    kiln_optimizer_free(r->opt);
    kiln_graph_free(r->g);
    kiln_session_free(r->s);
    kiln_dataset_free(&r->train_set);
    kiln_dataset_free(&r->test_set);
}

/* Loads the data, builds the network and compiles both functions. */
static int setup(run *r, const options *o)
{
    if (kiln_mnist_dataset(&r->train_set, o->data, 1, 1.0f / 255) != KILN_OK ||
        kiln_mnist_dataset(&r->test_set, o->data, 0, 1.0f / 255) != KILN_OK)
        return fprintf(stderr, "mnist_cnn: %s (run scripts/setup)\n",
                       kiln_last_error()),
               0;
    if (r->train_set.rows * r->train_set.cols != 784 ||
        r->test_set.rows * r->test_set.cols != 784)
        return fprintf(stderr, "mnist_cnn: %s: not 28x28 images\n", o->data), 0;
    kiln_session_options so = {.seed = (uint64_t)o->seed,
                               .threads = o->threads};
    r->s = kiln_session_new(&so);
    r->g = kiln_graph_new();
    net m = build(r->g);
    kiln_optim_options oo = kiln_optim_defaults(KILN_ADAM);
    oo.lr = o->lr;
    r->opt = kiln_optimizer_new(r->s, &oo);
    kiln_node *outs[2] = {m.loss,
                          kiln_optimizer_build_step(r->opt, r->g, m.loss)};
    kiln_node *ins[2] = {m.x, m.y};
    r->train = kiln_compile(r->s, r->g, outs, 2, ins, 2);
    r->eval = r->train ? kiln_compile(r->s, r->g, &m.logits, 1, &m.x, 1) : NULL;
    if (!r->eval)
        return fprintf(stderr, "mnist_cnn: %s\n", kiln_session_error(r->s)), 0;
    r->batches = kiln_batcher_new(r->train_set.images, r->train_set.labels,
                                  BATCH, 1, 1, (uint64_t)o->seed);
    r->xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(BATCH, 784));
    r->yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(BATCH));
    r->loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    if (!r->batches || !r->xb || !r->yb || !r->loss)
        return fprintf(stderr, "mnist_cnn: out of memory\n"), 0;
    return 1;
}

/* One epoch (or o->steps steps of it); 0 after an error. */
static int epoch(run *r, const options *o, int e)
{
    double sum = 0;
    int step = 0;
    kiln_tensor *in[2] = {r->xb, r->yb}, *out[2] = {r->loss, NULL};
    while (kiln_batcher_next(r->batches, r->xb, r->yb) > 0) {
        if (kiln_run(r->train, in, out) != KILN_OK)
            return fprintf(stderr, "mnist_cnn: %s\n", kiln_session_error(r->s)),
                   0;
        sum += kiln_tensor_f32(r->loss)[0];
        if (++step % 100 == 0) {
            printf("epoch %d step %d: loss %.4f\n", e, step, sum / 100);
            fflush(stdout);
            sum = 0;
        }
        if (o->steps && step == o->steps) {
            /* finish the epoch's shuffle so the next epoch starts anew */
            while (kiln_batcher_next(r->batches, r->xb, r->yb) > 0)
                ;
            break;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse(argc, argv, &o))
        return 2;
    kiln_set_num_threads(o.threads);
    run r = {0};
    int ok = setup(&r, &o);
    double start = kiln_now(), acc = 0;
    for (int e = 1; ok && e <= o.epochs; e++) {
        double t0 = kiln_now();
        ok = epoch(&r, &o, e);
        acc = ok ? accuracy(r.eval, &r.test_set) : -1;
        if (ok && acc < 0) {
            fprintf(stderr, "mnist_cnn: %s\n", kiln_session_error(r.s));
            ok = 0;
        }
        if (ok)
            printf("epoch %d: %.1f s\nTest accuracy: %.4f\n", e,
                   kiln_now() - t0, acc);
        if (ok && o.target > 0 && acc >= o.target) {
            printf("Reached %g test accuracy in %.1f s (%d epochs)\n", o.target,
                   kiln_now() - start, e);
            break;
        }
    }
    run_free(&r);
    if (ok && o.target > 0 && acc < o.target) {
        fprintf(stderr,
                "mnist_cnn: test accuracy %.4f after %d epochs, below "
                "--target %g\n",
                acc, o.epochs, o.target);
        return 1;
    }
    return ok ? 0 : 1;
}
