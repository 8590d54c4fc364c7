/* The FUSED kernel: a bytecode interpreter over blocks of output elements.
   Each instruction runs as one tight loop over the block, so the per-element
   cost is the arithmetic alone and the compiler can vectorise every loop. */
#include "cpu/fused.h"
#include "cpu/fast.h"
#include "cpu/fast_reduce.h"
#include "cpu/pool.h"
#include "cpu/scalar.h"
#include "cpu/vmath.h"

#include <math.h>
#include <string.h>

enum { BLOCK = 512 };

/* How a LOAD reads its input while walking the output in order. */
typedef enum load_kind {
    LOAD_FULL,
    LOAD_SCALAR,
    LOAD_ROW,
    LOAD_BLOCK, /* repeats every inner * period elements, each value inner times
                 */
    LOAD_GENERAL
} load_kind;

typedef struct load_plan {
    load_kind kind;
    const float *x;
    int64_t inner;             /* LOAD_ROW: the input repeats every inner;
                                  LOAD_BLOCK: each value lasts inner */
    int64_t period;            /* LOAD_BLOCK: the input's numel */
    int64_t st[KILN_MAX_DIMS]; /* LOAD_GENERAL: broadcast strides */
} load_plan;

/* The input's trailing dims equal the output's and the rest are 1: element
   i of the output reads i mod numel(input). */
static int is_row_broadcast(kiln_shape in, kiln_shape out)
{
    int off = out.ndim - in.ndim;
    int first = 0; /* first input dim that is not a leading 1 */
    while (first < in.ndim && in.d[first] == 1)
        first++;
    for (int d = first; d < in.ndim; d++)
        if (in.d[d] != out.d[d + off])
            return 0;
    return off >= 0;
}

/* The input's dims that are not 1 are consecutive and equal the output's
   there, and the output has more dims after them (a bias [1,C,1,1] over
   [N,C,H,W]): element i reads (i / inner) mod numel(input), inner the
   output's size after them.  *inner is set when it is. */
static int is_block_broadcast(kiln_shape in, kiln_shape out, int64_t *inner)
{
    int off = out.ndim - in.ndim, first = 0, last = in.ndim - 1;
    while (first < in.ndim && in.d[first] == 1)
        first++;
    while (last >= first && in.d[last] == 1)
        last--;
    if (off < 0 || last < first || last + off == out.ndim - 1)
        return 0;
    for (int d = first; d <= last; d++)
        if (in.d[d] != out.d[d + off])
            return 0;
    *inner = 1;
    for (int d = last + off + 1; d < out.ndim; d++)
        *inner *= out.d[d];
    return 1;
}

static void load_plan_init(load_plan *p, const kiln_node *n, int k,
                           const float *x)
{
    kiln_shape in = n->in[k]->shape, out = kiln_fused_domain(n);
    int64_t numel = kiln_shape_numel(in);
    p->x = x;
    p->inner = numel;
    if (numel == kiln_shape_numel(out))
        p->kind = LOAD_FULL;
    else if (numel == 1)
        p->kind = LOAD_SCALAR;
    else if (is_row_broadcast(in, out))
        p->kind = LOAD_ROW;
    else if (is_block_broadcast(in, out, &p->inner)) {
        p->kind = LOAD_BLOCK;
        p->period = numel;
    } else {
        p->kind = LOAD_GENERAL;
        kiln_broadcast_strides(in, out, p->st);
    }
}

/* Input offset of output element i through broadcast strides. */
static int64_t general_offset(const load_plan *p, kiln_shape out, int64_t i)
{
    int64_t off = 0;
    for (int d = out.ndim - 1; d >= 0; d--) {
        off += (i % out.d[d]) * p->st[d];
        i /= out.d[d];
    }
    return off;
}

/* Points *dst at the len values of the load starting at output element base,
   copying into buf unless the input can be read in place. */
static const float *load_block(const load_plan *p, kiln_shape out, int64_t base,
                               int64_t len, float *buf)
{
    switch (p->kind) {
    case LOAD_FULL:
        return p->x + base;
    case LOAD_SCALAR:
        for (int64_t e = 0; e < len; e++)
            buf[e] = p->x[0];
        return buf;
    case LOAD_ROW: {
        /* a block within one repetition (a bias row, a mask) is read in
           place; otherwise copied a run at a time */
        int64_t j = base % p->inner;
        if (j + len <= p->inner)
            return p->x + j;
        for (int64_t e = 0; e < len;) {
            int64_t run = p->inner - j < len - e ? p->inner - j : len - e;
            memcpy(buf + e, p->x + j, (size_t)run * sizeof *buf);
            e += run;
            j = 0;
        }
        return buf;
    }
    case LOAD_BLOCK: {
        /* runs of one value: a per-element offset costs a division per dim */
        int64_t j = base / p->inner % p->period, r = base % p->inner;
        for (int64_t e = 0; e < len;) {
            int64_t run = p->inner - r < len - e ? p->inner - r : len - e;
            float v = p->x[j];
            for (int64_t q = 0; q < run; q++)
                buf[e + q] = v;
            e += run;
            r = 0;
            j = j + 1 == p->period ? 0 : j + 1;
        }
        return buf;
    }
    case LOAD_GENERAL:
        for (int64_t e = 0; e < len; e++)
            buf[e] = p->x[general_offset(p, out, base + e)];
        return buf;
    }
    return buf;
}

/* Compiled for AVX-512, AVX2 and baseline x86-64, picked at load time, so
   the arithmetic loops below vectorise on any processor. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) &&         \
    !defined(KILN_NO_CLONES)
#define FUSED_CLONES                                                           \
    __attribute__((                                                            \
        target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FUSED_CLONES
#endif

/* r = op(a, b, c) over len elements: the op's formula from its row of
   graph/elementwise.def, once with the reference kernels' libm functions
   (apply_ref: bit-identical to the unfused reference kernels) and once
   with the fast kernels' cpu/vmath.h ones (apply_fast).  Only the fast
   loops are marked simd: without the mark GCC leaves those calling
   vm_tanhf or vm_expf scalar, and the reference ones must keep libm's
   scalar results. */
#define LOOP(expr)                                                             \
    SIMD for (int64_t e = 0; e < len; e++)                                     \
    {                                                                          \
        float x = a[e];                                                        \
        (void)x;                                                               \
        r[e] = (expr);                                                         \
    }                                                                          \
    return
#define LOOP2(expr)                                                            \
    SIMD for (int64_t e = 0; e < len; e++)                                     \
    {                                                                          \
        float x = a[e], y = b[e];                                              \
        r[e] = (expr);                                                         \
    }                                                                          \
    return
#define KILN_UNARY(OP, name, f, ...)                                           \
    case KILN_OP_##OP:                                                         \
        LOOP(f);
#define KILN_BINARY(OP, name, f, ...)                                          \
    case KILN_OP_##OP:                                                         \
        LOOP2(f);
/* select is not in the table: its kernels are written out */
#define SELECT_CASE                                                            \
    case KILN_OP_SELECT:                                                       \
        for (int64_t e = 0; e < len; e++)                                      \
            r[e] = a[e] != 0.0f ? b[e] : c[e];                                 \
        return;                                                                \
    default:                                                                   \
        return; /* the validator admits no other op */

typedef void (*apply_fn)(kiln_op op, float *r, const float *a, const float *b,
                         const float *c, int64_t len);

#define SIMD
#define APPLY apply_ref
#define EXP expf
#define EXPN expf
#define LOG logf
#define TANH tanhf
#include "cpu/fused_apply.h"
#undef SIMD
#define SIMD _Pragma("omp simd")
#define APPLY apply_fast
#define EXP vm_expf
#define EXPN vm_expf_neg
#define LOG vm_logf
#define TANH vm_tanhf
#include "cpu/fused_apply.h"
#undef KILN_UNARY
#undef KILN_BINARY
#undef SELECT_CASE
#undef LOOP
#undef LOOP2
#undef SIMD

/* One run of a program over blocks [lo, hi) of the output. */
typedef struct fused_job {
    const kiln_node *n;
    const kiln_fused_program *p;
    load_plan loads[KILN_FUSED_MAX_INPUTS];
    float *out;
    int64_t total;
    apply_fn apply;
} fused_job;

/* Values that are the same in every block (immediates, scalar loads) are
   filled once per call. */
static int constant_value(const fused_job *j, const kiln_fused_instr *ins)
{
    return ins->op == KILN_FUSED_IMM ||
           (ins->op == KILN_FUSED_LOAD &&
            j->loads[ins->arg[0]].kind == LOAD_SCALAR);
}

static void fused_blocks(void *ctx, int64_t lo, int64_t hi)
{
    const fused_job *j = ctx;
    const kiln_fused_program *p = j->p;
    float store[KILN_FUSED_MAX_INSTRS][BLOCK];
    const float *val[KILN_FUSED_MAX_INSTRS];
    float *o = j->out;
    for (int i = 0; i < p->n; i++) {
        const kiln_fused_instr *ins = &p->ins[i];
        if (!constant_value(j, ins))
            continue;
        float v =
            ins->op == KILN_FUSED_IMM ? ins->imm : j->loads[ins->arg[0]].x[0];
        for (int e = 0; e < BLOCK; e++)
            store[i][e] = v;
        val[i] = store[i];
    }
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t base = blk * BLOCK;
        int64_t len = j->total - base < BLOCK ? j->total - base : BLOCK;
        for (int i = 0; i < p->n; i++) {
            const kiln_fused_instr *ins = &p->ins[i];
            if (ins->op == KILN_FUSED_LOAD) {
                if (!constant_value(j, ins))
                    val[i] = load_block(&j->loads[ins->arg[0]], j->n->shape,
                                        base, len, store[i]);
            } else if (ins->op != KILN_FUSED_IMM) {
                /* the result goes straight to the output */
                float *r = i == p->n - 1 ? o + base : store[i];
                int ar = kiln_op_table[ins->op].arity;
                j->apply((kiln_op)ins->op, r, val[ins->arg[0]],
                         ar > 1 ? val[ins->arg[1]] : NULL,
                         ar > 2 ? val[ins->arg[2]] : NULL, len);
                val[i] = r;
            }
        }
        if (p->n && p->ins[p->n - 1].op < 0)
            memmove(o + base, val[p->n - 1], (size_t)len * sizeof(float));
    }
}

static void fused_reduce(const kiln_node *n, float *o, void *const *in,
                         int fast);

static void fused_run(const kiln_node *n, void *out, void *const *in, int fast)
{
    if (((const kiln_fused_program *)n->at.data)->reduce) {
        fused_reduce(n, out, in, fast);
        return;
    }
    fused_job j;
    j.n = n;
    j.p = n->at.data;
    for (int k = 0; k < n->n_in && k < KILN_FUSED_MAX_INPUTS; k++)
        load_plan_init(&j.loads[k], n, k, in[k]);
    j.out = out;
    j.total = kiln_shape_numel(n->shape);
    j.apply = fast ? apply_fast : apply_ref;
    int64_t blocks = (j.total + BLOCK - 1) / BLOCK, ops = 0;
    for (int i = 0; i < j.p->n; i++)
        ops += j.p->ins[i].op >= 0;
    if (fast) /* cost: the computing instructions */
        kiln_par_for(blocks, (int64_t)BLOCK * (ops ? ops : 1), fused_blocks,
                     &j);
    else
        fused_blocks(&j, 0, blocks);
}

void kiln_fused_ref(const kiln_node *n, void *out, void *const *in)
{
    fused_run(n, out, in, 0);
}

void kiln_fast_FUSED(const kiln_node *n, void *out, void *const *in)
{
    fused_run(n, out, in, 1);
}

/* ------------------------------------------------------------ reductions */

/* Columns reduced at once: accumulators on the stack. */
enum { COLS = 512 };

/* A reduction over the domain seen as [outer, red, inner]: output element
   o * inner + c reduces domain elements (o * red + k) * inner + c. */
typedef struct reduce_job {
    const kiln_fused_program *p;
    load_plan loads[KILN_FUSED_MAX_INPUTS];
    apply_fn apply;
    int is_max, fast;
    int64_t outer, red, inner, chunks; /* chunks of COLS columns per row */
    float *out;
} reduce_job;

/* One thread's values and accumulators. */
typedef struct reducer {
    const reduce_job *j;
    float store[KILN_FUSED_MAX_INSTRS][BLOCK];
    const float *val[KILN_FUSED_MAX_INSTRS];
    double sum[COLS];
    float max[COLS];
} reducer;

/* The program's result for domain elements [base, base + len), len <=
   BLOCK. */
static const float *eval_block(reducer *r, int64_t base, int64_t len)
{
    const kiln_fused_program *p = r->j->p;
    for (int i = 0; i < p->n; i++) {
        const kiln_fused_instr *ins = &p->ins[i];
        if (ins->op == KILN_FUSED_LOAD) {
            r->val[i] = load_block(&r->j->loads[ins->arg[0]], p->domain, base,
                                   len, r->store[i]);
        } else if (ins->op == KILN_FUSED_IMM) {
            for (int64_t e = 0; e < len; e++)
                r->store[i][e] = ins->imm;
            r->val[i] = r->store[i];
        } else {
            int ar = kiln_op_table[ins->op].arity;
            r->j->apply((kiln_op)ins->op, r->store[i], r->val[ins->arg[0]],
                        ar > 1 ? r->val[ins->arg[1]] : NULL,
                        ar > 2 ? r->val[ins->arg[2]] : NULL, len);
            r->val[i] = r->store[i];
        }
    }
    return r->val[p->n - 1];
}

FUSED_CLONES static double row_sum_d(const float *x, int64_t n)
{
    double acc = 0;
    _Pragma("omp simd reduction(+ : acc)") for (int64_t i = 0; i < n; i++)
        acc += (double)x[i];
    return acc;
}

/* Folds v[0..len) into the one accumulator of a row reduction (a softmax's
   max and sum over its last axis): vector loops, where the reference's
   serial chain costs a dependent add or compare per element. */
static void accumulate_row_fast(reducer *r, const float *v, int64_t len)
{
    if (!r->j->is_max) {
        r->sum[0] += row_sum_d(v, len);
        return;
    }
    float m = r->max[0], b = kiln_row_max(v, len);
    if (m == m && (b > m || b != b)) /* NaN wins and stays */
        r->max[0] = b;
}

/* Folds v[0..len) into accumulators j, j + 1, ... wrapping at w; returns
   the next j.  Max keeps a NaN once seen, like the reference. */
static int64_t accumulate(reducer *r, const float *v, int64_t len, int64_t j,
                          int64_t w)
{
    int is_max = r->j->is_max;
    if (w == 1 && r->j->fast) {
        accumulate_row_fast(r, v, len);
        return 0;
    }
    if (w == 1) {
        double acc = r->sum[0];
        float m = r->max[0];
        for (int64_t e = 0; e < len; e++) {
            if (is_max)
                m = (v[e] > m || v[e] != v[e]) ? v[e] : m;
            else
                acc += (double)v[e];
        }
        r->sum[0] = acc;
        r->max[0] = m;
        return 0;
    }
    if (j + len <= w) { /* no wrap: one loop the compiler vectorises */
        double *acc = r->sum + j;
        float *m = r->max + j;
        if (is_max)
            for (int64_t e = 0; e < len; e++)
                m[e] = (v[e] > m[e] || v[e] != v[e]) ? v[e] : m[e];
        else
            for (int64_t e = 0; e < len; e++)
                acc[e] += (double)v[e];
        return j + len == w ? 0 : j + len;
    }
    for (int64_t e = 0; e < len; e++) {
        if (is_max)
            r->max[j] = (v[e] > r->max[j] || v[e] != v[e]) ? v[e] : r->max[j];
        else
            r->sum[j] += (double)v[e];
        if (++j == w)
            j = 0;
    }
    return j;
}

/* Reduces domain elements [start, start + count) into the w accumulators,
   element e going to accumulator e mod w. */
static void reduce_run(reducer *r, int64_t start, int64_t count, int64_t w)
{
    int64_t j = 0;
    for (int64_t e = 0; e < count; e += BLOCK) {
        int64_t len = count - e < BLOCK ? count - e : BLOCK;
        j = accumulate(r, eval_block(r, start + e, len), len, j, w);
    }
}

/* Output elements [o * inner + c0, + w): columns c0 .. c0 + w of slab o. */
static void reduce_columns(reducer *r, int64_t o, int64_t c0, int64_t w)
{
    const reduce_job *j = r->j;
    for (int64_t c = 0; c < w; c++) {
        r->sum[c] = 0;
        r->max[c] = -INFINITY;
    }
    int64_t slab = o * j->red * j->inner;
    if (w == j->inner && j->inner < BLOCK) /* short rows: one walk */
        reduce_run(r, slab, j->red * j->inner, w);
    else
        for (int64_t k = 0; k < j->red; k++)
            reduce_run(r, slab + k * j->inner + c0, w, w);
    float *out = j->out + o * j->inner + c0;
    for (int64_t c = 0; c < w; c++)
        out[c] = j->is_max ? r->max[c] : (float)r->sum[c];
}

static void reduce_range(void *ctx, int64_t lo, int64_t hi)
{
    reducer r;
    r.j = ctx;
    for (int64_t it = lo; it < hi; it++) {
        int64_t o = it / r.j->chunks, c0 = it % r.j->chunks * COLS;
        reduce_columns(&r, o, c0,
                       r.j->inner - c0 < COLS ? r.j->inner - c0 : COLS);
    }
}

static void fused_reduce(const kiln_node *n, float *o, void *const *in,
                         int fast)
{
    reduce_job j;
    j.p = n->at.data;
    for (int k = 0; k < n->n_in && k < KILN_FUSED_MAX_INPUTS; k++)
        load_plan_init(&j.loads[k], n, k, in[k]);
    j.apply = fast ? apply_fast : apply_ref;
    j.is_max = j.p->reduce == KILN_OP_RMAX;
    j.fast = fast;
    j.out = o;
    if (!kiln_reduce_split(j.p->domain, j.p->axes, &j.outer, &j.red, &j.inner))
        return; /* the validator admits no other program */
    j.chunks = (j.inner + COLS - 1) / COLS;
    int64_t items = j.outer * j.chunks;
    int64_t cost = j.red * (j.inner < COLS ? j.inner : COLS) *
                   (j.p->n > 2 ? j.p->n - 1 : 1);
    if (fast)
        kiln_par_for(items, cost, reduce_range, &j);
    else
        reduce_range(&j, 0, items);
}
