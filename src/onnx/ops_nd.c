/* GatherND and ScatterND with indices known while loading: each index
   tuple becomes one row of data seen as [batch * points, rest...], so the
   ops are kiln_index_select and kiln_index_add over that row axis. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* The rows of data [d0, ..., d(b+k-1), rest...] (b batch dims, k index
   dims) that indices [b dims..., m..., k] pick; *count of them. */
typedef struct nd_rows {
    int32_t *row;
    int64_t count;   /* rows picked */
    kiln_shape flat; /* data as [rows, rest...] */
} nd_rows;

static int nd_index(ox_ctx *c, const ox_node *n, kiln_shape ds, int64_t b,
                    nd_rows *r)
{
    const ox_host *h = ox_known_ints(c, n, 1);
    if (!h)
        return -1;
    kiln_shape is = h->shape;
    int64_t k = is.ndim ? is.d[is.ndim - 1] : 0, batch = 1, points = 1;
    if (is.ndim < 1 || b < 0 || b >= is.ndim || k < 1 || b + k > ds.ndim)
        return ox_problem(c, n, KILN_ERR_ARG, "indices do not fit the data"),
               -1;
    for (int d = 0; d < b; d++)
        if (is.d[d] != ds.d[d])
            return ox_problem(c, n, KILN_ERR_ARG, "batch dims differ"), -1;
    for (int d = 0; d < b; d++)
        batch *= ds.d[d];
    for (int d = (int)b; d < b + k; d++)
        points *= ds.d[d];
    r->flat = (kiln_shape){.ndim = 1 + ds.ndim - (int)(b + k)};
    r->flat.d[0] = batch * points;
    for (int d = (int)(b + k); d < ds.ndim; d++)
        r->flat.d[d - b - k + 1] = ds.d[d];
    if (r->flat.d[0] > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "too many rows"), -1;
    r->count = h->numel / k;
    r->row = malloc((size_t)r->count * sizeof *r->row + 1);
    if (!r->row)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    int64_t per_batch = batch ? r->count / batch : 0; /* no rows: 0 / 0 */
    for (int64_t t = 0; t < r->count; t++) {
        int64_t at = (t / per_batch) * points;
        for (int64_t j = 0, stride = points; j < k; j++) {
            int64_t dim = ds.d[b + j], i = h->i[t * k + j];
            i = i < 0 ? i + dim : i;
            if (i < 0 || i >= dim) {
                free(r->row);
                return ox_problem(c, n, KILN_ERR_ARG, "index %lld out of range",
                                  (long long)h->i[t * k + j]),
                       -1;
            }
            stride /= dim;
            at += i * stride;
        }
        r->row[t] = (int32_t)at;
    }
    return 0;
}

static int conv_gather_nd(ox_ctx *c, ox_node *n)
{
    int64_t b;
    nd_rows r;
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape ds = kiln_node_shape(x), out = {0};
    if (ox_attr_int(c, n, "batch_dims", 0, &b) || nd_index(c, n, ds, b, &r))
        return -1;
    kiln_shape is = n->in[1]->known->shape;
    kiln_node *idx = kiln_constant(c->g, KILN_I32, KILN_SHAPE(r.count), r.row);
    free(r.row);
    for (int d = 0; d + 1 < is.ndim; d++)
        out.d[out.ndim++] = is.d[d];
    for (int d = 1; d < r.flat.ndim && out.ndim < KILN_MAX_DIMS; d++)
        out.d[out.ndim++] = r.flat.d[d];
    if (is.ndim - 1 + r.flat.ndim - 1 > KILN_MAX_DIMS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "more than 8 dims"), -1;
    kiln_node *y =
        kiln_index_select(c->g, kiln_reshape(c->g, x, r.flat), 0, idx);
    n->out[0] = kiln_reshape(c->g, y, out);
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

/* Updates written (reduction none: where the scattered ones land), added
   (add) or multiplied (mul, scatter_mul.c) into the rows. */
static int conv_scatter_nd(ox_ctx *c, ox_node *n)
{
    char red[8];
    nd_rows r;
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0), *u = ox_f32(c, n, 2);
    kiln_shape ds = kiln_node_shape(x);
    if (ox_attr_string(c, n, "reduction", "none", red, sizeof red))
        return -1;
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul"))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "reduction '%s'", red),
               -1;
    if (nd_index(c, n, ds, 0, &r))
        return -1;
    int mul = !strcmp(red, "mul");
    kiln_shape us = r.flat;
    us.d[0] = r.count;
    kiln_node *flat = kiln_reshape(g, x, r.flat), *y = NULL;
    u = kiln_reshape(g, u, us);
    kiln_node *idx =
        mul ? NULL : kiln_constant(g, KILN_I32, KILN_SHAPE(r.count), r.row);
    if (mul)
        y = ox_scatter_mul(c, n, flat, u, r.row, r.count);
    free(r.row);
    if (mul && !y)
        return -1;
    if (!strcmp(red, "add"))
        y = kiln_index_add(g, flat, 0, idx, u);
    else if (!mul) {
        kiln_node *zero = ox_fill(g, r.flat, 0);
        kiln_node *hit = kiln_index_add(g, zero, 0, idx, ox_fill(g, us, 1));
        y = kiln_select(g, hit, kiln_index_add(g, zero, 0, idx, u), flat);
    }
    ox_out(c, n, kiln_reshape(g, y, ds), ox_in_type(n, 0));
    return 0;
}

const ox_op ox_nd_ops[] = {
    {"GatherND", conv_gather_nd, "batch_dims"},
    {"ScatterND", conv_scatter_nd, "reduction"},
    {NULL, NULL, NULL},
};
