/* Converters of more ops composed from Kiln primitives: Pad's reflect and
   edge modes, hyperbolic functions and Tan, EyeLike, CastLike, OneHot,
   DepthToSpace, SpaceToDepth, ScatterElements, TopK, Compress, the window
   functions, and the broadcast of ops before opset 7. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

kiln_node *ox_pad_mode(ox_ctx *c, const ox_node *n, kiln_node *x,
                       const int64_t *pads, const char *mode)
{
    kiln_shape s = kiln_node_shape(x), flat, out = s;
    int nd = s.ndim;
    kiln_padding how = !strcmp(mode, "reflect") ? KILN_PAD_REFLECT
                       : !strcmp(mode, "edge")  ? KILN_PAD_REPLICATE
                                                : 0;
    if (!how)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "mode '%s'", mode), NULL;
    for (int k = 0; k < nd; k++) {
        out.d[k] += pads[k] + pads[nd + k];
        if (k < nd - 2 && (pads[k] || pads[nd + k]))
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                              "mode '%s' padding other than the last two dims",
                              mode),
                   NULL;
    }
    /* Kiln pads the last two dims of a 3-D tensor: [rest, H, W]. */
    int64_t h = nd >= 2 ? s.d[nd - 2] : 1, w = nd >= 1 ? s.d[nd - 1] : 1;
    int64_t p[4] = {nd >= 1 ? pads[nd - 1] : 0, nd >= 1 ? pads[2 * nd - 1] : 0,
                    nd >= 2 ? pads[nd - 2] : 0, nd >= 2 ? pads[2 * nd - 2] : 0};
    flat = KILN_SHAPE(h && w ? kiln_shape_numel(s) / (h * w) : 0, h, w);
    kiln_dtype dt = kiln_node_dtype(x);
    if (dt != KILN_F32) /* Kiln pads floats; integers convert exactly */
        x = kiln_cast(c->g, x, KILN_F32);
    kiln_node *y = kiln_pad_mode(c->g, kiln_reshape(c->g, x, flat), p, 4, how);
    y = kiln_reshape(c->g, y, out);
    return dt != KILN_F32 ? kiln_cast(c->g, y, dt) : y;
}

/* Tan, Sinh, Cosh, Asinh, Acosh, Atanh from exp, log and the like. */
static int conv_hyperbolic(ox_ctx *c, ox_node *n)
{
    kiln_graph *g = c->g;
    kiln_node *x = ox_f32(c, n, 0), *y, *half = kiln_scalar(g, 0.5f);
    kiln_node *one = kiln_scalar(g, 1);
    const char *op = n->p->op_type;
    if (!strcmp(op, "Tan"))
        y = kiln_div(g, kiln_sin(g, x), kiln_cos(g, x));
    else if (!strcmp(op, "Sinh"))
        y = kiln_mul(
            g, half,
            kiln_sub(g, kiln_expm1(g, x), kiln_expm1(g, kiln_neg(g, x))));
    else if (!strcmp(op, "Cosh"))
        y = kiln_mul(g, half,
                     kiln_add(g, kiln_exp(g, x), kiln_exp(g, kiln_neg(g, x))));
    else if (!strcmp(op, "Asinh")) {
        kiln_node *a = kiln_abs(g, x);
        kiln_node *r = kiln_sqrt(g, kiln_add(g, kiln_mul(g, a, a), one));
        y = kiln_mul(g, kiln_sign(g, x), kiln_log(g, kiln_add(g, a, r)));
    } else if (!strcmp(op, "Acosh"))
        y = kiln_log(
            g,
            kiln_add(g, x, kiln_sqrt(g, kiln_sub(g, kiln_mul(g, x, x), one))));
    else
        y = kiln_mul(
            g, half,
            kiln_sub(g, kiln_log1p(g, x), kiln_log1p(g, kiln_neg(g, x))));
    ox_out(c, n, y, ox_in_type(n, 0));
    return 0;
}

/* EyeLike's most rows (its table of columns is made while loading). */
#define OX_MAX_EYE_ROWS ((int64_t)1 << 24)

static int conv_eye_like(ox_ctx *c, ox_node *n)
{
    int64_t dtype, k;
    kiln_shape s = kiln_node_shape(ox_in(c, n, 0));
    char b[32];
    if (ox_attr_int(c, n, "dtype", ox_in_type(n, 0), &dtype) ||
        ox_attr_int(c, n, "k", 0, &k))
        return -1;
    if (!ox_type_supported((int)dtype))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "dtype %s",
                          ox_type_name((int)dtype, b, sizeof b)),
               -1;
    if (s.ndim != 2)
        return ox_problem(c, n, KILN_ERR_SHAPE, "input of rank %d", s.ndim), -1;
    /* row i is the one-hot row of column i + k (none outside): a table of
       the rows while loading, not of the matrix */
    if (s.d[0] > OX_MAX_EYE_ROWS || s.d[1] > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "a %lld x %lld identity (at most %lld rows, %d "
                          "columns)",
                          (long long)s.d[0], (long long)s.d[1],
                          (long long)OX_MAX_EYE_ROWS, INT32_MAX),
               -1;
    /* past the matrix every row is zero: k clamped, i + k cannot overflow */
    k = k < -s.d[0] ? -s.d[0] : k > s.d[1] ? s.d[1] : k;
    int32_t *col = malloc((size_t)s.d[0] * sizeof *col + 1);
    if (!col)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    for (int64_t i = 0; i < s.d[0]; i++)
        col[i] = i + k >= 0 && i + k < s.d[1] ? (int32_t)(i + k) : -1;
    kiln_node *at = kiln_constant(c->g, KILN_I32, KILN_SHAPE(s.d[0]), col);
    free(col);
    ox_out(c, n, kiln_one_hot(c->g, at, (int)s.d[1]), (int)dtype);
    return 0;
}

/* Cast to the type of input 1 (bools: nonzero is true). */
static int conv_cast_like(ox_ctx *c, ox_node *n)
{
    int to = ox_in_type(n, 1);
    kiln_node *x = ox_in(c, n, 0);
    if (to == OX_BOOL) {
        kiln_node *z = kiln_eq(c->g, ox_f32(c, n, 0), kiln_scalar(c->g, 0));
        x = kiln_sub(c->g, kiln_scalar(c->g, 1), z);
    }
    ox_out(c, n, ox_round_to(c, x, to), to);
    return 0;
}

/* values[0] where indices miss, values[1] at their depth position (a new
   axis); negative indices count from the end. */
static int conv_one_hot(ox_ctx *c, ox_node *n)
{
    int64_t axis;
    const ox_host *dh = n->n_in > 1 && n->in[1] ? n->in[1]->known : NULL;
    if (ox_attr_int(c, n, "axis", -1, &axis))
        return -1;
    if (!dh || dh->numel != 1)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "depth must be a scalar known while loading"),
               -1;
    double depth = dh->f ? dh->f[0] : (double)dh->i[0];
    kiln_node *idx = ox_in(c, n, 0), *vals = ox_f32(c, n, 2);
    int nd = kiln_node_shape(idx).ndim + 1, a = ox_axis(c, n, axis, nd);
    if (a < 0 || !(depth >= 1 && depth <= INT32_MAX))
        return a < 0 ? -1 : (ox_problem(c, n, KILN_ERR_ARG, "bad depth"), -1);
    if (kiln_node_dtype(idx) != KILN_I32)
        idx = kiln_cast(c->g, idx, KILN_I32);
    idx = ox_wrap_indices(c, idx, (int64_t)depth);
    kiln_node *oh = kiln_one_hot(c->g, idx, (int)depth);
    int64_t zero = 0, one = 1, two = 2;
    kiln_node *off =
        kiln_reshape(c->g, kiln_slice(c->g, vals, &zero, &one), KILN_SCALAR);
    kiln_node *on =
        kiln_reshape(c->g, kiln_slice(c->g, vals, &one, &two), KILN_SCALAR);
    kiln_node *y =
        kiln_add(c->g, off, kiln_mul(c->g, oh, kiln_sub(c->g, on, off)));
    int perm[KILN_MAX_DIMS];
    for (int k = 0, at = 0; k < nd; k++)
        perm[k] = k == a ? nd - 1 : at++;
    ox_out(c, n, kiln_permute(c->g, y, perm), ox_in_type(n, 2));
    return 0;
}

/* DepthToSpace (DCR or CRD) and SpaceToDepth: a reshape to 6 dims, a
   permute and a reshape back. */
static int conv_depth_space(ox_ctx *c, ox_node *n)
{
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3},
                     s2d[6] = {0, 3, 5, 1, 2, 4};
    int64_t b;
    char mode[8];
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape s = kiln_node_shape(x), six, out;
    int to_space = !strcmp(n->p->op_type, "DepthToSpace");
    if (ox_attr_int(c, n, "blocksize", 0, &b) ||
        ox_attr_string(c, n, "mode", "DCR", mode, sizeof mode))
        return -1;
    int is_crd = !strcmp(mode, "CRD");
    /* b * b below 2^40 first: b * b divides the channels, b the sides */
    if (s.ndim != 4 || b < 1 || b > (1 << 20) ||
        (to_space && s.d[1] % (b * b)) ||
        (!to_space && (s.d[2] % b || s.d[3] % b)))
        return ox_problem(c, n, KILN_ERR_SHAPE, "blocksize %lld for this input",
                          (long long)b),
               -1;
    if (!is_crd && strcmp(mode, "DCR"))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "mode '%s'", mode), -1;
    int64_t N = s.d[0], C = s.d[1], H = s.d[2], W = s.d[3];
    if (to_space) {
        six = is_crd ? KILN_SHAPE(N, C / (b * b), b, b, H, W)
                     : KILN_SHAPE(N, b, b, C / (b * b), H, W);
        out = KILN_SHAPE(N, C / (b * b), H * b, W * b);
    } else {
        six = KILN_SHAPE(N, C, H / b, b, W / b, b);
        out = KILN_SHAPE(N, C * b * b, H / b, W / b);
    }
    const int *perm = !to_space ? s2d : is_crd ? crd : dcr;
    kiln_node *y = kiln_permute(c->g, kiln_reshape(c->g, x, six), perm);
    n->out[0] = kiln_reshape(c->g, y, out);
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

/* data with updates written (reduction none) or added (add) at indices
   along axis; written positions are found by scattering ones. */
static int conv_scatter(ox_ctx *c, ox_node *n)
{
    int64_t axis;
    char red[8];
    kiln_graph *g = c->g;
    if (ox_attr_int(c, n, "axis", 0, &axis) ||
        ox_attr_string(c, n, "reduction", "none", red, sizeof red))
        return -1;
    kiln_node *x = ox_f32(c, n, 0), *idx = ox_in(c, n, 1), *u = ox_f32(c, n, 2);
    kiln_shape s = kiln_node_shape(x);
    int a = ox_axis(c, n, axis, s.ndim);
    if (a < 0)
        return -1;
    idx = ox_wrap_indices(c, idx, s.d[a]);
    kiln_node *y;
    if (!strcmp(red, "add"))
        y = kiln_scatter_add(g, x, a, idx, u);
    else if (!strcmp(red, "none")) {
        kiln_node *zero = ox_fill(g, s, 0);
        kiln_node *hit = kiln_scatter_add(g, zero, a, idx,
                                          ox_fill(g, kiln_node_shape(u), 1));
        y = kiln_select(g, hit, kiln_scatter_add(g, zero, a, idx, u), x);
    } else
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "reduction '%s'", red),
               -1;
    ox_out(c, n, y, ox_in_type(n, 0));
    return 0;
}

/* The k largest (or smallest: of -x) along axis, sorted. */
static int conv_topk(ox_ctx *c, ox_node *n)
{
    int64_t axis, largest, sorted;
    const ox_host *kh = ox_known_ints(c, n, 1);
    if (!kh || ox_attr_int(c, n, "axis", -1, &axis) ||
        ox_attr_int(c, n, "largest", 1, &largest) ||
        ox_attr_int(c, n, "sorted", 1, &sorted))
        return -1;
    if (!sorted)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "sorted=0"), -1;
    kiln_node *x = ox_f32(c, n, 0), *v, *i;
    int a = ox_axis(c, n, axis, kiln_node_shape(x).ndim);
    if (a < 0 || kh->numel != 1 || kh->i[0] < 0 || kh->i[0] > INT32_MAX)
        return a < 0 ? -1 : (ox_problem(c, n, KILN_ERR_ARG, "bad k"), -1);
    if (kiln_topk(c->g, largest ? x : kiln_neg(c->g, x), (int)kh->i[0], a, &v,
                  &i) != KILN_OK)
        return 0; /* the graph's error is reported */
    ox_out(c, n, largest ? v : kiln_neg(c->g, v), ox_in_type(n, 0));
    n->out[1] = i;
    n->out_type[1] = OX_INT64;
    return 0;
}

kiln_node *ox_legacy_broadcast(ox_ctx *c, const ox_node *n, kiln_node *a, int i)
{
    kiln_node *b = ox_f32(c, n, i);
    int64_t bc, axis;
    if (c->opset >= 7 || !ox_attr(n, "axis") ||
        ox_attr_int(c, n, "broadcast", 0, &bc) ||
        ox_attr_int(c, n, "axis", 0, &axis) || !bc)
        return b;
    kiln_shape as = kiln_node_shape(a), bs = kiln_node_shape(b), s = {0};
    int at = ox_axis(c, n, axis, as.ndim);
    if (at < 0 || at + bs.ndim > as.ndim)
        return NULL; /* recorded, or the op names the shapes */
    s.ndim = as.ndim;
    for (int k = 0; k < s.ndim; k++)
        s.d[k] = k >= at && k < at + bs.ndim ? bs.d[k - at] : 1;
    return kiln_reshape(c->g, b, s);
}

/* The slices of x along axis (x flattened without one) where the known
   condition holds. */
static int conv_compress(ox_ctx *c, ox_node *n)
{
    const ox_value *cv = n->n_in > 1 ? n->in[1] : NULL;
    const ox_host *h = cv ? cv->known : NULL;
    kiln_node *x = ox_in(c, n, 0);
    int64_t axis;
    if (!h || h->shape.ndim != 1)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                          "condition must be a vector known while loading"),
               -1;
    if (ox_attr_int(c, n, "axis", 0, &axis))
        return -1;
    int a = 0;
    if (!ox_attr(n, "axis"))
        x = kiln_reshape(c->g, x, KILN_SHAPE(-1));
    else if ((a = ox_axis(c, n, axis, kiln_node_shape(x).ndim)) < 0)
        return -1;
    int64_t len = kiln_node_shape(x).d[a], kept = 0;
    int32_t *idx = malloc((size_t)h->numel * sizeof *idx + 1);
    if (!idx)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    for (int64_t k = 0; k < h->numel && k < len; k++)
        if (h->f ? h->f[k] != 0 : h->i[k] != 0)
            idx[kept++] = (int32_t)k;
    kiln_node *in = kiln_constant(c->g, KILN_I32, KILN_SHAPE(kept), idx);
    free(idx);
    n->out[0] = kiln_index_select(c->g, x, a, in);
    n->out_type[0] = ox_in_type(n, 0);
    return 0;
}

/* Hann, Hamming and Blackman windows of a known size: sums of cosines
   a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N), N the size (periodic) or
   the size - 1 (symmetric). */
static int conv_window(ox_ctx *c, ox_node *n)
{
    int64_t periodic, dtype;
    const ox_host *h = ox_known_ints(c, n, 0);
    const char *op = n->p->op_type;
    double a1 = !strcmp(op, "HammingWindow") ? 21.0 / 46 : 0.5;
    double a0 = !strcmp(op, "BlackmanWindow") ? 0.42 : 1 - a1;
    double a2 = !strcmp(op, "BlackmanWindow") ? 0.08 : 0;
    if (!h || ox_attr_int(c, n, "periodic", 1, &periodic) ||
        ox_attr_int(c, n, "output_datatype", OX_FLOAT, &dtype))
        return -1;
    if (h->numel != 1 || h->i[0] < 0 || h->i[0] > OX_MAX_COMPUTED ||
        !ox_type_supported((int)dtype))
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "size or output type"),
               -1;
    int64_t size = h->i[0];
    double N = (double)(periodic ? size : size - 1);
    float *v = malloc((size_t)size * sizeof *v + 1);
    if (!v)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), -1;
    for (int64_t k = 0; k < size; k++) {
        double t = 2 * 3.14159265358979323846 * (double)k / N;
        v[k] = (float)(a0 - a1 * cos(t) + a2 * cos(2 * t));
    }
    ox_out(c, n, kiln_constant(c->g, KILN_F32, KILN_SHAPE(size), v),
           (int)dtype);
    free(v);
    return 0;
}

const ox_op ox_misc_ops[] = {
    {"Tan", conv_hyperbolic, ""},
    {"Sinh", conv_hyperbolic, ""},
    {"Cosh", conv_hyperbolic, ""},
    {"Asinh", conv_hyperbolic, ""},
    {"Acosh", conv_hyperbolic, ""},
    {"Atanh", conv_hyperbolic, ""},
    {"EyeLike", conv_eye_like, "dtype,k"},
    {"CastLike", conv_cast_like, ""},
    {"OneHot", conv_one_hot, "axis"},
    {"DepthToSpace", conv_depth_space, "blocksize,mode"},
    {"SpaceToDepth", conv_depth_space, "blocksize"},
    {"ScatterElements", conv_scatter, "axis,reduction"},
    {"Scatter", conv_scatter, "axis"},
    {"TopK", conv_topk, "axis,largest,sorted"},
    {"Compress", conv_compress, "axis"},
    {"HannWindow", conv_window, "output_datatype,periodic"},
    {"HammingWindow", conv_window, "output_datatype,periodic"},
    {"BlackmanWindow", conv_window, "output_datatype,periodic"},
    {NULL, NULL, NULL},
};
