/* Recurrent cells on the dynamic path (Marian style): every batch builds
   its own graph, an LSTM or GRU cell (kiln_lstm_cell, kiln_gru_cell)
   unrolled over as many steps as the batch's longest sequence.  The toy
   task: read a string of bits, 1 to 10 long, and say how many are ones
   (11 classes).  Sequences of different lengths share a batch: after a
   sequence's last bit its state is carried unchanged (a select on the
   step's mask), so the final state of every row is the one at its own
   end.  Prints the cross-entropy as it falls and the accuracy on fresh
   batches.

     rnn_dynamic [lstm|gru] [steps]     (default: both cells, 300 steps) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

enum { BATCH = 32, MAX_LEN = 10, HIDDEN = 24, CLASSES = MAX_LEN + 1 };

typedef struct batch {
    int len[BATCH], t_max;
    float bits[MAX_LEN][BATCH]; /* bit t of each row (0 past its end) */
    float mask[MAX_LEN][BATCH]; /* 1 while t < the row's length */
    int32_t ones[BATCH];        /* the label */
} batch;

static void draw_batch(kiln_rng *r, batch *b)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < BATCH; i++) {
        b->len[i] = 1 + (int)(kiln_rng_uniform(r) * MAX_LEN);
        if (b->len[i] > b->t_max)
            b->t_max = b->len[i];
        for (int t = 0; t < b->len[i]; t++) {
            b->bits[t][i] = kiln_rng_uniform(r) < 0.5 ? 1.0f : 0.0f;
            b->mask[t][i] = 1.0f;
            b->ones[i] += (int32_t)b->bits[t][i];
        }
    }
}

static kiln_node *param(kiln_graph *g, const char *name, kiln_shape s)
{
    float k = 1.0f / sqrtf((float)HIDDEN); /* PyTorch's cell init */
    return kiln_variable(g, name, KILN_F32, s, kiln_init_uniform(-k, k));
}

/* The logits [BATCH, CLASSES] of batch b: the cell unrolled b->t_max
   steps, then a linear head. */
static kiln_node *build_logits(kiln_graph *g, const batch *b, int lstm)
{
    int gates = lstm ? 4 : 3;
    kiln_node *w_ih = param(g, "w_ih", KILN_SHAPE(gates * HIDDEN, 1));
    kiln_node *w_hh = param(g, "w_hh", KILN_SHAPE(gates * HIDDEN, HIDDEN));
    kiln_node *b_ih = param(g, "b_ih", KILN_SHAPE(gates * HIDDEN));
    kiln_node *b_hh = param(g, "b_hh", KILN_SHAPE(gates * HIDDEN));
    kiln_node *h = kiln_fill(g, KILN_SHAPE(BATCH, HIDDEN), 0.0f), *c = h;
    for (int t = 0; t < b->t_max; t++) {
        kiln_node *x =
            kiln_constant(g, KILN_F32, KILN_SHAPE(BATCH, 1), b->bits[t]);
        kiln_node *m =
            kiln_constant(g, KILN_F32, KILN_SHAPE(BATCH, 1), b->mask[t]);
        kiln_node *h2, *c2 = c;
        if (lstm)
            kiln_lstm_cell(g, x, h, c, w_ih, w_hh, b_ih, b_hh, &h2, &c2);
        else
            h2 = kiln_gru_cell(g, x, h, w_ih, w_hh, b_ih, b_hh);
        h = kiln_select(g, m, h2, h);
        c = kiln_select(g, m, c2, c);
    }
    kiln_node *w = param(g, "w_out", KILN_SHAPE(HIDDEN, CLASSES));
    kiln_node *bias = param(g, "b_out", KILN_SHAPE(CLASSES));
    return kiln_affine(g, h, w, bias);
}

static int fail(kiln_session *s, kiln_graph *g, const char *what)
{
    fprintf(stderr, "rnn_dynamic: %s: %s\n", what,
            kiln_graph_status(g) != KILN_OK ? kiln_graph_error(g)
                                            : kiln_session_error(s));
    return 1;
}

/* Share of rows of 10 fresh batches whose largest logit is the count. */
static double accuracy(kiln_session *s, kiln_graph *g, kiln_rng *r, int lstm)
{
    int right = 0;
    for (int k = 0; k < 10; k++) {
        batch b;
        draw_batch(r, &b);
        kiln_graph_clear(g);
        kiln_node *pred = kiln_argmax(g, build_logits(g, &b, lstm), 1);
        if (kiln_forward(s, g) != KILN_OK)
            return -1;
        kiln_tensor *t = kiln_node_value(s, pred); /* a copy: ours to free */
        if (!t)
            return -1;
        const int32_t *p = kiln_tensor_data(t);
        for (int i = 0; i < BATCH; i++)
            right += p[i] == b.ones[i];
        kiln_tensor_free(t);
    }
    return right / (10.0 * BATCH);
}

static int train(int lstm, int steps)
{
    const char *name = lstm ? "lstm" : "gru";
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAM);
    o.lr = 0.01f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &o);
    kiln_rng r;
    kiln_rng_seed(&r, 12);
    double first = 0, last = 0;
    int window = steps / 10 > 0 ? steps / 10 : 1;
    for (int step = 0; step < steps; step++) {
        batch b;
        draw_batch(&r, &b);
        kiln_graph_clear(g);
        kiln_node *labels =
            kiln_constant(g, KILN_I32, KILN_SHAPE(BATCH), b.ones);
        kiln_node *loss =
            kiln_cross_entropy_loss(g, build_logits(g, &b, lstm), labels,
                                    KILN_REDUCE_MEAN, KILN_IGNORE_NONE, 0.0f);
        if (kiln_backprop(s, g, loss) != KILN_OK)
            return fail(s, g, "backprop");
        double v = kiln_node_value_f32(s, loss)[0];
        if (kiln_optimizer_update(opt, g) != KILN_OK)
            return fail(s, g, "update");
        first += step < window ? v / window : 0;
        last += step >= steps - window ? v / window : 0;
        if (step % 50 == 0 || step == steps - 1)
            printf("%s step %d: loss %.4f (longest sequence %d)\n", name, step,
                   v, b.t_max);
    }
    double acc = accuracy(s, g, &r, lstm);
    printf("%s: mean loss of the first %d steps %.4f, of the last %d %.4f; "
           "accuracy %.3f\n",
           name, window, first, window, last, acc);
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
    kiln_session_free(s);
    return acc < 0;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "both";
    int steps = argc > 2 ? atoi(argv[2]) : 300;
    if (steps < 1 || (strcmp(which, "lstm") && strcmp(which, "gru") &&
                      strcmp(which, "both"))) {
        fprintf(stderr, "usage: rnn_dynamic [lstm|gru|both] [steps >= 1]\n");
        return 2;
    }
    int bad = 0;
    if (strcmp(which, "gru"))
        bad |= train(1, steps);
    if (strcmp(which, "lstm"))
        bad |= train(0, steps);
    return bad;
}
