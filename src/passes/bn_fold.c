/* Inference passes (kiln_compile_options.inference).

   eval_mode: the function runs in evaluation only.  The mode leaf becomes
   the constant 0, and a select on the mode (batch norm's running
   statistics' update) takes its evaluation branch, so that the update and
   the batch statistics it reads die.

   bn_fold: batch norm in evaluation after a convolution is one
   convolution.  With s = gamma / sqrt(running_var + eps),
     bn(conv(x, w, b)) = conv(x, w * s, (b - running_mean) * s + beta)
   per output channel; the new weights and bias are a few small nodes over
   the variables, computed at each run (they may change between runs),
   instead of two passes over the activations.  It fires where the
   statistics' mode is the constant 0 (eval_mode ran) and the conv's value
   is read by nothing but the batch norm (else both would be needed), and
   before conv_fuse, so that a relu after the batch norm then fuses into
   the folded conv. */
#include <stdlib.h>

#include "graph/conv.h"
#include "passes/passes.h"

static int is_mode(const kiln_node *n)
{
    return n->op == KILN_OP_MODE ||
           (n->op == KILN_OP_CAST && n->in[0]->op == KILN_OP_MODE);
}

static kiln_node *eval_mode(kiln_rewriter *rw, const kiln_node *old,
                            kiln_node **in)
{
    if (old->debug)
        return NULL;
    if (old->op == KILN_OP_MODE) {
        int32_t zero = 0;
        return kiln_constant(rw->out->g, KILN_I32, KILN_SCALAR, &zero);
    }
    if (old->op == KILN_OP_SELECT && is_mode(old->in[0]) &&
        in[2]->dtype == old->dtype &&
        kiln_shape_equal(in[2]->shape, old->shape))
        return in[2];
    return NULL;
}

kiln_status kiln_pass_eval_mode(const kiln_unit *in, kiln_unit *out,
                                const kiln_compile_options *opt,
                                kiln_eval_fn eval)
{
    return kiln_rewrite(in, out, opt, eval, NULL, eval_mode, NULL);
}

static int is_zero_i32(const kiln_node *n)
{
    return n->op == KILN_OP_CONSTANT && n->dtype == KILN_I32 &&
           kiln_shape_numel(n->shape) == 1 && !*(const int32_t *)n->at.data;
}

/* norm is batch norm in evaluation of a conv only it reads. */
static int foldable(const kiln_node *norm, const int *uses)
{
    if (norm->op != KILN_OP_NORM || norm->debug || norm->at.norm.axis != 1 ||
        norm->at.norm.groups != 0)
        return 0;
    const kiln_node *c = norm->in[0], *st = norm->in[1];
    return c->op == KILN_OP_CONV && !c->debug &&
           !(c->at.win.flags & KILN_WINDOW_RELU) &&
           st->op == KILN_OP_NORM_STATS && st->n_in == 4 && st->in[0] == c &&
           is_zero_i32(st->in[3]) && !st->debug && uses[c->id] == 2 &&
           uses[st->id] == 1;
}

/* s [O] reshaped to broadcast over w's first axis. */
static kiln_node *per_channel(kiln_graph *g, kiln_node *s, kiln_shape like)
{
    kiln_shape sh = like;
    for (int d = 1; d < sh.ndim; d++)
        sh.d[d] = 1;
    sh.sym = 0;
    return kiln_reshape(g, s, sh);
}

static kiln_node *fold(kiln_rewriter *rw, const kiln_node *old, kiln_node **in)
{
    const int *uses = rw->state;
    if (!foldable(old, uses))
        return NULL;
    kiln_graph *g = rw->out->g;
    const kiln_node *c = old->in[0], *st = old->in[1];
    kiln_node **m = rw->map;
    kiln_node *x = m[c->in[0]->id], *w = m[c->in[1]->id];
    kiln_node *mean = m[st->in[1]->id], *var = m[st->in[2]->id];
    kiln_node *s = kiln_div(
        g, in[2],
        kiln_sqrt(g, kiln_add(g, var, kiln_scalar(g, old->at.norm.eps))));
    kiln_node *b =
        c->n_in > 2 ? kiln_sub(g, m[c->in[2]->id], mean) : kiln_neg(g, mean);
    kiln_node *y = kiln_conv_fused(
        g, x, kiln_mul(g, w, per_channel(g, s, w->shape)),
        kiln_add(g, kiln_mul(g, b, s), in[3]), &c->at.win, NULL);
    y->name = kiln_graph_strdup(g, c->name);
    return y;
}

kiln_status kiln_pass_bn_fold(const kiln_unit *in, kiln_unit *out,
                              const kiln_compile_options *opt,
                              kiln_eval_fn eval)
{
    int *uses = kiln_unit_uses(in);
    kiln_status s = KILN_ERR_MEMORY;
    if (uses)
        s = kiln_rewrite(in, out, opt, eval, NULL, fold, uses);
    else
        kiln_graph_fail(out->g, s, "kiln_compile: out of memory");
    free(uses);
    return s;
}
