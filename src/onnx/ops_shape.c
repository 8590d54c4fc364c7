/* Converters of the movement ops whose ONNX form takes shapes, axes or
   indices as tensors: those must be known while loading (initializers,
   Constants, or shapes computed from static shapes). */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* The known integers of input 0, carried to the output with a new shape
   (shape arithmetic: Reshape, Squeeze, Unsqueeze of a known vector). */
static void carry_known(ox_node *n, kiln_shape s)
{
    const ox_host *k = n->in[0] ? n->in[0]->known : NULL;
    if (k && k->i && kiln_shape_numel(s) == k->numel)
        n->out_known[0] = ox_host_ints(s, k->i);
}

/* The axes of an op: the attribute before opset `since`, else input 1. */
static int axes_of(ox_ctx *c, const ox_node *n, int64_t since,
                   const int64_t **axes, int64_t *count)
{
    if (c->opset < since)
        return ox_attr_ints(c, n, "axes", axes, count);
    *axes = NULL;
    *count = 0;
    if (n->n_in < 2 || !n->in[1])
        return 0;
    const ox_host *h = ox_known_ints(c, n, 1);
    if (!h)
        return -1;
    *axes = h->i;
    *count = h->numel;
    return 0;
}

static int conv_reshape(ox_ctx *c, ox_node *n)
{
    const ox_host *h = NULL;
    const int64_t *v = NULL;
    int64_t count = 0, allowzero = 0;
    if (c->opset < 5) {
        if (ox_attr_ints(c, n, "shape", &v, &count))
            return -1;
    } else if (!(h = ox_known_ints(c, n, 1)))
        return -1;
    if (h) {
        v = h->i;
        count = h->numel;
    }
    if (ox_attr_int(c, n, "allowzero", 0, &allowzero))
        return -1;
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape in = kiln_node_shape(x), s = {0};
    if (count > KILN_MAX_DIMS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "more than 8 dims"), -1;
    s.ndim = (int)count;
    for (int k = 0; k < s.ndim; k++) {
        s.d[k] = v[k] == 0 && !allowzero && k < in.ndim ? in.d[k] : v[k];
        if (s.d[k] < -1)
            return ox_problem(c, n, KILN_ERR_ARG, "bad target shape"), -1;
    }
    n->out[0] = kiln_reshape(c->g, x, s);
    n->out_type[0] = ox_in_type(n, 0);
    carry_known(n, kiln_node_shape(n->out[0]));
    return 0;
}

static int conv_flatten(ox_ctx *c, ox_node *n)
{
    int64_t axis;
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    if (ox_attr_int(c, n, "axis", 1, &axis))
        return -1;
    if (axis < -s.ndim || axis > s.ndim)
        return ox_problem(c, n, KILN_ERR_ARG, "axis out of range"), -1;
    int a = (int)(axis < 0 ? axis + s.ndim : axis);
    kiln_node *y;
    if (a == 0)
        y = kiln_reshape(c->g, x, KILN_SHAPE(1, -1));
    else if (a == s.ndim)
        y = kiln_reshape(c->g, kiln_flatten(c->g, x, 0, -1),
                         KILN_SHAPE(kiln_shape_numel(s), 1));
    else {
        y = kiln_flatten(c->g, x, a, -1);
        if (a > 1)
            y = kiln_flatten(c->g, y, 0, a - 1);
    }
    n->out[0] = y;
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

static int conv_transpose(ox_ctx *c, ox_node *n)
{
    const int64_t *perm;
    int64_t count;
    kiln_node *x = ox_in(c, n, 0);
    int nd = kiln_node_shape(x).ndim, p[KILN_MAX_DIMS];
    if (ox_attr_ints(c, n, "perm", &perm, &count))
        return -1;
    if (count && count != nd)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "perm has %lld entries for rank %d", (long long)count,
                          nd),
               -1;
    for (int k = 0; k < nd; k++) {
        p[k] = count ? (int)perm[k] : nd - 1 - k;
        if (p[k] < 0 || p[k] >= nd)
            return ox_problem(c, n, KILN_ERR_ARG, "bad perm"), -1;
    }
    n->out[0] = kiln_permute(c->g, x, p);
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

/* Squeeze (unsqueeze 0) or Unsqueeze (1): a reshape to the new shape. */
static int squeeze(ox_ctx *c, ox_node *n, int unsqueeze)
{
    const int64_t *axes;
    int64_t count;
    if (axes_of(c, n, 13, &axes, &count))
        return -1;
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape in = kiln_node_shape(x), s = {0};
    int rank = unsqueeze ? in.ndim + (int)count : in.ndim;
    unsigned mask = 0;
    if (rank > KILN_MAX_DIMS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "more than 8 dims"), -1;
    for (int64_t k = 0; k < count; k++) {
        int a = ox_axis(c, n, axes[k], rank);
        if (a < 0)
            return -1;
        mask |= KILN_AXIS(a);
    }
    for (int k = 0, j = 0; k < rank; k++) {
        if (unsqueeze)
            s.d[s.ndim++] = mask & KILN_AXIS(k) ? 1 : in.d[j++];
        else if (count ? !(mask & KILN_AXIS(k)) : in.d[k] != 1)
            s.d[s.ndim++] = in.d[k];
    }
    n->out[0] = kiln_reshape(c->g, x, s);
    n->out_type[0] = ox_in_type(n, 0);
    carry_known(n, s);
    return 0;
}

static int conv_squeeze(ox_ctx *c, ox_node *n)
{
    return squeeze(c, n, 0);
}

static int conv_unsqueeze(ox_ctx *c, ox_node *n)
{
    return squeeze(c, n, 1);
}

/* Concatenation of known integer vectors (shape arithmetic) is folded. */
static void concat_known(ox_node *n)
{
    int64_t total = 0, v[64];
    for (int k = 0; k < n->n_in; k++) {
        const ox_host *h = n->in[k] ? n->in[k]->known : NULL;
        if (!h || (!h->i && h->numel) || h->shape.ndim != 1 ||
            total + h->numel > 64)
            return;
        if (h->numel)
            memcpy(v + total, h->i, (size_t)h->numel * sizeof *v);
        total += h->numel;
    }
    n->out_known[0] = ox_host_ints(KILN_SHAPE(total), v);
}

static int conv_concat(ox_ctx *c, ox_node *n)
{
    int64_t axis;
    kiln_node *xs[OX_MAX_IO];
    if (ox_attr_int(c, n, "axis", 0, &axis))
        return -1;
    int a = ox_axis(c, n, axis, kiln_node_shape(ox_in(c, n, 0)).ndim);
    if (a < 0)
        return -1;
    for (int k = 0; k < n->n_in; k++)
        xs[k] = ox_in(c, n, k);
    n->out[0] = kiln_concat(c->g, xs, n->n_in, a);
    n->out_type[0] = ox_in_type(n, 0);
    concat_known(n);
    return 0;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Slice's starts, ends and axes: attributes before opset 10, inputs from
   it; *steps the steps input (NULL when absent). */
static int slice_args(ox_ctx *c, ox_node *n, const int64_t *arg[3],
                      int64_t cnt[3], const int64_t **steps)
{
    static const char *const names[3] = {"starts", "ends", "axes"};
    for (int k = 0; k < 3; k++) {
        if (c->opset < 10) {
            if (ox_attr_ints(c, n, names[k], &arg[k], &cnt[k]))
                return -1;
            continue;
        }
        arg[k] = NULL;
        cnt[k] = 0;
        if (k == 2 && (n->n_in <= 3 || !n->in[3]))
            continue;
        const ox_host *h = ox_known_ints(c, n, k + 1);
        if (!h)
            return -1;
        arg[k] = h->i;
        cnt[k] = h->numel;
    }
    *steps = NULL;
    if (c->opset >= 10 && n->n_in > 4 && n->in[4]) {
        const ox_host *st = ox_known_ints(c, n, 4);
        if (!st)
            return -1;
        if (st->numel != cnt[0])
            return ox_problem(c, n, KILN_ERR_ARG, "%lld steps for %lld starts",
                              (long long)st->numel, (long long)cnt[0]),
                   -1;
        for (int64_t k = 0; k < st->numel; k++)
            if (st->i[k] != 1)
                *steps = st->i;
    }
    if (cnt[0] != cnt[1] || (arg[2] && cnt[2] != cnt[0]))
        return ox_problem(c, n, KILN_ERR_ARG,
                          "starts, ends and axes differ "
                          "in length"),
               -1;
    return 0;
}

static int conv_slice(ox_ctx *c, ox_node *n)
{
    const int64_t *arg[3], *steps;
    int64_t cnt[3];
    if (slice_args(c, n, arg, cnt, &steps))
        return -1;
    if (steps)
        return ox_slice_steps(c, n, arg, steps, cnt[0]);
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    int64_t start[KILN_MAX_DIMS], stop[KILN_MAX_DIMS];
    for (int k = 0; k < s.ndim; k++) {
        start[k] = 0;
        stop[k] = s.d[k];
    }
    for (int64_t k = 0; k < cnt[0]; k++) {
        int a = ox_axis(c, n, arg[2] ? arg[2][k] : k, s.ndim);
        if (a < 0)
            return -1;
        int64_t d = s.d[a], b = arg[0][k], e = arg[1][k];
        b = clamp64(b < 0 ? b + d : b, 0, d);
        e = clamp64(e < 0 ? e + d : e, 0, d);
        start[a] = b;
        stop[a] = e < b ? b : e;
    }
    n->out[0] = kiln_slice(c->g, x, start, stop);
    n->out_type[0] = ox_in_type(n, 0);
    /* a slice of a known vector (a prefix of a shape) stays known */
    const ox_host *h = n->in[0] ? n->in[0]->known : NULL;
    if (h && (h->i || !h->numel) && s.ndim == 1) /* also a 0-d's shape */
        n->out_known[0] = ox_host_ints(KILN_SHAPE(stop[0] - start[0]),
                                       h->i ? h->i + start[0] : NULL);
    return 0;
}

/* Split: the lengths from input 1 (opset 13) or the attribute 'split'
   (opset 11); without either, equal parts, one per output. */
static int conv_split(ox_ctx *c, ox_node *n)
{
    int64_t axis;
    if (ox_attr_int(c, n, "axis", 0, &axis))
        return -1;
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    int a = ox_axis(c, n, axis, s.ndim);
    if (a < 0)
        return -1;
    if (s.sym >> a & 1u)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "split along the symbolic dimension %d", a),
               -1;
    const int64_t *len = NULL;
    int64_t cnt = 0, d = s.d[a], each = 0, sum = 0;
    if (n->n_in > 1 && n->in[1]) {
        const ox_host *h = ox_known_ints(c, n, 1);
        if (!h)
            return -1;
        len = h->i;
        cnt = h->numel;
    } else if (ox_attr_ints(c, n, "split", &len, &cnt)) {
        return -1;
    }
    if (len && cnt != n->n_out)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "%lld split lengths for %d outputs", (long long)cnt,
                          n->n_out),
               -1;
    for (int64_t k = 0; len && k < cnt; k++) {
        if (len[k] < 0 || len[k] > d)
            return ox_problem(c, n, KILN_ERR_ARG,
                              "split length %lld outside [0, %lld]",
                              (long long)len[k], (long long)d),
                   -1;
        sum += len[k];
    }
    if (len && sum != d)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "split lengths add up to %lld, not dimension %d's "
                          "%lld",
                          (long long)sum, a, (long long)d),
               -1;
    if (!len && (n->n_out < 1 || d % n->n_out))
        return ox_problem(c, n, KILN_ERR_ARG,
                          "dimension %d (%lld) does not split into %d equal "
                          "parts",
                          a, (long long)d, n->n_out),
               -1;
    if (!len)
        each = d / n->n_out;
    int64_t start[KILN_MAX_DIMS], stop[KILN_MAX_DIMS], at = 0;
    for (int k = 0; k < s.ndim; k++) {
        start[k] = 0;
        stop[k] = s.d[k];
    }
    for (int k = 0; k < n->n_out; k++) {
        start[a] = at;
        stop[a] = at += len ? len[k] : each;
        n->out[k] = kiln_slice(c->g, x, start, stop);
        n->out_type[k] = ox_in_type(n, 0);
    }
    return 0;
}

/* Known indices: negatives wrapped, then an i32 constant. */
static kiln_node *known_indices(ox_ctx *c, ox_node *n, const ox_host *h,
                                int64_t dim)
{
    int32_t *v = malloc(h->numel ? (size_t)h->numel * sizeof *v : 1);
    if (!v)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), NULL;
    for (int64_t k = 0; k < h->numel; k++) {
        int64_t i = h->i[k] < 0 ? h->i[k] + dim : h->i[k];
        if (i < 0 || i >= dim) {
            free(v);
            return ox_problem(c, n, KILN_ERR_ARG, "index %lld out of range",
                              (long long)h->i[k]),
                   NULL;
        }
        v[k] = (int32_t)i;
    }
    kiln_node *idx = kiln_constant(c->g, KILN_I32, KILN_SHAPE(h->numel), v);
    free(v);
    return idx;
}

kiln_node *ox_wrap_indices(ox_ctx *c, kiln_node *idx, int64_t dim)
{
    kiln_node *f = kiln_cast(c->g, idx, KILN_F32);
    kiln_node *neg = kiln_lt(c->g, f, kiln_scalar(c->g, 0));
    kiln_node *up = kiln_add(c->g, f, kiln_scalar(c->g, (float)dim));
    return kiln_cast(c->g, kiln_select(c->g, neg, up, f), KILN_I32);
}

/* Gather of a known vector at known indices (shape arithmetic). */
static void gather_known(ox_node *n, const ox_host *idx)
{
    const ox_host *d = n->in[0] ? n->in[0]->known : NULL;
    int64_t v[64];
    if (!d || !d->i || d->shape.ndim != 1 || !idx || idx->numel > 64)
        return;
    for (int64_t k = 0; k < idx->numel; k++) {
        int64_t i = idx->i[k] < 0 ? idx->i[k] + d->numel : idx->i[k];
        if (i < 0 || i >= d->numel)
            return;
        v[k] = d->i[i];
    }
    n->out_known[0] = ox_host_ints(idx->shape, v);
}

static int conv_gather(ox_ctx *c, ox_node *n)
{
    int64_t axis;
    kiln_node *x = ox_in(c, n, 0), *idx = ox_in(c, n, 1);
    kiln_shape s = kiln_node_shape(x), is = kiln_node_shape(idx), out = {0};
    if (!x || !idx)
        return ox_problem(c, n, KILN_ERR_IO, "data and indices are required"),
               -1;
    if (ox_attr_int(c, n, "axis", 0, &axis))
        return -1;
    int a = ox_axis(c, n, axis, s.ndim);
    if (a < 0)
        return -1;
    if (s.ndim - 1 + is.ndim > KILN_MAX_DIMS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "more than 8 dims"), -1;
    const ox_host *known = n->in[1]->known;
    if (known && known->i)
        idx = known_indices(c, n, known, s.d[a]);
    else
        idx = ox_wrap_indices(
            c, kiln_reshape(c->g, idx, KILN_SHAPE(kiln_shape_numel(is))),
            s.d[a]);
    if (!idx)
        return -1;
    for (int k = 0; k < a; k++)
        out.d[out.ndim++] = s.d[k];
    for (int k = 0; k < is.ndim; k++)
        out.d[out.ndim++] = is.d[k];
    for (int k = a + 1; k < s.ndim; k++)
        out.d[out.ndim++] = s.d[k];
    n->out[0] = kiln_reshape(c->g, kiln_index_select(c->g, x, a, idx), out);
    n->out_type[0] = ox_in_type(n, 0);
    gather_known(n, known && known->i ? known : NULL);
    return 0;
}

static int conv_shape(ox_ctx *c, ox_node *n)
{
    kiln_shape s = kiln_node_shape(ox_in(c, n, 0));
    int64_t start, end, v[KILN_MAX_DIMS];
    if (ox_attr_int(c, n, "start", 0, &start) ||
        ox_attr_int(c, n, "end", s.ndim, &end))
        return -1;
    start = clamp64(start < 0 ? start + s.ndim : start, 0, s.ndim);
    end = clamp64(end < 0 ? end + s.ndim : end, start, s.ndim);
    int32_t v32[KILN_MAX_DIMS];
    for (int64_t k = start; k < end; k++) {
        v[k - start] = s.d[k];
        v32[k - start] = (int32_t)s.d[k];
    }
    kiln_shape os = KILN_SHAPE(end - start);
    n->out[0] = kiln_constant(c->g, KILN_I32, os, v32);
    n->out_type[0] = OX_INT64;
    n->out_known[0] = ox_host_ints(os, v);
    return 0;
}

static int conv_size(ox_ctx *c, ox_node *n)
{
    int64_t v = kiln_shape_numel(kiln_node_shape(ox_in(c, n, 0)));
    int32_t v32 = (int32_t)v;
    if (v > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "size above i32"), -1;
    n->out[0] = kiln_constant(c->g, KILN_I32, KILN_SCALAR, &v32);
    n->out_type[0] = OX_INT64;
    n->out_known[0] = ox_host_ints(KILN_SCALAR, &v);
    return 0;
}

const ox_op ox_shape_ops[] = {
    {"Reshape", conv_reshape, "shape,allowzero"},
    {"Flatten", conv_flatten, "axis"},
    {"Transpose", conv_transpose, "perm"},
    {"Squeeze", conv_squeeze, "axes"},
    {"Unsqueeze", conv_unsqueeze, "axes"},
    {"Concat", conv_concat, "axis"},
    {"Slice", conv_slice, "starts,ends,axes"},
    {"Split", conv_split, "axis,split"},
    {"Gather", conv_gather, "axis"},
    {"Shape", conv_shape, "start,end"},
    {"Size", conv_size, ""},
    {NULL, NULL, NULL},
};
