/* Float arithmetic and casts on small values known while loading, beside
   fold_ints.c's integer arithmetic: ONNX's expanded functions compute
   window sizes and trip counts in floats (Range's and HannWindow's bodies:
   a size cast to float, differences, a quotient, Ceil, Relu, a cast back
   to int64) and pass them to ops that need them while building (Range,
   Loop).  Each result is computed in float, as the node computes it when
   running; the converters still build the node. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Known results larger than this stay unknown. */
#define FOLD_MAX 4096

static ox_host *host_floats(kiln_shape s, int type)
{
    ox_host *h = calloc(1, sizeof *h);
    int64_t n = kiln_shape_numel(s);
    if (!h || n < 0 || n > FOLD_MAX ||
        !(h->f = malloc((size_t)(n ? n : 1) * sizeof *h->f))) {
        free(h);
        return NULL;
    }
    h->type = type;
    h->shape = s;
    h->numel = n;
    return h;
}

static float apply(const char *op, float a, float b)
{
    switch (op[0]) {
    case 'A':
        return op[1] == 'd' ? a + b : fabsf(a);
    case 'S':
        return a - b;
    case 'M':
        return a * b;
    case 'D':
        return a / b;
    case 'C':
        return ceilf(a);
    case 'F':
        return floorf(a);
    case 'N':
        return -a;
    default: /* Relu */
        return a > 0 ? a : 0;
    }
}

static const ox_host *known_float(const ox_node *n, int i)
{
    const ox_value *v = i < n->n_in ? n->in[i] : NULL;
    return v && v->known && v->known->f && v->known->type == OX_FLOAT &&
                   v->known->numel <= FOLD_MAX
               ? v->known
               : NULL;
}

/* Element i of x broadcast (numpy rules, right-aligned) to shape os. */
static float at(const ox_host *x, kiln_shape os, int64_t i)
{
    int64_t idx = 0, stride = 1;
    for (int k = os.ndim - 1; k >= 0; k--) {
        int64_t c = i % os.d[k];
        i /= os.d[k];
        int kx = k - (os.ndim - x->shape.ndim);
        if (kx >= 0) {
            idx += (x->shape.d[kx] == 1 ? 0 : c) * stride;
            stride *= x->shape.d[kx];
        }
    }
    return x->f[idx];
}

void ox_fold_floats(ox_node *n)
{
    static const char *const ops[] = {"Add",   "Sub",  "Mul", "Div", "Ceil",
                                      "Floor", "Relu", "Neg", "Abs"};
    const char *op = n->p->op_type;
    size_t k = 0, count = sizeof ops / sizeof *ops;
    while (k < count && strcmp(op, ops[k]))
        k++;
    int binary = k < 4;
    const ox_host *a = known_float(n, 0), *b = binary ? known_float(n, 1) : a;
    if (k == count || n->out_known[0] || !a || !b || n->n_in != 1 + binary)
        return;
    kiln_shape os = a->shape;
    if (b->shape.ndim > os.ndim)
        os = b->shape;
    for (int d = 0; d < os.ndim; d++) {
        int64_t da = d < os.ndim - a->shape.ndim
                         ? 1
                         : a->shape.d[d - (os.ndim - a->shape.ndim)];
        int64_t db = d < os.ndim - b->shape.ndim
                         ? 1
                         : b->shape.d[d - (os.ndim - b->shape.ndim)];
        if (da != db && da != 1 && db != 1)
            return;
        os.d[d] = da == 1 ? db : da;
    }
    ox_host *h = host_floats(os, OX_FLOAT);
    for (int64_t i = 0; h && i < h->numel; i++)
        h->f[i] = apply(op, at(a, os, i), at(b, os, i));
    n->out_known[0] = h;
}

void ox_fold_cast(ox_node *n, int to)
{
    const ox_host *x = n->n_in > 0 && n->in[0] ? n->in[0]->known : NULL;
    /* values rounded to float16 / bfloat16 are left to the graph */
    if (!x || n->out_known[0] || x->numel > FOLD_MAX || to == OX_FLOAT16 ||
        to == OX_BFLOAT16)
        return;
    if (to == OX_FLOAT || to == OX_DOUBLE || to == OX_BOOL) {
        ox_host *h = host_floats(x->shape, to == OX_BOOL ? OX_BOOL : OX_FLOAT);
        for (int64_t i = 0; h && i < h->numel; i++) {
            float v = x->f ? x->f[i] : (float)x->i[i];
            h->f[i] = to == OX_BOOL ? v != 0 : v;
        }
        n->out_known[0] = h;
        return;
    }
    if (x->i || !x->f)
        return; /* integer to integer: ops_tensor.c carries it */
    int64_t *v = malloc((size_t)(x->numel ? x->numel : 1) * sizeof *v);
    for (int64_t i = 0; v && i < x->numel; i++) {
        /* truncation toward zero, as numpy's astype; past int64 or NaN
           stays unknown */
        if (!(fabsf(x->f[i]) < 9.2e18f)) {
            free(v);
            return;
        }
        v[i] = (int64_t)x->f[i];
    }
    if (v)
        n->out_known[0] = ox_host_ints(x->shape, v);
    free(v);
}
