/* The fused-program IR's helpers: which ops and reductions a program can
   hold, program equality (CSE) and printing. */
#include "graph/fused_program.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int kiln_fused_op_ok(kiln_op op)
{
    kiln_op_kind k = kiln_op_table[op].kind;
    return k == KILN_KIND_UNARY || k == KILN_KIND_BINARY ||
           k == KILN_KIND_TERNARY;
}

int kiln_fused_reduce_ok(kiln_shape domain, unsigned axes)
{
    int64_t outer, red, inner;
    return !(axes >> domain.ndim) &&
           kiln_reduce_split(domain, axes, &outer, &red, &inner);
}

int kiln_fused_is_reduction(const kiln_node *n)
{
    return n->op == KILN_OP_FUSED &&
           ((const kiln_fused_program *)n->at.data)->reduce != 0;
}

kiln_shape kiln_fused_domain(const kiln_node *n)
{
    const kiln_fused_program *p = n->at.data;
    return p->reduce ? p->domain : n->shape;
}

int kiln_fused_program_equal(const kiln_fused_program *a,
                             const kiln_fused_program *b)
{
    if (a->n != b->n || a->reduce != b->reduce ||
        memcmp(a->ins, b->ins, (size_t)a->n * sizeof *a->ins))
        return 0;
    return !a->reduce || (a->axes == b->axes && a->keepdims == b->keepdims &&
                          kiln_shape_equal(a->domain, b->domain));
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
    if (p->reduce) {
        put(&b, "%s%s(", prev >= 0 ? " -> " : "",
            kiln_op_table[p->reduce].name);
        if (prev == p->n - 1)
            put(&b, "_");
        else
            put_value(&b, n, p, p->n - 1);
        put(&b, ") axes=0x%x%s", p->axes, p->keepdims ? " keepdims" : "");
    }
    return buf;
}
