/* Recurrent cells as composites (torch.nn.LSTMCell and torch.nn.GRUCell,
   PyTorch's gate order and equations; Marian's RNN path): one matmul of
   the input and one of the hidden state over all the gates, the gates
   then sliced out of the [B, k * H] products; autodiff differentiates the
   decomposition. */
#include "graph/builders.h"

/* x [B, I] W^T (+ b) with W [k * H, I]: the gates' pre-activations. */
static kiln_node *gate_input(kiln_graph *g, kiln_node *x, kiln_node *w,
                             kiln_node *b)
{
    kiln_node *y = kiln_matmul(g, x, w, 0, 1);
    return b ? kiln_add(g, y, b) : y;
}

/* Gate k of the [B, n * H] pre-activations z. */
static kiln_node *gate(kiln_graph *g, kiln_node *z, int k, int64_t h)
{
    int64_t start[2] = {0, k * h}, stop[2] = {z->shape.d[0], (k + 1) * h};
    return kiln_slice(g, z, start, stop);
}

/* The shapes of a cell with n gates: x [B, I], h (and c) [B, H], w_ih
   [n H, I], w_hh [n H, H], biases [n H] or NULL. */
static int check_cell(kiln_graph *g, const char *fn, int n, kiln_node *x,
                      kiln_node *h, kiln_node *c, kiln_node *w_ih,
                      kiln_node *w_hh, kiln_node *b_ih, kiln_node *b_hh)
{
    kiln_node *all[6] = {x, h, w_ih, w_hh, c ? c : h, b_ih ? b_ih : h};
    for (int i = 0; i < 6; i++)
        if (!kiln_graph_check(g, fn, all[i]) || !check_f32(g, fn, all[i]))
            return 0;
    if (b_hh && (!kiln_graph_check(g, fn, b_hh) || !check_f32(g, fn, b_hh)))
        return 0;
    int64_t bsz = x->shape.d[0], hid = h->shape.ndim == 2 ? h->shape.d[1] : 0;
    kiln_shape wi = KILN_SHAPE(n * hid, x->shape.ndim == 2 ? x->shape.d[1] : 0);
    kiln_shape wh = KILN_SHAPE(n * hid, hid), bs = KILN_SHAPE(n * hid);
    int ok = x->shape.ndim == 2 && h->shape.ndim == 2 && h->shape.d[0] == bsz &&
             kiln_shape_equal(w_ih->shape, wi) &&
             kiln_shape_equal(w_hh->shape, wh) &&
             (!c || kiln_shape_equal(c->shape, h->shape)) &&
             (!b_ih || kiln_shape_equal(b_ih->shape, bs)) &&
             (!b_hh || kiln_shape_equal(b_hh->shape, bs));
    if (ok)
        return 1;
    /* every operand given, named with its shape */
    const char *names[7] = {"x", "h", "c", "w_ih", "w_hh", "b_ih", "b_hh"};
    kiln_node *given[7] = {x, h, c, w_ih, w_hh, b_ih, b_hh};
    char got[7 * (SHAPE_BUF + 8)] = "", b[SHAPE_BUF];
    size_t at = 0;
    for (int i = 0; i < 7 && at < sizeof got; i++)
        if (given[i])
            at += (size_t)snprintf(got + at, sizeof got - at, "%s%s %s",
                                   at ? ", " : "", names[i],
                                   S(given[i]->shape, b));
    kiln_graph_fail(g, KILN_ERR_SHAPE,
                    "%s: %s: want x [B,I], h [B,H]%s, w_ih [%dH,I], w_hh "
                    "[%dH,H] and biases [%dH] or NULL",
                    fn, got, c ? ", c [B,H]" : "", n, n, n);
    return 0;
}

kiln_status kiln_lstm_cell(kiln_graph *g, kiln_node *x, kiln_node *h,
                           kiln_node *c, kiln_node *w_ih, kiln_node *w_hh,
                           kiln_node *b_ih, kiln_node *b_hh, kiln_node **h_out,
                           kiln_node **c_out)
{
    const char *fn = "kiln_lstm_cell";
    if (!g)
        return kiln_null_arg(fn, "graph");
    if (!h_out || !c_out) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: h_out or c_out is NULL", fn);
        return g->status;
    }
    *h_out = *c_out = &g->poison;
    if (!kiln_graph_check(g, fn, c) ||
        !check_cell(g, fn, 4, x, h, c, w_ih, w_hh, b_ih, b_hh))
        return g->status;
    int64_t hid = h->shape.d[1];
    kiln_node *z =
        kiln_add(g, gate_input(g, x, w_ih, b_ih), gate_input(g, h, w_hh, b_hh));
    /* PyTorch's order: input, forget, cell (g), output */
    kiln_node *i = kiln_sigmoid(g, gate(g, z, 0, hid));
    kiln_node *f = kiln_sigmoid(g, gate(g, z, 1, hid));
    kiln_node *cand = kiln_tanh(g, gate(g, z, 2, hid));
    kiln_node *o = kiln_sigmoid(g, gate(g, z, 3, hid));
    kiln_node *c2 = kiln_add(g, kiln_mul(g, f, c), kiln_mul(g, i, cand));
    kiln_node *h2 = kiln_mul(g, o, kiln_tanh(g, c2));
    if (g->status == KILN_OK) {
        *h_out = h2;
        *c_out = c2;
    }
    return g->status;
}

kiln_node *kiln_gru_cell(kiln_graph *g, kiln_node *x, kiln_node *h,
                         kiln_node *w_ih, kiln_node *w_hh, kiln_node *b_ih,
                         kiln_node *b_hh)
{
    const char *fn = "kiln_gru_cell";
    if (!g)
        return kiln_null_graph(fn);
    if (!check_cell(g, fn, 3, x, h, NULL, w_ih, w_hh, b_ih, b_hh))
        return &g->poison;
    int64_t hid = h->shape.d[1];
    kiln_node *zi = gate_input(g, x, w_ih, b_ih);
    kiln_node *zh = gate_input(g, h, w_hh, b_hh);
    /* PyTorch's order: reset, update, new; the reset gate scales the
       hidden state's new-gate product, its bias included */
    kiln_node *r =
        kiln_sigmoid(g, kiln_add(g, gate(g, zi, 0, hid), gate(g, zh, 0, hid)));
    kiln_node *u =
        kiln_sigmoid(g, kiln_add(g, gate(g, zi, 1, hid), gate(g, zh, 1, hid)));
    kiln_node *n = kiln_tanh(g, kiln_add(g, gate(g, zi, 2, hid),
                                         kiln_mul(g, r, gate(g, zh, 2, hid))));
    /* (1 - u) n + u h = n + u (h - n) */
    return kiln_add(g, n, kiln_mul(g, u, kiln_sub(g, h, n)));
}
