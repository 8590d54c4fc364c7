/* Fast strided copies: permutes that the transpose path of fast_movement.c
   does not take (heads split and merged: [B, T, H, D] <-> [B, H, T, D]),
   slices and constant pads.  Each is a copy between a contiguous tensor and
   a strided view of another; axes that stay adjacent in both are merged, so
   the copy runs as memcpy of whole rows, or, when the innermost axis moves,
   as 32 x 32 tiles of a transpose.  Movement kernels move 4-byte elements
   whatever the dtype. */
#include <string.h>

#include "cpu/fast.h"
#include "cpu/pool.h"

typedef uint32_t elem;

enum { TILE = 32 };

/* dst[dst_st . i] = src[src_st . i] over the index space dim. */
typedef struct strided_copy {
    int nd;
    int64_t dim[KILN_MAX_DIMS];
    int64_t dst_st[KILN_MAX_DIMS], src_st[KILN_MAX_DIMS];
    elem *dst;
    const elem *src;
    int tk; /* transpose: the axis src walks with stride 1; -1 for rows */
} strided_copy;

/* Drops size-1 axes and merges an axis into the next where both sides walk
   them as one. */
static void simplify(strided_copy *c)
{
    int nd = 0;
    for (int d = 0; d < c->nd; d++) {
        if (c->dim[d] == 1)
            continue;
        if (nd && c->dst_st[nd - 1] == c->dst_st[d] * c->dim[d] &&
            c->src_st[nd - 1] == c->src_st[d] * c->dim[d]) {
            c->dim[nd - 1] *= c->dim[d];
            c->dst_st[nd - 1] = c->dst_st[d];
            c->src_st[nd - 1] = c->src_st[d];
            continue;
        }
        c->dim[nd] = c->dim[d];
        c->dst_st[nd] = c->dst_st[d];
        c->src_st[nd] = c->src_st[d];
        nd++;
    }
    if (nd == 0) { /* one element */
        c->dim[0] = 1;
        c->dst_st[0] = c->src_st[0] = 1;
        nd = 1;
    }
    c->nd = nd;
}

/* Offsets of outer index r over the axes other than skip and the last. */
static void outer_offsets(const strided_copy *c, int skip, int64_t r,
                          int64_t *doff, int64_t *soff)
{
    int64_t dd = 0, ss = 0;
    for (int d = c->nd - 2; d >= 0; d--) {
        if (d == skip)
            continue;
        int64_t i = r % c->dim[d];
        r /= c->dim[d];
        dd += i * c->dst_st[d];
        ss += i * c->src_st[d];
    }
    *doff = dd;
    *soff = ss;
}

static void rows_range(void *ctx, int64_t lo, int64_t hi)
{
    const strided_copy *c = ctx;
    int64_t w = c->dim[c->nd - 1];
    int64_t ds = c->dst_st[c->nd - 1], ss = c->src_st[c->nd - 1];
    for (int64_t r = lo; r < hi; r++) {
        int64_t dof, sof;
        outer_offsets(c, -1, r, &dof, &sof);
        elem *o = c->dst + dof;
        const elem *x = c->src + sof;
        if (ds == 1 && ss == 1) {
            memcpy(o, x, (size_t)w * sizeof(elem));
        } else {
            for (int64_t i = 0; i < w; i++)
                o[i * ds] = x[i * ss];
        }
    }
}

/* Item r: outer index r / tiles, then a band of TILE along axis tk. */
static void tiles_range(void *ctx, int64_t lo, int64_t hi)
{
    const strided_copy *c = ctx;
    int k = c->tk, l = c->nd - 1;
    int64_t bands = (c->dim[k] + TILE - 1) / TILE, w = c->dim[l];
    int64_t dk = c->dst_st[k], dl = c->dst_st[l], sk = c->src_st[k],
            sl = c->src_st[l];
    for (int64_t r = lo; r < hi; r++) {
        int64_t dof, sof;
        outer_offsets(c, k, r / bands, &dof, &sof);
        int64_t k0 = r % bands * TILE;
        int64_t k1 = k0 + TILE < c->dim[k] ? k0 + TILE : c->dim[k];
        for (int64_t l0 = 0; l0 < w; l0 += TILE) {
            int64_t l1 = l0 + TILE < w ? l0 + TILE : w;
            for (int64_t j = l0; j < l1; j++)
                for (int64_t i = k0; i < k1; i++)
                    c->dst[dof + i * dk + j * dl] =
                        c->src[sof + i * sk + j * sl];
        }
    }
}

static void run_copy(strided_copy *c)
{
    simplify(c);
    int l = c->nd - 1;
    int64_t total = 1;
    for (int d = 0; d < c->nd; d++)
        total *= c->dim[d];
    if (total == 0)
        return;
    /* The innermost axis of one side moved away from the other's: tile
       over that axis and the other side's unit-stride axis. */
    c->tk = -1;
    if (c->dst_st[l] != 1 || c->src_st[l] != 1)
        for (int d = 0; d < l; d++)
            if ((c->dst_st[l] == 1 && c->src_st[d] == 1) ||
                (c->src_st[l] == 1 && c->dst_st[d] == 1))
                c->tk = d;
    if (c->tk < 0) {
        int64_t rows = total / c->dim[l];
        kiln_par_for(rows, c->dim[l], rows_range, c);
        return;
    }
    int64_t bands = (c->dim[c->tk] + TILE - 1) / TILE;
    int64_t items = total / c->dim[c->tk] / c->dim[l] * bands;
    kiln_par_for(items, TILE * c->dim[l], tiles_range, c);
}

/* Permutes the transpose path does not take (from fast_movement.c). */
void kiln_fast_permute_strided(const kiln_node *n, void *o, const void *x)
{
    strided_copy c = {.nd = n->shape.ndim, .dst = o, .src = x};
    int64_t ist[KILN_MAX_DIMS];
    kiln_shape_strides(n->in[0]->shape, ist);
    kiln_shape_strides(n->shape, c.dst_st);
    for (int d = 0; d < c.nd; d++) {
        c.dim[d] = n->shape.d[d];
        c.src_st[d] = ist[n->at.perm[d]];
    }
    run_copy(&c);
}

void kiln_fast_SLICE(const kiln_node *n, void *o, void *const *in)
{
    strided_copy c = {.nd = n->shape.ndim, .dst = o, .src = in[0]};
    kiln_shape_strides(n->in[0]->shape, c.src_st);
    kiln_shape_strides(n->shape, c.dst_st);
    int64_t base = 0;
    for (int d = 0; d < c.nd; d++) {
        c.dim[d] = n->shape.d[d];
        base += n->at.lo[d] * c.src_st[d];
    }
    c.src += base;
    run_copy(&c);
}

typedef struct fill_job {
    elem *o;
    elem v;
    int64_t len;
} fill_job;

static void fill_range(void *ctx, int64_t lo, int64_t hi)
{
    fill_job *j = ctx;
    int64_t e = hi * 32768 < j->len ? hi * 32768 : j->len;
    for (int64_t i = lo * 32768; i < e; i++)
        j->o[i] = j->v;
}

void kiln_fast_PAD(const kiln_node *n, void *o, void *const *in)
{
    fill_job f = {.o = o, .len = kiln_shape_numel(n->shape)};
    if (n->dtype == KILN_I32) {
        int32_t iv = (int32_t)n->at.value;
        memcpy(&f.v, &iv, sizeof f.v);
    } else {
        memcpy(&f.v, &n->at.value, sizeof f.v);
    }
    kiln_par_for((f.len + 32767) / 32768, 32768, fill_range, &f);
    const kiln_shape is = n->in[0]->shape;
    strided_copy c = {.nd = is.ndim, .dst = o, .src = in[0]};
    kiln_shape_strides(n->shape, c.dst_st);
    kiln_shape_strides(is, c.src_st);
    int64_t base = 0;
    for (int d = 0; d < c.nd; d++) {
        c.dim[d] = is.d[d];
        base += n->at.lo[d] * c.dst_st[d];
    }
    c.dst += base;
    run_copy(&c);
}
