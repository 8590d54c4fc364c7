/* Slice with steps other than 1 (opset 10 on): numpy's x[b:e:s] on each
   axis listed, a negative step walking backward.  The positions taken are
   known while loading, so each such axis is one kiln_index_select of a
   constant index vector (its gradient an index add). */
#include <stdint.h>
#include <stdlib.h>

#include "onnx/onnx_internal.h"

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* How many positions x[b:e:s] takes along an axis of size d, and in *b the
   first, numpy's rules: negative b and e count from the end, then clamp
   to [0, d] (s > 0) or [-1, d - 1] (s < 0).  s is first clamped to
   +-(d + 1), which takes the same positions and keeps the arithmetic far
   from overflow whatever the file says. */
static int64_t strided(int64_t d, int64_t *b, int64_t e, int64_t s)
{
    s = clamp64(s, -(d + 1), d + 1);
    int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? d : d - 1;
    *b = clamp64(*b < 0 ? *b + d : *b, lo, hi);
    e = clamp64(e < 0 ? e + d : e, lo, hi);
    if (s > 0)
        return e > *b ? (e - *b + s - 1) / s : 0;
    return *b > e ? (*b - e - s - 1) / -s : 0;
}

/* x's positions b, b + s, ... (count of them) along axis a. */
static kiln_node *take(ox_ctx *c, const ox_node *n, kiln_node *x, int a,
                       int64_t b, int64_t s, int64_t count)
{
    kiln_node *iv = ox_arith_indices(c, n, b, s, count);
    return iv ? kiln_index_select(c->g, x, a, iv) : NULL;
}

/* A known vector's values at the positions taken (shapes reversed or
   strided stay known while loading). */
static void known_out(ox_node *n, int64_t b, int64_t s, int64_t count)
{
    const ox_host *h = n->in[0] ? n->in[0]->known : NULL;
    if (!h || !h->i || h->shape.ndim != 1)
        return;
    int64_t *v = malloc((size_t)count * sizeof *v + 1);
    for (int64_t i = 0; v && i < count; i++)
        v[i] = h->i[b + i * s];
    if (v)
        n->out_known[0] = ox_host_ints(KILN_SHAPE(count), v);
    free(v);
}

int ox_slice_steps(ox_ctx *c, ox_node *n, const int64_t *const arg[3],
                   const int64_t *steps, int64_t cnt)
{
    kiln_node *x = ox_in(c, n, 0);
    kiln_shape s = kiln_node_shape(x);
    int64_t first = 0, step = 1, count = s.ndim ? s.d[0] : 0;
    unsigned seen = 0;
    for (int64_t k = 0; k < cnt; k++) {
        int a = ox_axis(c, n, arg[2] ? arg[2][k] : k, s.ndim);
        if (a < 0)
            return -1;
        if (steps[k] == 0 || (seen >> a & 1u) || s.d[a] > INT32_MAX)
            return ox_problem(c, n, KILN_ERR_ARG, "axis %d: %s", a,
                              steps[k] == 0    ? "step 0"
                              : seen >> a & 1u ? "sliced twice"
                                               : "too long to index"),
                   -1;
        seen |= 1u << a;
        if (s.sym >> a & 1u)
            return ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                              "a step other than 1 along the symbolic "
                              "dimension %d",
                              a),
                   -1;
        int64_t b = arg[0][k];
        int64_t len = strided(s.d[a], &b, arg[1][k], steps[k]);
        if (!(x = take(c, n, x, a, b, steps[k], len)))
            return -1;
        if (a == 0)
            first = b, step = steps[k], count = len;
    }
    n->out[0] = x;
    n->out_type[0] = ox_in_type(n, 0);
    known_out(n, first, step, count);
    return 0;
}
