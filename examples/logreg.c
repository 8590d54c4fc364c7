/* Nervana graph's logistic regression, part 1, with named axes.
 *
 * Axes C (4 features) and the batch axis N (128); X [C, N] with the batch
 * axis last, Y [N], W on the axis C - 1 so that dot(W, X) contracts C.
 * The loss is the binary cross-entropy summed over everything and divided
 * by the batch size; each step assigns W - alpha dL/dW / tensor_size(Y_hat).
 * Data: 10 mini-batches from a two-class Gaussian mixture (seed 1), trained
 * for 10 epochs with alpha = 5 / (1 + epoch).  Prints W and the loss per
 * step, then the signs of W and of the difference of the class means, and
 * W . mean for each mean.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kiln.h"

enum { C = 4, N = 128, BATCHES = 10, EPOCHS = 10 };

/* One mini-batch from the mixture, laid out features x N (batch last). */
static void gen_batch(kiln_mixture *m, kiln_tensor *x, kiln_tensor *y)
{
    float rows[N * C];
    int32_t labels[N];
    kiln_mixture_batch(m, N, rows, labels);
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < C; c++)
            kiln_tensor_f32(x)[c * N + i] = rows[i * C + c];
        kiln_tensor_f32(y)[i] = (float)labels[i];
    }
}

int main(void)
{
    /* ax = ng.make_name_scope("ax"): in C, a struct of axes. */
    struct {
        kiln_axis N, C;
    } ax = {kiln_axis_make("N", N, 1), kiln_axis_make("C", C, 0)};

    kiln_graph *g = kiln_graph_new();
    kiln_ax *alpha = kiln_ax_placeholder(g, "alpha", KILN_NO_AXES);
    kiln_ax *X = kiln_ax_placeholder(g, "X", KILN_AXES(ax.C, ax.N));
    kiln_ax *Y = kiln_ax_placeholder(g, "Y", KILN_AXES(ax.N));
    kiln_ax *W = kiln_ax_variable(g, "W", KILN_AXES(kiln_axis_dual(ax.C, -1)),
                                  kiln_init_zeros());

    kiln_ax *Y_hat = kiln_ax_sigmoid(g, kiln_ax_dot(g, W, X));
    kiln_axes scalar = KILN_NO_AXES;
    kiln_ax *L =
        kiln_ax_div(g, kiln_ax_cross_entropy_binary(g, Y_hat, Y, &scalar),
                    kiln_ax_batch_size(g, Y_hat));
    kiln_ax *grad = kiln_ax_deriv(g, L, W);
    kiln_ax *update =
        kiln_ax_assign(g, W,
                       kiln_ax_sub(g, W,
                                   kiln_ax_div(g, kiln_ax_mul(g, alpha, grad),
                                               kiln_ax_tensor_size(g, Y_hat))));
    if (kiln_graph_status(g) != KILN_OK) {
        fprintf(stderr, "logreg: %s\n", kiln_graph_error(g));
        return 1;
    }

    kiln_session *s = kiln_session_new(NULL);
    kiln_ax *results[3] = {L, W, update}, *placeholders[3] = {alpha, X, Y};
    kiln_computation *update_fun =
        kiln_computation_new(s, g, results, 3, placeholders, 3);

    kiln_mixture *mix = kiln_mixture_new((const double[]){0.5, 0.5}, 2, C, 1);
    kiln_tensor *xs[BATCHES], *ys[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        xs[b] = kiln_tensor_new(KILN_F32, KILN_SHAPE(C, N));
        ys[b] = kiln_tensor_new(KILN_F32, KILN_SHAPE(N));
        gen_batch(mix, xs[b], ys[b]);
    }
    kiln_tensor *a = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    float w[C] = {0};
    for (int i = 0; i < EPOCHS; i++) {
        for (int b = 0; b < BATCHES; b++) {
            kiln_tensor_f32(a)[0] = 5.0f / (float)(1 + i);
            kiln_tensor *in[3] = {a, xs[b], ys[b]};
            if (kiln_computation_call(update_fun, in) != KILN_OK) {
                fprintf(stderr, "logreg: %s\n", kiln_session_error(s));
                return 1;
            }
            const float *wv =
                kiln_tensor_f32(kiln_computation_result(update_fun, 1));
            for (int c = 0; c < C; c++)
                w[c] = wv[c];
            printf("W: [%.6f %.6f %.6f %.6f], loss %.6f\n", w[0], w[1], w[2],
                   w[3], kiln_computation_scalar(update_fun, 0));
        }
    }
    const float *m0 = kiln_mixture_mean(mix, 0),
                *m1 = kiln_mixture_mean(mix, 1);
    double d0 = 0, d1 = 0;
    printf("sign(W):             ");
    for (int c = 0; c < C; c++) {
        d0 += w[c] * m0[c];
        d1 += w[c] * m1[c];
        printf(" %c", w[c] >= 0 ? '+' : '-');
    }
    printf("\nsign(mean1 - mean0):");
    for (int c = 0; c < C; c++)
        printf(" %c", m1[c] - m0[c] >= 0 ? '+' : '-');
    printf("\nW . mean0 = %.4f, W . mean1 = %.4f\n", d0, d1);

    for (int b = 0; b < BATCHES; b++) {
        kiln_tensor_free(xs[b]);
        kiln_tensor_free(ys[b]);
    }
    kiln_tensor_free(a);
    kiln_mixture_free(mix);
    kiln_computation_free(update_fun);
    kiln_session_free(s);
    kiln_graph_free(g);
    return 0;
}
