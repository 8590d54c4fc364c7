/* Integer arithmetic on values known while loading.  Models compute
   shapes and axes from other shapes (ONNX's expanded functions: a rank
   minus an axis, a negated axis count, a product of dims) and pass the
   result to ops that need it while building (ConstantOfShape, Reshape,
   Range ...).  The converters still build the graph node; this carries
   the exact int64 result beside it, as Shape and Concat do. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Known results larger than this stay unknown: shape arithmetic is small. */
#define FOLD_MAX 4096

typedef int (*int_op)(int64_t a, int64_t b, int64_t *out);

static int op_add(int64_t a, int64_t b, int64_t *o)
{
    return __builtin_add_overflow(a, b, o) ? -1 : 0;
}

static int op_sub(int64_t a, int64_t b, int64_t *o)
{
    return __builtin_sub_overflow(a, b, o) ? -1 : 0;
}

static int op_mul(int64_t a, int64_t b, int64_t *o)
{
    return __builtin_mul_overflow(a, b, o) ? -1 : 0;
}

/* ONNX's integer Div truncates toward zero, as C does. */
static int op_div(int64_t a, int64_t b, int64_t *o)
{
    if (b == 0 || (a == INT64_MIN && b == -1))
        return -1;
    *o = a / b;
    return 0;
}

static int op_max(int64_t a, int64_t b, int64_t *o)
{
    *o = a > b ? a : b;
    return 0;
}

static int op_min(int64_t a, int64_t b, int64_t *o)
{
    *o = a < b ? a : b;
    return 0;
}

static int op_neg(int64_t a, int64_t b, int64_t *o)
{
    (void)b;
    return op_sub(0, a, o);
}

static int op_abs(int64_t a, int64_t b, int64_t *o)
{
    (void)b;
    return a < 0 ? op_sub(0, a, o) : (*o = a, 0);
}

static const struct {
    const char *name;
    int_op fn;
} fold_ops[] = {
    {"Add", op_add}, {"Sub", op_sub}, {"Mul", op_mul},
    {"Div", op_div}, {"Max", op_max}, {"Min", op_min},
    {"Sum", op_add}, {"Neg", op_neg}, {"Abs", op_abs},
};

/* numpy broadcasting of two shapes; -1 when they do not broadcast. */
static int broadcast(kiln_shape a, kiln_shape b, kiln_shape *out)
{
    int nd = a.ndim > b.ndim ? a.ndim : b.ndim;
    out->ndim = nd;
    for (int k = 0; k < nd; k++) {
        int64_t da = k < nd - a.ndim ? 1 : a.d[k - (nd - a.ndim)];
        int64_t db = k < nd - b.ndim ? 1 : b.d[k - (nd - b.ndim)];
        if (da != db && da != 1 && db != 1)
            return -1;
        out->d[k] = da == 1 ? db : da;
    }
    return 0;
}

/* The flat index into x (shaped xs, right-aligned in os) of output
   element i. */
static int64_t source(kiln_shape os, kiln_shape xs, int64_t i)
{
    int64_t at = 0, stride = 1;
    for (int k = os.ndim - 1; k >= 0; k--) {
        int64_t idx = i % os.d[k];
        i /= os.d[k];
        int kx = k - (os.ndim - xs.ndim);
        if (kx >= 0) {
            at += (xs.d[kx] == 1 ? 0 : idx) * stride;
            stride *= xs.d[kx];
        }
    }
    return at;
}

/* acc (shaped *as) op= x elementwise with broadcasting, into a new array;
   NULL (acc freed) when the shapes do not broadcast, the result is too
   large, or an operation overflows. */
static int64_t *combine(int_op fn, int64_t *acc, kiln_shape *as,
                        const ox_host *x)
{
    kiln_shape os;
    if (broadcast(*as, x->shape, &os) || kiln_shape_numel(os) > FOLD_MAX) {
        free(acc);
        return NULL;
    }
    int64_t n = kiln_shape_numel(os);
    int64_t *r = malloc((size_t)(n ? n : 1) * sizeof *r);
    for (int64_t i = 0; r && i < n; i++)
        if (fn(acc[source(os, *as, i)], x->i[source(os, x->shape, i)], &r[i])) {
            free(r);
            r = NULL;
        }
    free(acc);
    *as = os;
    return r;
}

static const ox_host *known_int(const ox_node *n, int i)
{
    const ox_value *v = i < n->n_in ? n->in[i] : NULL;
    return v && v->known && v->known->i && v->known->numel <= FOLD_MAX
               ? v->known
               : NULL;
}

void ox_fold_ints(ox_node *n)
{
    size_t k = 0, count = sizeof fold_ops / sizeof *fold_ops;
    while (k < count && strcmp(n->p->op_type, fold_ops[k].name))
        k++;
    if (k == count || n->out_known[0] || n->n_in < 1 || !known_int(n, 0))
        return;
    for (int i = 1; i < n->n_in; i++)
        if (!known_int(n, i))
            return;
    const ox_host *first = known_int(n, 0);
    kiln_shape s = first->shape;
    int64_t *acc = malloc((size_t)first->numel * sizeof *acc);
    if (!acc)
        return;
    memcpy(acc, first->i, (size_t)first->numel * sizeof *acc);
    if (n->n_in == 1) /* unary: each element against itself */
        acc = combine(fold_ops[k].fn, acc, &s, first);
    for (int i = 1; acc && i < n->n_in; i++)
        acc = combine(fold_ops[k].fn, acc, &s, known_int(n, i));
    if (acc)
        n->out_known[0] = ox_host_ints(s, acc);
    free(acc);
}
