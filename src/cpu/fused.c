/* The FUSED kernel: a bytecode interpreter over blocks of output elements.
   Each instruction runs as one tight loop over the block, so the per-element
   cost is the arithmetic alone and the compiler can vectorise every loop. */
#include "cpu/fused.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { BLOCK = 128 };

int kiln_fused_op_ok(kiln_op op)
{
    kiln_op_kind k = kiln_op_table[op].kind;
    return k == KILN_KIND_UNARY || k == KILN_KIND_BINARY ||
           k == KILN_KIND_TERNARY;
}

/* How a LOAD reads its input while walking the output in order. */
typedef enum load_kind {
    LOAD_FULL,
    LOAD_SCALAR,
    LOAD_ROW,
    LOAD_GENERAL
} load_kind;

typedef struct load_plan {
    load_kind kind;
    const float *x;
    int64_t inner;             /* LOAD_ROW: the input repeats every inner */
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

static void load_plan_init(load_plan *p, const kiln_node *n, int k,
                           const float *x)
{
    kiln_shape in = n->in[k]->shape;
    int64_t numel = kiln_shape_numel(in);
    p->x = x;
    p->inner = numel;
    if (numel == kiln_shape_numel(n->shape))
        p->kind = LOAD_FULL;
    else if (numel == 1)
        p->kind = LOAD_SCALAR;
    else if (is_row_broadcast(in, n->shape))
        p->kind = LOAD_ROW;
    else {
        p->kind = LOAD_GENERAL;
        kiln_broadcast_strides(in, n->shape, p->st);
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
        int64_t j = base % p->inner;
        for (int64_t e = 0; e < len; e++) {
            buf[e] = p->x[j];
            if (++j == p->inner)
                j = 0;
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

static inline float sigmoidf(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* Compiled for AVX-512, AVX2 and baseline x86-64, picked at load time, so
   the arithmetic loops below vectorise on any processor. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define FUSED_CLONES                                                           \
    __attribute__((                                                            \
        target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FUSED_CLONES
#endif

/* r = op(a, b, c) over len elements; the expressions are those of the
   reference kernels. */
FUSED_CLONES static void apply(kiln_op op, float *r, const float *a,
                               const float *b, const float *c, int64_t len)
{
#define LOOP(expr)                                                             \
    for (int64_t e = 0; e < len; e++) {                                        \
        float x = a[e];                                                        \
        (void)x;                                                               \
        r[e] = (expr);                                                         \
    }                                                                          \
    return
#define LOOP2(expr)                                                            \
    for (int64_t e = 0; e < len; e++) {                                        \
        float x = a[e], y = b[e];                                              \
        r[e] = (expr);                                                         \
    }                                                                          \
    return
    switch (op) {
    case KILN_OP_NEG:
        LOOP(-x);
    case KILN_OP_ABS:
        LOOP(fabsf(x));
    case KILN_OP_SIGN:
        LOOP((float)((x > 0) - (x < 0)));
    case KILN_OP_EXP:
        LOOP(expf(x));
    case KILN_OP_LOG:
        LOOP(logf(x));
    case KILN_OP_SQRT:
        LOOP(sqrtf(x));
    case KILN_OP_SIN:
        LOOP(sinf(x));
    case KILN_OP_COS:
        LOOP(cosf(x));
    case KILN_OP_TANH:
        LOOP(tanhf(x));
    case KILN_OP_SIGMOID:
        LOOP(sigmoidf(x));
    case KILN_OP_RELU:
        LOOP(x > 0 ? x : 0.0f);
    case KILN_OP_ERF:
        LOOP(erff(x));
    case KILN_OP_ADD:
        LOOP2(x + y);
    case KILN_OP_SUB:
        LOOP2(x - y);
    case KILN_OP_MUL:
        LOOP2(x * y);
    case KILN_OP_DIV:
        LOOP2(x / y);
    case KILN_OP_POW:
        LOOP2(powf(x, y));
    case KILN_OP_MAX:
        LOOP2(x >= y ? x : y);
    case KILN_OP_MIN:
        LOOP2(x <= y ? x : y);
    case KILN_OP_LT:
        LOOP2(x < y ? 1.0f : 0.0f);
    case KILN_OP_LE:
        LOOP2(x <= y ? 1.0f : 0.0f);
    case KILN_OP_GT:
        LOOP2(x > y ? 1.0f : 0.0f);
    case KILN_OP_GE:
        LOOP2(x >= y ? 1.0f : 0.0f);
    case KILN_OP_EQ:
        LOOP2(x == y ? 1.0f : 0.0f);
    case KILN_OP_SELECT:
        for (int64_t e = 0; e < len; e++)
            r[e] = a[e] != 0.0f ? b[e] : c[e];
        return;
    default:
        return; /* the validator admits no other op */
    }
#undef LOOP
#undef LOOP2
}

void kiln_fused_ref(const kiln_node *n, void *out, void *const *in)
{
    const kiln_fused_program *p = n->at.data;
    load_plan loads[KILN_FUSED_MAX_INPUTS];
    for (int k = 0; k < n->n_in && k < KILN_FUSED_MAX_INPUTS; k++)
        load_plan_init(&loads[k], n, k, in[k]);
    float store[KILN_FUSED_MAX_INSTRS][BLOCK];
    const float *val[KILN_FUSED_MAX_INSTRS];
    float *o = out;
    int64_t total = kiln_shape_numel(n->shape);
    for (int64_t base = 0; base < total; base += BLOCK) {
        int64_t len = total - base < BLOCK ? total - base : BLOCK;
        for (int i = 0; i < p->n; i++) {
            const kiln_fused_instr *ins = &p->ins[i];
            if (ins->op == KILN_FUSED_LOAD) {
                val[i] = load_block(&loads[ins->arg[0]], n->shape, base, len,
                                    store[i]);
            } else if (ins->op == KILN_FUSED_IMM) {
                for (int64_t e = 0; e < len; e++)
                    store[i][e] = ins->imm;
                val[i] = store[i];
            } else {
                /* the result goes straight to the output */
                float *r = i == p->n - 1 ? o + base : store[i];
                int ar = kiln_op_table[ins->op].arity;
                apply((kiln_op)ins->op, r, val[ins->arg[0]],
                      ar > 1 ? val[ins->arg[1]] : NULL,
                      ar > 2 ? val[ins->arg[2]] : NULL, len);
                val[i] = r;
            }
        }
        if (p->n && p->ins[p->n - 1].op < 0)
            memmove(o + base, val[p->n - 1], (size_t)len * sizeof(float));
    }
}

/* ------------------------------------------------------------ printing */

typedef struct outbuf {
    char *p;
    size_t len, used;
} outbuf;

static void put(outbuf *b, const char *fmt, ...) KILN_PRINTF(2, 3);

static void put(outbuf *b, const char *fmt, ...)
{
    if (b->used + 1 >= b->len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
    va_end(ap);
    if (w > 0)
        b->used =
            b->used + (size_t)w < b->len ? b->used + (size_t)w : b->len - 1;
}

static void put_value(outbuf *b, const kiln_node *n,
                      const kiln_fused_program *p, int v)
{
    const kiln_fused_instr *ins = &p->ins[v];
    if (ins->op == KILN_FUSED_LOAD)
        put(b, "%%%d", n->in[ins->arg[0]]->id);
    else if (ins->op == KILN_FUSED_IMM)
        put(b, "%g", ins->imm);
    else
        put(b, "$%d", v);
}

/* A value used once, by the next computing instruction, is written as a
   chain with "_" standing for it: "add(%1, %2) -> relu(_) -> mul(_, 0.5)";
   a value used otherwise is named: "exp(%1) as $1; add($1, neg($1))"... */
char *kiln_fused_format(const kiln_node *n, char *buf, size_t len)
{
    const kiln_fused_program *p = n->at.data;
    outbuf b = {buf, len, 0};
    if (len)
        buf[0] = 0;
    int uses[KILN_FUSED_MAX_INSTRS] = {0}, chained[KILN_FUSED_MAX_INSTRS];
    int named[KILN_FUSED_MAX_INSTRS] = {0};
    for (int i = 0; i < p->n; i++)
        for (int k = 0;
             p->ins[i].op >= 0 && k < kiln_op_table[p->ins[i].op].arity; k++)
            uses[p->ins[i].arg[k]]++;
    int prev = -1; /* the last computing instruction */
    for (int i = 0; i < p->n; i++) {
        const kiln_fused_instr *ins = &p->ins[i];
        chained[i] = -1;
        if (ins->op < 0)
            continue;
        int ar = kiln_op_table[ins->op].arity;
        for (int k = 0; k < ar; k++) {
            int v = ins->arg[k];
            if (p->ins[v].op < 0)
                continue;
            if (v == prev && uses[v] == 1 && chained[i] < 0)
                chained[i] = k;
            else
                named[v] = 1;
        }
        prev = i;
    }
    prev = -1;
    for (int i = 0; i < p->n; i++) {
        const kiln_fused_instr *ins = &p->ins[i];
        if (ins->op < 0)
            continue;
        if (prev >= 0)
            put(&b, "%s", chained[i] >= 0 ? " -> " : "; ");
        put(&b, "%s", kiln_op_table[ins->op].name);
        for (int k = 0; k < kiln_op_table[ins->op].arity; k++) {
            put(&b, "%s", k ? ", " : "(");
            if (k == chained[i])
                put(&b, "_");
            else
                put_value(&b, n, p, ins->arg[k]);
        }
        put(&b, ")");
        if (named[i])
            put(&b, " as $%d", i);
        prev = i;
    }
    return buf;
}
