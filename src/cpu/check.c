/* Run-time checks of input values that a kernel cannot compute from: a
   class label outside [0, C) has no logit to pick.  PyTorch refuses such
   labels too; Kiln refuses them in every kernel that reads them (loss,
   gradient, strict one-hot), so forward and backward always agree. */
#include <stdio.h>

#include "cpu/check.h"
#include "cpu/norm.h"
#include "cpu/index.h"
#include "cpu/int_math.h"

/* The first label outside [0, classes) of n labels, or -1. */
static int64_t first_bad_label(const int32_t *lab, int64_t n, int64_t classes)
{
    for (int64_t i = 0; i < n; i++)
        if (lab[i] < 0 || lab[i] >= classes)
            return i;
    return -1;
}

static kiln_status check_labels(const kiln_node *n, const int32_t *lab,
                                int64_t rows, int64_t classes, char *msg,
                                size_t len)
{
    int64_t i = lab ? first_bad_label(lab, rows, classes) : -1;
    if (i < 0)
        return KILN_OK;
    if (msg && len)
        snprintf(msg, len, "%s %%%d: label %d at row %lld is outside [0, %lld)",
                 kiln_op_table[n->op].name, n->id, (int)lab[i], (long long)i,
                 (long long)classes);
    return KILN_ERR_ARG;
}

kiln_status kiln_cpu_check_inputs(const kiln_node *n, void *const *in,
                                  char *msg, size_t len)
{
    switch (n->op) {
    case KILN_OP_SOFTMAX_CE:
    case KILN_OP_SOFTMAX_CE_GRAD:
        /* [N, 0] logits are refused by the builder; a node made without it
           reads no label (the kernels give NaN) */
        if (n->in[0]->shape.d[1] == 0)
            return KILN_OK;
        return check_labels(n, in[1], n->in[0]->shape.d[0],
                            n->in[0]->shape.d[1], msg, len);
    case KILN_OP_ONEHOT:
        return n->at.strict
                   ? check_labels(n, in[0], kiln_shape_numel(n->in[0]->shape),
                                  n->at.depth, msg, len)
                   : KILN_OK;
    case KILN_OP_INT_FLOOR_DIV:
    case KILN_OP_INT_MOD:
        return kiln_cpu_check_int_div(n, in, msg, len);
    case KILN_OP_NORM_STATS:
        return kiln_cpu_check_norm(n, in, msg, len);
    case KILN_OP_INDEX_SELECT:
    case KILN_OP_INDEX_ADD:
    case KILN_OP_GATHER:
    case KILN_OP_SCATTER_ADD:
        return kiln_cpu_check_index(n, in, msg, len);
    default: /* every other op's kernels read any input values safely */
        return KILN_OK;
    }
}
