/* Common-subexpression elimination: a node with the same op, dtype, shape,
   inputs and attributes as one already built is replaced by it; constants
   merge by value.  Leaves with identity (inputs, variables), state ops and
   nodes marked for debugging are never merged. */
#include <stdlib.h>

#include "graph/clone.h"
#include "passes/passes.h"

typedef struct table {
    kiln_node **slot;
    size_t mask;
} table;

static int mergeable(const kiln_node *n)
{
    return n->op != KILN_OP_INPUT && n->op != KILN_OP_VARIABLE &&
           kiln_op_table[n->op].kind != KILN_KIND_STATE && !kiln_node_pinned(n);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
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
    return kiln_attrs_hash(old, h);
}

static int same(const kiln_node *c, const kiln_node *old, kiln_node *const *in)
{
    if (c->op != old->op || c->dtype != old->dtype || c->n_in != old->n_in ||
        !kiln_shape_equal(c->shape, old->shape))
        return 0;
    for (int k = 0; k < c->n_in; k++)
        if (c->in[k] != in[k])
            return 0;
    return kiln_attrs_equal(c, old);
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
