/* Fast sum and max.  The input's axes are merged into at most three runs,
   [outer kept, reduced, inner kept]; rows (inner = 1) reduce contiguous
   runs, columns (inner > 1) accumulate whole rows into a block of partial
   results.  The runs [reduced, kept, reduced] (a per-channel sum over
   [N, C, H, W]: a bias's or a normalisation's gradient) reduce each kept
   index's rows in turn.  Sums accumulate in double like the reference, so
   the two agree to rounding.  Other axis patterns run the reference
   kernel. */
#include <math.h>

#include "cpu/fast.h"
#include "cpu/fast_reduce.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"

/* Columns accumulated at once in the column form (stack storage). */
enum { COLS = 256 };

typedef struct reduce_job {
    int is_max;
    int64_t outer, red, inner, col_blocks;
    const float *x;
    float *o;
} reduce_job;

KILN_CLONES static double sum_row_d(const float *x, int64_t n)
{
    double acc = 0;
    _Pragma("omp simd reduction(+ : acc)") for (int64_t i = 0; i < n; i++)
        acc += (double)x[i];
    return acc;
}

static float sum_row(const float *x, int64_t n)
{
    return (float)sum_row_d(x, n);
}

/* The largest of n floats; NaN when any is NaN (like the reference). */
KILN_CLONES static float row_max(const float *x, int64_t n)
{
    float m = -INFINITY;
    int nan = 0;
    _Pragma("omp simd reduction(max : m) reduction(| : nan)") for (int64_t i =
                                                                       0;
                                                                   i < n; i++)
    {
        float v = x[i];
        m = m > v ? m : v;
        nan |= v != v;
    }
    return nan ? NAN : m;
}

/* Not cloned itself: GCC exports the resolver of a non-static
   target_clones function from the shared library whatever its
   visibility. */
float kiln_row_max(const float *x, int64_t n)
{
    return row_max(x, n);
}

/* o[0..w) = sum or max over r of x[r * stride + 0..w) */
KILN_CLONES static void sum_cols(float *o, const float *x, int64_t rows,
                                 int64_t stride, int64_t w)
{
    double acc[COLS];
    for (int64_t i = 0; i < w; i++)
        acc[i] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * stride;
        _Pragma("omp simd") for (int64_t i = 0; i < w; i++) acc[i] +=
            (double)row[i];
    }
    for (int64_t i = 0; i < w; i++)
        o[i] = (float)acc[i];
}

KILN_CLONES static void max_cols(float *o, const float *x, int64_t rows,
                                 int64_t stride, int64_t w)
{
    for (int64_t i = 0; i < w; i++)
        o[i] = -INFINITY;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * stride;
        _Pragma("omp simd") for (int64_t i = 0; i < w; i++)
        {
            float v = row[i], m = o[i];
            o[i] = (v > m || v != v) ? v : m;
        }
    }
}

static void rows_range(void *ctx, int64_t lo, int64_t hi)
{
    reduce_job *j = ctx;
    for (int64_t r = lo; r < hi; r++)
        j->o[r] = j->is_max ? kiln_row_max(j->x + r * j->red, j->red)
                            : sum_row(j->x + r * j->red, j->red);
}

static void cols_range(void *ctx, int64_t lo, int64_t hi)
{
    reduce_job *j = ctx;
    for (int64_t it = lo; it < hi; it++) {
        int64_t o = it / j->col_blocks, c0 = it % j->col_blocks * COLS;
        int64_t w = j->inner - c0 < COLS ? j->inner - c0 : COLS;
        const float *x = j->x + o * j->red * j->inner + c0;
        float *out = j->o + o * j->inner + c0;
        if (j->is_max)
            max_cols(out, x, j->red, j->inner, w);
        else
            sum_cols(out, x, j->red, j->inner, w);
    }
}

/* The [reduced, kept, reduced] runs of s under axes: *outer x *kept x
 *inner with outer and inner reduced; 0 for any other pattern. */
static int middle_kept(kiln_shape s, unsigned axes, int64_t *outer,
                       int64_t *kept, int64_t *inner)
{
    int64_t size[3] = {1, 1, 1};
    int run = 0, started = 0;
    for (int d = 0; d < s.ndim; d++) {
        if (s.d[d] == 1)
            continue;
        int red = (axes >> d) & 1u, want = run != 1;
        if (red != want) {
            if (!started || ++run > 2)
                return 0;
        }
        started = 1;
        size[run] *= s.d[d];
    }
    *outer = size[0];
    *kept = size[1];
    *inner = size[2];
    return run == 2;
}

/* o[c] over c in [lo, hi): every x[n, c, :] row summed, in double */
static void middle_range(void *ctx, int64_t lo, int64_t hi)
{
    reduce_job *j = ctx;
    for (int64_t c = lo; c < hi; c++) {
        double acc = 0;
        float m = -INFINITY;
        for (int64_t b = 0; b < j->outer; b++) {
            const float *row = j->x + (b * j->red + c) * j->inner;
            if (!j->is_max) {
                acc += sum_row_d(row, j->inner);
                continue;
            }
            float v = kiln_row_max(row, j->inner);
            if (m == m && (v > m || v != v)) /* NaN wins and stays */
                m = v;
        }
        j->o[c] = j->is_max ? m : (float)acc;
    }
}

static void run_reduce(const kiln_node *n, void *o, void *const *in, int is_max)
{
    reduce_job j = {is_max, 0, 0, 0, 0, in[0], o};
    kiln_shape s = n->in[0]->shape;
    if (kiln_shape_numel(s) &&
        middle_kept(s, n->at.axes, &j.outer, &j.red, &j.inner)) {
        /* red holds the kept size here */
        kiln_par_for(j.red, j.outer * j.inner, middle_range, &j);
        return;
    }
    if (!kiln_reduce_split(s, n->at.axes, &j.outer, &j.red, &j.inner)) {
        kiln_ref_kernels[n->op](n, o, in);
        return;
    }
    if (kiln_shape_numel(s) == 0) { /* empty reductions give the identity */
        int64_t len = kiln_shape_numel(n->shape);
        for (int64_t i = 0; i < len; i++)
            j.o[i] = is_max ? -INFINITY : 0.0f;
        return;
    }
    if (j.inner == 1) {
        kiln_par_for(j.outer, j.red, rows_range, &j);
    } else {
        j.col_blocks = (j.inner + COLS - 1) / COLS;
        int64_t w = j.inner < COLS ? j.inner : COLS;
        kiln_par_for(j.outer * j.col_blocks, j.red * w, cols_range, &j);
    }
}

void kiln_fast_SUM(const kiln_node *n, void *o, void *const *in)
{
    run_reduce(n, o, in, 0);
}

void kiln_fast_RMAX(const kiln_node *n, void *o, void *const *in)
{
    run_reduce(n, o, in, 1);
}
