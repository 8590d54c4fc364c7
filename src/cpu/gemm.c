/* Matrix products for every kernel.  Each BLAS call runs on one thread:
   OpenBLAS's thread count is process-wide, so changing it around one
   product changed the products of another session running at the same
   time.  Products large enough are split instead over Kiln's pool into
   blocks of rows or columns of out, each an independent one-thread call,
   the blocks fixed by the running session's thread count; matrix-vector
   products go through GEMV, split the same way.  Transposes are passed as
   flags.  Each block is one call of Kiln's AVX-512 kernel
   (cpu/gemm_avx512.c) where the CPU has it, else of BLAS, else of a
   blocked portable loop. */
#include <limits.h>
#include <string.h>

#include "cpu/gemm.h"
#include "cpu/gemm_avx512.h"
#include "cpu/gemv_avx512.h"
#include "cpu/pool.h"
#include "cpu/threads.h"

#ifdef KILN_HAVE_BLAS
#include <cblas.h>
#include <pthread.h>
#endif

enum {
    BLOCK_ROWS = 16, /* rows of out per work item of a split product */
    BLOCK_COLS = 64, /* columns (or GEMV outputs) per work item */
};
/* a block of columns starts on a panel of a packed op(b) */
_Static_assert(BLOCK_COLS % KILN_GEMM_AVX512_PANEL == 0,
               "column blocks must start on packed panels");

/* Kiln's AVX-512 kernel computes at least 16 columns at a time: under 6
   most of them are padding and OpenBLAS's narrower tiles are faster (at
   128 rows and k 600: 17 us against 22 at 2 columns; 30 against 22 at a
   classifier's 10). */
#ifdef KILN_HAVE_BLAS
#define AVX512_MIN_COLS 6
#else
#define AVX512_MIN_COLS 1
#endif

#ifdef KILN_HAVE_BLAS
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_one_thread(void)
{
    openblas_set_num_threads(1);
}

/* out[o0..o1) of y = alpha op(M) x + beta y, M [rows, cols] row-major: the
   outputs are M's rows, or its columns when trans. */
typedef struct gemv_job {
    int trans;
    int64_t rows, cols;
    float alpha, beta;
    const float *mat, *x;
    float *y;
} gemv_job;

static void gemv_block(void *ctx, int64_t lo, int64_t hi)
{
    const gemv_job *j = ctx;
    int64_t outs = j->trans ? j->cols : j->rows;
    int64_t o0 = lo * BLOCK_COLS,
            o1 = hi * BLOCK_COLS < outs ? hi * BLOCK_COLS : outs;
    if (!j->trans && kiln_gemv_avx512_ok())
        kiln_gemv_avx512(o1 - o0, j->cols, j->cols, j->alpha,
                         j->mat + o0 * j->cols, j->x, j->beta, j->y + o0);
    else if (j->trans)
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)j->rows, (int)(o1 - o0),
                    j->alpha, j->mat + o0, (int)j->cols, j->x, 1, j->beta,
                    j->y + o0, 1);
    else
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)(o1 - o0), (int)j->cols,
                    j->alpha, j->mat + o0 * j->cols, (int)j->cols, j->x, 1,
                    j->beta, j->y + o0, 1);
}

/* A product with one row or one column is a matrix-vector product: the
   vector operand is contiguous whatever its transpose flag.  Large ones
   are bound by reading the matrix: their outputs are split over the pool. */
static void gemv(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, const float *b, float beta, float *out)
{
    gemv_job j = {0, 0, 0, alpha, beta, NULL, NULL, out};
    if (m == 1) { /* out[n] = op(B)^T a: B is [k,n], or [n,k] when tb */
        j.trans = !tb;
        j.rows = tb ? n : k;
        j.cols = tb ? k : n;
        j.mat = b;
        j.x = a;
    } else { /* out[m] = op(A) b: A is [m,k], or [k,m] when ta */
        j.trans = ta;
        j.rows = ta ? k : m;
        j.cols = ta ? m : k;
        j.mat = a;
        j.x = b;
    }
    int64_t outs = j.trans ? j.cols : j.rows;
    int64_t blocks = (outs + BLOCK_COLS - 1) / BLOCK_COLS;
    if (blocks >= 2 && j.rows * j.cols >= (1 << 17))
        kiln_par_for(blocks, BLOCK_COLS * (j.trans ? j.rows : j.cols),
                     gemv_block, &j);
    else
        gemv_block(&j, 0, blocks);
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
#endif

/* op(b) packed once (kiln_cpu_gemm_pack_b), NULL when it is not, and the
   column of it a block starts at. */
typedef struct packed_cols {
    const float *packed;
    int64_t j0;
} packed_cols;

/* out = alpha op(a) op(b) + beta out on the calling thread, with leading
   dimensions (so that a block of a larger product can be passed): Kiln's
   AVX-512 kernel where the CPU has it (OpenBLAS as packaged here runs AVX2
   kernels), reading op(b) from pc when packed, else OpenBLAS, else a
   portable loop. */
static void gemm_one(int ta, int tb, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b,
                     int64_t ldb, packed_cols pc, float beta, float *out,
                     int64_t ldo)
{
    if (n >= AVX512_MIN_COLS && kiln_gemm_avx512_ok() &&
        (pc.packed ? kiln_gemm_avx512_packed(ta, m, n, k, alpha, a, lda,
                                             pc.packed, pc.j0, beta, out, ldo)
                   : kiln_gemm_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb,
                                      beta, out, ldo)))
        return;
#ifdef KILN_HAVE_BLAS
    if (m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX &&
        ldb <= INT_MAX && ldo <= INT_MAX) {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                    tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                    alpha, a, (int)lda, b, (int)ldb, beta, out, (int)ldo);
        return;
    }
#endif
    /* a row at a time, a block of columns summed in float in k order (and
       sizes BLAS's int cannot take) */
    enum { COLS = 256 };
    float acc[COLS];
    for (int64_t i = 0; i < m; i++) {
        float *row = out + i * ldo;
        for (int64_t j0 = 0; j0 < n; j0 += COLS) {
            int64_t w = n - j0 < COLS ? n - j0 : COLS;
            for (int64_t j = 0; j < w; j++)
                acc[j] = 0;
            for (int64_t p = 0; p < k; p++) {
                float av = ta ? a[p * lda + i] : a[i * lda + p];
                for (int64_t j = 0; j < w; j++)
                    acc[j] +=
                        av * (tb ? b[(j0 + j) * ldb + p] : b[p * ldb + j0 + j]);
            }
            for (int64_t j = 0; j < w; j++)
                row[j0 + j] =
                    beta == 0.0f && alpha == 1.0f
                        ? acc[j]
                        : alpha * acc[j] + (beta == 0.0f ? 0.0f : row[j0 + j]);
        }
    }
}

/* A product split into blocks of rows (or of columns) of out. */
typedef struct gemm_job {
    int ta, tb, by_cols;
    int64_t m, n, k;
    float alpha, beta;
    const float *a, *b, *packed;
    float *out;
} gemm_job;

static void gemm_block(void *ctx, int64_t lo, int64_t hi)
{
    const gemm_job *j = ctx;
    int64_t lda = j->ta ? j->m : j->k, ldb = j->tb ? j->k : j->n;
    if (j->by_cols) {
        int64_t c0 = lo * BLOCK_COLS,
                c1 = hi * BLOCK_COLS < j->n ? hi * BLOCK_COLS : j->n;
        /* columns c0..c1 of op(b): a column block of b, or a row block of
           b^T */
        const float *b = j->tb ? j->b + c0 * j->k : j->b + c0;
        gemm_one(j->ta, j->tb, j->m, c1 - c0, j->k, j->alpha, j->a, lda, b, ldb,
                 (packed_cols){j->packed, c0}, j->beta, j->out + c0, j->n);
    } else {
        int64_t r0 = lo * BLOCK_ROWS,
                r1 = hi * BLOCK_ROWS < j->m ? hi * BLOCK_ROWS : j->m;
        /* rows r0..r1 of op(a): a row block of a, or a column block of a^T */
        const float *a = j->ta ? j->a + r0 : j->a + r0 * j->k;
        gemm_one(j->ta, j->tb, r1 - r0, j->n, j->k, j->alpha, a, lda, j->b, ldb,
                 (packed_cols){j->packed, 0}, j->beta, j->out + r0 * j->n,
                 j->n);
    }
}

/* Products above KILN_GEMM_SPLIT_MIN are split over the pool into blocks
   of rows of out, each call then packing all of op(b), or of columns, each
   packing all of op(a): along the longer side of out, so that the copies
   packed twice are the smaller (unless that side has too few blocks for
   the threads).  kiln_par_for makes one call per thread's share. */
static void gemm_split(int ta, int tb, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, const float *b,
                       const float *packed, float beta, float *out)
{
    gemm_job j = {ta, tb, 0, m, n, k, alpha, beta, a, b, packed, out};
    int threads = kiln_cpu_threads();
    int64_t rows = (m + BLOCK_ROWS - 1) / BLOCK_ROWS,
            cols = (n + BLOCK_COLS - 1) / BLOCK_COLS;
    if (threads < 2 ||
        (double)m * (double)n * (double)k <= KILN_GEMM_SPLIT_MIN) {
        gemm_block(&j, 0, rows);
        return;
    }
    /* with op(b) packed once, blocks of rows pack only their own rows of
       op(a) and split evenly (MLP b128 at 2 threads: 335 + 335 us a
       thread, against 348 + 318 by blocks of 64 columns), where each
       thread still gets 4 tiles of 12 rows to reuse each panel of op(b)
       (the CNN's fc at b64: the same either way) */
    j.by_cols = packed ? m < 48 * (int64_t)threads : n > m;
    if ((j.by_cols ? cols : rows) < threads)
        j.by_cols = cols > rows;
    if (j.by_cols)
        kiln_par_for(cols, BLOCK_COLS * m * k, gemm_block, &j);
    else
        kiln_par_for(rows, BLOCK_ROWS * n * k, gemm_block, &j);
}

/* A product goes through GEMV (not reading a packed op(b)). */
static int is_gemv(int64_t m, int64_t n, int64_t k)
{
#ifdef KILN_HAVE_BLAS
    return (m == 1 || n == 1) && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX;
#else
    (void)m, (void)n, (void)k;
    return 0;
#endif
}

/* out = alpha op(a) op(b) + beta out, beta 0 (out is not read) or 1, op(b)
   also packed once when packed is not NULL. */
static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, const float *b, const float *packed,
                 float beta, float *out)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        if (beta == 0.0f)
            memset(out, 0, (size_t)(m * n) * sizeof(float));
        return;
    }
#ifdef KILN_HAVE_BLAS
    pthread_once(&blas_once, blas_one_thread);
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
        if (is_gemv(m, n, k)) {
            gemv(ta, tb, m, n, k, alpha, a, b, beta, out);
            return;
        }
    }
#endif
    gemm_split(ta, tb, m, n, k, alpha, a, b, packed, beta, out);
}

void kiln_cpu_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k,
                   const float *a, const float *b, float *out)
{
    gemm(ta, tb, m, n, k, 1.0f, a, b, NULL, 0.0f, out);
}

void kiln_cpu_gemm_acc(int ta, int tb, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, const float *b, float *out)
{
    gemm(ta, tb, m, n, k, alpha, a, b, NULL, 1.0f, out);
}

void kiln_cpu_gemm_rows_into(int ta, int tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float *a, const float *b,
                             float beta, float *add, float *out, int64_t r0,
                             int64_t r1)
{
    if (r0 < 0 || r1 > m || r1 <= r0 || n == 0)
        return;
    int64_t rows = r1 - r0;
    float *o = out + r0 * n, *ad = add ? add + r0 * n : NULL;
    if (k == 0) { /* no product: (0 + add) + beta out */
        for (int64_t i = 0; i < rows * n; i++)
            o[i] = (ad ? ad[i] : 0.0f) + (beta == 0.0f ? 0.0f : beta * o[i]);
        return;
    }
#ifdef KILN_HAVE_BLAS
    pthread_once(&blas_once, blas_one_thread);
#endif
    /* rows r0..r1 of op(a): rows of a, or columns of a (op(a) = a^T, its
       leading dimension staying m); on the calling thread, which runs
       outside any kernel's share of the pool */
    const float *ar = ta ? a + r0 : a + r0 * k;
    int64_t lda = ta ? m : k, ldb = tb ? k : n;
    if (ad && n >= AVX512_MIN_COLS && kiln_gemm_avx512_ok() &&
        kiln_gemm_avx512_add(ta, tb, rows, n, k, alpha, ar, lda, b, ldb, ad,
                             beta, o, n))
        return;
    if (ad) { /* the same sums in two passes, add as the scratch */
        gemm_one(ta, tb, rows, n, k, alpha, ar, lda, b, ldb,
                 (packed_cols){NULL, 0}, 1.0f, ad, n);
        for (int64_t i = 0; i < rows * n; i++)
            o[i] = ad[i] + (beta == 0.0f ? 0.0f : beta * o[i]);
        return;
    }
    gemm_one(ta, tb, rows, n, k, alpha, ar, lda, b, ldb, (packed_cols){NULL, 0},
             beta, o, n);
}

int64_t kiln_cpu_gemm_packed_floats(int64_t m, int64_t n, int64_t k)
{
    if (m < 1 || k < 1 || n < AVX512_MIN_COLS || is_gemv(m, n, k) ||
        !kiln_gemm_avx512_ok())
        return 0;
    return kiln_gemm_avx512_packed_floats(n, k);
}

void kiln_cpu_gemm_pack_b(int tb, int64_t n, int64_t k, const float *b,
                          float *packed)
{
    kiln_gemm_avx512_pack_b(tb, n, k, b, tb ? k : n, packed);
}

void kiln_cpu_gemm_packed(int ta, int tb, int64_t m, int64_t n, int64_t k,
                          const float *a, const float *b, const float *packed,
                          float *out)
{
    gemm(ta, tb, m, n, k, 1.0f, a, b, packed, 0.0f, out);
}

void kiln_cpu_gemm_serial(int ta, int tb, int64_t m, int64_t n, int64_t k,
                          const float *a, int64_t lda, const float *b,
                          int64_t ldb, float beta, float *out, int64_t ldo)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        for (int64_t i = 0; beta == 0.0f && i < m; i++)
            memset(out + i * ldo, 0, (size_t)n * sizeof(float));
        return;
    }
#ifdef KILN_HAVE_BLAS
    pthread_once(&blas_once, blas_one_thread);
#endif
    gemm_one(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, (packed_cols){NULL, 0},
             beta, out, ldo);
}
