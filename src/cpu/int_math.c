/* The i32 arithmetic kernels.  Sums, differences and products wrap in two's
   complement (computed on uint32, where C defines overflow), as PyTorch's
   integer tensors do.  Division rounds toward minus infinity and the
   remainder takes the divisor's sign (torch.div(rounding_mode="floor"),
   torch.remainder); INT_MIN / -1 wraps to INT_MIN with remainder 0 (numpy's
   answer; PyTorch dies of SIGFPE there).  Divisors are checked before a
   kernel runs (kiln_cpu_check_int_div). */
#include <limits.h>
#include <stdio.h>

#include "cpu/fast.h"
#include "cpu/index.h"
#include "cpu/int_math.h"
#include "cpu/pool.h"

static int32_t wrap(uint32_t v)
{
    return v <= INT32_MAX ? (int32_t)v : (int32_t)(v - 0x80000000u) + INT32_MIN;
}

static int32_t floor_div(int32_t a, int32_t b)
{
    if (b == -1)
        return wrap(0u - (uint32_t)a);
    int32_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int32_t floor_mod(int32_t a, int32_t b)
{
    if (b == -1)
        return 0;
    int32_t r = a % b;
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

/* One op on one pair; b is never 0 here (checked), and -1 never reaches
   C's division, whose INT_MIN / -1 traps. */
static int32_t apply(kiln_op op, int32_t a, int32_t b)
{
    switch (op) {
    case KILN_OP_INT_ADD:
        return wrap((uint32_t)a + (uint32_t)b);
    case KILN_OP_INT_SUB:
        return wrap((uint32_t)a - (uint32_t)b);
    case KILN_OP_INT_MUL:
        return wrap((uint32_t)a * (uint32_t)b);
    case KILN_OP_INT_FLOOR_DIV:
        return floor_div(a, b);
    default:
        return floor_mod(a, b);
    }
}

/* Offset in an input of broadcast strides st of output element i. */
static int64_t offset_of(const kiln_shape *out, const int64_t *st, int64_t i)
{
    int64_t off = 0;
    for (int d = out->ndim - 1; d >= 0; d--) {
        off += (i % out->d[d]) * st[d];
        i /= out->d[d];
    }
    return off;
}

void kiln_ref_int_map(const kiln_node *n, void *o, void *const *in)
{
    int32_t *out = o;
    const int32_t *a = in[0], *b = in[1];
    int64_t sa[KILN_MAX_DIMS], sb[KILN_MAX_DIMS];
    kiln_broadcast_strides(n->in[0]->shape, n->shape, sa);
    kiln_broadcast_strides(n->in[1]->shape, n->shape, sb);
    int64_t len = kiln_shape_numel(n->shape);
    for (int64_t i = 0; i < len; i++)
        out[i] = apply(n->op, a[offset_of(&n->shape, sa, i)],
                       b[offset_of(&n->shape, sb, i)]);
}

typedef struct int_job {
    const kiln_node *n;
    const int32_t *a, *b;
    int32_t *out;
    int64_t sa[KILN_MAX_DIMS], sb[KILN_MAX_DIMS];
    int64_t row; /* the last dim's size */
} int_job;

/* Rows [lo, hi) of the output's last dim: the operands' row starts found
   once per row, the row itself a loop over constant strides (0 or 1). */
static void int_rows(void *ctx, int64_t lo, int64_t hi)
{
    const int_job *j = ctx;
    int nd = j->n->shape.ndim;
    int64_t da = nd ? j->sa[nd - 1] : 0, db = nd ? j->sb[nd - 1] : 0;
    kiln_op op = j->n->op;
    for (int64_t r = lo; r < hi; r++) {
        const int32_t *a = j->a + offset_of(&j->n->shape, j->sa, r * j->row);
        const int32_t *b = j->b + offset_of(&j->n->shape, j->sb, r * j->row);
        int32_t *out = j->out + r * j->row;
        for (int64_t i = 0; i < j->row; i++)
            out[i] = apply(op, a[i * da], b[i * db]);
    }
}

static void fast_int_map(const kiln_node *n, void *o, void *const *in)
{
    int_job j = {.n = n, .a = in[0], .b = in[1], .out = o};
    int64_t len = kiln_shape_numel(n->shape);
    if (!len)
        return;
    kiln_broadcast_strides(n->in[0]->shape, n->shape, j.sa);
    kiln_broadcast_strides(n->in[1]->shape, n->shape, j.sb);
    j.row = n->shape.ndim ? n->shape.d[n->shape.ndim - 1] : 1;
    kiln_par_for(len / j.row, j.row + 8, int_rows, &j);
}

/* one kernel for the five ops (kiln_fast_<OP>, cpu/fast.h's names) */
#define INT_FAST(OP)                                                           \
    void kiln_fast_##OP(const kiln_node *n, void *o, void *const *in)          \
    {                                                                          \
        fast_int_map(n, o, in);                                                \
    }
INT_FAST(INT_ADD)
INT_FAST(INT_SUB)
INT_FAST(INT_MUL)
INT_FAST(INT_FLOOR_DIV)
INT_FAST(INT_MOD)
#undef INT_FAST

kiln_status kiln_cpu_check_int_div(const kiln_node *n, void *const *in,
                                   char *msg, size_t len)
{
    if (n->op != KILN_OP_INT_FLOOR_DIV && n->op != KILN_OP_INT_MOD)
        return KILN_OK;
    const int32_t *b = in[1];
    kiln_shape bs = n->in[1]->shape;
    int64_t k = kiln_shape_numel(bs), i = 0;
    if (!b)
        return KILN_OK;
    while (i < k && b[i] != 0)
        i++;
    if (i == k)
        return KILN_OK;
    if (msg && len) {
        char at[KILN_MAX_DIMS * 21 + 3], sh[96];
        kiln_index_position(bs, i, at, sizeof at);
        snprintf(msg, len, "%s %%%d: division by zero at %s of the divisor %s",
                 kiln_op_table[n->op].name, n->id, at,
                 kiln_shape_str(bs, sh, sizeof sh));
    }
    return KILN_ERR_ARG;
}
