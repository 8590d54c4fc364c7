/* Matrix products for every kernel: OpenBLAS with transposes passed as
   flags, matrix-vector products through GEMV, and the thread policy for thin
   products (one dimension <= THIN_GEMM) that OpenBLAS splits badly; a
   blocked portable loop when built without BLAS. */
#include <string.h>

#include "cpu/fast.h"
#include "cpu/kernels.h"

#ifdef KILN_HAVE_BLAS
#include <cblas.h>
#endif

#ifdef KILN_HAVE_BLAS
/* Products with a dimension at most this run on one BLAS thread. */
enum { THIN_GEMM = 32 };

static int64_t min3(int64_t a, int64_t b, int64_t c)
{
    int64_t m = a < b ? a : b;
    return m < c ? m : c;
}

/* A product with one row or one column is a matrix-vector product: the
   vector operand is contiguous whatever its transpose flag. */
static void blas_gemv(int ta, int tb, int64_t m, int64_t n, int64_t k,
                      float alpha, const float *a, const float *b, float beta,
                      float *out)
{
    if (m == 1) /* out[n] = op(B)^T a: B is [k,n], or [n,k] when tb */
        cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans,
                    tb ? (int)n : (int)k, tb ? (int)k : (int)n, alpha, b,
                    tb ? (int)k : (int)n, a, 1, beta, out, 1);
    else /* out[m] = op(A) b: A is [m,k], or [k,m] when ta */
        cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                    ta ? (int)k : (int)m, ta ? (int)m : (int)k, alpha, a,
                    ta ? (int)m : (int)k, b, 1, beta, out, 1);
}

/* out[j] += alpha sum_p x[p] rows[p][j], j < w, for k rows of w floats (a
   vector times a row-major matrix), summed in float in p order over a block
   of columns and added to out once. */
static void acc_rows(int64_t w, int64_t k, float alpha, const float *rows,
                     const float *x, float *out)
{
    enum { COLS = 256 };
    float acc[COLS];
    for (int64_t j0 = 0; j0 < w; j0 += COLS) {
        int64_t c = w - j0 < COLS ? w - j0 : COLS;
        for (int64_t j = 0; j < c; j++)
            acc[j] = 0;
        for (int64_t p = 0; p < k; p++) {
            const float *row = rows + p * w + j0;
            float xv = x[p];
            for (int64_t j = 0; j < c; j++)
                acc[j] += xv * row[j];
        }
        for (int64_t j = 0; j < c; j++)
            out[j0 + j] += alpha * acc[j];
    }
}

/* A row vector times a large [k, n] matrix is bound by reading the matrix,
   and OpenBLAS runs it on one core: split its columns over the pool, each
   part an independent one-thread GEMV over a column slice.  Returns 0 when
   the product is too small to gain (then the caller does it whole). */
typedef struct gemv_job {
    int64_t n, k;
    float alpha;
    const float *a, *b;
    float *out;
} gemv_job;

enum { GEMV_COLS = 64 }; /* columns per work item */

static void gemv_range(void *ctx, int64_t lo, int64_t hi)
{
    const gemv_job *j = ctx;
    int64_t c0 = lo * GEMV_COLS,
            c1 = hi * GEMV_COLS < j->n ? hi * GEMV_COLS : j->n;
    cblas_sgemv(CblasRowMajor, CblasTrans, (int)j->k, (int)(c1 - c0), j->alpha,
                j->b + c0, (int)j->n, j->a, 1, 0.0f, j->out + c0, 1);
}

static int gemv_split(int64_t n, int64_t k, float alpha, const float *a,
                      const float *b, float *out)
{
    int threads = kiln_cpu_threads();
    if (threads < 2 || n < 2 * GEMV_COLS || n * k < (1 << 17))
        return 0;
    gemv_job j = {n, k, alpha, a, b, out};
    int blas = openblas_get_num_threads();
    if (blas > 1)
        openblas_set_num_threads(1);
    kiln_par_for((n + GEMV_COLS - 1) / GEMV_COLS, GEMV_COLS * k, gemv_range,
                 &j);
    if (blas > 1)
        openblas_set_num_threads(blas);
    return 1;
}

/* Thin products (one dimension <= THIN_GEMM) run on one BLAS thread, since
   OpenBLAS splits them badly; with more than one kernel thread and enough
   work, split the rows of out over the pool instead, each block an
   independent one-thread sgemm. */
typedef struct gemm_job {
    int ta, tb;
    int64_t m, n, k;
    float alpha, beta;
    const float *a, *b;
    float *out;
} gemm_job;

enum { GEMM_ROWS = 16 }; /* rows of out per work item */

static void gemm_rows(void *ctx, int64_t lo, int64_t hi)
{
    const gemm_job *j = ctx;
    int64_t r0 = lo * GEMM_ROWS,
            r1 = hi * GEMM_ROWS < j->m ? hi * GEMM_ROWS : j->m;
    /* rows r0..r1 of op(a): a row block of a, or a column block of a^T */
    const float *a = j->ta ? j->a + r0 : j->a + r0 * j->k;
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans,
                j->tb ? CblasTrans : CblasNoTrans, (int)(r1 - r0), (int)j->n,
                (int)j->k, j->alpha, a, j->ta ? (int)j->m : (int)j->k, j->b,
                j->tb ? (int)j->k : (int)j->n, j->beta, j->out + r0 * j->n,
                (int)j->n);
}

static int gemm_split_rows(int ta, int tb, int64_t m, int64_t n, int64_t k,
                           float alpha, const float *a, const float *b,
                           float beta, float *out)
{
    if (kiln_cpu_threads() < 2 || m < 4 * GEMM_ROWS || m * n * k < (1 << 20))
        return 0;
    gemm_job j = {ta, tb, m, n, k, alpha, beta, a, b, out};
    int blas = openblas_get_num_threads();
    if (blas > 1)
        openblas_set_num_threads(1);
    kiln_par_for((m + GEMM_ROWS - 1) / GEMM_ROWS, GEMM_ROWS * n * k, gemm_rows,
                 &j);
    if (blas > 1)
        openblas_set_num_threads(blas);
    return 1;
}

#endif

/* out = alpha op(a) op(b) + beta out, beta 0 (out is not read) or 1. */
static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, const float *b, float beta, float *out)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        if (beta == 0.0f)
            memset(out, 0, (size_t)(m * n) * sizeof(float));
        return;
    }
#ifdef KILN_HAVE_BLAS
    if (m == 1 || n == 1) {
        /* accumulating (beta 1), only the dot-product form of GEMV: the
           other adds one scaled row at a time into out, rounding every
           partial sum at out's magnitude, where this adds each finished
           sum once */
        if (beta != 0.0f && (m == 1 ? !tb : ta)) {
            if (m == 1)
                acc_rows(n, k, alpha, b, a, out);
            else
                acc_rows(m, k, alpha, a, b, out);
            return;
        }
        if (m == 1 && !tb && beta == 0.0f && gemv_split(n, k, alpha, a, b, out))
            return;
        blas_gemv(ta, tb, m, n, k, alpha, a, b, beta, out);
        return;
    }
    /* OpenBLAS splits thin products (the [.,10] layers of a classifier,
       the [.,32] ones of a small MLP) over its threads for a loss: at 2
       threads they ran 1.3 to 4 times slower than on one */
    if (min3(m, n, k) <= THIN_GEMM &&
        gemm_split_rows(ta, tb, m, n, k, alpha, a, b, beta, out))
        return;
    int threads = min3(m, n, k) <= THIN_GEMM ? openblas_get_num_threads() : 1;
    if (threads > 1)
        openblas_set_num_threads(1);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha,
                a, ta ? (int)m : (int)k, b, tb ? (int)k : (int)n, beta, out,
                (int)n);
    if (threads > 1)
        openblas_set_num_threads(threads);
#else
    /* a row at a time, a block of columns summed in float in k order */
    enum { COLS = 256 };
    float acc[COLS];
    for (int64_t i = 0; i < m; i++) {
        float *row = out + i * n;
        for (int64_t j0 = 0; j0 < n; j0 += COLS) {
            int64_t w = n - j0 < COLS ? n - j0 : COLS;
            for (int64_t j = 0; j < w; j++)
                acc[j] = 0;
            for (int64_t p = 0; p < k; p++) {
                float av = ta ? a[p * m + i] : a[i * k + p];
                for (int64_t j = 0; j < w; j++)
                    acc[j] +=
                        av * (tb ? b[(j0 + j) * k + p] : b[p * n + j0 + j]);
            }
            for (int64_t j = 0; j < w; j++)
                row[j0 + j] =
                    beta == 0.0f && alpha == 1.0f
                        ? acc[j]
                        : alpha * acc[j] + (beta == 0.0f ? 0.0f : row[j0 + j]);
        }
    }
#endif
}

void kiln_cpu_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k,
                   const float *a, const float *b, float *out)
{
    gemm(ta, tb, m, n, k, 1.0f, a, b, 0.0f, out);
}

void kiln_cpu_gemm_acc(int ta, int tb, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, const float *b, float *out)
{
    gemm(ta, tb, m, n, k, alpha, a, b, 1.0f, out);
}
