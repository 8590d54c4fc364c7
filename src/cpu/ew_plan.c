/* The broadcast plan of the fast elementwise and movement kernels. */
#include <string.h>

#include "cpu/ew_plan.h"

/* Every operand of n's shape: one contiguous walk of all the elements,
   without computing strides or zeroing the plan (a dynamic graph's ops on
   small values are mostly this, and pay for the plan on every node); the
   entries past the first axis are never read. */
static int same_shapes(kiln_ew_plan *p, const kiln_node *n)
{
    p->nin = n->n_in < 3 ? n->n_in : 3;
    for (int k = 0; k < p->nin; k++)
        if (!kiln_shape_same(&n->in[k]->shape, &n->shape))
            return 0;
    p->nd = 1;
    p->dim[0] = p->inner = kiln_node_numel(n);
    for (int k = 0; k < p->nin; k++)
        p->st[k][0] = 1;
    p->rows = p->inner ? 1 : 0;
    return 1;
}

void kiln_ew_plan_init(kiln_ew_plan *p, const kiln_node *n)
{
    if (same_shapes(p, n))
        return;
    memset(p, 0, sizeof *p);
    p->nin = n->n_in < 3 ? n->n_in : 3;
    int64_t st[3][KILN_MAX_DIMS];
    for (int k = 0; k < p->nin; k++)
        kiln_broadcast_strides(n->in[k]->shape, n->shape, st[k]);
    /* keep axes of size > 1, merging an axis into the previous kept one
       when every operand continues the same walk across the boundary */
    for (int d = 0; d < n->shape.ndim; d++) {
        int64_t len = n->shape.d[d];
        if (len == 1)
            continue;
        int merge = p->nd > 0;
        for (int k = 0; k < p->nin && merge; k++)
            merge = p->st[k][p->nd - 1] == st[k][d] * len;
        if (merge) {
            p->dim[p->nd - 1] *= len;
            for (int k = 0; k < p->nin; k++)
                p->st[k][p->nd - 1] = st[k][d];
        } else {
            p->dim[p->nd] = len;
            for (int k = 0; k < p->nin; k++)
                p->st[k][p->nd] = st[k][d];
            p->nd++;
        }
    }
    int64_t numel = kiln_node_numel(n);
    if (p->nd == 0) { /* a single element (or a scalar) */
        p->nd = 1;
        p->dim[0] = numel;
        for (int k = 0; k < p->nin; k++)
            p->st[k][0] = 1;
    }
    p->inner = p->dim[p->nd - 1];
    p->rows = p->inner ? numel / p->inner : 0;
}

void kiln_ew_row_offsets(const kiln_ew_plan *p, int64_t r, int64_t *off)
{
    for (int k = 0; k < p->nin; k++)
        off[k] = 0;
    for (int d = p->nd - 2; d >= 0 && r; d--) {
        int64_t i = r % p->dim[d];
        r /= p->dim[d];
        for (int k = 0; k < p->nin; k++)
            off[k] += i * p->st[k][d];
    }
}
