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

static void dropout_range(void *ctx, int64_t lo, int64_t hi)
{
    const dropout_job *j = ctx;
    for (int64_t i = lo; i < hi; i++) {
        uint32_t bits =
            kiln_philox_bits(j->seed, j->step, j->stream, i / j->plane);
        j->y[i] = j->x[i] * ((bits >> 8) >= j->threshold ? j->scale : 0.0f);
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
    kiln_par_for(len, 8, dropout_range, &j);
}
