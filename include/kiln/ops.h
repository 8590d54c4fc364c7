/* Kiln: the ops (builders that add a node to a graph).
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_OPS_H
#define KILN_OPS_H

#include <limits.h>

#include "kiln/elementwise.h"
#include "kiln/graph.h"

KILN_DECLS_BEGIN

/* ---------------------------------------------- elementwise */

/* The unary and binary elementwise ops (kiln_exp, kiln_add, ...) are
   declared in kiln/elementwise.h, which the build writes from their table
   (src/graph/elementwise.def). */
/* x * s for a float s (a constant scalar broadcast). */
kiln_node *kiln_scale(kiln_graph *g, kiln_node *x, float s);
/* gelu, tanh approximation: 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))). */
kiln_node *kiln_gelu(kiln_graph *g, kiln_node *x);
/* gelu, exact form: 0.5x(1+erf(x/sqrt 2)). */
kiln_node *kiln_gelu_erf(kiln_graph *g, kiln_node *x);
/* where(cond != 0, a, b), all three broadcast together. */
kiln_node *kiln_select(kiln_graph *g, kiln_node *cond, kiln_node *a,
                       kiln_node *b);

/* ---------------------------------------------- reductions */

/* Sum / max / mean over the axes in the mask; keepdims keeps them as size 1.
   KILN_ALL_AXES reduces everything. */
kiln_node *kiln_sum(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims);
kiln_node *kiln_reduce_max(kiln_graph *g, kiln_node *x, unsigned axes,
                           int keepdims);
kiln_node *kiln_mean(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims);
/* Index of the largest element along axis, or of the first NaN (i32, axis
   removed); no gradient. */
kiln_node *kiln_argmax(kiln_graph *g, kiln_node *x, int axis);

/* ---------------------------------------------- movement */

/* Same data, new shape (numel must match; one dimension may be -1). */
kiln_node *kiln_reshape(kiln_graph *g, kiln_node *x, kiln_shape shape);
/* Output axis i is input axis perm[i]; perm has ndim entries. */
kiln_node *kiln_permute(kiln_graph *g, kiln_node *x, const int *perm);
/* Swaps the last two axes. */
kiln_node *kiln_transpose(kiln_graph *g, kiln_node *x);
/* numpy broadcast of x to shape. */
kiln_node *kiln_broadcast_to(kiln_graph *g, kiln_node *x, kiln_shape shape);
/* nGraph Broadcast: the output has shape; the axes in new_axes are new and
   the remaining ones are x's, in order. */
kiln_node *kiln_broadcast(kiln_graph *g, kiln_node *x, kiln_shape shape,
                          unsigned new_axes);
/* x[start[i]:stop[i]] on every axis (negative values count from the end). */
kiln_node *kiln_slice(kiln_graph *g, kiln_node *x, const int64_t *start,
                      const int64_t *stop);
/* Concatenation of n nodes along axis. */
kiln_node *kiln_concat(kiln_graph *g, kiln_node *const *xs, int n, int axis);
/* Pads lo[i] before and hi[i] after every axis with value. */
kiln_node *kiln_pad(kiln_graph *g, kiln_node *x, const int64_t *lo,
                    const int64_t *hi, float value);

/* ---------------------------------------------- contraction */

/* Matrix product of the last two axes, leading (batch) axes broadcast;
   trans_a/trans_b transpose an operand's last two axes. 1-D operands are not
   accepted: reshape them. */
kiln_node *kiln_matmul(kiln_graph *g, kiln_node *a, kiln_node *b, int trans_a,
                       int trans_b);
/* nGraph Dot: contracts the last n axes of a with the first n of b. */
kiln_node *kiln_dot(kiln_graph *g, kiln_node *a, kiln_node *b, int n);

/* ---------------------------------------------- conversion */

/* i32 labels -> f32 one-hot with a new last axis of size depth; no gradient.
   Labels outside [0, depth) give a zero row. */
kiln_node *kiln_one_hot(kiln_graph *g, kiln_node *labels, int depth);
/* Converts between f32 and i32 (truncation toward zero). */
kiln_node *kiln_cast(kiln_graph *g, kiln_node *x, kiln_dtype dt);
/* Identity in the forward pass; blocks gradients. */
kiln_node *kiln_stop_gradient(kiln_graph *g, kiln_node *x);

/* ---------------------------------------------- composites */

/* Numerically stable softmax / log-softmax along axis (negative counts from
   the end); f32 only, a bad axis poisons the graph. */
kiln_node *kiln_softmax(kiln_graph *g, kiln_node *x, int axis);
kiln_node *kiln_log_softmax(kiln_graph *g, kiln_node *x, int axis);
/* x W + b, with b broadcast over rows. */
kiln_node *kiln_affine(kiln_graph *g, kiln_node *x, kiln_node *w, kiln_node *b);
/* nGraph's clipped cross-entropy: -Sum(Log(Maximum(p, exp(log_min))) *
   onehot) / n, with n an f32 scalar node (e.g. the batch size as an input);
   any other n poisons the graph. */
kiln_node *kiln_cross_entropy(kiln_graph *g, kiln_node *probs,
                              kiln_node *onehot, kiln_node *n, float log_min);
/* Mean over the batch of -log softmax(logits)[label]; labels i32 [N],
   logits f32 [N, C].  NaN for N = 0.  A label outside [0, C) is a run-time
   error (KILN_ERR_ARG from kiln_run / kiln_forward / kiln_backward). */
kiln_node *kiln_softmax_cross_entropy(kiln_graph *g, kiln_node *logits,
                                      kiln_node *labels);
/* How a loss combines its per-sample terms. */
typedef enum kiln_reduction {
    KILN_REDUCE_MEAN,
    KILN_REDUCE_SUM,
    KILN_REDUCE_NONE /* one loss per sample (kiln_cross_entropy_loss) */
} kiln_reduction;
/* kiln_softmax_cross_entropy with a choice of mean or sum over the batch. */
kiln_node *kiln_softmax_cross_entropy_reduce(kiln_graph *g, kiln_node *logits,
                                             kiln_node *labels,
                                             kiln_reduction reduction);
/* ignore_index of kiln_cross_entropy_loss that ignores no label. */
#define KILN_IGNORE_NONE INT_MIN
/* torch.nn.functional.cross_entropy(logits [N, C], labels i32 [N],
   reduction, ignore_index, label_smoothing): rows whose label is
   ignore_index count for nothing (0 under KILN_REDUCE_NONE; the mean is
   over the other rows, NaN if none); label_smoothing in [0, 1] mixes in
   the uniform target as PyTorch.  A label neither ignored nor in [0, C) is
   a run-time error.  With KILN_IGNORE_NONE and no smoothing a mean or sum
   is the fused kiln_softmax_cross_entropy_reduce.  Bad shapes, dtypes or
   arguments poison the graph. */
kiln_node *kiln_cross_entropy_loss(kiln_graph *g, kiln_node *logits,
                                   kiln_node *labels, kiln_reduction reduction,
                                   int ignore_index, float label_smoothing);
/* PopXL's nll_loss_with_softmax_grad: from probabilities probs [N, C] (a
   softmax output) and i32 labels [N], *loss = mean(-log probs[label]) and
   *dlogits = (probs - onehot(labels)) / N, the loss's gradient with respect
   to the logits behind the softmax.  A label outside [0, C) is a run-time
   error.  KILN_OK or the graph's error (both outputs poisoned). */
kiln_status kiln_nll_loss_with_softmax_grad(kiln_graph *g, kiln_node *probs,
                                            kiln_node *labels, kiln_node **loss,
                                            kiln_node **dlogits);
/* Mean of -(y log p + (1-y) log(1-p)), p clipped to [eps, 1-eps]. */
kiln_node *kiln_binary_cross_entropy(kiln_graph *g, kiln_node *p, kiln_node *y);

/* ---------------------------------------------- convolution */

/* Padding: the same output size as the input (stride 1), the total
   dilation * (kernel - 1) split as PyTorch does, the odd one after. */
#define KILN_PAD_SAME 1u
/* relu of the result (bias added), fused into conv1d and conv2d */
#define KILN_CONV_RELU 2u

/* Settings of a convolution, one entry per spatial dim (conv1d reads entry
   0); a zero stride, dilation or groups means 1, so a zeroed struct (or a
   NULL pointer) is PyTorch's defaults.  padding is added before and after
   each dim; output_padding is conv_transpose2d's extra size after. */
typedef struct kiln_conv_params {
    int stride[2];
    int padding[2];
    int dilation[2];
    int output_padding[2];
    int groups;
    unsigned flags; /* KILN_PAD_SAME, KILN_CONV_RELU */
} kiln_conv_params;

/* PyTorch's conv2d: x [N, C, H, W], w [O, C/groups, kh, kw], bias [O] or
   NULL, p NULL for the defaults; y [N, O, H', W'].  Mismatched channels,
   groups not dividing them, a kernel larger than the padded input or a
   negative setting poison the graph with a message naming the shapes. */
kiln_node *kiln_conv2d(kiln_graph *g, kiln_node *x, kiln_node *w,
                       kiln_node *bias, const kiln_conv_params *p);
/* PyTorch's conv1d: x [N, C, L], w [O, C/groups, k]; as kiln_conv2d. */
kiln_node *kiln_conv1d(kiln_graph *g, kiln_node *x, kiln_node *w,
                       kiln_node *bias, const kiln_conv_params *p);
/* PyTorch's conv_transpose2d: x [N, C, H, W], w [C, O/groups, kh, kw],
   bias [O] or NULL; y [N, O, (H-1)s - 2p + d(kh-1) + 1 + output_padding,
   ...].  output_padding must be below the stride; errors as
   kiln_conv2d (KILN_PAD_SAME is refused). */
kiln_node *kiln_conv_transpose2d(kiln_graph *g, kiln_node *x, kiln_node *w,
                                 kiln_node *bias, const kiln_conv_params *p);
/* ---------------------------------------------- pooling, resampling */

/* As torch.nn.functional.max_pool2d over the last two dims of an f32
   (C,H,W) or (N,C,H,W) x: kernel[2]; stride[2] (NULL: the kernel); padding
   [2] (NULL: 0; at most half the kernel; padded positions never win);
   dilation[2] (NULL: 1); ceil_mode.  NaN wins its window; the gradient goes
   to each window's first maximum.  Bad sizes poison the graph. */
kiln_node *kiln_max_pool2d(kiln_graph *g, kiln_node *x, const int *kernel,
                           const int *stride, const int *padding,
                           const int *dilation, int ceil_mode);
/* As torch.nn.functional.avg_pool2d (kernel, stride NULL: kernel, padding
   NULL: 0, ceil_mode, count_include_pad: padded positions count in the
   divisor).  Bad sizes poison the graph. */
kiln_node *kiln_avg_pool2d(kiln_graph *g, kiln_node *x, const int *kernel,
                           const int *stride, const int *padding, int ceil_mode,
                           int count_include_pad);
/* As torch.nn.functional.adaptive_avg_pool2d to out_h x out_w (1 x 1:
   global average pooling); sizes < 1 poison the graph. */
kiln_node *kiln_adaptive_avg_pool2d(kiln_graph *g, kiln_node *x, int64_t out_h,
                                    int64_t out_w);
/* How kiln_pad_mode fills: reflecting at the edges (the edge not repeated)
   or repeating the edge. */
typedef enum kiln_padding {
    KILN_PAD_REFLECT = 1,
    KILN_PAD_REPLICATE
} kiln_padding;
/* As torch.nn.functional.pad(x, pad, mode) for reflect and replicate
   (constant padding is kiln_pad): n_pad 2 pads the last dim of a 2-D or
   3-D x, 4 the last two of a 3-D or 4-D x, in PyTorch's order (left,
   right, top, bottom).  Reflect needs each pad below its dim's size;
   negative pads and bad ranks poison the graph. */
kiln_node *kiln_pad_mode(kiln_graph *g, kiln_node *x, const int64_t *pad,
                         int n_pad, kiln_padding mode);
typedef enum kiln_upsample {
    KILN_UPSAMPLE_NEAREST = 1,
    KILN_UPSAMPLE_BILINEAR
} kiln_upsample;
/* As torch.nn.functional.interpolate of an (N,C,H,W) x with mode nearest
   or bilinear: to size[2], or by scale[2] (output floor(in * scale), the
   scale itself used for the source positions, as PyTorch does); exactly
   one of size and scale is non-NULL.  align_corners for bilinear only.
   Bad arguments poison the graph. */
kiln_node *kiln_upsample2d(kiln_graph *g, kiln_node *x, const int64_t *size,
                           const double *scale, kiln_upsample mode,
                           int align_corners);
/* As torch.flatten: dims start_dim..end_dim (negative count from the end)
   merged into one, a reshape; bad dims poison the graph. */
kiln_node *kiln_flatten(kiln_graph *g, kiln_node *x, int start_dim,
                        int end_dim);

/* ---------------------------------------------- indexing (issue 12) */

/* Indices are i32.  An index outside [0, size of the axis) -- negative
   ones included, as PyTorch refuses them -- is a run-time error
   (KILN_ERR_ARG from kiln_run / kiln_forward / kiln_backward) whose
   message names the op, the index and its position; shapes are checked
   when building (errors name the function and the shapes). */

/* torch.index_select: the slices of x (f32 or i32) at idx ([K], or 0-d
   as [1]) along axis (negative counts from the end): x's shape with K on
   axis. */
kiln_node *kiln_index_select(kiln_graph *g, kiln_node *x, int axis,
                             kiln_node *idx);
/* torch.index_add: x (f32) plus src's slice k added into x's slice idx[k]
   along axis (repeated indices accumulate); src is x's shape with K on
   axis. */
kiln_node *kiln_index_add(kiln_graph *g, kiln_node *x, int axis, kiln_node *idx,
                          kiln_node *src);
/* torch.gather (take_along_axis): out[p] = x[p with axis coordinate
   idx[p]]; idx has x's rank and no larger size on the other axes; the
   result has idx's shape. */
kiln_node *kiln_gather(kiln_graph *g, kiln_node *x, int axis, kiln_node *idx);
/* torch.scatter_add: x (f32) plus src[p] added at (p with axis coordinate
   idx[p]) for every position p of idx, which is no larger than src on any
   axis and than x on the others. */
kiln_node *kiln_scatter_add(kiln_graph *g, kiln_node *x, int axis,
                            kiln_node *idx, kiln_node *src);
/* Embedding lookup: rows of table [V, D] at i32 ids of any shape, giving
   ids' shape + [D] (an id outside [0, V) is a run-time error). */
kiln_node *kiln_embedding(kiln_graph *g, kiln_node *table, kiln_node *ids);

/* ---------------------------------------------- scans and small ops
   (issue 12) */

/* torch.cumsum along axis (f32; accumulates in double). */
kiln_node *kiln_cumsum(kiln_graph *g, kiln_node *x, int axis);
/* Product over the axes in the mask (1 over none); the gradient is
   PyTorch's, zeros included. */
kiln_node *kiln_prod(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims);
/* torch.topk(x, k, axis, largest=True, sorted=True): *values (f32,
   differentiable) and *indices (i32) of the k largest along axis, largest
   first, NaN largest, equal values by lower index.  KILN_OK or the
   graph's error (k outside [0, size], bad axis; both outputs poisoned). */
kiln_status kiln_topk(kiln_graph *g, kiln_node *x, int k, int axis,
                      kiln_node **values, kiln_node **indices);
/* torch.masked_fill: value where mask (f32 nonzero, or i32 nonzero,
   broadcast to x's shape) is set, x elsewhere. */
kiln_node *kiln_masked_fill(kiln_graph *g, kiln_node *x, kiln_node *mask,
                            float value);
/* torch.tril / torch.triu over the last two dims (>= 2 dims): x on and
   below (above) diagonal k, 0 elsewhere. */
kiln_node *kiln_tril(kiln_graph *g, kiln_node *x, int k);
kiln_node *kiln_triu(kiln_graph *g, kiln_node *x, int k);
/* F.leaky_relu (gradient slope at 0) and F.elu (alpha expm1(x) for x <=
   0). */
kiln_node *kiln_leaky_relu(kiln_graph *g, kiln_node *x, float slope);
kiln_node *kiln_elu(kiln_graph *g, kiln_node *x, float alpha);
/* torch.clamp(x, lo, hi): gradient 1 on [lo, hi]; infinite bounds make
   it one-sided; a NaN bound poisons the graph. */
kiln_node *kiln_clamp(kiln_graph *g, kiln_node *x, float lo, float hi);
/* torch.amin over the axes (ties share the gradient, as amin). */
kiln_node *kiln_reduce_min(kiln_graph *g, kiln_node *x, unsigned axes,
                           int keepdims);
/* torch.logsumexp over the axes, stable (shifted by the max). */
kiln_node *kiln_logsumexp(kiln_graph *g, kiln_node *x, unsigned axes,
                          int keepdims);
/* torch.var / torch.std over the axes with the given correction (1:
   unbiased, 0: biased); a correction that is not finite poisons the
   graph. */
kiln_node *kiln_variance(kiln_graph *g, kiln_node *x, unsigned axes,
                         float correction, int keepdims);
kiln_node *kiln_std(kiln_graph *g, kiln_node *x, unsigned axes,
                    float correction, int keepdims);
/* ---------------------------------------------- attention */

/* Options of kiln_scaled_dot_product_attention; NULL means all defaults. */
typedef struct kiln_attention_options {
    int causal;  /* query i sees keys 0..i only (PyTorch's is_causal) */
    float scale; /* multiplies q k^T; 0: 1 / sqrt(D); NaN or inf refused */
} kiln_attention_options;
/* As torch.nn.functional.scaled_dot_product_attention: softmax(q k^T *
   scale + mask) v for q [B,H,Tq,D], k [B,H,Tk,D], v [B,H,Tk,E] (or all
   three 3-D, [B,T,.]), giving [B,H,Tq,E] (or [B,Tq,E]).  mask (NULL: none)
   broadcasts to [B,H,Tq,Tk] (to [B,Tq,Tk] for 3-D inputs): f32 is added to
   the scores (-inf masks out), i32 is boolean (nonzero: attend).  A query
   that sees no key gives 0 (PyTorch: NaN); no gradient reaches the mask.
   One fused op; bad shapes or dtypes poison the graph. */
kiln_node *kiln_scaled_dot_product_attention(kiln_graph *g, kiln_node *q,
                                             kiln_node *k, kiln_node *v,
                                             kiln_node *mask,
                                             const kiln_attention_options *opt);
/* [B,T,H*D] -> [B,H,T,D] (a reshape and a permute); T*H*D not divisible
   into heads poisons the graph. */
kiln_node *kiln_split_heads(kiln_graph *g, kiln_node *x, int heads);
/* [B,H,T,D] -> [B,T,H*D], the inverse of kiln_split_heads; a non-4-D x
   poisons the graph. */
kiln_node *kiln_merge_heads(kiln_graph *g, kiln_node *x);
/* As torch.nn.functional.rms_norm over the last ndims dims of x: x /
   sqrt(mean(x^2) + eps) * weight; weight (NULL: none) has the shape of
   those dims; eps < 0 means FLT_EPSILON (PyTorch's None).  A bad ndims,
   weight shape or a NaN or infinite eps poisons the graph. */
kiln_node *kiln_rms_norm(kiln_graph *g, kiln_node *x, int ndims,
                         kiln_node *weight, float eps);

/* i32 arithmetic for index math, a and b i32 and broadcast together (numpy
   rules), no gradient; other dtypes or shapes poison the graph.  Sums,
   differences and products wrap around (two's complement), as PyTorch. */
kiln_node *kiln_int_add(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_int_sub(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_int_mul(kiln_graph *g, kiln_node *a, kiln_node *b);
/* floor(a / b) (torch.div(rounding_mode="floor")) and a - b floor(a / b)
   (torch.remainder: the sign of b); a zero b is a run-time error
   (KILN_ERR_ARG from kiln_run / kiln_forward naming the position);
   INT_MIN / -1 wraps to INT_MIN. */
kiln_node *kiln_int_floor_div(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_int_mod(kiln_graph *g, kiln_node *a, kiln_node *b);

/* ---------------------------------------------- recurrent cells
   (issue 12) */

/* torch.nn.LSTMCell: x [B, I], h and c [B, H], w_ih [4H, I], w_hh [4H, H],
   b_ih and b_hh [4H] or NULL; gates i, f, g, o in PyTorch's order; *h_out
   and *c_out the next state [B, H].  KILN_OK or the graph's error (bad
   shapes or dtypes; both outputs poisoned). */
kiln_status kiln_lstm_cell(kiln_graph *g, kiln_node *x, kiln_node *h,
                           kiln_node *c, kiln_node *w_ih, kiln_node *w_hh,
                           kiln_node *b_ih, kiln_node *b_hh, kiln_node **h_out,
                           kiln_node **c_out);
/* torch.nn.GRUCell: x [B, I], h [B, H], w_ih [3H, I], w_hh [3H, H], b_ih
   and b_hh [3H] or NULL; gates r, z, n in PyTorch's order; the next h
   [B, H].  Bad shapes or dtypes poison the graph. */
kiln_node *kiln_gru_cell(kiln_graph *g, kiln_node *x, kiln_node *h,
                         kiln_node *w_ih, kiln_node *w_hh, kiln_node *b_ih,
                         kiln_node *b_hh);

/* ---------------------------------------------- state ops */

/* After a run, the variable takes value (computed before any assignment of
   the same run).  The node's own value is the new value. */
kiln_node *kiln_assign(kiln_graph *g, kiln_node *variable, kiln_node *value);
/* Groups nodes so that compiling the group runs them all (ngraph doall). */
kiln_node *kiln_doall(kiln_graph *g, kiln_node *const *xs, int n);

/* ---------------------------------------------- normalisation, dropout */

/* The run's mode: an i32 scalar, 1 in training and 0 in evaluation, that
   every run takes from its session (kiln_session_set_training).  Batch norm
   and dropout read it; so may a user's own graph (e.g. with kiln_select). */
kiln_node *kiln_mode(kiln_graph *g);
/* torch.nn.functional.batch_norm over channel axis 1 of x [N, C, ...] (f32,
   2 to 8 dims): in training, normalises with the batch's mean and biased
   variance and updates running_mean and running_var (non-trainable f32 [C]
   variables, both or neither) as (1 - momentum) * running + momentum *
   batch, with the unbiased batch variance; in evaluation, normalises with
   them (with neither, always with the batch's); an empty batch leaves them
   as they are.  weight and bias ([C]) may be NULL: no affine.  Compiling
   anything that needs the result runs the updates (kiln_forward always
   does); momentum in [0, 1], eps >= 0.
   Errors (shapes, NULL x, bad momentum or eps) poison the graph; training
   on one value per channel is a run-time error, as in PyTorch. */
kiln_node *kiln_batch_norm(kiln_graph *g, kiln_node *x, kiln_node *weight,
                           kiln_node *bias, kiln_node *running_mean,
                           kiln_node *running_var, float momentum, float eps);
/* torch.nn.functional.layer_norm: normalises x over its trailing dims, which
   must equal normalized_shape, with weight and bias of that shape (either
   may be NULL); eps >= 0.  Errors poison the graph. */
kiln_node *kiln_layer_norm(kiln_graph *g, kiln_node *x,
                           kiln_shape normalized_shape, kiln_node *weight,
                           kiln_node *bias, float eps);
/* torch.nn.functional.group_norm: x [N, C, ...] normalised per sample over
   each of num_groups groups of C / num_groups channels; weight and bias [C]
   (either may be NULL).  Errors (C not a multiple, eps < 0) poison the
   graph. */
kiln_node *kiln_group_norm(kiln_graph *g, kiln_node *x, int num_groups,
                           kiln_node *weight, kiln_node *bias, float eps);
/* torch.nn.functional.instance_norm without running statistics: x [N, C,
   ...] normalised per sample and channel over the spatial dims; weight and
   bias [C] (either may be NULL).  Errors poison the graph. */
kiln_node *kiln_instance_norm(kiln_graph *g, kiln_node *x, kiln_node *weight,
                              kiln_node *bias, float eps);
/* torch.nn.functional.dropout: in training each element is zeroed with
   probability p and the others scaled by 1 / (1 - p), the mask drawn
   inside the graph from the session's seed and step (kiln_session_set_seed)
   and fresh at every run; x itself in evaluation and for p = 0.  p outside
   [0, 1) or a NULL x poisons the graph. */
kiln_node *kiln_dropout(kiln_graph *g, kiln_node *x, float p);
/* torch.nn.functional.dropout2d: as kiln_dropout, with whole channels
   zeroed: one draw per (sample, channel) of x [N, C, ...]. */
kiln_node *kiln_dropout2d(kiln_graph *g, kiln_node *x, float p);

KILN_DECLS_END
#endif /* KILN_OPS_H */
