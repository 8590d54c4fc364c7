/* PopXL's MNIST application in C: modules, calls with info, autodiff of
 * each layer's subgraph, host streams, and separate train and test
 * programs sharing the trained weights.
 *
 * Two Linear modules (x W + b, then gelu), 784-32-10; the images are
 * normalised with MNIST's mean 0.1307 and deviation 0.3081.  Training
 * program: host_load the images [batch, 28, 28] and labels, call the two
 * layers, softmax, nll_loss_with_softmax_grad, autodiff layer 1 for all its
 * inputs and layer 0 for W and b only, scaled_add_ each weight by -lr times
 * its gradient, host_store the loss.  A progress bar shows the average loss.
 * The test program repeats the forward pass in its own session, receives
 * the trained weights and prints the test accuracy.  The streams' batch
 * axis is symbolic: training runs the last, smaller batch of the epoch and
 * testing covers every test image, each with the one program compiled.
 *
 * Flags (the document's defaults): --batch-size N (8), --test-batch-size N
 * (80), --epochs N (1), --lr X (0.05); also --steps N (stop training after
 * N steps, for tests), --seed N (0), --data DIR (data/mnist).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

enum { IMG = 28 * 28, HIDDEN = 32, CLASSES = 10 };

typedef struct options {
    int batch_size, test_batch_size, epochs, steps, seed;
    float lr;
    const char *data;
} options;

/* ------------------------------------------------------------ the module */

/* popxl.Module Linear: its graph inputs W and b are set by build. */
typedef struct linear {
    int out_features;
    kiln_node *W, *b;
} linear;

static void linear_build(kiln_subgraph *sg, void *module, kiln_node *const *xs,
                         int n)
{
    linear *self = module;
    kiln_graph *g = kiln_subgraph_graph(sg);
    kiln_node *x = n == 1 ? xs[0] : NULL;
    kiln_shape xs_shape = kiln_node_shape(x);
    int64_t in_features = xs_shape.ndim ? xs_shape.d[xs_shape.ndim - 1] : 0;
    self->W = kiln_subgraph_input(sg, "W", KILN_F32,
                                  KILN_SHAPE(in_features, self->out_features));
    kiln_node *y = kiln_matmul(g, x, self->W, 0, 0);
    self->b =
        kiln_subgraph_input(sg, "b", KILN_F32, KILN_SHAPE(self->out_features));
    y = kiln_add(g, y, self->b);
    kiln_subgraph_output(sg, kiln_gelu(g, y));
}

/* ------------------------------------------------------------ the network */

typedef struct network {
    linear lin[2];
    kiln_subgraph *graphs[2];
    kiln_call_info *calls[2];
    kiln_node *params[4]; /* W0 b0 W1 b1 */
    kiln_node *x1, *y;
} network;

static const char *const param_names[4] = {"W0", "b0", "W1", "b1"};

/* create_network_fwd_graph: the variables, the two layer graphs and their
   calls. */
static void network_fwd(kiln_graph *g, kiln_node *x, network *net)
{
    kiln_shape shapes[4] = {KILN_SHAPE(IMG, HIDDEN), KILN_SHAPE(HIDDEN),
                            KILN_SHAPE(HIDDEN, CLASSES), KILN_SHAPE(CLASSES)};
    for (int i = 0; i < 4; i++)
        net->params[i] = kiln_variable(g, param_names[i], KILN_F32, shapes[i],
                                       kiln_init_normal(0, 0.02));
    kiln_node *in = kiln_reshape(g, x, KILN_SHAPE(-1, IMG));
    int out_features[2] = {HIDDEN, CLASSES};
    for (int l = 0; l < 2; l++) {
        net->lin[l] = (linear){.out_features = out_features[l]};
        net->graphs[l] =
            kiln_module_create_graph(linear_build, &net->lin[l], &in, 1);
        kiln_binding dict[2] = {{net->lin[l].W, net->params[2 * l]},
                                {net->lin[l].b, net->params[2 * l + 1]}};
        net->calls[l] = kiln_call_with_info(g, net->graphs[l], &in, 1, dict, 2);
        in = kiln_call_info_output(net->calls[l], 0);
        if (l == 0)
            net->x1 = in;
    }
    net->y = in;
}

static void network_free(network *net)
{
    for (int l = 0; l < 2; l++)
        kiln_subgraph_free(net->graphs[l]);
}

/* calculate_grads: layer 1 differentiated for all its inputs, layer 0 for
   W and b only, fed with layer 1's gradient of x1. */
static kiln_grad_info *calculate_grads(kiln_graph *g, network *net,
                                       kiln_node *dy, kiln_node **grads,
                                       kiln_grad_info **bwd0)
{
    kiln_binding acts[16];
    kiln_grad_info *bwd1 = kiln_autodiff(net->graphs[1], NULL, 0);
    int n1 = kiln_grad_info_inputs_dict(bwd1, net->calls[1], acts, 16);
    kiln_call_info *grads_1 = kiln_call_with_info(
        g, kiln_grad_info_graph(bwd1), &dy, 1, acts, n1 < 0 ? 0 : n1);
    kiln_node *grad_x1 =
        kiln_grad_info_parent_grad(bwd1, net->calls[1], grads_1, net->x1);
    grads[2] = kiln_grad_info_parent_grad(bwd1, net->calls[1], grads_1,
                                          net->params[2]);
    grads[3] = kiln_grad_info_parent_grad(bwd1, net->calls[1], grads_1,
                                          net->params[3]);

    kiln_node *required[2] = {net->lin[0].W, net->lin[0].b};
    *bwd0 = kiln_autodiff(net->graphs[0], required, 2);
    int n0 = kiln_grad_info_inputs_dict(*bwd0, net->calls[0], acts, 16);
    kiln_call(g, kiln_grad_info_graph(*bwd0), &grad_x1, 1, acts,
              n0 < 0 ? 0 : n0, grads);
    return bwd1;
}

/* ------------------------------------------------------------ programs */

typedef struct train_ir {
    kiln_program *p;
    kiln_stream *img, *label, *loss;
    network net;
    kiln_grad_info *bwd[2];
} train_ir;

/* shape with its first axis, the batch, symbolic (any size at run time) */
static kiln_shape batched(kiln_shape shape)
{
    shape.sym = KILN_AXIS(0);
    return shape;
}

static int build_train_ir(const options *o, train_ir *t)
{
    t->p = kiln_program_new();
    kiln_graph *g = kiln_program_graph(t->p);
    t->img = kiln_h2d_stream(t->p, "input_stream", KILN_F32,
                             batched(KILN_SHAPE(o->batch_size, 28, 28)));
    kiln_node *x = kiln_host_load(t->p, t->img, "x");
    t->label = kiln_h2d_stream(t->p, "label_stream", KILN_I32,
                               batched(KILN_SHAPE(o->batch_size)));
    kiln_node *labels = kiln_host_load(t->p, t->label, "labels");

    network_fwd(g, x, &t->net);
    kiln_node *probs = kiln_softmax(g, t->net.y, -1), *loss, *dy, *grads[4];
    kiln_nll_loss_with_softmax_grad(g, probs, labels, &loss, &dy);
    t->bwd[1] = calculate_grads(g, &t->net, dy, grads, &t->bwd[0]);
    for (int i = 0; i < 4; i++) /* update_weights_bias */
        kiln_scaled_add_inplace(t->p, t->net.params[i], grads[i], 1.0f, -o->lr);

    t->loss = kiln_d2h_stream(t->p, "loss_stream", KILN_F32, KILN_SCALAR);
    kiln_host_store(t->p, t->loss, loss);
    return kiln_graph_status(g) == KILN_OK;
}

static void train_ir_free(train_ir *t)
{
    kiln_grad_info_free(t->bwd[0]);
    kiln_grad_info_free(t->bwd[1]);
    network_free(&t->net);
    kiln_program_free(t->p);
}

typedef struct test_ir {
    kiln_program *p;
    kiln_stream *img, *out;
    network net;
} test_ir;

static int build_test_ir(const options *o, test_ir *t)
{
    t->p = kiln_program_new();
    kiln_graph *g = kiln_program_graph(t->p);
    t->img = kiln_h2d_stream(t->p, "input_stream", KILN_F32,
                             batched(KILN_SHAPE(o->test_batch_size, 28, 28)));
    network_fwd(g, kiln_host_load(t->p, t->img, "x"), &t->net);
    t->out = kiln_d2h_stream(t->p, "output_stream", KILN_F32,
                             batched(KILN_SHAPE(o->test_batch_size, CLASSES)));
    kiln_host_store(t->p, t->out, t->net.y);
    return kiln_graph_status(g) == KILN_OK;
}

/* ------------------------------------------------------------ running */

static int parse(int argc, char **argv, options *o)
{
    *o = (options){8, 80, 1, 0, 0, 0.05f, "data/mnist"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            fprintf(stderr, "mnist_modules: option '%s' needs a value\n", a);
            return 0;
        }
        if (!strcmp(a, "--batch-size"))
            o->batch_size = atoi(v);
        else if (!strcmp(a, "--test-batch-size"))
            o->test_batch_size = atoi(v);
        else if (!strcmp(a, "--epochs"))
            o->epochs = atoi(v);
        else if (!strcmp(a, "--lr"))
            o->lr = (float)atof(v);
        else if (!strcmp(a, "--steps"))
            o->steps = atoi(v);
        else if (!strcmp(a, "--seed"))
            o->seed = atoi(v);
        else if (!strcmp(a, "--data"))
            o->data = v;
        else {
            fprintf(stderr, "mnist_modules: unknown option '%s'\n", a);
            return 0;
        }
    }
    return o->batch_size > 0 && o->test_batch_size > 0 && o->epochs > 0;
}

static void normalise(kiln_tensor *images)
{
    float *p = kiln_tensor_f32(images);
    for (int64_t i = 0; i < kiln_tensor_numel(images); i++)
        p[i] = (p[i] - 0.1307f) / 0.3081f;
}

/* Runs the training program on the first rows of the batch in io. */
static kiln_status run_rows(train_ir *t, kiln_stream_data *io, int rows)
{
    if (rows == kiln_tensor_shape(io[1].tensor).d[0])
        return kiln_program_run(t->p, io, 3);
    kiln_stream_data part[3] = {
        {t->img, kiln_tensor_wrap(KILN_F32, KILN_SHAPE(rows, 28, 28),
                                  kiln_tensor_data(io[0].tensor))},
        {t->label, kiln_tensor_wrap(KILN_I32, KILN_SHAPE(rows),
                                    kiln_tensor_data(io[1].tensor))},
        io[2]};
    kiln_status st = kiln_program_run(t->p, part, 3);
    kiln_tensor_free(part[0].tensor);
    kiln_tensor_free(part[1].tensor);
    return st;
}

static int train(const options *o, train_ir *t, const kiln_tensor *images,
                 const kiln_tensor *labels)
{
    kiln_batcher *b = kiln_batcher_new(images, labels, o->batch_size, 1, 0,
                                       (uint64_t)o->seed);
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(o->batch_size, IMG));
    kiln_tensor *img = kiln_tensor_wrap(
        KILN_F32, KILN_SHAPE(o->batch_size, 28, 28), kiln_tensor_data(xb));
    kiln_tensor *yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(o->batch_size));
    kiln_tensor *loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_stream_data io[3] = {{t->img, img}, {t->label, yb}, {t->loss, loss}};
    int64_t nb = kiln_batcher_num_batches(b), step = 0;
    if (o->steps > 0 && o->steps < nb * o->epochs)
        nb = (o->steps + o->epochs - 1) / o->epochs;
    int ok = 1;
    for (int epoch = 1; epoch <= o->epochs && ok; epoch++) {
        char label[32];
        snprintf(label, sizeof label, "Epoch %d/%d", epoch, o->epochs);
        printf("%s\n", label);
        fflush(stdout);
        kiln_progress bar;
        kiln_progress_begin(&bar, stderr, label, nb);
        double total = 0;
        int64_t done = 0;
        int rows;
        while (done < nb && (rows = kiln_batcher_next(b, xb, yb)) > 0) {
            if (run_rows(t, io, rows) != KILN_OK) {
                fprintf(stderr, "mnist_modules: %s\n",
                        kiln_program_error(t->p));
                ok = 0;
                break;
            }
            total += kiln_tensor_f32(loss)[0];
            done++;
            step++;
            kiln_progress_update(&bar, done, total / (double)done,
                                 o->batch_size);
        }
        char summary[64];
        snprintf(summary, sizeof summary, "Average loss: %.4f",
                 done ? total / (double)done : 0.0);
        kiln_progress_end(&bar, summary);
        printf("Epoch %d average loss: %.4f (%lld steps)\n", epoch,
               done ? total / (double)done : 0.0, (long long)done);
    }
    kiln_batcher_free(b);
    kiln_tensor_free(img);
    kiln_tensor_free(xb);
    kiln_tensor_free(yb);
    kiln_tensor_free(loss);
    return ok;
}

/* get_tensors_data from the training session, write_variables_data into the
   test session. */
static int copy_weights(kiln_session *from, kiln_session *to,
                        const network *net)
{
    for (int i = 0; i < 4; i++) {
        kiln_tensor *t =
            kiln_tensor_new(KILN_F32, kiln_node_shape(net->params[i]));
        int ok = kiln_variable_read(from, param_names[i], t) == KILN_OK &&
                 kiln_variable_write(to, param_names[i], t) == KILN_OK;
        kiln_tensor_free(t);
        if (!ok)
            return 0;
    }
    return 1;
}

static double test(const options *o, test_ir *t, const kiln_tensor *images,
                   const kiln_tensor *labels)
{
    int64_t n = kiln_tensor_shape(images).d[0], correct = 0, seen = 0;
    float *y = malloc((size_t)o->test_batch_size * CLASSES * sizeof *y);
    for (int64_t start = 0; y && start < n; start += o->test_batch_size) {
        int64_t bs =
            n - start < o->test_batch_size ? n - start : o->test_batch_size;
        kiln_tensor *img =
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(bs, 28, 28),
                             kiln_tensor_f32(images) + start * IMG);
        kiln_tensor *out =
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(bs, CLASSES), y);
        kiln_stream_data io[2] = {{t->img, img}, {t->out, out}};
        kiln_status st = kiln_program_run(t->p, io, 2);
        kiln_tensor_free(img);
        kiln_tensor_free(out);
        if (st != KILN_OK) {
            fprintf(stderr, "mnist_modules: %s\n", kiln_program_error(t->p));
            correct = -1;
            break;
        }
        for (int i = 0; i < bs; i++, seen++) {
            int best = 0;
            for (int c = 1; c < CLASSES; c++)
                if (y[i * CLASSES + c] > y[i * CLASSES + best])
                    best = c;
            correct += best == kiln_tensor_i32(labels)[start + i];
        }
    }
    free(y);
    return correct < 0 || !seen ? -1 : (double)correct / (double)seen;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse(argc, argv, &o))
        return 1;
    kiln_tensor *train_x, *train_y, *test_x, *test_y;
    if (kiln_mnist_load(o.data, 1, 1.0f / 255, &train_x, &train_y) != KILN_OK ||
        kiln_mnist_load(o.data, 0, 1.0f / 255, &test_x, &test_y) != KILN_OK) {
        fprintf(stderr, "mnist_modules: %s\n", kiln_last_error());
        return 1;
    }
    normalise(train_x);
    normalise(test_x);

    train_ir tr = {0};
    test_ir te = {0};
    if (!build_train_ir(&o, &tr) || !build_test_ir(&o, &te)) {
        fprintf(stderr, "mnist_modules: %s%s\n", kiln_program_error(tr.p),
                te.p ? kiln_program_error(te.p) : "");
        return 1;
    }
    kiln_session *train_session =
        kiln_session_new(&(kiln_session_options){.seed = (uint64_t)o.seed});
    kiln_session *test_session = kiln_session_new(NULL);
    int ok = kiln_program_compile(tr.p, train_session) == KILN_OK;
    if (!ok)
        fprintf(stderr, "mnist_modules: %s\n", kiln_program_error(tr.p));
    ok = ok && train(&o, &tr, train_x, train_y);
    if (ok && kiln_program_compile(te.p, test_session) != KILN_OK) {
        fprintf(stderr, "mnist_modules: %s\n", kiln_program_error(te.p));
        ok = 0;
    }
    if (ok && !copy_weights(train_session, test_session, &tr.net)) {
        fprintf(stderr, "mnist_modules: %s\n",
                kiln_session_error(test_session));
        ok = 0;
    }
    double acc = ok ? test(&o, &te, test_x, test_y) : -1;
    if (acc >= 0)
        printf("Test accuracy: %.4f\n", acc);

    train_ir_free(&tr);
    network_free(&te.net);
    kiln_program_free(te.p);
    kiln_session_free(train_session);
    kiln_session_free(test_session);
    kiln_tensor_free(train_x);
    kiln_tensor_free(train_y);
    kiln_tensor_free(test_x);
    kiln_tensor_free(test_y);
    return acc >= 0 ? 0 : 1;
}
