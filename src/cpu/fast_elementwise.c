/* Fast elementwise kernels.  Every op is a span function over a contiguous
   run of output elements whose operands are contiguous (stride 1) or one
   repeated value (stride 0); the broadcast plan cuts any operand shapes
   into such runs, and long runs are cut again into pieces for the pool. */
#include <math.h>

#include "cpu/ew_plan.h"
#include "cpu/fast.h"
#include "cpu/pool.h"
#include "cpu/scalar.h"
#include "cpu/vmath.h"

/* Elements per piece handed to one thread. */
enum { PIECE = 16384 };

/* ------------------------------------------------------------ span functions
 */

typedef void (*unary_span)(float *o, const float *a, int64_t n);
typedef void (*binary_span)(float *o, const float *a, int64_t sa,
                            const float *b, int64_t sb, int64_t n);

#define UNARY_SPAN(OP, expr)                                                   \
    KILN_CLONES static void span_##OP(float *o, const float *a, int64_t n)     \
    {                                                                          \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                    \
        {                                                                      \
            float x = a[i];                                                    \
            o[i] = (expr);                                                     \
        }                                                                      \
    }

/* One loop per stride pattern, so each is a plain vector loop. */
#define BINARY_SPAN(OP, expr)                                                  \
    KILN_CLONES static void span_##OP(float *o, const float *a, int64_t sa,    \
                                      const float *b, int64_t sb, int64_t n)   \
    {                                                                          \
        if (sa && sb) {                                                        \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                \
            {                                                                  \
                float x = a[i], y = b[i];                                      \
                o[i] = (expr);                                                 \
            }                                                                  \
        } else if (sa) {                                                       \
            const float y = b[0];                                              \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                \
            {                                                                  \
                float x = a[i];                                                \
                o[i] = (expr);                                                 \
            }                                                                  \
        } else {                                                               \
            const float x = a[0];                                              \
            if (sb) {                                                          \
                _Pragma("omp simd") for (int64_t i = 0; i < n; i++)            \
                {                                                              \
                    float y = b[i];                                            \
                    o[i] = (expr);                                             \
                }                                                              \
            } else {                                                           \
                const float y = b[0], v = (expr);                              \
                for (int64_t i = 0; i < n; i++)                                \
                    o[i] = v;                                                  \
            }                                                                  \
        }                                                                      \
    }

KILN_CLONES static void span_select(float *o, const float *c, int64_t sc,
                                    const float *a, int64_t sa, const float *b,
                                    int64_t sb, int64_t n)
{
    if (sc && sa && sb) {
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] =
            c[i] != 0.0f ? a[i] : b[i];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        o[i] = c[i * sc] != 0.0f ? a[i * sa] : b[i * sb];
}

/* ------------------------------------------------------------ drivers */

typedef struct unary_job {
    unary_span f;
    float *o;
    const float *a;
    int64_t len;
} unary_job;

static void unary_range(void *ctx, int64_t lo, int64_t hi)
{
    unary_job *j = ctx;
    int64_t s = lo * PIECE, e = hi * PIECE < j->len ? hi * PIECE : j->len;
    j->f(j->o + s, j->a + s, e - s);
}

static void run_unary(const kiln_node *n, void *o, void *const *in,
                      unary_span f)
{
    unary_job j = {f, o, in[0], kiln_node_numel(n)};
    int64_t pieces = (j.len + PIECE - 1) / PIECE;
    kiln_par_for(pieces, j.len < PIECE ? j.len : PIECE, unary_range, &j);
}

/* Work items are (row, piece of the row). */
typedef struct ew_job {
    kiln_ew_plan p;
    int64_t pieces;
    float *o;
    const float *in[3];
    binary_span f;
} ew_job;

static void ew_item(const ew_job *j, int64_t item, int64_t *off, int64_t *s,
                    int64_t *e)
{
    int64_t row = item / j->pieces, piece = item % j->pieces;
    kiln_ew_row_offsets(&j->p, row, off);
    *s = piece * PIECE;
    *e = *s + PIECE < j->p.inner ? *s + PIECE : j->p.inner;
    off[3] = row * j->p.inner;
}

static void binary_range(void *ctx, int64_t lo, int64_t hi)
{
    ew_job *j = ctx;
    int64_t sa = j->p.st[0][j->p.nd - 1], sb = j->p.st[1][j->p.nd - 1];
    if (j->p.nd == 1) { /* one walk (equal shapes, a scalar): items are its
                           pieces, without dividing item numbers */
        for (int64_t s = lo * PIECE; s < hi * PIECE && s < j->p.inner;
             s += PIECE) {
            int64_t len = j->p.inner - s < PIECE ? j->p.inner - s : PIECE;
            j->f(j->o + s, j->in[0] + s * sa, sa, j->in[1] + s * sb, sb, len);
        }
        return;
    }
    if (j->pieces == 1 && j->p.nd == 2) { /* rows: the bias-add shape */
        int64_t ra = j->p.st[0][0], rb = j->p.st[1][0], w = j->p.inner;
        for (int64_t r = lo; r < hi; r++)
            j->f(j->o + r * w, j->in[0] + r * ra, sa, j->in[1] + r * rb, sb, w);
        return;
    }
    for (int64_t it = lo; it < hi; it++) {
        int64_t off[4], s, e;
        ew_item(j, it, off, &s, &e);
        j->f(j->o + off[3] + s, j->in[0] + off[0] + s * sa, sa,
             j->in[1] + off[1] + s * sb, sb, e - s);
    }
}

static void ew_job_init(ew_job *j, const kiln_node *n, void *o, void *const *in)
{
    kiln_ew_plan_init(&j->p, n);
    j->pieces = j->p.inner > 0 ? (j->p.inner + PIECE - 1) / PIECE : 0;
    j->o = o;
    for (int k = 0; k < j->p.nin; k++)
        j->in[k] = in[k];
}

static void run_binary(const kiln_node *n, void *o, void *const *in,
                       binary_span f)
{
    ew_job j;
    ew_job_init(&j, n, o, in);
    j.f = f;
    int64_t cost = j.p.inner < PIECE ? j.p.inner : PIECE;
    kiln_par_for(j.p.rows * j.pieces, cost, binary_range, &j);
}

static void select_range(void *ctx, int64_t lo, int64_t hi)
{
    ew_job *j = ctx;
    int last = j->p.nd - 1;
    for (int64_t it = lo; it < hi; it++) {
        int64_t off[4], s, e;
        ew_item(j, it, off, &s, &e);
        int64_t sc = j->p.st[0][last], sa = j->p.st[1][last],
                sb = j->p.st[2][last];
        span_select(j->o + off[3] + s, j->in[0] + off[0] + s * sc, sc,
                    j->in[1] + off[1] + s * sa, sa, j->in[2] + off[2] + s * sb,
                    sb, e - s);
    }
}

void kiln_fast_SELECT(const kiln_node *n, void *o, void *const *in)
{
    ew_job j;
    ew_job_init(&j, n, o, in);
    int64_t cost = j.p.inner < PIECE ? j.p.inner : PIECE;
    kiln_par_for(j.p.rows * j.pieces, cost, select_range, &j);
}

/* A span function and a kernel per row of the elementwise table, its
   formula with the vectorisable exp, log and tanh of cpu/vmath.h (the op
   names are pasted, never expanded: EXP is a macro here). */
#define KILN_UNARY(OP, name, f, ...)                                           \
    UNARY_SPAN(OP##_, f)                                                       \
    void kiln_fast_##OP(const kiln_node *n, void *o, void *const *in)          \
    {                                                                          \
        run_unary(n, o, in, span_##OP##_);                                     \
    }
#define KILN_BINARY(OP, name, f, ...)                                          \
    BINARY_SPAN(OP##_, f)                                                      \
    void kiln_fast_##OP(const kiln_node *n, void *o, void *const *in)          \
    {                                                                          \
        run_binary(n, o, in, span_##OP##_);                                    \
    }
#define EXP vm_expf
#define EXPN vm_expf_neg
#define LOG vm_logf
#define TANH vm_tanhf
#include "graph/elementwise.def"
