/* Variable shapes per step, the reason Marian rebuilds its graph for every
   batch: each step draws a batch of sequences with its own length and its
   own batch size, unrolls one shared recurrent cell over that length,
   builds the loss and trains with Adam.  Every step is a new graph over the
   same workspace; the session keeps the parameters.

   Task: read a sequence x_1..x_T (D features each) and predict the mean
   over time of x_t . a, for a fixed hidden vector a.

     dynamic_shapes [STEPS]     (default 400) */
#include <stdio.h>
#include <stdlib.h>

#include "kiln.h"

enum { D = 4, H = 16, MAX_LEN = 12, MAX_BATCH = 24 };

static int fail(kiln_session *s, const char *what)
{
    fprintf(stderr, "dynamic_shapes: %s: %s\n", what, kiln_session_error(s));
    return 1;
}

/* h_t = tanh(x_t Wx + h_{t-1} Wh + b); prediction = h_T v. */
static kiln_node *unroll(kiln_graph *g, kiln_node *const *xs, int len,
                         int batch)
{
    kiln_node *wx = kiln_variable(g, "cell.Wx", KILN_F32, KILN_SHAPE(D, H),
                                  kiln_init_glorot_uniform());
    kiln_node *wh = kiln_variable(g, "cell.Wh", KILN_F32, KILN_SHAPE(H, H),
                                  kiln_init_glorot_uniform());
    kiln_node *b =
        kiln_variable(g, "cell.b", KILN_F32, KILN_SHAPE(H), kiln_init_zeros());
    kiln_node *v = kiln_variable(g, "out.v", KILN_F32, KILN_SHAPE(H, 1),
                                 kiln_init_glorot_uniform());
    kiln_node *h = kiln_fill(g, KILN_SHAPE(batch, H), 0.0f);
    for (int t = 0; t < len; t++)
        h = kiln_tanh(g, kiln_add(g, kiln_affine(g, xs[t], wx, b),
                                  kiln_matmul(g, h, wh, 0, 0)));
    return kiln_matmul(g, h, v, 0, 0);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 400;
    if (steps < 50)
        steps = 50;
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_rng rng;
    kiln_rng_seed(&rng, 2026);
    kiln_set_logging_level(
        KILN_LOGGING_WARN); /* quiet, but say if the workspace grows */
    if (kiln_session_reserve_workspace_mb(s, g, 4) != KILN_OK)
        return fail(s, "reserve");
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAM);
    o.lr = 0.01f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &o);
    if (!opt)
        return fail(s, "optimizer");
    const float a[D] = {0.8f, -0.5f, 0.3f, 0.6f};
    kiln_tensor *xt[MAX_LEN];
    double window = 0, first_window = -1;
    int min_len = MAX_LEN, max_len = 0, min_batch = MAX_BATCH, max_batch = 0;
    printf("step  len  batch  loss (mean of the last 50 steps)\n");
    for (int step = 1; step <= steps; step++) {
        int len = 2 + (int)(kiln_rng_u32(&rng) % (MAX_LEN - 1));
        int batch = 4 + (int)(kiln_rng_u32(&rng) % (MAX_BATCH - 3));
        min_len = len < min_len ? len : min_len;
        max_len = len > max_len ? len : max_len;
        min_batch = batch < min_batch ? batch : min_batch;
        max_batch = batch > max_batch ? batch : max_batch;

        /* data of this step's shape */
        kiln_tensor *yt = kiln_tensor_new(KILN_F32, KILN_SHAPE(batch, 1));
        for (int t = 0; t < len; t++) {
            xt[t] = kiln_tensor_new(KILN_F32, KILN_SHAPE(batch, D));
            for (int i = 0; i < batch * D; i++)
                kiln_tensor_f32(xt[t])[i] =
                    (float)(2 * kiln_rng_uniform(&rng) - 1);
        }
        for (int i = 0; i < batch; i++) {
            double m = 0;
            for (int t = 0; t < len; t++)
                for (int k = 0; k < D; k++)
                    m += kiln_tensor_f32(xt[t])[i * D + k] * a[k];
            kiln_tensor_f32(yt)[i] = (float)(m / len);
        }

        /* a new graph for this step */
        kiln_graph_clear(g);
        kiln_node *xs[MAX_LEN];
        for (int t = 0; t < len; t++)
            xs[t] = kiln_input(g, "x_t", KILN_F32, KILN_SHAPE(batch, D));
        kiln_node *y = kiln_input(g, "y", KILN_F32, KILN_SHAPE(batch, 1));
        kiln_node *d = kiln_sub(g, unroll(g, xs, len, batch), y);
        kiln_node *loss = kiln_mean(g, kiln_mul(g, d, d), KILN_ALL_AXES, 0);
        kiln_status st = KILN_OK;
        for (int t = 0; t < len && st == KILN_OK; t++)
            st = kiln_feed(s, xs[t], xt[t]);
        if (st == KILN_OK)
            st = kiln_feed(s, y, yt);
        if (st == KILN_OK)
            st = kiln_backprop(s, g, loss);
        if (st == KILN_OK)
            st = kiln_optimizer_update(opt, g);
        for (int t = 0; t < len; t++)
            kiln_tensor_free(xt[t]);
        kiln_tensor_free(yt);
        if (st != KILN_OK)
            return fail(s, "step");

        window += kiln_node_value_f32(s, loss)[0];
        if (step % 50 == 0) {
            printf("%4d  %3d  %5d  %.5f\n", step, len, batch, window / 50);
            if (first_window < 0)
                first_window = window / 50;
            if (step + 50 > steps)
                printf("loss %.5f -> %.5f over %d steps; lengths %d..%d, "
                       "batches %d..%d, "
                       "%d session variables (parameters and Adam state)\n",
                       first_window, window / 50, step, min_len, max_len,
                       min_batch, max_batch, kiln_session_num_variables(s));
            window = 0;
        }
    }
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
