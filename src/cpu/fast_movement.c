/* Fast copies: reshape and friends as (threaded) memcpy, broadcast as row
   copies and fills, permute of a (batched) matrix as a blocked transpose.
   Movement kernels move 4-byte elements whatever the dtype. */
#include <string.h>

#include "cpu/ew_plan.h"
#include "cpu/fast.h"
#include "cpu/kernels.h"
#include "cpu/pool.h"

typedef uint32_t elem;

/* Elements per piece of a threaded copy. */
enum { PIECE = 32768, TILE = 32 };

typedef struct copy_job {
    elem *o;
    const elem *x;
    int64_t len;
} copy_job;

static void copy_range(void *ctx, int64_t lo, int64_t hi)
{
    copy_job *j = ctx;
    int64_t s = lo * PIECE, e = hi * PIECE < j->len ? hi * PIECE : j->len;
    memcpy(j->o + s, j->x + s, (size_t)(e - s) * sizeof(elem));
}

static void copy_elems(void *o, const void *x, int64_t len)
{
    if (o == x || len <= 0)
        return;
    copy_job j = {o, x, len};
    kiln_par_for((len + PIECE - 1) / PIECE, PIECE, copy_range, &j);
}

void kiln_fast_RESHAPE(const kiln_node *n, void *o, void *const *in)
{
    copy_elems(o, in[0], kiln_shape_numel(n->shape));
}

void kiln_fast_STOPGRAD(const kiln_node *n, void *o, void *const *in)
{
    copy_elems(o, in[0], kiln_shape_numel(n->shape));
}

void kiln_fast_ASSIGN(const kiln_node *n, void *o, void *const *in)
{
    copy_elems(o, in[1], kiln_shape_numel(n->shape));
}

typedef struct bcast_job {
    kiln_ew_plan p;
    elem *o;
    const elem *x;
} bcast_job;

static void bcast_range(void *ctx, int64_t lo, int64_t hi)
{
    bcast_job *j = ctx;
    int64_t w = j->p.inner, s = j->p.st[0][j->p.nd - 1];
    for (int64_t r = lo; r < hi; r++) {
        int64_t off;
        kiln_ew_row_offsets(&j->p, r, &off);
        elem *row = j->o + r * w;
        if (s) {
            memcpy(row, j->x + off, (size_t)w * sizeof(elem));
        } else {
            elem v = j->x[off];
            for (int64_t i = 0; i < w; i++)
                row[i] = v;
        }
    }
}

void kiln_fast_BROADCAST(const kiln_node *n, void *o, void *const *in)
{
    bcast_job j;
    kiln_ew_plan_init(&j.p, n);
    j.o = o;
    j.x = in[0];
    kiln_par_for(j.p.rows, j.p.inner, bcast_range, &j);
}

/* ------------------------------------------------------------ permute */

typedef struct transpose_job {
    int64_t batch, rows, cols; /* input is [batch, rows, cols] */
    elem *o;
    const elem *x;
} transpose_job;

static void transpose_range(void *ctx, int64_t lo, int64_t hi)
{
    transpose_job *j = ctx;
    int64_t row_tiles = (j->rows + TILE - 1) / TILE;
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / row_tiles, r0 = it % row_tiles * TILE;
        int64_t r1 = r0 + TILE < j->rows ? r0 + TILE : j->rows;
        const elem *x = j->x + b * j->rows * j->cols;
        elem *o = j->o + b * j->rows * j->cols;
        for (int64_t c0 = 0; c0 < j->cols; c0 += TILE) {
            int64_t c1 = c0 + TILE < j->cols ? c0 + TILE : j->cols;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++)
                    o[c * j->rows + r] = x[r * j->cols + c];
        }
    }
}

/* Merges the permutation into runs of input axes that stay together; 1
   when it is a (batched) swap of two runs. */
static int as_transpose(const kiln_node *n, transpose_job *j)
{
    kiln_shape is = n->in[0]->shape;
    int axes[KILN_MAX_DIMS], na = 0;
    for (int d = 0; d < n->shape.ndim; d++)
        if (is.d[n->at.perm[d]] != 1)
            axes[na++] = n->at.perm[d];
    int64_t len[KILN_MAX_DIMS];
    int first[KILN_MAX_DIMS], nr = 0;
    for (int i = 0; i < na; i++) {
        if (nr && axes[i] == axes[i - 1] + 1) {
            len[nr - 1] *= is.d[axes[i]];
        } else {
            first[nr] = axes[i];
            len[nr++] = is.d[axes[i]];
        }
    }
    if (nr == 2 && first[0] > first[1]) {
        *j = (transpose_job){1, len[1], len[0], NULL, NULL};
        return 1;
    }
    if (nr == 3 && first[0] < first[2] && first[2] < first[1]) {
        *j = (transpose_job){len[0], len[2], len[1], NULL, NULL};
        return 1;
    }
    return 0;
}

void kiln_fast_PERMUTE(const kiln_node *n, void *o, void *const *in)
{
    int64_t len = kiln_shape_numel(n->shape);
    transpose_job j;
    if (len == 0)
        return;
    if (!as_transpose(n, &j)) {
        /* the identity after dropping size-1 axes is a copy */
        kiln_shape is = n->in[0]->shape;
        int last = -1, ordered = 1;
        for (int d = 0; d < n->shape.ndim && ordered; d++)
            if (is.d[n->at.perm[d]] != 1) {
                ordered = n->at.perm[d] > last;
                last = n->at.perm[d];
            }
        if (ordered)
            copy_elems(o, in[0], len);
        else
            kiln_fast_permute_strided(n, o, in[0]);
        return;
    }
    j.o = o;
    j.x = in[0];
    int64_t tiles = j.batch * ((j.rows + TILE - 1) / TILE);
    kiln_par_for(tiles, TILE * j.cols, transpose_range, &j);
}
