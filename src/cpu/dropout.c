/* The dropout kernel.  Element i keeps its value, scaled by 1 / (1 - p),
   when its 24-bit uniform u = (bits >> 8) / 2^24 is >= p, the bits being
   Philox's for (seed, step) of the run's key, the node's stream and i (or
   its (sample, channel) plane): a pure function of those, so the mask is the
   same whatever the thread count or the order elements are computed in.
   It is cheap enough to run as the one reference and fast kernel, split
   over the thread pool. */
#include <math.h>
#include <string.h>

#include "base/philox.h"
#include "cpu/fast.h"
#include "cpu/norm.h"
#include "cpu/pool.h"

typedef struct dropout_job {
    const float *x;
    float *y;
    uint64_t seed, step;
    uint32_t stream, threshold;
    int64_t plane; /* elements per draw: 1, or the plane of dropout2d */
    float scale;
} dropout_job;

/* Blocks of four draws computed at once. */
enum { BATCH = 64 };

/* The Philox blocks first .. first + nb - 1 of the job's stream, as
   4 * nb draws. */
static void philox_batch(const dropout_job *j, uint64_t first, int nb,
                         uint32_t *bits)
{
    uint32_t stream = j->stream, k0 = (uint32_t)j->seed,
             k1 = (uint32_t)(j->seed >> 32);
    uint32_t c[4] = {0, 0, (uint32_t)j->step, (uint32_t)(j->step >> 32)};
    for (int b = 0; b < nb; b++) {
        uint64_t blk = first + (uint64_t)b;
        c[0] = (uint32_t)blk;
        c[1] = stream ^ (uint32_t)(blk >> 32) << 24;
        kiln_philox_out o = kiln_philox4x32(c, k0, k1);
        memcpy(bits + 4 * b, o.v, sizeof o.v);
    }
}

/* y over draws [from, to), bits[k] being draw at + k's. */
KILN_CLONES static void apply_draws(const dropout_job *j, const uint32_t *bits,
                                    int64_t at, int64_t from, int64_t to)
{
    if (j->plane == 1) {
        _Pragma("omp simd") for (int64_t d = from; d < to; d++) j->y[d] =
            j->x[d] * ((bits[d - at] >> 8) >= j->threshold ? j->scale : 0.0f);
        return;
    }
    for (int64_t d = from; d < to; d++) {
        float m = (bits[d - at] >> 8) >= j->threshold ? j->scale : 0.0f;
        const float *x = j->x + d * j->plane;
        float *y = j->y + d * j->plane;
        _Pragma("omp simd") for (int64_t e = 0; e < j->plane; e++) y[e] =
            x[e] * m;
    }
}

/* Draws [lo, hi): the blocks that hold them, BATCH at a time. */
static void dropout_range(void *ctx, int64_t lo, int64_t hi)
{
    const dropout_job *j = ctx;
    uint32_t bits[4 * BATCH];
    for (int64_t at = lo & ~(int64_t)3; at < hi; at += 4 * BATCH) {
        int64_t nb = (hi - at + 3) / 4;
        nb = nb < BATCH ? nb : BATCH;
        philox_batch(j, (uint64_t)at >> 2, (int)nb, bits);
        int64_t from = at > lo ? at : lo, to = at + 4 * nb;
        apply_draws(j, bits, at, from, to < hi ? to : hi);
    }
}

static uint64_t key_word(const int32_t *key, int k)
{
    return (uint64_t)(uint32_t)key[2 * k] | (uint64_t)(uint32_t)key[2 * k + 1]
                                                << 32;
}

void kiln_ref_dropout(const kiln_node *n, void *out, void *const *in)
{
    int64_t len = kiln_shape_numel(n->shape);
    kiln_random_attr a = n->at.random;
    if (!*(const int32_t *)in[2] || a.p == 0.0f) {
        memmove(out, in[0], (size_t)len * sizeof(float));
        return;
    }
    kiln_shape s = n->shape;
    int64_t plane = 1;
    for (int d = 2; a.per_channel && d < s.ndim; d++)
        plane *= s.d[d];
    dropout_job j = {
        .x = in[0],
        .y = out,
        .seed = key_word(in[1], 0),
        .step = key_word(in[1], 1),
        .stream = (uint32_t)a.stream,
        /* u >= p exactly: p * 2^24 is exact in double */
        .threshold = (uint32_t)ceil((double)a.p * 16777216.0),
        .plane = plane ? plane : 1,
        .scale = 1.0f / (1.0f - a.p),
    };
    kiln_par_for(len / j.plane, j.plane + 16, dropout_range, &j);
}
