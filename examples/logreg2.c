/* Nervana graph's logistic regression, part 2, with named axes.
 *
 * Features on two axes W (4) and H (1), the batch axis N (128); X is
 * [W, H, N], the weight has axes (W - 1, H - 1) and a scalar bias b is
 * added.  The updates are built over L's variables (found by
 * kiln_ax_variables) and grouped with kiln_ax_doall; a second computation
 * on the same session evaluates the loss on 4 held-out batches.  Prints the
 * variables' names, the starting average validation loss, then W, b and
 * the average validation loss after each of 10 epochs, and finally
 * the signs of W and of mean1 - mean0 and W . mean + b for each mean.
 *
 * The average is the document's avg_loss: the sum of the per-batch mean
 * losses divided by the batch length.
 *
 * Flags: --epochs N (10), --seed N (1), --better: plain SGD on the mean
 * loss, v - alpha dL/dv, instead of the document's v - alpha dL/dv /
 * batch_size (L is already a mean, so the document's step is 128 times
 * smaller and the loss falls by a few percent in 10 epochs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

enum { AW = 4, AH = 1, N = 128, BATCHES = 10, EVAL_BATCHES = 4, MAX_VARS = 8 };

/* One mini-batch from the mixture, laid out W x H x N (batch last). */
static void gen_batch(kiln_mixture *m, kiln_tensor *x, kiln_tensor *y)
{
    float rows[N * AW * AH];
    int32_t labels[N];
    kiln_mixture_batch(m, N, rows, labels);
    for (int i = 0; i < N; i++) {
        for (int f = 0; f < AW * AH; f++)
            kiln_tensor_f32(x)[f * N + i] = rows[i * AW * AH + f];
        kiln_tensor_f32(y)[i] = (float)labels[i];
    }
}

static kiln_tensor **gen_data(kiln_mixture *m, int n, kiln_tensor **ys)
{
    kiln_tensor **xs = calloc((size_t)n, sizeof *xs);
    for (int b = 0; b < n; b++) {
        xs[b] = kiln_tensor_new(KILN_F32, KILN_SHAPE(AW, AH, N));
        ys[b] = kiln_tensor_new(KILN_F32, KILN_SHAPE(N));
        gen_batch(m, xs[b], ys[b]);
    }
    return xs;
}

/* The document's avg_loss over the held-out batches. */
static double avg_loss(kiln_computation *eval_fun, kiln_tensor **xs,
                       kiln_tensor **ys)
{
    double total = 0;
    for (int b = 0; b < EVAL_BATCHES; b++) {
        kiln_tensor *in[2] = {xs[b], ys[b]};
        if (kiln_computation_call(eval_fun, in) != KILN_OK)
            return -1;
        total += kiln_computation_scalar(eval_fun, 0);
    }
    return total / N;
}

int main(int argc, char **argv)
{
    int epochs = 10, seed = 1, better = 0;
    for (int i = 1; i < argc; i++) {
        int has_value = i + 1 < argc;
        if (!strcmp(argv[i], "--better"))
            better = 1;
        else if (!strcmp(argv[i], "--epochs") && has_value)
            epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && has_value)
            seed = atoi(argv[++i]);
        else {
            fprintf(stderr, "logreg2: unknown or incomplete option '%s'\n",
                    argv[i]);
            return 1;
        }
    }
    struct {
        kiln_axis W, H, N;
    } ax = {kiln_axis_make("W", AW, 0), kiln_axis_make("H", AH, 0),
            kiln_axis_make("N", N, 1)};

    kiln_graph *g = kiln_graph_new();
    kiln_ax *alpha = kiln_ax_placeholder(g, "alpha", KILN_NO_AXES);
    kiln_ax *X = kiln_ax_placeholder(g, "X", KILN_AXES(ax.W, ax.H, ax.N));
    kiln_ax *Y = kiln_ax_placeholder(g, "Y", KILN_AXES(ax.N));
    kiln_ax *W = kiln_ax_variable(
        g, "W", KILN_AXES(kiln_axis_dual(ax.W, -1), kiln_axis_dual(ax.H, -1)),
        kiln_init_zeros());
    kiln_ax *b = kiln_ax_variable(g, "b", KILN_NO_AXES, kiln_init_zeros());

    kiln_ax *Y_hat =
        kiln_ax_sigmoid(g, kiln_ax_add(g, kiln_ax_dot(g, W, X), b));
    kiln_axes scalar = KILN_NO_AXES;
    kiln_ax *L =
        kiln_ax_div(g, kiln_ax_cross_entropy_binary(g, Y_hat, Y, &scalar),
                    kiln_ax_batch_size(g, Y_hat));

    kiln_ax *vars[MAX_VARS], *updates[MAX_VARS];
    int n_vars = kiln_ax_variables(L, vars, MAX_VARS);
    printf("[");
    for (int i = 0; i < n_vars; i++)
        printf("%s'%s'", i ? ", " : "", kiln_node_name(kiln_ax_node(vars[i])));
    printf("]\n");
    for (int i = 0; i < n_vars; i++) {
        kiln_ax *step = kiln_ax_mul(g, alpha, kiln_ax_deriv(g, L, vars[i]));
        if (!better)
            step = kiln_ax_div(g, step, kiln_ax_batch_size(g, Y_hat));
        updates[i] = kiln_ax_assign(g, vars[i], kiln_ax_sub(g, vars[i], step));
    }
    kiln_ax *all_updates = kiln_ax_doall(g, updates, n_vars);
    if (kiln_graph_status(g) != KILN_OK) {
        fprintf(stderr, "logreg2: %s\n", kiln_graph_error(g));
        return 1;
    }

    kiln_session *s = kiln_session_new(NULL);
    kiln_ax *res[4] = {L, W, b, all_updates}, *ph[3] = {alpha, X, Y};
    kiln_computation *update_fun = kiln_computation_new(s, g, res, 4, ph, 3);
    kiln_computation *eval_fun = kiln_computation_new(s, g, &L, 1, ph + 1, 2);

    kiln_mixture *mix = kiln_mixture_new((const double[]){0.5, 0.5}, 2, AW * AH,
                                         (uint64_t)seed);
    kiln_tensor *ys[BATCHES], *eys[EVAL_BATCHES];
    kiln_tensor **xs = gen_data(mix, BATCHES, ys);
    kiln_tensor **exs = gen_data(mix, EVAL_BATCHES, eys);

    printf("Starting avg loss: %.6f\n", avg_loss(eval_fun, exs, eys));
    kiln_tensor *a = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    float w[AW * AH] = {0}, bias = 0;
    for (int i = 0; i < epochs; i++) {
        for (int k = 0; k < BATCHES; k++) {
            kiln_tensor_f32(a)[0] = 5.0f / (float)(1 + i);
            kiln_tensor *in[3] = {a, xs[k], ys[k]};
            if (kiln_computation_call(update_fun, in) != KILN_OK) {
                fprintf(stderr, "logreg2: %s\n", kiln_session_error(s));
                return 1;
            }
        }
        memcpy(w, kiln_tensor_f32(kiln_computation_result(update_fun, 1)),
               sizeof w);
        bias = kiln_computation_scalar(update_fun, 2);
        double loss = avg_loss(eval_fun, exs, eys);
        if (loss < 0) {
            fprintf(stderr, "logreg2: %s\n", kiln_session_error(s));
            return 1;
        }
        printf("After epoch %d: W: [%.6f %.6f %.6f %.6f], b: %.6f, avg loss "
               "%.6f\n",
               i, w[0], w[1], w[2], w[3], bias, loss);
    }
    const float *m0 = kiln_mixture_mean(mix, 0),
                *m1 = kiln_mixture_mean(mix, 1);
    double d0 = bias, d1 = bias;
    printf("sign(W):             ");
    for (int f = 0; f < AW * AH; f++) {
        d0 += w[f] * m0[f];
        d1 += w[f] * m1[f];
        printf(" %c", w[f] >= 0 ? '+' : '-');
    }
    printf("\nsign(mean1 - mean0):");
    for (int f = 0; f < AW * AH; f++)
        printf(" %c", m1[f] - m0[f] >= 0 ? '+' : '-');
    printf("\nW . mean0 + b = %.4f, W . mean1 + b = %.4f\n", d0, d1);

    for (int k = 0; k < BATCHES; k++) {
        kiln_tensor_free(xs[k]);
        kiln_tensor_free(ys[k]);
    }
    for (int k = 0; k < EVAL_BATCHES; k++) {
        kiln_tensor_free(exs[k]);
        kiln_tensor_free(eys[k]);
    }
    free(xs);
    free(exs);
    kiln_tensor_free(a);
    kiln_mixture_free(mix);
    kiln_computation_free(update_fun);
    kiln_computation_free(eval_fun);
    kiln_session_free(s);
    kiln_graph_free(g);
    return 0;
}
