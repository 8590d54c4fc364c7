/* nGraph's "derive a trainable model" walkthrough (mnist_mlp.cpp) in C.
 *
 * A stateless graph: the weights are inputs of the training function and
 * their updated values are among its results; the host swaps each weight
 * with its update after every step.  X [128,784] holds pixels / 256,
 * W0 [784,600], b0 [600], W1 [600,10], b1 [10], softmax over axis 1, and the
 * clipped cross-entropy loss Sum(Log(Maximum(softmax, exp(-50))) * OneHot(Y))
 * / N.  Following the original, delta = -learning_rate * loss seeds the
 * adjoints and W_next = W + backprop_node(W, delta).
 *
 * The batch axis of X and Y is symbolic: the graph is built at 128, and
 * inference is compiled from the same graph and runs on the test set in
 * batches of 1000.
 *
 * Flags: --epochs N (5), --steps N (stop after N steps, for tests),
 * --lr X (0.03), --seed N (1), --data DIR (data/mnist), --better: glorot
 * initialisation and plain cross-entropy SGD (delta = learning_rate, lr 0.4)
 * instead of the document's loss-scaled delta and uniform(-1, 1)
 * initialisation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

enum { BATCH = 128, INPUT = 784, L0 = 600, L1 = 10 };

typedef struct mlp {
    kiln_node *x, *w0, *b0, *w1, *b1, *softmax;
} mlp;

/* The inference graph: Dot, Broadcast, Relu, Dot, Broadcast, Softmax.  The
   biases are broadcast to the shape of the products, batch axis included,
   so that they follow the batch. */
static mlp build_inference(kiln_graph *g, int batch)
{
    mlp m;
    m.x = kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(batch, INPUT),
                         KILN_AXIS(0));
    m.w0 = kiln_input(g, "W0", KILN_F32, KILN_SHAPE(INPUT, L0));
    m.b0 = kiln_input(g, "b0", KILN_F32, KILN_SHAPE(L0));
    kiln_node *l0_dot = kiln_dot(g, m.x, m.w0, 1);
    kiln_node *b0_bc =
        kiln_broadcast(g, m.b0, kiln_node_shape(l0_dot), KILN_AXIS(0));
    kiln_node *l0 = kiln_relu(g, kiln_add(g, l0_dot, b0_bc));
    m.w1 = kiln_input(g, "W1", KILN_F32, KILN_SHAPE(L0, L1));
    m.b1 = kiln_input(g, "b1", KILN_F32, KILN_SHAPE(L1));
    kiln_node *l1_dot = kiln_dot(g, l0, m.w1, 1);
    kiln_node *b1_bc =
        kiln_broadcast(g, m.b1, kiln_node_shape(l1_dot), KILN_AXIS(0));
    m.softmax = kiln_softmax(g, kiln_add(g, l1_dot, b1_bc), 1);
    return m;
}

typedef struct options {
    int epochs, steps, better, seed;
    float lr;
    const char *data;
} options;

static int parse(int argc, char **argv, options *o)
{
    *o = (options){5, 0, 0, 1, -1.0f, "data/mnist"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--better")) {
            o->better = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "mnist_mlp: unknown or incomplete option '%s'\n",
                    a);
            return 0;
        }
        if (!strcmp(a, "--epochs"))
            o->epochs = atoi(v);
        else if (!strcmp(a, "--steps"))
            o->steps = atoi(v);
        else if (!strcmp(a, "--seed"))
            o->seed = atoi(v);
        else if (!strcmp(a, "--lr"))
            o->lr = (float)atof(v);
        else if (!strcmp(a, "--data"))
            o->data = v;
        else {
            fprintf(stderr, "mnist_mlp: unknown option '%s'\n", a);
            return 0;
        }
        i++;
    }
    if (o->lr < 0)
        o->lr = o->better ? 0.4f : 0.03f;
    return o->epochs > 0;
}

/* Accuracy over every test image, in batches of 1000 (the last one
   smaller when 1000 does not divide the count) read in place. */
static float accuracy(kiln_function *infer, kiln_tensor **weights,
                      const kiln_tensor *images, const kiln_tensor *labels,
                      float *p)
{
    int64_t n = kiln_tensor_shape(images).d[0], correct = 0;
    for (int64_t start = 0; start < n; start += 1000) {
        int64_t batch = n - start < 1000 ? n - start : 1000;
        kiln_tensor *xb =
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(batch, INPUT),
                             kiln_tensor_f32(images) + start * INPUT);
        kiln_tensor *probs =
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(batch, L1), p);
        kiln_tensor *in[5] = {xb, weights[0], weights[1], weights[2],
                              weights[3]};
        kiln_status st = kiln_run(infer, in, &probs);
        kiln_tensor_free(xb);
        kiln_tensor_free(probs);
        if (st != KILN_OK)
            return -1;
        for (int64_t i = 0; i < batch; i++) {
            int best = 0;
            for (int c = 1; c < L1; c++)
                if (p[i * L1 + c] > p[i * L1 + best])
                    best = c;
            correct += best == kiln_tensor_i32(labels)[start + i];
        }
    }
    return (float)correct / (float)n;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse(argc, argv, &o))
        return 1;
    kiln_tensor *train_x, *train_y, *test_x, *test_y;
    if (kiln_mnist_load(o.data, 1, 1.0f / 256, &train_x, &train_y) != KILN_OK ||
        kiln_mnist_load(o.data, 0, 1.0f / 256, &test_x, &test_y) != KILN_OK) {
        fprintf(stderr, "mnist_mlp: %s\n", kiln_last_error());
        return 1;
    }

    /* Training graph: inference, loss, and the weight updates. */
    kiln_graph *g = kiln_graph_new();
    mlp m = build_inference(g, BATCH);
    kiln_node *y =
        kiln_input_sym(g, "Y", KILN_I32, KILN_SHAPE(BATCH), KILN_AXIS(0));
    kiln_node *labels = kiln_one_hot(g, y, L1);
    kiln_node *clip =
        kiln_max(g, m.softmax, kiln_scalar(g, 1.9287498479639178e-22f));
    kiln_node *prod = kiln_mul(g, kiln_log(g, clip), labels);
    kiln_node *n = kiln_input(g, "N", KILN_F32, KILN_SCALAR);
    kiln_node *loss = kiln_div(g, kiln_sum(g, prod, KILN_ALL_AXES, 0), n);
    kiln_node *lr = kiln_input(g, "learning_rate", KILN_F32, KILN_SCALAR);
    /* The document seeds the adjoints with -learning_rate * loss; --better
       uses +learning_rate: loss is the mean log-likelihood, so this is plain
       SGD on the cross-entropy -loss. */
    kiln_node *delta = o.better ? lr : kiln_neg(g, kiln_mul(g, lr, loss));
    kiln_node *params[4] = {m.w0, m.b0, m.w1, m.b1}, *adj[4];
    kiln_grads(g, loss, delta, params, 4, adj);
    kiln_node *outs[6] = {loss, m.softmax};
    for (int i = 0; i < 4; i++)
        outs[2 + i] = kiln_add(g, params[i], adj[i]);
    kiln_node *ins[8] = {m.x, y, n, lr, m.w0, m.b0, m.w1, m.b1};

    kiln_session *s = kiln_session_new(NULL);
    kiln_function *train = kiln_compile(s, g, outs, 6, ins, 8);
    /* Inference: the softmax of the same graph, run at batch 1000. */
    kiln_node *ins_i[5] = {m.x, m.w0, m.b0, m.w1, m.b1};
    kiln_function *infer = kiln_compile(s, g, &m.softmax, 1, ins_i, 5);
    if (!train || !infer) {
        fprintf(stderr, "mnist_mlp: %s\n", kiln_session_error(s));
        return 1;
    }

    /* Weights uniform in (-1, 1) from a fixed seed (the document), or
       glorot-uniform with zero biases (--better). */
    kiln_rng rng;
    kiln_rng_seed(&rng, (uint64_t)o.seed);
    kiln_shape wshape[4] = {KILN_SHAPE(INPUT, L0), KILN_SHAPE(L0),
                            KILN_SHAPE(L0, L1), KILN_SHAPE(L1)};
    kiln_tensor *w[4], *w_next[4];
    for (int i = 0; i < 4; i++) {
        w[i] = kiln_tensor_new(KILN_F32, wshape[i]);
        w_next[i] = kiln_tensor_new(KILN_F32, wshape[i]);
        kiln_init init = !o.better    ? kiln_init_uniform(-1, 1)
                         : i % 2 == 0 ? kiln_init_glorot_uniform()
                                      : kiln_init_zeros();
        kiln_init_fill(init, wshape[i], kiln_tensor_f32(w[i]), &rng);
    }
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(BATCH, INPUT));
    kiln_tensor *yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(BATCH));
    kiln_tensor *t_n = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_tensor *t_lr = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_tensor *t_loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_tensor *t_soft = kiln_tensor_new(KILN_F32, KILN_SHAPE(BATCH, L1));
    float *pi = malloc(1000 * L1 * sizeof *pi);
    kiln_tensor_f32(t_n)[0] = BATCH;
    kiln_tensor_f32(t_lr)[0] = o.lr;

    /* Batches in order, wrapping across epochs. */
    int64_t rows = kiln_tensor_shape(train_x).d[0];
    int64_t steps_per_epoch = rows / BATCH, pos = 0, step = 0;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        double loss_sum = 0;
        int64_t count = 0;
        for (int64_t b = 0; b < steps_per_epoch; b++, step++) {
            if (o.steps && step >= o.steps)
                break;
            for (int r = 0; r < BATCH; r++, pos = (pos + 1) % rows) {
                memcpy(kiln_tensor_f32(xb) + r * INPUT,
                       kiln_tensor_f32(train_x) + pos * INPUT,
                       INPUT * sizeof(float));
                kiln_tensor_i32(yb)[r] = kiln_tensor_i32(train_y)[pos];
            }
            kiln_tensor *in[8] = {xb, yb, t_n, t_lr, w[0], w[1], w[2], w[3]};
            kiln_tensor *out[6] = {t_loss,    t_soft,    w_next[0],
                                   w_next[1], w_next[2], w_next[3]};
            if (kiln_run(train, in, out) != KILN_OK) {
                fprintf(stderr, "mnist_mlp: %s\n", kiln_session_error(s));
                return 1;
            }
            for (int i = 0; i < 4; i++) { /* the host swaps weight and update */
                kiln_tensor *t = w[i];
                w[i] = w_next[i];
                w_next[i] = t;
            }
            loss_sum += kiln_tensor_f32(t_loss)[0];
            count++;
            if (count % 100 == 0)
                printf("step %lld: mean loss %.4f\n", (long long)step + 1,
                       -loss_sum / (double)count);
        }
        float acc = accuracy(infer, w, test_x, test_y, pi);
        printf("epoch %d: mean loss %.4f\n", epoch,
               count ? -loss_sum / (double)count : 0);
        printf("Test accuracy: %.4f\n", acc);
        fflush(stdout);
        if (o.steps && step >= o.steps)
            break;
    }
    for (int i = 0; i < 4; i++) {
        kiln_tensor_free(w[i]);
        kiln_tensor_free(w_next[i]);
    }
    kiln_tensor *tmp[] = {xb,     yb,      t_n,     t_lr,   t_loss,
                          t_soft, train_x, train_y, test_x, test_y};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        kiln_tensor_free(tmp[i]);
    kiln_session_free(s);
    kiln_graph_free(g);
    free(pi);
    return 0;
}
