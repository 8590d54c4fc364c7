/* Common-subexpression elimination: a node with the same op, dtype, shape,
   inputs and attributes as one already built is replaced by it; constants
   merge by value.  Leaves with identity (inputs, variables), state ops and
   nodes marked for debugging are never merged. */
#include <stdlib.h>
#include <string.h>

#include "graph/clone.h"
#include "graph/fused_program.h"
#include "passes/passes.h"

typedef struct table {
    kiln_node **slot;
    size_t mask;
} table;

static int mergeable(const kiln_node *n)
{
    return n->op != KILN_OP_INPUT && n->op != KILN_OP_VARIABLE &&
           kiln_op_table[n->op].kind != KILN_KIND_STATE && !n->debug;
}

static size_t data_bytes(const kiln_node *n)
{
    if (n->op == KILN_OP_CONSTANT)
        return (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype);
    if (n->op == KILN_OP_FUSED)
        return sizeof(kiln_fused_program);
    return 0;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Attributes that matter for op (the rest are unused and may differ). */
static int attrs_equal(const kiln_node *a, const kiln_node *b)
{
    const kiln_attrs *x = &a->at, *y = &b->at;
    int nd = a->n_in ? a->in[0]->shape.ndim : 0;
    switch (a->op) {
    case KILN_OP_SUM:
    case KILN_OP_RMAX:
    case KILN_OP_ARGMAX:
        return x->axes == y->axes && x->keepdims == y->keepdims &&
               x->axis == y->axis;
    case KILN_OP_PERMUTE:
        return !memcmp(x->perm, y->perm, (size_t)nd * sizeof *x->perm);
    case KILN_OP_PAD:
        if (memcmp(&x->value, &y->value, sizeof x->value))
            return 0;
        /* fall through */
    case KILN_OP_SLICE:
        return !memcmp(x->lo, y->lo, (size_t)nd * sizeof *x->lo);
    case KILN_OP_CONCAT:
        return x->axis == y->axis;
    case KILN_OP_MATMUL:
    case KILN_OP_MATMUL_ACC:
        return x->trans_a == y->trans_a && x->trans_b == y->trans_b;
    case KILN_OP_ONEHOT:
        return x->depth == y->depth && x->strict == y->strict;
    case KILN_OP_CONSTANT:
        return !memcmp(x->data, y->data, data_bytes(a));
    case KILN_OP_FUSED:
        return kiln_fused_program_equal(x->data, y->data);
    default:
        return 1;
    }
}

/* old's key, with its inputs replaced by in. */
static uint64_t key_hash(const kiln_node *old, kiln_node *const *in)
{
    uint64_t h = mix((uint64_t)old->op, (uint64_t)old->dtype);
    for (int d = 0; d < old->shape.ndim; d++)
        h = mix(h, (uint64_t)old->shape.d[d]);
    h = mix(h, (uint64_t)old->shape.ndim);
    for (int k = 0; k < old->n_in; k++)
        h = mix(h, (uint64_t)in[k]->id);
    if (old->op == KILN_OP_CONSTANT)
        h = hash_bytes(h, old->at.data, data_bytes(old));
    if (old->op == KILN_OP_FUSED) {
        const kiln_fused_program *p = old->at.data;
        h = hash_bytes(h, p->ins, (size_t)p->n * sizeof *p->ins);
        h = mix(mix(h, (uint64_t)p->reduce), (uint64_t)p->axes);
    }
    return h;
}

static int same(const kiln_node *c, const kiln_node *old, kiln_node *const *in)
{
    if (c->op != old->op || c->dtype != old->dtype || c->n_in != old->n_in ||
        !kiln_shape_equal(c->shape, old->shape))
        return 0;
    for (int k = 0; k < c->n_in; k++)
        if (c->in[k] != in[k])
            return 0;
    return attrs_equal(c, old);
}

static kiln_node *merge(kiln_rewriter *rw, const kiln_node *old, kiln_node **in)
{
    table *t = rw->state;
    if (!mergeable(old))
        return NULL;
    size_t i = key_hash(old, in) & t->mask;
    for (; t->slot[i]; i = (i + 1) & t->mask)
        if (same(t->slot[i], old, in))
            return t->slot[i];
    kiln_node *c = kiln_node_clone(rw->out->g, old, in);
    t->slot[i] = c;
    return c;
}

kiln_status kiln_pass_cse(const kiln_unit *in, kiln_unit *out,
                          const kiln_compile_options *opt, kiln_eval_fn eval)
{
    table t;
    size_t cap = 16;
    while (cap < 2 * (size_t)in->g->n_nodes + 2)
        cap *= 2;
    t.slot = calloc(cap, sizeof *t.slot);
    t.mask = cap - 1;
    if (!t.slot)
        return KILN_ERR_MEMORY;
    kiln_status st = kiln_rewrite(in, out, opt, eval, NULL, merge, &t);
    free(t.slot);
    return st;
}
