/* Train what you import: fine-tune an ONNX model exported by PyTorch.
 *
 * examples/mnist_cnn_brief.onnx is a small MNIST CNN that PyTorch 1.13
 * trained on only 300 images (examples/onnx_finetune_export.py wrote it):
 * its test accuracy is mediocre.  This program loads it with its
 * initializers as trainable variables of a session, attaches a softmax
 * cross-entropy loss to the imported logits, lets Kiln derive the
 * gradients and Adam's update, and trains one epoch on MNIST:
 *
 *   kiln_onnx_load (trainable_initializers)  x [N,1,28,28] -> logits [N,10]
 *   loss = softmax_cross_entropy(logits, Y)  kiln_optimizer_build_step
 *
 * The batch dim, named "batch" in the file, is symbolic: one graph gives
 * the training function (batch 64) and the evaluation function (batches
 * of 1000).  Prints "Test accuracy: A (imported)" before training, the
 * running loss every 100 steps, "Test accuracy: A (fine-tuned)" after and
 * "Accuracy change: +D".
 *
 * Flags: --model FILE (examples/mnist_cnn_brief.onnx), --data DIR
 * (data/mnist), --steps N (stop the epoch after N steps, for tests), --lr X
 * (0.001), --seed N (1), --threads N (0: all cores), --save FILE (the
 * session's variables after training, .npz / .safetensors / .bin, under the
 * model's initializer names).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

enum { BATCH = 64, EVAL = 1000, CLASSES = 10, PIXELS = 784 };

typedef struct options {
    int steps, seed, threads;
    float lr;
    const char *model, *data, *save;
} options;

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.seed = 1,
                   .lr = 1e-3f,
                   .model = "examples/mnist_cnn_brief.onnx",
                   .data = "data/mnist"};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 0;
        int num = v && end != v && !*end;
        if (!v)
            return fprintf(stderr, "onnx_finetune: %s needs a value\n", a), 0;
        if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--data"))
            o->data = v;
        else if (!strcmp(a, "--save"))
            o->save = v;
        else if (!strcmp(a, "--lr") && (o->lr = strtof(v, &end)) > 0 && !*end)
            continue;
        else if (!strcmp(a, "--steps") && num && n >= 1)
            o->steps = (int)(n < 1000000 ? n : 1000000);
        else if (!strcmp(a, "--seed") && num && n >= 0)
            o->seed = (int)(n < 1000000000 ? n : 1000000000);
        else if (!strcmp(a, "--threads") && num && n >= 0 && n <= 1024)
            o->threads = (int)n;
        else
            return fprintf(stderr, "onnx_finetune: bad option %s %s\n", a, v),
                   0;
    }
    return 1;
}

typedef struct run {
    kiln_session *s;
    kiln_graph *g;
    kiln_onnx_model *m;
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
    kiln_onnx_free(r->m);
    kiln_graph_free(r->g);
    kiln_session_free(r->s);
    kiln_dataset_free(&r->train_set);
    kiln_dataset_free(&r->test_set);
}

/* The data is [N, 784]; the model takes images as [N, 1, 28, 28]: the same
   memory seen with the model's shape. */
static kiln_tensor *as_images(float *rows, int64_t n)
{
    return kiln_tensor_wrap(KILN_F32, KILN_SHAPE(n, 1, 28, 28), rows);
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
            as_images(kiln_tensor_f32(test->images) + at * PIXELS, rows);
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
            const float *z_i = logits + i * CLASSES;
            int best = 0;
            for (int k = 1; k < CLASSES; k++)
                best = z_i[k] > z_i[best] ? k : best;
            correct += best == labels[at + i];
        }
    }
    free(logits);
    return logits ? (double)correct / (double)n : -1;
}

/* Imports the model with trainable initializers; *x and *logits are its
   input and output, checked to be the MNIST shapes. */
static int import(run *r, const options *o, kiln_node **x, kiln_node **logits)
{
    kiln_onnx_options io = {.trainable_initializers = 1,
                            .named_dim_size = BATCH};
    if (kiln_onnx_load(r->g, o->model, &io, &r->m) != KILN_OK)
        return fprintf(stderr, "onnx_finetune: %s\n",
                       r->m ? kiln_onnx_error(r->m) : kiln_last_error()),
               0;
    *x = kiln_onnx_input(r->m, 0);
    *logits = kiln_onnx_output(r->m, 0);
    kiln_shape xs = kiln_node_shape(*x), zs = kiln_node_shape(*logits);
    if (kiln_onnx_num_inputs(r->m) != 1 || xs.ndim != 4 ||
        xs.d[1] * xs.d[2] * xs.d[3] != PIXELS || zs.ndim != 2 ||
        zs.d[1] != CLASSES)
        return fprintf(stderr,
                       "onnx_finetune: %s: want one input [N,1,28,28] and "
                       "logits [N,10]\n",
                       o->model),
               0;
    return 1;
}

/* Loads the data and the model, attaches the loss and compiles the
   training and evaluation functions. */
static int setup(run *r, const options *o)
{
    if (kiln_mnist_dataset(&r->train_set, o->data, 1, 1.0f / 255) != KILN_OK ||
        kiln_mnist_dataset(&r->test_set, o->data, 0, 1.0f / 255) != KILN_OK)
        return fprintf(stderr, "onnx_finetune: %s (run scripts/setup)\n",
                       kiln_last_error()),
               0;
    kiln_session_options so = {.seed = (uint64_t)o->seed,
                               .threads = o->threads};
    r->s = kiln_session_new(&so);
    r->g = kiln_graph_new();
    kiln_node *x, *logits;
    if (!import(r, o, &x, &logits))
        return 0;
    kiln_node *y =
        kiln_input_sym(r->g, "Y", KILN_I32, KILN_SHAPE(BATCH), KILN_AXIS(0));
    kiln_node *loss = kiln_softmax_cross_entropy(r->g, logits, y);
    kiln_optim_options oo = kiln_optim_defaults(KILN_ADAM);
    oo.lr = o->lr;
    r->opt = kiln_optimizer_new(r->s, &oo);
    kiln_node *outs[2] = {loss, kiln_optimizer_build_step(r->opt, r->g, loss)};
    kiln_node *ins[2] = {x, y};
    r->train = kiln_compile(r->s, r->g, outs, 2, ins, 2);
    r->eval = r->train ? kiln_compile(r->s, r->g, &logits, 1, &x, 1) : NULL;
    if (!r->eval)
        return fprintf(stderr, "onnx_finetune: %s\n", kiln_session_error(r->s)),
               0;
    r->batches = kiln_batcher_new(r->train_set.images, r->train_set.labels,
                                  BATCH, 1, 1, (uint64_t)o->seed);
    r->xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(BATCH, PIXELS));
    r->yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(BATCH));
    r->loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    if (!r->batches || !r->xb || !r->yb || !r->loss)
        return fprintf(stderr, "onnx_finetune: out of memory\n"), 0;
    return 1;
}

/* One epoch (or o->steps steps of it); 0 after an error. */
static int epoch(run *r, const options *o)
{
    double sum = 0;
    int step = 0, ok = 1;
    kiln_tensor *images = as_images(kiln_tensor_f32(r->xb), BATCH);
    kiln_tensor *in[2] = {images, r->yb}, *out[2] = {r->loss, NULL};
    while (ok && kiln_batcher_next(r->batches, r->xb, r->yb) > 0) {
        ok = images && kiln_run(r->train, in, out) == KILN_OK;
        sum += ok ? kiln_tensor_f32(r->loss)[0] : 0;
        if (ok && ++step % 100 == 0) {
            printf("step %d: loss %.4f\n", step, sum / 100);
            fflush(stdout);
            sum = 0;
        }
        if (o->steps && step == o->steps)
            break;
    }
    kiln_tensor_free(images);
    if (!ok)
        fprintf(stderr, "onnx_finetune: %s\n",
                images ? kiln_session_error(r->s) : "out of memory");
    return ok;
}

static int report(run *r, const char *when, double *acc)
{
    *acc = accuracy(r->eval, &r->test_set);
    if (*acc < 0)
        return fprintf(stderr, "onnx_finetune: %s\n", kiln_session_error(r->s)),
               0;
    printf("Test accuracy: %.4f (%s)\n", *acc, when);
    fflush(stdout);
    return 1;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse(argc, argv, &o))
        return 2;
    kiln_set_num_threads(o.threads);
    run r = {0};
    double before = 0, after = 0, t0 = kiln_now();
    int ok = setup(&r, &o) && report(&r, "imported", &before);
    if (ok) {
        t0 = kiln_now();
        ok = epoch(&r, &o);
    }
    if (ok) {
        printf("epoch: %.1f s\n", kiln_now() - t0);
        ok = report(&r, "fine-tuned", &after);
    }
    if (ok)
        printf("Accuracy change: %+.4f\n", after - before);
    if (ok && o.save && kiln_session_save(r.s, o.save) != KILN_OK) {
        fprintf(stderr, "onnx_finetune: %s\n", kiln_session_error(r.s));
        ok = 0;
    } else if (ok && o.save)
        printf("Saved the fine-tuned variables to %s\n", o.save);
    run_free(&r);
    return ok ? 0 : 1;
}
