/* Fast attention, flash-attention style: queries and keys in tiles of
   BR x BC, the scores of one tile at a time in scratch memory (never the
   Tq x Tk matrix), each product of a tile one serial GEMM.

   Forward: for a tile of queries, the key tiles in turn with an online
   softmax: each row keeps its running maximum m and sum l of exp(s - m);
   when a tile raises m, the row's output so far is scaled by exp(m_old -
   m_new) before the tile's exp(s - m) V is added.  At the end the output
   is divided by l and lse = m + log l.

   Backward: the scores of each tile are recomputed and turned into
   probabilities with the saved lse (p = exp(s - lse)); with
   D = rowsum(dO o) - dlse, dS = p (dO V^T - D) scale, and
   dV += p^T dO, dQ += dS K, dK += dS^T Q.

   Causal masking skips the key tiles past a query tile's last row.  A
   query that sees no key gets a zero row and lse -inf, as the reference.

   Threads: the work is split into at most SLOTS contiguous ranges of
   items, one scratch slot each, spread over the pool: forward items are
   (batch, head, query tile), independent; backward items are whole
   (batch, head) pairs, so that each pair's dK and dV sums run in one
   order whatever the thread count. */
#include <math.h>
#include <string.h>

#include "cpu/attention.h"
#include "cpu/attention_skip.h"
#include "cpu/fast.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"
#include "cpu/vmath.h"

/* BR_SKIP: query tiles under a mask whose tail can be skipped
   (cpu/attention_skip.c) are shorter, so that more of a causal mask's
   tiles end early (GPT b1, T 128: 37.5% of the tiles skipped, not 25%) */
enum { BR = 64, BR_SKIP = 32, BC = 128, SLOTS = 8, LANES = 16 };

typedef struct attn_job {
    const kiln_node *n;
    kiln_attn_dims a;
    void *out;
    void *const *in;
    float *scratch;
    int64_t br, bc, qtiles, items, slots, per_slot;
    const int64_t *ends; /* forward: each item's key end under the mask
                            (cpu/attention_skip.c), or NULL */
} attn_job;

static attn_job job_of(const kiln_node *n)
{
    attn_job j = {.n = n, .a = kiln_attn_dims_of(n)};
    kiln_attn_dims a = j.a;
    int64_t br = kiln_attn_skip_applies(n) ? BR_SKIP : BR;
    j.br = a.tq < br ? a.tq : br;
    j.bc = a.tk < BC ? a.tk : BC;
    j.qtiles = j.br ? (a.tq + j.br - 1) / j.br : 0;
    j.items = n->op == KILN_OP_ATTENTION ? a.b * a.h * j.qtiles : a.b * a.h;
    if (a.tq == 0)
        j.items = 0;
    j.slots = j.items < SLOTS ? j.items : SLOTS;
    /* scores (probabilities) and their adjoints, then m and l or D */
    j.per_slot = 2 * j.br * j.bc + 2 * j.br;
    return j;
}

/* Bytes of the slots, rounded up for the skip plan's integers after. */
static size_t slot_bytes(const attn_job *j)
{
    size_t b = (size_t)(j->slots * j->per_slot) * sizeof(float);
    return (b + sizeof(int64_t) - 1) / sizeof(int64_t) * sizeof(int64_t);
}

size_t kiln_attention_scratch_bytes(const kiln_node *n)
{
    attn_job j = job_of(n);
    return slot_bytes(&j) + kiln_attn_skip_bytes(n, j.qtiles);
}

/* ------------------------------------------------------------ row loops */

/* The sum of LANES partial sums (or their largest, when max) as a tree:
   omp simd's own reduction adds the lanes one after another, a chain as
   long as the loop over a 128-key row. */
static inline float fold_lanes(float *acc, int max)
{
    for (int w = LANES / 2; w; w /= 2)
        for (int u = 0; u < w; u++)
            acc[u] = max ? (acc[u + w] > acc[u] ? acc[u + w] : acc[u])
                         : acc[u] + acc[u + w];
    return acc[0];
}

KILN_CLONES static float row_max(const float *s, int64_t n, float init)
{
    float acc[LANES];
    for (int u = 0; u < LANES; u++)
        acc[u] = init;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        _Pragma("omp simd") for (int u = 0; u < LANES; u++) acc[u] =
            s[j + u] > acc[u] ? s[j + u] : acc[u];
    for (; j < n; j++)
        acc[0] = s[j] > acc[0] ? s[j] : acc[0];
    return fold_lanes(acc, 1);
}

/* s = exp(s - shift) in place; returns the sum.  omp simd: without it GCC
   calls the exponential one element at a time. */
KILN_CLONES static float row_exp(float *s, int64_t n, float shift)
{
    float acc[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        _Pragma("omp simd") for (int u = 0; u < LANES; u++)
        {
            s[j + u] = vm_expf_neg(s[j + u] - shift);
            acc[u] += s[j + u];
        }
    for (; j < n; j++) {
        s[j] = vm_expf_neg(s[j] - shift);
        acc[0] += s[j];
    }
    return fold_lanes(acc, 0);
}

/* s = s scale + mask (m: the row's mask, stride 0 or 1), -inf from key
   visible on. */
KILN_CLONES static void row_scores(float *s, int64_t n, float scale,
                                   const float *m, int64_t mst, int64_t visible)
{
    if (m && mst)
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) s[j] =
            s[j] * scale + m[j];
    else {
        float add = m ? m[0] : 0.0f;
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) s[j] =
            s[j] * scale + add;
    }
    for (int64_t j = visible < 0 ? 0 : visible; j < n; j++)
        s[j] = -INFINITY;
}

/* lse = m + log l of rows that saw a key, -inf for the others. */
KILN_CLONES static void rows_lse(float *lse, const float *m, const float *l,
                                 int64_t rows)
{
    _Pragma("omp simd") for (int64_t r = 0; r < rows; r++) lse[r] =
        l[r] > 0.0f ? m[r] + vm_logf(l[r]) : -INFINITY;
}

KILN_CLONES static void row_scale(float *o, int64_t n, float f)
{
    for (int64_t c = 0; c < n; c++)
        o[c] *= f;
}

/* dS = p (dp - dsum) scale, in place in dp */
KILN_CLONES static void row_dscores(const float *p, float *dp, int64_t n,
                                    float dsum, float scale)
{
    for (int64_t j = 0; j < n; j++)
        dp[j] = p[j] * (dp[j] - dsum) * scale;
}

KILN_CLONES static float row_dot(const float *x, const float *y, int64_t n)
{
    float acc[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int u = 0; u < LANES; u++)
            acc[u] += x[c + u] * y[c + u];
    for (; c < n; c++)
        acc[0] += x[c] * y[c];
    float sum = 0;
    for (int u = 0; u < LANES; u++)
        sum += acc[u];
    return sum;
}

/* ------------------------------------------------------------ tiles */

/* The last key (exclusive) query tile [i0, i0 + rows) sees. */
static int64_t key_end(const kiln_attn_head *x, int64_t i0, int64_t rows)
{
    int64_t end = i0 + rows;
    return x->causal && end < x->a.tk ? end : x->a.tk;
}

/* s [rows, cols] (row stride ld): the scores of queries i0.. against keys
   j0.., scaled, masked, -inf where causal masking hides a key. */
static void tile_scores(const kiln_attn_head *x, int64_t i0, int64_t rows,
                        int64_t j0, int64_t cols, float *s, int64_t ld)
{
    int64_t d = x->a.d;
    kiln_cpu_gemm_serial(0, 1, rows, cols, d, x->q + i0 * d, d, x->k + j0 * d,
                         d, 0.0f, s, ld);
    for (int64_t r = 0; r < rows; r++) {
        const float *m =
            x->mask ? x->mask + (i0 + r) * x->mst[2] + j0 * x->mst[3] : NULL;
        row_scores(s + r * ld, cols, x->scale, m, x->mst[3],
                   x->causal ? i0 + r - j0 + 1 : cols);
    }
}

/* ------------------------------------------------------------ forward */

/* The online softmax of one row of a tile: s becomes exp(s - m_new), m
   and l move on; returns the factor the row's output so far takes. */
static float online_row(float *s, int64_t n, float *m, float *l)
{
    float mx = row_max(s, n, *m);
    if (mx == -INFINITY) { /* nothing seen yet */
        memset(s, 0, (size_t)n * sizeof *s);
        return 1.0f;
    }
    /* the first tile (nothing summed yet) and a maximum that stays need no
       rescaling: a scalar exponential per row cost as much as a row's */
    float alpha = *m == -INFINITY || *m == mx ? 1.0f : vm_expf(*m - mx);
    *l = *l * alpha + row_exp(s, n, mx);
    *m = mx;
    return alpha;
}

/* Query tile qt of head x (item it); s: the slot's scores, m and l its
   rows' state. */
static void forward_tile(const attn_job *j, const kiln_attn_head *x, int64_t it,
                         float *s, float *m, float *l)
{
    int64_t qt = it % j->qtiles;
    int64_t e = j->a.e, i0 = qt * j->br;
    int64_t rows = j->a.tq - i0 < j->br ? j->a.tq - i0 : j->br;
    float *o = x->o + i0 * e;
    memset(o, 0, (size_t)(rows * e) * sizeof *o);
    for (int64_t r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    int64_t end = key_end(x, i0, rows);
    if (j->ends && j->ends[it] < end)
        end = j->ends[it];
    for (int64_t j0 = 0; j0 < end; j0 += j->bc) {
        int64_t cols = end - j0 < j->bc ? end - j0 : j->bc;
        tile_scores(x, i0, rows, j0, cols, s, j->bc);
        for (int64_t r = 0; r < rows; r++) {
            float alpha = online_row(s + r * j->bc, cols, &m[r], &l[r]);
            if (alpha != 1.0f)
                row_scale(o + r * e, e, alpha);
        }
        kiln_cpu_gemm_serial(0, 0, rows, e, cols, s, j->bc, x->v + j0 * e, e,
                             1.0f, o, e);
    }
    for (int64_t r = 0; r < rows; r++)
        row_scale(o + r * e, e, l[r] > 0.0f ? 1.0f / l[r] : 0.0f);
    rows_lse(x->lse + i0, m, l, rows);
}

/* ------------------------------------------------------------ backward */

/* Query tile i0.. (rows) of head x against key tile j0.. (cols): s takes
   the probabilities, ds their adjoints; dsum: each row's D. */
static void backward_pair(const attn_job *j, const kiln_attn_head *x,
                          int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                          float *s, float *ds, const float *dsum)
{
    int64_t d = j->a.d, e = j->a.e, ld = j->bc;
    tile_scores(x, i0, rows, j0, cols, s, ld);
    for (int64_t r = 0; r < rows; r++) {
        float lse = x->lse_in[i0 + r];
        if (lse == -INFINITY)
            memset(s + r * ld, 0, (size_t)cols * sizeof *s);
        else
            row_exp(s + r * ld, cols, lse);
    }
    const float *dout = x->dout + i0 * e;
    kiln_cpu_gemm_serial(1, 0, cols, e, rows, s, ld, dout, e, 1.0f,
                         x->dv + j0 * e, e);
    kiln_cpu_gemm_serial(0, 1, rows, cols, e, dout, e, x->v + j0 * e, e, 0.0f,
                         ds, ld);
    for (int64_t r = 0; r < rows; r++)
        row_dscores(s + r * ld, ds + r * ld, cols, dsum[r], x->scale);
    kiln_cpu_gemm_serial(0, 0, rows, d, cols, ds, ld, x->k + j0 * d, d, 1.0f,
                         x->dq + i0 * d, d);
    kiln_cpu_gemm_serial(1, 0, cols, d, rows, ds, ld, x->q + i0 * d, d, 1.0f,
                         x->dk + j0 * d, d);
}

/* Every tile pair of head x, query tile by query tile. */
static void backward_head(const attn_job *j, const kiln_attn_head *x,
                          float *slot)
{
    kiln_attn_dims a = j->a;
    float *s = slot, *ds = slot + j->br * j->bc, *dsum = ds + j->br * j->bc;
    memset(x->dq, 0, (size_t)(a.tq * a.d) * sizeof(float));
    memset(x->dk, 0, (size_t)(a.tk * a.d) * sizeof(float));
    memset(x->dv, 0, (size_t)(a.tk * a.e) * sizeof(float));
    for (int64_t i0 = 0; i0 < a.tq; i0 += j->br) {
        int64_t rows = a.tq - i0 < j->br ? a.tq - i0 : j->br;
        for (int64_t r = 0; r < rows; r++)
            dsum[r] = row_dot(x->dout + (i0 + r) * a.e,
                              x->o_in + (i0 + r) * a.e, a.e) -
                      x->dlse[i0 + r];
        int64_t end = key_end(x, i0, rows);
        for (int64_t j0 = 0; j0 < end; j0 += j->bc)
            backward_pair(j, x, i0, rows, j0,
                          end - j0 < j->bc ? end - j0 : j->bc, s, ds, dsum);
    }
}

/* ------------------------------------------------------------ driver */

/* Slots [lo, hi): each runs its range of items. */
static void run_slots(void *ctx, int64_t lo, int64_t hi)
{
    const attn_job *j = ctx;
    for (int64_t si = lo; si < hi; si++) {
        float *slot = j->scratch + si * j->per_slot;
        int64_t i0 = si * j->items / j->slots,
                i1 = (si + 1) * j->items / j->slots;
        for (int64_t it = i0; it < i1; it++) {
            int fwd = j->n->op == KILN_OP_ATTENTION;
            int64_t bh = fwd ? it / j->qtiles : it;
            kiln_attn_head x = kiln_attn_head_of(j->n, j->out, j->in,
                                                 bh / j->a.h, bh % j->a.h);
            if (fwd)
                forward_tile(j, &x, it, slot, slot + 2 * j->br * j->bc,
                             slot + 2 * j->br * j->bc + j->br);
            else
                backward_head(j, &x, slot);
        }
    }
}

static void run(const kiln_node *n, void *out, void *const *in, void *scratch)
{
    attn_job j = job_of(n);
    j.out = out;
    j.in = in;
    j.scratch = scratch;
    kiln_attn_dims a = j.a;
    if (j.items == 0) { /* no query: only an empty gradient to clear */
        if (n->op == KILN_OP_ATTENTION_GRAD)
            memset(out, 0,
                   (size_t)(a.b * kiln_attn_grad_row(a)) * sizeof(float));
        return;
    }
    j.ends = kiln_attn_skip_plan(n, in, j.br, j.qtiles,
                                 (char *)scratch + slot_bytes(&j));
    int64_t per_item = (a.b * a.h * a.tq * a.tk * (a.d + a.e)) / j.items;
    kiln_par_for(j.slots, per_item * (j.items / j.slots), run_slots, &j);
}

void kiln_fast_ATTENTION(const kiln_node *n, void *out, void *const *in,
                         void *scratch)
{
    run(n, out, in, scratch);
}

void kiln_fast_ATTENTION_GRAD(const kiln_node *n, void *out, void *const *in,
                              void *scratch)
{
    run(n, out, in, scratch);
}
