/* torch.nn.functional.cross_entropy with class-index targets: ignore_index,
   label_smoothing and reduction 'none' / 'mean' / 'sum', as a
   decomposition (log_softmax, gather, masks) that autodiff differentiates.
   Without ignoring or smoothing, a mean or sum is the fused softmax
   cross-entropy op (kiln_softmax_cross_entropy_reduce), whose kernels and
   gradient are one pass each. */
#include <limits.h>
#include <math.h>

#include "graph/graph.h"
#include "nn/nn_check.h"

/* 1 where a label is not ignore_index, else 0 (f32 [N]); labels compare as
   f32, exact for every label a class can have (below 2^24). */
static kiln_node *kept_rows(kiln_graph *g, kiln_node *labels, int ignore)
{
    kiln_node *eq = kiln_eq(g, kiln_cast(g, labels, KILN_F32),
                            kiln_scalar(g, (float)ignore));
    return kiln_sub(g, kiln_scalar(g, 1.0f), eq);
}

/* Per-row loss [N]: (1 - eps) * -logp[label] + eps * -mean_c logp, times
   the kept mask (ignored rows 0, their label read as class 0, so only a
   label that is neither ignored nor in [0, C) is gather's run-time error). */
static kiln_node *row_losses(kiln_graph *g, kiln_node *logits,
                             kiln_node *labels, kiln_node *kept, float eps)
{
    kiln_node *logp = kiln_log_softmax(g, logits, 1);
    kiln_node *safe = labels;
    if (kept)
        safe = kiln_int_mul(g, labels, kiln_cast(g, kept, KILN_I32));
    kiln_node *picked =
        kiln_gather(g, logp, 1, kiln_reshape(g, safe, KILN_SHAPE(-1, 1)));
    kiln_node *loss = kiln_neg(g, kiln_reshape(g, picked, KILN_SHAPE(-1)));
    if (eps > 0) {
        kiln_node *smooth = kiln_scale(g, kiln_sum(g, logp, KILN_AXIS(1), 0),
                                       -1.0f / (float)logits->shape.d[1]);
        loss = kiln_add(g, kiln_scale(g, loss, 1.0f - eps),
                        kiln_scale(g, smooth, eps));
    }
    return kept ? kiln_mul(g, loss, kept) : loss;
}

kiln_node *kiln_cross_entropy_loss(kiln_graph *g, kiln_node *logits,
                                   kiln_node *labels, kiln_reduction reduction,
                                   int ignore_index, float label_smoothing)
{
    const char *fn = "kiln_cross_entropy_loss";
    if (!g)
        return kiln_null_graph(fn);
    if (!kiln_nn_check_scores_labels(g, fn, logits, labels, "logits"))
        return &g->poison;
    if (reduction != KILN_REDUCE_MEAN && reduction != KILN_REDUCE_SUM &&
        reduction != KILN_REDUCE_NONE)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: unknown reduction %d", fn,
                               (int)reduction);
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: label_smoothing %g is outside [0, 1]", fn,
                               (double)label_smoothing);
    int ignoring = ignore_index != KILN_IGNORE_NONE;
    if (!ignoring && label_smoothing == 0.0f && reduction != KILN_REDUCE_NONE)
        return kiln_softmax_cross_entropy_reduce(g, logits, labels, reduction);
    kiln_node *kept = ignoring ? kept_rows(g, labels, ignore_index) : NULL;
    kiln_node *rows = row_losses(g, logits, labels, kept, label_smoothing);
    if (reduction == KILN_REDUCE_NONE)
        return rows;
    kiln_node *total = kiln_sum(g, rows, KILN_ALL_AXES, 0);
    if (reduction == KILN_REDUCE_SUM)
        return total;
    /* the mean over the rows not ignored (NaN when there are none, as
       PyTorch); 1 / N re-derived at each batch size otherwise */
    return kept ? kiln_div(g, total, kiln_sum(g, kept, KILN_ALL_AXES, 0))
                : kiln_mul(g, total,
                           kiln_count_scalar(g, logits->shape, 1u, 1, 1));
}
