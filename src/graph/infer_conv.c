/* Shape rules of the convolution ops (ops.def): conv, its input gradient
   conv_transpose and its weight gradient conv_weight_grad.  All three read
   the window attribute: stride, dilation, padding before and after, groups
   and the weight's spatial size (kernel) over the last nd dims of NC...
   tensors; conv_transpose also its output padding. */
#include "graph/builders.h"

#define WHY(...) kiln_infer_why(why, len, KILN_ERR_SHAPE, __VA_ARGS__)

/* The window's own settings are usable: nd spatial dims, strides and
   dilations and kernel sizes >= 1, paddings >= 0, groups >= 1, an output
   padding below the stride. */
static kiln_status window_ok(const kiln_window *w, char *why, size_t len)
{
    if (w->nd < 1 || w->nd > 3)
        return WHY("%d spatial dims (1 to 3)", w->nd);
    if (w->groups < 1)
        return WHY("groups %d must be positive", w->groups);
    for (int i = 0; i < w->nd; i++) {
        if (w->stride[i] < 1 || w->dilation[i] < 1 || w->kernel[i] < 1)
            return WHY("stride %d, dilation %d and kernel %d of dim %d must "
                       "be positive",
                       w->stride[i], w->dilation[i], w->kernel[i], i);
        if (w->pad_lo[i] < 0 || w->pad_hi[i] < 0)
            return WHY("padding %d, %d of dim %d must not be negative",
                       w->pad_lo[i], w->pad_hi[i], i);
        /* PyTorch also takes one below the dilation, but conv of the
           result would then not give the input's size back: its
           gradient could not be the conv it is */
        if (w->out_pad[i] < 0 ||
            (w->out_pad[i] && w->out_pad[i] >= w->stride[i]))
            return WHY("output padding %d of dim %d must be below the stride "
                       "%d",
                       w->out_pad[i], i, w->stride[i]);
    }
    return KILN_OK;
}

/* Output size of spatial dim i of a convolution over n positions, or -1
   when the dilated kernel is larger than the padded input. */
static int64_t conv_extent(int64_t n, const kiln_window *w, int i)
{
    int64_t span = (int64_t)w->dilation[i] * (w->kernel[i] - 1) + 1;
    int64_t padded = n + w->pad_lo[i] + w->pad_hi[i];
    return padded < span ? -1 : (padded - span) / w->stride[i] + 1;
}

/* Input size of spatial dim i whose convolution gives m positions, the
   output padding added: (m-1) s - lo - hi + d (k-1) + 1 + out_pad. */
static int64_t transpose_extent(int64_t m, const kiln_window *w, int i)
{
    int64_t steps;
    if (m < 1 || __builtin_mul_overflow(m - 1, (int64_t)w->stride[i], &steps))
        return -1;
    return steps - w->pad_lo[i] - w->pad_hi[i] +
           (int64_t)w->dilation[i] * (w->kernel[i] - 1) + 1 + w->out_pad[i];
}

/* Checks x [N, C, *S] (the activation side: conv's x, conv_transpose's
   dy) against the weight w [O, C/groups, *K]: ranks, kernel, channels. */
static kiln_status weight_ok(kiln_shape x, kiln_shape w, const kiln_window *win,
                             int transpose, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    int nd = win->nd, g = win->groups;
    if (x.ndim != nd + 2 || w.ndim != nd + 2)
        return WHY("input %s and weight %s must both have %d dims", S(x, b1),
                   S(w, b2), nd + 2);
    /* PyTorch refuses a convolution to no channels too */
    if (w.d[0] < 1)
        return WHY("weight %s has no %s channels", S(w, b2),
                   transpose ? "input" : "output");
    for (int i = 0; i < nd; i++)
        if (w.d[2 + i] != win->kernel[i])
            return WHY("weight %s: kernel size %lld of dim %d, the window "
                       "says %d",
                       S(w, b2), (long long)w.d[2 + i], i, win->kernel[i]);
    /* conv: x's channels are the weight's dim 1 times groups; transpose:
       dy's channels are the weight's dim 0 */
    int64_t c = x.d[1], want = transpose ? w.d[0] : w.d[1] * g;
    if (!transpose && c % g)
        return WHY("groups %d do not divide the input %s's %lld channels", g,
                   S(x, b1), (long long)c);
    if (c != want)
        return WHY("input %s has %lld channels, weight %s wants %lld%s",
                   S(x, b1), (long long)c, S(w, b2), (long long)want,
                   transpose || g == 1 ? "" : " (its dim 1 times groups)");
    if (w.d[0] % g)
        return WHY("groups %d do not divide the weight %s's %lld %s channels",
                   g, S(w, b2), (long long)w.d[0],
                   transpose ? "input" : "output");
    return KILN_OK;
}

/* f32 operands, a usable window and, but for the weight gradient (whose
   operands are x and dy), a weight that fits the activation operand. */
static kiln_status operands_ok(const kiln_node *n, char *why, size_t len)
{
    int fused = n->op == KILN_OP_CONV;
    if (n->n_in != 2 && !(fused && n->n_in == 3))
        return WHY("%d operands (x, w%s)", n->n_in, fused ? " and a bias" : "");
    if (n->at.win.flags & ~(fused ? KILN_WINDOW_RELU : 0))
        return WHY("window flags 0x%x", (unsigned)n->at.win.flags);
    kiln_status st = kiln_infer_f32(n, 0, n->n_in, why, len);
    if (st == KILN_OK)
        st = window_ok(&n->at.win, why, len);
    if (st == KILN_OK && n->op != KILN_OP_CONV_WGRAD)
        st = weight_ok(n->in[0]->shape, n->in[1]->shape, &n->at.win,
                       n->op == KILN_OP_CONV_TRANSPOSE, why, len);
    return st;
}

static kiln_status finish(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                          char *why, size_t len)
{
    char b[SHAPE_BUF];
    *dt = KILN_F32;
    if (!kiln_shape_valid(*s))
        return WHY("result %s is too large", S(*s, b));
    /* a batch that follows the symbolic size stays symbolic */
    s->sym = n->op == KILN_OP_CONV_WGRAD ? 0 : n->in[0]->shape.sym & 1u;
    return KILN_OK;
}

kiln_status kiln_infer_conv(const kiln_node *n, kiln_shape *s, kiln_dtype *dt,
                            char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    const kiln_window *win = &n->at.win;
    kiln_shape x = n->in[0]->shape, w = n->in[1]->shape;
    kiln_status st = operands_ok(n, why, len);
    if (st != KILN_OK)
        return st;
    if (n->n_in == 3 &&
        (n->in[2]->shape.ndim != 1 || n->in[2]->shape.d[0] != w.d[0]))
        return WHY("bias %s for weight %s: want [%lld]", S(n->in[2]->shape, b1),
                   S(w, b2), (long long)w.d[0]);
    *s = (kiln_shape){.ndim = x.ndim, .d = {x.d[0], w.d[0]}};
    for (int i = 0; i < win->nd; i++)
        if ((s->d[2 + i] = conv_extent(x.d[2 + i], win, i)) < 1)
            return WHY("input %s, weight %s: the kernel (dilated to %lld) is "
                       "larger than dim %d padded to %lld",
                       S(x, b1), S(w, b2),
                       (long long)win->dilation[i] * (win->kernel[i] - 1) + 1,
                       i,
                       (long long)x.d[2 + i] + win->pad_lo[i] + win->pad_hi[i]);
    return finish(n, s, dt, why, len);
}

kiln_status kiln_infer_conv_transpose(const kiln_node *n, kiln_shape *s,
                                      kiln_dtype *dt, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    const kiln_window *win = &n->at.win;
    kiln_shape dy = n->in[0]->shape, w = n->in[1]->shape;
    kiln_status st = operands_ok(n, why, len);
    if (st != KILN_OK)
        return st;
    int64_t c;
    if (__builtin_mul_overflow(w.d[1], (int64_t)win->groups, &c))
        return WHY("weight %s: too many channels", S(w, b2));
    *s = (kiln_shape){.ndim = dy.ndim, .d = {dy.d[0], c}};
    for (int i = 0; i < win->nd; i++)
        if ((s->d[2 + i] = transpose_extent(dy.d[2 + i], win, i)) < 1)
            return WHY("input %s, weight %s: output size %lld of dim %d is "
                       "not positive",
                       S(dy, b1), S(w, b2), (long long)s->d[2 + i], i);
    return finish(n, s, dt, why, len);
}

kiln_status kiln_infer_conv_wgrad(const kiln_node *n, kiln_shape *s,
                                  kiln_dtype *dt, char *why, size_t len)
{
    char b1[SHAPE_BUF], b2[SHAPE_BUF];
    const kiln_window *win = &n->at.win;
    kiln_shape x = n->in[0]->shape, dy = n->in[1]->shape;
    kiln_status st = operands_ok(n, why, len);
    if (st != KILN_OK)
        return st;
    int nd = win->nd, g = win->groups;
    if (x.ndim != nd + 2 || dy.ndim != nd + 2 || x.d[0] != dy.d[0] ||
        x.d[1] % g || dy.d[1] % g)
        return WHY("input %s and output gradient %s: %d-dim tensors with one "
                   "batch and channels that groups %d divide",
                   S(x, b1), S(dy, b2), nd + 2, g);
    *s = (kiln_shape){.ndim = x.ndim, .d = {dy.d[1], x.d[1] / g}};
    for (int i = 0; i < nd; i++) {
        s->d[2 + i] = win->kernel[i];
        if (conv_extent(x.d[2 + i], win, i) != dy.d[2 + i])
            return WHY("output gradient %s does not match the convolution of "
                       "input %s (dim %d)",
                       S(dy, b2), S(x, b1), i);
    }
    return finish(n, s, dt, why, len);
}
