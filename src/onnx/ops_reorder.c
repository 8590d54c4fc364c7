/* Converters that move data by indices (and BitShift, whose powers of two
   are looked up): ReverseSequence (the indices
   computed in the graph from sequence_lens, so the lengths may be given
   only when running) and MaxUnpool (the values scattered to MaxPool's
   flat indices).  Both are built from Kiln's index ops, so gradients reach
   the data. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Positions are computed in f32: exact below 2^24. */
#define EXACT_F32 ((int64_t)1 << 24)

/* A constant [rows, cols] f32 holding 0, 1, ... along its longer axis (one
   of rows, cols is 1). */
static kiln_node *count_up(ox_ctx *c, const ox_node *n, int64_t rows,
                           int64_t cols)
{
    int64_t len = rows * cols;
    float *v = malloc((size_t)len * sizeof *v + 1);
    if (!v)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), NULL;
    for (int64_t k = 0; k < len; k++)
        v[k] = (float)k;
    kiln_node *y = kiln_constant(c->g, KILN_F32, KILN_SHAPE(rows, cols), v);
    free(v);
    return y;
}

/* x with, for each batch entry b, its first sequence_lens[b] time steps
   reversed and the rest as they are.  x is viewed as [D0 * D1, rest]; the
   source of position (t, b) is t' = t < len[b] ? len[b] - 1 - t : t, one
   index_select of the flattened positions. */
static int conv_reverse_sequence(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    int64_t ba, ta;
    if (ox_attr_int(c, n, "batch_axis", 1, &ba) ||
        ox_attr_int(c, n, "time_axis", 0, &ta))
        return -1;
    kiln_node *x = ox_in(c, n, 0), *lens = ox_in(c, n, 1);
    kiln_shape s = kiln_node_shape(x), ls = kiln_node_shape(lens);
    if (s.ndim < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        return ox_problem(c, n, KILN_ERR_ARG,
                          "batch_axis %lld and time_axis %lld of an input of "
                          "%d dims: want 0 and 1 in some order",
                          (long long)ba, (long long)ta, s.ndim),
               -1;
    int64_t nb = s.d[ba], nt = s.d[ta], rest = 1;
    if (ls.ndim != 1 || ls.d[0] != nb)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "sequence_lens must be [%lld] (the batch)",
                          (long long)nb),
               -1;
    if (nb * nt >= EXACT_F32)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "%lld x %lld positions (at most 2^24)", (long long)nt,
                          (long long)nb),
               -1;
    for (int k = 2; k < s.ndim; k++)
        rest *= s.d[k];
    /* time along the axes as x has them: [T, 1] and [1, B] when time is
       axis 0, [1, T] and [B, 1] otherwise */
    int t0 = ta == 0;
    kiln_node *t = t0 ? count_up(c, n, nt, 1) : count_up(c, n, 1, nt);
    kiln_node *b = t0 ? count_up(c, n, 1, nb) : count_up(c, n, nb, 1);
    if (!t || !b)
        return -1;
    kiln_node *len = kiln_reshape(g, kiln_cast(g, lens, KILN_F32),
                                  t0 ? KILN_SHAPE(1, nb) : KILN_SHAPE(nb, 1));
    kiln_node *back =
        kiln_sub(g, kiln_sub(g, len, kiln_scalar(g, 1)), t); /* len - 1 - t */
    kiln_node *src = kiln_select(g, kiln_lt(g, t, len), back,
                                 kiln_add(g, t, kiln_scale(g, b, 0)));
    kiln_node *flat = t0 ? kiln_add(g, kiln_scale(g, src, (float)nb), b)
                         : kiln_add(g, kiln_scale(g, b, (float)nt), src);
    kiln_node *idx =
        kiln_reshape(g, kiln_cast(g, flat, KILN_I32), KILN_SHAPE(nb * nt));
    kiln_node *y = kiln_index_select(
        g, kiln_reshape(g, x, KILN_SHAPE(nb * nt, rest)), 0, idx);
    ox_out(c, n, kiln_reshape(g, y, s), ox_in_type(n, 0));
    return 0;
}

/* MaxUnpool's shape: per spatial axis (in - 1) * stride - pads + kernel
   into *unpooled (I's flat indices count in it), and output_shape (input
   2) into *out when given (the unpooled padded at the ends to it), else
   *unpooled.  -1 (recorded) when either is bad. */
static int unpool_shape(ox_ctx *c, const ox_node *n, kiln_shape xs,
                        kiln_shape *unpooled, kiln_shape *out)
{
    int sp = xs.ndim - 2;
    int64_t k[KILN_MAX_DIMS], st[KILN_MAX_DIMS], pads[2 * KILN_MAX_DIMS];
    if (sp < 1)
        return ox_problem(c, n, KILN_ERR_SHAPE, "X must be [N, C, spatial...]"),
               -1;
    if (ox_ints_attr(c, n, "kernel_shape", sp, 1, k) ||
        ox_ints_attr(c, n, "strides", sp, 1, st) ||
        ox_ints_attr(c, n, "pads", 2 * sp, 0, pads))
        return -1;
    *unpooled = xs;
    for (int a = 0; a < sp; a++) {
        int64_t d;
        if (__builtin_mul_overflow(xs.d[2 + a] - 1, st[a], &d) ||
            d > KILN_MAX_NUMEL)
            d = KILN_MAX_NUMEL + 1; /* too large whatever the pads */
        else
            d = d - pads[a] - pads[sp + a] + k[a];
        if (d < 1 || d > KILN_MAX_NUMEL)
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "spatial axis %d unpools to %lld points", a,
                              (long long)d),
                   -1;
        unpooled->d[2 + a] = d;
    }
    if (kiln_shape_numel(*unpooled) < 0)
        return ox_problem(c, n, KILN_ERR_SHAPE, "the output is too large"), -1;
    *out = *unpooled;
    if (n->n_in < 3 || !n->in[2])
        return 0;
    const ox_host *h = ox_known_ints(c, n, 2);
    if (!h)
        return -1;
    if (h->numel != xs.ndim)
        return ox_problem(c, n, KILN_ERR_ARG,
                          "output_shape has %lld entries, X %d dims",
                          (long long)h->numel, xs.ndim),
               -1;
    for (int a = 0; a < xs.ndim; a++) {
        out->d[a] = h->i[a];
        if (h->i[a] < unpooled->d[a] || h->i[a] > KILN_MAX_NUMEL ||
            (a < 2 && h->i[a] != xs.d[a]))
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "output_shape[%d] is %lld: want X's N and C, "
                              "and no less than the unpooled %lld",
                              a, (long long)h->i[a], (long long)unpooled->d[a]),
                   -1;
    }
    if (kiln_shape_numel(*out) < 0)
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "output_shape has too many elements"),
               -1;
    return 0;
}

/* Zeros of the unpooled shape with X's values at I's flat positions,
   then zeros at the ends of the axes up to output_shape (as ONNX's tests
   have it).
   Overlapping pool windows can give one position twice, each time with the
   same maximum: it is written once (the sum divided by the count), as
   ONNX Runtime and PyTorch do. */
static int conv_max_unpool(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0), *idx = ox_in(c, n, 1);
    kiln_shape xs = kiln_node_shape(x), unpooled, out;
    kiln_shape is = kiln_node_shape(idx);
    int same = is.ndim == xs.ndim;
    for (int a = 0; same && a < xs.ndim; a++)
        same = is.d[a] == xs.d[a];
    if (!same)
        return ox_problem(c, n, KILN_ERR_SHAPE, "I must have X's shape"), -1;
    if (unpool_shape(c, n, xs, &unpooled, &out))
        return -1;
    int64_t count = kiln_shape_numel(xs), total = kiln_shape_numel(unpooled);
    kiln_node *zero = ox_fill(g, KILN_SHAPE(total), 0);
    idx = kiln_reshape(g, idx, KILN_SHAPE(count));
    kiln_node *sum = kiln_scatter_add(g, zero, 0, idx,
                                      kiln_reshape(g, x, KILN_SHAPE(count)));
    kiln_node *hits =
        kiln_scatter_add(g, zero, 0, idx, ox_fill(g, KILN_SHAPE(count), 1));
    kiln_node *once = kiln_select(g, kiln_lt(g, hits, kiln_scalar(g, 0.5f)),
                                  ox_fill(g, KILN_SHAPE(total), 1), hits);
    kiln_node *y = kiln_reshape(g, kiln_div(g, sum, once), unpooled);
    int64_t lo[KILN_MAX_DIMS] = {0}, hi[KILN_MAX_DIMS];
    int grow = 0;
    for (int a = 0; a < xs.ndim; a++)
        grow |= (hi[a] = out.d[a] - unpooled.d[a]) != 0;
    ox_out(c, n, grow ? kiln_pad(g, y, lo, hi, 0) : y, OX_FLOAT);
    return 0;
}

/* BitShift of unsigned integers held in i32: x times or floor-divided by
   2^y, 2^y looked up exactly in a table (y clamped to 0..30, so shifts
   past 30 bits act as 30); a left shift wraps modulo 2^bits of the type
   (uint8, uint16; uint32 wraps in i32, its top bit as the sign). */
static int conv_bit_shift(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    char dir[8];
    if (ox_attr_string(c, n, "direction", "", dir, sizeof dir))
        return -1;
    int left = !strcmp(dir, "LEFT"), type = ox_in_type(n, 0);
    int bits = type == OX_UINT8 ? 8 : type == OX_UINT16 ? 16 : 32;
    if (!left && strcmp(dir, "RIGHT"))
        return ox_problem(c, n, KILN_ERR_ARG, "direction '%s'", dir), -1;
    if (type != OX_UINT8 && type != OX_UINT16 && type != OX_UINT32 &&
        type != OX_UINT64)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "BitShift of a signed or non-integer type"),
               -1;
    int32_t pow2[31];
    for (int k = 0; k < 31; k++)
        pow2[k] = (int32_t)1 << k;
    kiln_node *x = ox_in(c, n, 0), *y = ox_in(c, n, 1);
    kiln_shape ys = kiln_node_shape(y);
    kiln_node *at =
        kiln_cast(g, kiln_clamp(g, kiln_cast(g, y, KILN_F32), 0, 30), KILN_I32);
    kiln_node *p =
        kiln_reshape(g,
                     kiln_index_select(
                         g, kiln_constant(g, KILN_I32, KILN_SHAPE(31), pow2), 0,
                         kiln_reshape(g, at, KILN_SHAPE(kiln_shape_numel(ys)))),
                     ys);
    kiln_node *r = left ? kiln_int_mul(g, x, p) : kiln_int_floor_div(g, x, p);
    if (left && bits < 32) {
        int32_t m = (int32_t)1 << bits;
        r = kiln_int_mod(g, r, kiln_constant(g, KILN_I32, KILN_SCALAR, &m));
    }
    ox_out(c, n, r, type);
    return 0;
}

const ox_op ox_reorder_ops[] = {
    {"ReverseSequence", conv_reverse_sequence, "batch_axis,time_axis"},
    {"MaxUnpool", conv_max_unpool, "kernel_shape,pads,strides"},
    {"BitShift", conv_bit_shift, "direction"},
    {NULL, NULL, NULL},
};
