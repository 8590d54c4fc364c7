/* Det: the determinant of each [M, M] matrix of X [..., M, M] by Gaussian
   elimination with partial pivoting, unrolled into Kiln ops (M known while
   loading).  Each step picks the row of the largest |entry| in the
   current column (kiln_argmax, a one-hot), swaps it to the top by adding
   an outer product, multiplies the determinant by the pivot (and by -1
   for a swap) and subtracts the pivot row's multiples from the rows
   below.  The pivot choice is piecewise constant, so the gradient of the
   rest is the determinant's: det X X^-T where X is invertible. */
#include <stdlib.h>

#include "onnx/onnx_internal.h"

/* Larger matrices unroll into too many nodes (about 20 per row). */
#define DET_MAX 256

/* x[..., r0:r1, c0:c1] */
static kiln_node *block(kiln_graph *g, kiln_node *x, int64_t r0, int64_t r1,
                        int64_t c0, int64_t c1)
{
    kiln_shape s = kiln_node_shape(x);
    int64_t start[KILN_MAX_DIMS] = {0}, stop[KILN_MAX_DIMS];
    if (s.ndim < 2) /* poisoned by a failed op: the graph holds the error */
        return x;
    for (int k = 0; k < s.ndim; k++)
        stop[k] = s.d[k];
    start[s.ndim - 2] = r0;
    stop[s.ndim - 2] = r1;
    start[s.ndim - 1] = c0;
    stop[s.ndim - 1] = c1;
    return kiln_slice(g, x, start, stop);
}

/* x's shape with its last two dims set to r and c. */
static kiln_shape last2(kiln_node *x, int64_t r, int64_t c)
{
    kiln_shape s = kiln_node_shape(x);
    if (s.ndim < 2) /* poisoned: any shape, the graph holds the error */
        return s;
    s.d[s.ndim - 2] = r;
    s.d[s.ndim - 1] = c;
    return s;
}

/* One elimination step on the m x m block *b: the pivot row swapped to
   the top, *det times the signed pivot, *b the (m-1) x (m-1) remainder. */
static void step(kiln_graph *g, kiln_node **b, kiln_node **det, int64_t m)
{
    kiln_node *x = *b;
    int nd = kiln_node_shape(x).ndim;
    kiln_node *p = kiln_argmax(g, kiln_abs(g, block(g, x, 0, m, 0, 1)), nd - 2);
    kiln_node *row = kiln_one_hot(g, p, (int)m); /* [..., 1, m] */
    kiln_node *col = kiln_reshape(g, row, last2(row, m, 1));
    float *e = calloc((size_t)m, sizeof *e);
    if (e)
        e[0] = 1;
    kiln_node *e0 = kiln_constant(g, KILN_F32, KILN_SHAPE(m, 1), e);
    free(e);
    /* rows 0 and p trade places: x + (e0 - P)(row p - row 0) */
    kiln_node *diff =
        kiln_sub(g, kiln_matmul(g, row, x, 0, 0), block(g, x, 0, 1, 0, m));
    x = kiln_add(g, x, kiln_mul(g, kiln_sub(g, e0, col), diff));
    kiln_node *kept = block(g, row, 0, 1, 0, 1); /* 1 when p = 0 */
    kiln_node *piv = block(g, x, 0, 1, 0, 1);
    kiln_node *sp = kiln_mul(
        g, piv, kiln_sub(g, kiln_scale(g, kept, 2), kiln_scalar(g, 1)));
    *det = *det ? kiln_mul(g, *det, sp) : sp;
    if (m == 1)
        return;
    /* a zero pivot (a zero column: det 0) divides by 1 instead */
    kiln_node *safe = kiln_select(g, kiln_eq(g, piv, kiln_scalar(g, 0)),
                                  kiln_scalar(g, 1), piv);
    kiln_node *l = kiln_div(g, block(g, x, 1, m, 0, 1), safe);
    *b = kiln_sub(g, block(g, x, 1, m, 1, m),
                  kiln_mul(g, l, block(g, x, 0, 1, 1, m)));
}

static int conv_det(ox_ctx *c, ox_node *n)
{
    kiln_node *x = ox_f32(c, n, 0);
    kiln_shape s = kiln_node_shape(x), out = s;
    char b[128];
    if (s.ndim < 2 || s.d[s.ndim - 1] != s.d[s.ndim - 2])
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "X %s is not [..., M, M] (square matrices)",
                          kiln_shape_str(s, b, sizeof b)),
               -1;
    int64_t m = s.d[s.ndim - 1];
    if (m > DET_MAX || (s.sym >> (s.ndim - 2) & 3u))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "matrices %s: at most %d x %d, of a size known "
                          "while loading",
                          kiln_shape_str(s, b, sizeof b), DET_MAX, DET_MAX),
               -1;
    out.ndim -= 2;
    kiln_node *det = NULL;
    for (int64_t k = m; k > 0; k--)
        step(c->g, &x, &det, k);
    /* the determinant of a 0 x 0 matrix is 1 */
    det = det ? kiln_reshape(c->g, det, out) : ox_fill(c->g, out, 1);
    ox_out(c, n, det, ox_in_type(n, 0));
    return 0;
}

const ox_op ox_det_ops[] = {
    {"Det", conv_det, ""},
    {NULL, NULL, NULL},
};
