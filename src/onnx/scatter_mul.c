/* ScatterND's reduction 'mul': each row of data times every update aimed at
   it.  The rows are known while loading, so the updates are split by
   occurrence (the first update of each row, then the second ...): within
   one such group every row appears once, and the group is one factor,
   the updates written at their rows and 1 elsewhere.  data times the
   factors is the product in index order, and every step is a Kiln op with
   a gradient. */
#include <stdint.h>
#include <stdlib.h>

#include "onnx/onnx_internal.h"

/* A row updated more often than this makes a chain of factors too long
   to be worth building (and is refused rather than built). */
#define MUL_MAX_REPEAT 64

static int by_key(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* occ[k]: how many updates before k aim at k's row; returns the largest
   + 1 (-1 out of memory).  Sorting (row, k) keys groups each row's
   updates in index order; rows and k are below 2^31. */
static int64_t occurrences(const int32_t *row, int64_t count, int32_t *occ)
{
    int64_t *key = malloc((size_t)count * sizeof *key + 1), most = 0;
    if (!key)
        return -1;
    for (int64_t k = 0; k < count; k++)
        key[k] = (int64_t)row[k] << 32 | k;
    qsort(key, (size_t)count, sizeof *key, by_key);
    for (int64_t k = 0, run = 0; k < count; k++) {
        run = k && key[k] >> 32 == key[k - 1] >> 32 ? run + 1 : 0;
        occ[key[k] & 0xFFFFFFFF] =
            (int32_t)(run < MUL_MAX_REPEAT ? run : MUL_MAX_REPEAT);
        most = run + 1 > most ? run + 1 : most;
    }
    free(key);
    return most;
}

/* The factor of occurrence j: u's updates of that occurrence written at
   their rows of a flat-shaped tensor, 1 elsewhere. */
static kiln_node *factor(kiln_graph *g, kiln_node *flat, kiln_node *u,
                         const int32_t *row, const int32_t *occ, int64_t count,
                         int32_t j, int32_t *pos, int32_t *at)
{
    int64_t m = 0;
    for (int64_t k = 0; k < count; k++)
        if (occ[k] == j) {
            pos[m] = (int32_t)k;
            at[m++] = row[k];
        }
    kiln_shape fs = kiln_node_shape(flat), us = kiln_node_shape(u);
    us.d[0] = m;
    kiln_node *pi = kiln_constant(g, KILN_I32, KILN_SHAPE(m), pos);
    kiln_node *ai = kiln_constant(g, KILN_I32, KILN_SHAPE(m), at);
    kiln_node *zero = ox_fill(g, fs, 0);
    kiln_node *written =
        kiln_index_add(g, zero, 0, ai, kiln_index_select(g, u, 0, pi));
    kiln_node *hit = kiln_index_add(g, zero, 0, ai, ox_fill(g, us, 1));
    return kiln_select(g, hit, written, kiln_scalar(g, 1));
}

kiln_node *ox_scatter_mul(ox_ctx *c, const ox_node *n, kiln_node *flat,
                          kiln_node *u, const int32_t *row, int64_t count)
{
    if (count > INT32_MAX)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "too many updates"), NULL;
    int32_t *occ = malloc((size_t)count * sizeof *occ + 1);
    int32_t *pos = malloc((size_t)count * sizeof *pos + 1);
    int32_t *at = malloc((size_t)count * sizeof *at + 1);
    int64_t most = occ && pos && at ? occurrences(row, count, occ) : -1;
    kiln_node *y = NULL;
    if (most < 0)
        ox_problem(c, n, KILN_ERR_MEMORY, "out of memory");
    else if (most > MUL_MAX_REPEAT)
        ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                   "reduction 'mul' with a row updated %lld times (at most "
                   "%d)",
                   (long long)most, MUL_MAX_REPEAT);
    else {
        y = flat;
        for (int32_t j = 0; j < most; j++)
            y = kiln_mul(c->g, y,
                         factor(c->g, flat, u, row, occ, count, j, pos, at));
    }
    free(occ);
    free(pos);
    free(at);
    return y;
}
