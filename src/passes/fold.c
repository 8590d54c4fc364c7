/* Constant folding: a node whose inputs are all constants is evaluated now,
   through the evaluator the pipeline's caller gave (the runtime's runs the
   reference kernel), into a constant, when the result is small (at most
   fold_max_elements) so folding never bloats the graph. */
#include <string.h>

#include "passes/passes.h"

static int foldable(const kiln_node *old, kiln_node *const *in, int64_t max)
{
    kiln_op_kind k = kiln_op_table[old->op].kind;
    if (k == KILN_KIND_LEAF || k == KILN_KIND_STATE || kiln_node_pinned(old) ||
        !old->n_in || kiln_shape_numel(old->shape) > max)
        return 0;
    for (int i = 0; i < old->n_in; i++)
        if (in[i]->op != KILN_OP_CONSTANT)
            return 0;
    return 1;
}

static kiln_node *fold(kiln_rewriter *rw, const kiln_node *old, kiln_node **in)
{
    if (!rw->eval || !foldable(old, in, rw->opt->fold_max_elements))
        return NULL;
    kiln_graph *g = rw->out->g;
    enum { MAX_IN = 64 };
    if (old->n_in > MAX_IN)
        return NULL;
    void *data[MAX_IN];
    for (int i = 0; i < old->n_in; i++)
        data[i] = (void *)in[i]->at.data;
    /* the evaluator reads shapes through n->in, so it sees the new inputs */
    kiln_node tmp = *old;
    tmp.in = in;
    size_t bytes =
        (size_t)kiln_shape_numel(old->shape) * kiln_dtype_size(old->dtype);
    void *value = kiln_graph_alloc(g, bytes + 1);
    if (!value)
        return kiln_graph_fail(g, KILN_ERR_MEMORY,
                               "kiln_compile: out of memory");
    /* values the evaluator refuses stay unfolded: the run reports them */
    if (rw->eval(&tmp, value, data) != KILN_OK)
        return NULL;
    kiln_node *c =
        kiln_node_make(g, KILN_OP_CONSTANT, old->dtype, old->shape, NULL, 0);
    if (c->op != KILN_OP_ERROR) {
        c->at.data = value;
        c->name = kiln_graph_strdup(g, old->name);
    }
    return c;
}

kiln_status kiln_pass_fold(const kiln_unit *in, kiln_unit *out,
                           const kiln_compile_options *opt, kiln_eval_fn eval)
{
    return kiln_rewrite(in, out, opt, eval, NULL, fold, NULL);
}
