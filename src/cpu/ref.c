/* Reference kernels: plain loops, double accumulation in reductions.  They
   define what every op computes; fast kernels are tested against them. */
#include <math.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/conv.h"
#include "cpu/fused.h"
#include "cpu/index.h"
#include "cpu/int_math.h"
#include "cpu/scan.h"
#include "cpu/kernels.h"
#include "cpu/pool_kernels.h"
#include "cpu/norm.h"
#include "cpu/scalar.h"

/* ------------------------------------------------------------ broadcasting */

/* Walks an output shape while tracking the element offset of up to three
   inputs viewed through broadcast strides. */
typedef struct bcast_iter {
    int nd, nin;
    int64_t dim[KILN_MAX_DIMS], idx[KILN_MAX_DIMS];
    int64_t st[3][KILN_MAX_DIMS];
    int64_t off[3];
} bcast_iter;

static void bcast_init(bcast_iter *it, const kiln_node *n)
{
    memset(it, 0, sizeof *it);
    it->nd = n->shape.ndim;
    it->nin = n->n_in;
    for (int d = 0; d < it->nd; d++)
        it->dim[d] = n->shape.d[d];
    for (int k = 0; k < n->n_in && k < 3; k++)
        kiln_broadcast_strides(n->in[k]->shape, n->shape, it->st[k]);
}

static void bcast_next(bcast_iter *it)
{
    for (int d = it->nd - 1; d >= 0; d--) {
        it->idx[d]++;
        for (int k = 0; k < it->nin; k++)
            it->off[k] += it->st[k][d];
        if (it->idx[d] < it->dim[d])
            return;
        for (int k = 0; k < it->nin; k++)
            it->off[k] -= it->st[k][d] * it->dim[d];
        it->idx[d] = 0;
    }
}

static int same_shapes(const kiln_node *n)
{
    for (int k = 0; k < n->n_in; k++)
        if (!kiln_shape_equal(n->in[k]->shape, n->shape))
            return 0;
    return 1;
}

/* ------------------------------------------------------------ elementwise */

/* One kernel per row of the elementwise table, its formula f with libm
   (the op names are pasted, never expanded: EXP is a macro here). */
#define KILN_UNARY(OP, name, f, ...)                                           \
    static void ref_##OP(const kiln_node *n, void *o, void *const *in)         \
    {                                                                          \
        float *out = o;                                                        \
        const float *a = in[0];                                                \
        int64_t len = kiln_shape_numel(n->shape);                              \
        for (int64_t i = 0; i < len; i++) {                                    \
            float x = a[i];                                                    \
            out[i] = (f);                                                      \
        }                                                                      \
    }

#define KILN_BINARY(OP, name, f, ...)                                          \
    static void ref_##OP(const kiln_node *n, void *o, void *const *in)         \
    {                                                                          \
        float *out = o;                                                        \
        const float *pa = in[0], *pb = in[1];                                  \
        int64_t len = kiln_shape_numel(n->shape);                              \
        if (same_shapes(n)) {                                                  \
            for (int64_t i = 0; i < len; i++) {                                \
                float x = pa[i], y = pb[i];                                    \
                out[i] = (f);                                                  \
            }                                                                  \
            return;                                                            \
        }                                                                      \
        bcast_iter it;                                                         \
        bcast_init(&it, n);                                                    \
        for (int64_t i = 0; i < len; i++, bcast_next(&it)) {                   \
            float x = pa[it.off[0]], y = pb[it.off[1]];                        \
            out[i] = (f);                                                      \
        }                                                                      \
    }
#define EXP expf
#define EXPN expf
#define LOG logf
#define TANH tanhf
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY
#undef EXP
#undef EXPN
#undef LOG
#undef TANH

static void ref_SELECT(const kiln_node *n, void *o, void *const *in)
{
    float *out = o;
    const float *c = in[0], *a = in[1], *b = in[2];
    int64_t len = kiln_shape_numel(n->shape);
    bcast_iter it;
    bcast_init(&it, n);
    for (int64_t i = 0; i < len; i++, bcast_next(&it))
        out[i] = c[it.off[0]] != 0.0f ? a[it.off[1]] : b[it.off[2]];
}

/* ------------------------------------------------------------ reductions */

/* Splits x's axes into kept (outer) and reduced (inner) sets with their
   element strides, so one loop nest serves every reduction. */
typedef struct reduce_plan {
    int nk, nr;
    int64_t kdim[KILN_MAX_DIMS], kst[KILN_MAX_DIMS];
    int64_t rdim[KILN_MAX_DIMS], rst[KILN_MAX_DIMS];
    int64_t outer, inner;
} reduce_plan;

static void reduce_plan_init(reduce_plan *p, kiln_shape s, unsigned axes)
{
    int64_t st[KILN_MAX_DIMS];
    kiln_shape_strides(s, st);
    memset(p, 0, sizeof *p);
    p->outer = p->inner = 1;
    for (int d = 0; d < s.ndim; d++) {
        if (axes & (1u << d)) {
            p->rdim[p->nr] = s.d[d];
            p->rst[p->nr++] = st[d];
            p->inner *= s.d[d];
        } else {
            p->kdim[p->nk] = s.d[d];
            p->kst[p->nk++] = st[d];
            p->outer *= s.d[d];
        }
    }
}

/* Offset of the i-th element of a (dims, strides) sub-space. */
static int64_t sub_offset(int64_t i, int nd, const int64_t *dim,
                          const int64_t *st)
{
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (i % dim[d]) * st[d];
        i /= dim[d];
    }
    return off;
}

static void ref_SUM(const kiln_node *n, void *o, void *const *in)
{
    float *out = o;
    const float *x = in[0];
    reduce_plan p;
    reduce_plan_init(&p, n->in[0]->shape, n->at.axes);
    for (int64_t i = 0; i < p.outer; i++) {
        int64_t base = sub_offset(i, p.nk, p.kdim, p.kst);
        double acc = 0;
        if (p.nr == 1) {
            for (int64_t j = 0; j < p.inner; j++)
                acc += x[base + j * p.rst[0]];
        } else {
            for (int64_t j = 0; j < p.inner; j++)
                acc += x[base + sub_offset(j, p.nr, p.rdim, p.rst)];
        }
        out[i] = (float)acc;
    }
}

static void ref_RMAX(const kiln_node *n, void *o, void *const *in)
{
    float *out = o;
    const float *x = in[0];
    reduce_plan p;
    reduce_plan_init(&p, n->in[0]->shape, n->at.axes);
    for (int64_t i = 0; i < p.outer; i++) {
        int64_t base = sub_offset(i, p.nk, p.kdim, p.kst);
        float m = -INFINITY;
        for (int64_t j = 0; j < p.inner; j++) {
            float v = x[base + sub_offset(j, p.nr, p.rdim, p.rst)];
            if (v > m || isnan(v))
                m = v;
        }
        out[i] = m;
    }
}

static void ref_ARGMAX(const kiln_node *n, void *o, void *const *in)
{
    int32_t *out = o;
    const float *x = in[0];
    reduce_plan p;
    reduce_plan_init(&p, n->in[0]->shape, n->at.axes);
    for (int64_t i = 0; i < p.outer; i++) {
        int64_t base = sub_offset(i, p.nk, p.kdim, p.kst);
        int32_t best = 0;
        for (int64_t j = 1; j < p.inner; j++)
            if (kiln_s_argmax_better(x[base + j * p.rst[0]],
                                     x[base + best * p.rst[0]]))
                best = (int32_t)j;
        out[i] = best;
    }
}

/* ------------------------------------------------------------ movement */

/* Movement kernels copy 4-byte elements regardless of dtype. */
typedef uint32_t elem;

static void ref_RESHAPE(const kiln_node *n, void *o, void *const *in)
{
    memmove(o, in[0], (size_t)kiln_shape_numel(n->shape) * sizeof(elem));
}

static void ref_STOPGRAD(const kiln_node *n, void *o, void *const *in)
{
    ref_RESHAPE(n, o, in);
}

static void ref_PERMUTE(const kiln_node *n, void *o, void *const *in)
{
    elem *out = o;
    const elem *x = in[0];
    int64_t ist[KILN_MAX_DIMS], st[KILN_MAX_DIMS];
    kiln_shape_strides(n->in[0]->shape, ist);
    for (int d = 0; d < n->shape.ndim; d++)
        st[d] = ist[n->at.perm[d]];
    int64_t len = kiln_shape_numel(n->shape);
    for (int64_t i = 0; i < len; i++)
        out[i] = x[sub_offset(i, n->shape.ndim, n->shape.d, st)];
}

static void ref_BROADCAST(const kiln_node *n, void *o, void *const *in)
{
    elem *out = o;
    const elem *x = in[0];
    int64_t len = kiln_shape_numel(n->shape);
    bcast_iter it;
    bcast_init(&it, n);
    for (int64_t i = 0; i < len; i++, bcast_next(&it))
        out[i] = x[it.off[0]];
}

static void ref_SLICE(const kiln_node *n, void *o, void *const *in)
{
    elem *out = o;
    const elem *x = in[0];
    int64_t st[KILN_MAX_DIMS], base = 0;
    kiln_shape_strides(n->in[0]->shape, st);
    for (int d = 0; d < n->shape.ndim; d++)
        base += n->at.lo[d] * st[d];
    int64_t len = kiln_shape_numel(n->shape);
    for (int64_t i = 0; i < len; i++)
        out[i] = x[base + sub_offset(i, n->shape.ndim, n->shape.d, st)];
}

static void ref_PAD(const kiln_node *n, void *o, void *const *in)
{
    const elem *x = in[0];
    elem *eo = o, fill; /* the pad value converted to the node's dtype */
    if (n->dtype == KILN_I32) {
        int32_t iv = (int32_t)n->at.value;
        memcpy(&fill, &iv, sizeof fill);
    } else {
        memcpy(&fill, &n->at.value, sizeof fill);
    }
    int64_t len = kiln_shape_numel(n->shape);
    for (int64_t i = 0; i < len; i++)
        eo[i] = fill;
    int64_t st[KILN_MAX_DIMS], base = 0;
    kiln_shape_strides(n->shape, st);
    for (int d = 0; d < n->shape.ndim; d++)
        base += n->at.lo[d] * st[d];
    kiln_shape is = n->in[0]->shape;
    int64_t ilen = kiln_shape_numel(is);
    for (int64_t i = 0; i < ilen; i++)
        eo[base + sub_offset(i, is.ndim, is.d, st)] = x[i];
}

static void ref_CONCAT(const kiln_node *n, void *o, void *const *in)
{
    elem *out = o;
    int ax = n->at.axis;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++)
        outer *= n->shape.d[d];
    for (int d = ax + 1; d < n->shape.ndim; d++)
        inner *= n->shape.d[d];
    int64_t row = n->shape.d[ax] * inner, col = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t chunk = n->in[k]->shape.d[ax] * inner;
        const elem *x = in[k];
        for (int64_t i = 0; i < outer; i++)
            memcpy(out + i * row + col, x + i * chunk,
                   (size_t)chunk * sizeof(elem));
        col += chunk;
    }
}

/* ------------------------------------------------------------ contraction */

/* out = c + alpha op(a) op(b) for an m x k op(a) and a k x n op(b), each
   element's products summed in double by a plain loop (no BLAS: the fast
   kernels are tested against an independent product); c NULL counts as
   0.  out may be c's buffer (each element reads its own c first), never
   a's or b's. */
static void plain_gemm(int ta, int tb, int64_t m, int64_t nn, int64_t k,
                       double alpha, const float *a, const float *b,
                       const float *c, float *out)
{
    enum { COLS = 256 };
    double acc[COLS];
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j0 = 0; j0 < nn; j0 += COLS) {
            int64_t w = nn - j0 < COLS ? nn - j0 : COLS;
            for (int64_t j = 0; j < w; j++)
                acc[j] = 0;
            for (int64_t p = 0; p < k; p++) {
                double av = ta ? a[p * m + i] : a[i * k + p];
                for (int64_t j = 0; j < w; j++)
                    acc[j] +=
                        av * (tb ? b[(j0 + j) * k + p] : b[p * nn + j0 + j]);
            }
            for (int64_t j = 0; j < w; j++)
                out[i * nn + j0 + j] =
                    (float)((c ? c[i * nn + j0 + j] : 0.0) + alpha * acc[j]);
        }
    }
}

static void ref_MATMUL(const kiln_node *n, void *o, void *const *in)
{
    kiln_shape sa = n->in[0]->shape, sb = n->in[1]->shape, so = n->shape;
    int ta = n->at.trans_a, tb = n->at.trans_b;
    int64_t m = so.d[so.ndim - 2], nn = so.d[so.ndim - 1];
    int64_t k = sa.d[sa.ndim - (ta ? 2 : 1)];
    int64_t asz = sa.d[sa.ndim - 1] * sa.d[sa.ndim - 2];
    int64_t bsz = sb.d[sb.ndim - 1] * sb.d[sb.ndim - 2];
    /* batch offsets through broadcast strides over the leading axes */
    kiln_shape ba = sa, bb = sb, bo = so;
    ba.ndim -= 2;
    bb.ndim -= 2;
    bo.ndim -= 2;
    int64_t sta[KILN_MAX_DIMS], stb[KILN_MAX_DIMS];
    kiln_broadcast_strides(ba, bo, sta);
    kiln_broadcast_strides(bb, bo, stb);
    int64_t batches = kiln_shape_numel(bo);
    const float *a = in[0], *b = in[1];
    float *out = o;
    for (int64_t i = 0; i < batches; i++) {
        int64_t oa = sub_offset(i, bo.ndim, bo.d, sta);
        int64_t ob = sub_offset(i, bo.ndim, bo.d, stb);
        plain_gemm(ta, tb, m, nn, k, 1.0, a + oa * asz, b + ob * bsz, NULL,
                   out + i * m * nn);
    }
}

/* c + alpha op(a) op(b) for 2-D a and b. */
static void ref_MATMUL_ACC(const kiln_node *n, void *o, void *const *in)
{
    kiln_shape sa = n->in[1]->shape;
    int ta = n->at.trans_a, tb = n->at.trans_b;
    int64_t m = n->shape.d[0], nn = n->shape.d[1], k = sa.d[ta ? 0 : 1];
    plain_gemm(ta, tb, m, nn, k, *(const float *)in[3], in[1], in[2], in[0], o);
}

/* ------------------------------------------------------------ conversion */

static void ref_ONEHOT(const kiln_node *n, void *o, void *const *in)
{
    float *out = o;
    const int32_t *lab = in[0];
    int64_t rows = kiln_shape_numel(n->in[0]->shape), depth = n->at.depth;
    memset(out, 0, (size_t)(rows * depth) * sizeof(float));
    for (int64_t i = 0; i < rows; i++)
        if (lab[i] >= 0 && lab[i] < depth)
            out[i * depth + lab[i]] = 1.0f;
}

/* Softmax cross-entropy as its decomposition computes it (composite.c):
   z = x - max(x), log-softmax z - log(sum exp z) with the sum in double,
   the label's entries summed in double and scaled by -1/N (NaN for N = 0,
   as PyTorch's mean over no elements).  A label outside [0, C) is refused
   before the kernel runs (cpu/check.c); the kernels still never read past
   a row. */
static float ref_row_max(const float *x, int64_t c)
{
    float m = -INFINITY;
    for (int64_t j = 0; j < c; j++)
        if (x[j] > m || isnan(x[j]))
            m = x[j];
    return m;
}

static float ref_row_expsum(const float *x, int64_t c, float m)
{
    double s = 0;
    for (int64_t j = 0; j < c; j++)
        s += expf(x[j] - m);
    return (float)s;
}

static void ref_SOFTMAX_CE(const kiln_node *n, void *o, void *const *in)
{
    const float *x = in[0];
    const int32_t *lab = in[1];
    int64_t rows = n->in[0]->shape.d[0], c = n->in[0]->shape.d[1];
    if (rows == 0 || c == 0) { /* the mean of no rows; no classes */
        *(float *)o = NAN;
        return;
    }
    double acc = 0;
    for (int64_t i = 0; i < rows; i++, x += c) {
        if (lab[i] < 0 || lab[i] >= c)
            continue;
        float m = ref_row_max(x, c);
        acc += (x[lab[i]] - m) - logf(ref_row_expsum(x, c, m));
    }
    *(float *)o = (float)acc * (-1.0f / (float)rows);
}

static void ref_SOFTMAX_CE_GRAD(const kiln_node *n, void *o, void *const *in)
{
    const float *x = in[0];
    const int32_t *lab = in[1];
    float *out = o;
    int64_t rows = n->shape.d[0], c = n->shape.d[1];
    float k = *(const float *)in[2] * (rows ? 1.0f / (float)rows : 0.0f);
    for (int64_t i = 0; i < rows; i++, x += c, out += c) {
        float m = ref_row_max(x, c), s = ref_row_expsum(x, c, m);
        for (int64_t j = 0; j < c; j++)
            out[j] = (expf(x[j] - m) / s - (j == lab[i] ? 1.0f : 0.0f)) * k;
    }
}

static void ref_CAST(const kiln_node *n, void *o, void *const *in)
{
    int64_t len = kiln_shape_numel(n->shape);
    kiln_dtype from = n->in[0]->dtype, to = n->dtype;
    if (from == to) {
        memmove(o, in[0], (size_t)len * 4);
    } else if (to == KILN_I32) {
        const float *x = in[0];
        int32_t *out = o;
        for (int64_t i = 0; i < len; i++) {
            float v = x[i];
            out[i] = isnan(v)              ? 0
                     : v >= 2147483647.0f  ? INT32_MAX
                     : v <= -2147483648.0f ? INT32_MIN
                                           : (int32_t)v;
        }
    } else {
        const int32_t *x = in[0];
        float *out = o;
        for (int64_t i = 0; i < len; i++)
            out[i] = (float)x[i];
    }
}

/* ------------------------------------------------------------ state */

static void ref_ASSIGN(const kiln_node *n, void *o, void *const *in)
{
    memmove(o, in[1], (size_t)kiln_shape_numel(n->shape) * 4);
}

static void ref_DOALL(const kiln_node *n, void *o, void *const *in)
{
    (void)n;
    (void)in;
    *(float *)o = 0.0f;
}

/* pooling group (cpu/pool_ref.c) */
#define ref_MAX_POOL2D kiln_ref_max_pool2d
#define ref_MAX_POOL2D_GRAD kiln_ref_max_pool2d_grad
#define ref_MAX_POOL2D_GATHER kiln_ref_max_pool2d_gather
#define ref_RESAMPLE2D kiln_ref_resample2d
#define ref_RESAMPLE2D_GRAD kiln_ref_resample2d_grad
#define ref_MODE NULL
#define ref_RNG_KEY NULL
#define ref_NORM_STATS kiln_ref_norm_stats
#define ref_NORM kiln_ref_norm
#define ref_NORM_GRAD kiln_ref_norm_grad
#define ref_NORM_PARAM_GRAD kiln_ref_norm_param_grad
#define ref_DROPOUT kiln_ref_dropout
/* attention group (cpu/attention_ref.c) */
#define ref_ATTENTION kiln_ref_attention
#define ref_ATTENTION_GRAD kiln_ref_attention_grad
#define ref_RMS_NORM kiln_ref_rms_norm
#define ref_RMS_NORM_GRAD kiln_ref_rms_norm_grad
#define ref_FUSED kiln_fused_ref
#define ref_CONV kiln_ref_CONV
#define ref_CONV_TRANSPOSE kiln_ref_CONV_TRANSPOSE
#define ref_CONV_WGRAD kiln_ref_CONV_WGRAD
#define ref_INDEX_SELECT kiln_ref_INDEX_SELECT
#define ref_INDEX_ADD kiln_ref_INDEX_ADD
#define ref_GATHER kiln_ref_GATHER
#define ref_SCATTER_ADD kiln_ref_SCATTER_ADD
#define ref_CUMSUM kiln_ref_CUMSUM
#define ref_PROD kiln_ref_PROD
#define ref_TOPK kiln_ref_TOPK
#define ref_INT_ADD kiln_ref_int_map
#define ref_INT_SUB kiln_ref_int_map
#define ref_INT_MUL kiln_ref_int_map
#define ref_INT_FLOOR_DIV kiln_ref_int_map
#define ref_INT_MOD kiln_ref_int_map
#define ref_INPUT NULL
#define ref_CONSTANT NULL
#define ref_VARIABLE NULL
#define ref_ERROR NULL

const kiln_kernel_fn kiln_ref_kernels[KILN_OP_COUNT] = {
#define X(op, ...) [KILN_OP_##op] = ref_##op,
#include "graph/ops.def"
#undef X
};
