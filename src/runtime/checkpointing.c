/* Gradient checkpointing (Marian's checkpoint() and setCheckpointing()).
   Forward releases a value once the last node consuming it has run, unless
   it is a leaf, marked, or consumed by nothing (an output).  When a later
   node -- in backward, a gradient -- needs a released value, the released
   nodes behind it are recomputed from the nearest kept values (the segment
   since the last checkpoint), in creation order, by the same kernels, so
   the results are bit-identical; each is released again after its last
   use.  A value is recomputed at most once per pass, because it is only
   released once nothing later in the pass consumes it. */
#include "runtime/dynamic.h"

kiln_node *kiln_checkpoint(kiln_node *n)
{
    if (kiln_node_live(n, "kiln_checkpoint"))
        n->checkpoint = 1;
    return n;
}

int kiln_node_is_checkpoint(const kiln_node *n)
{
    return n && n->checkpoint;
}

static int is_leaf(kiln_op op)
{
    return op == KILN_OP_INPUT || op == KILN_OP_CONSTANT ||
           op == KILN_OP_VARIABLE || op == KILN_OP_ERROR;
}

int kiln_ckpt_released(const kiln_run_state *rs, const kiln_node *n)
{
    return n && n->id < rs->n_computed && !rs->e[n->id].value &&
           !is_leaf(n->op);
}

/* Assignments are applied after the pass from their own values. */
static int releasable(const kiln_run_state *rs, const kiln_node *n)
{
    return rs->e[n->id].value && !n->checkpoint && !rs->e[n->id].keep &&
           !is_leaf(n->op) && n->op != KILN_OP_ASSIGN && n->op != KILN_OP_DOALL;
}

kiln_status kiln_ckpt_prepare(kiln_run_ctx *r)
{
    kiln_graph *g = r->g;
    size_t bytes = (size_t)g->n_nodes * sizeof(int);
    int **arrays[] = {&r->last_use, &r->stack, &r->next, &r->order, &r->mark};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        if (!(*arrays[i] = kiln_ws_alloc(r, NULL, bytes))) {
            r->last_use = NULL;
            return KILN_ERR_MEMORY;
        }
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        r->last_use[id] = -1;
        for (int k = 0; k < n->n_in; k++)
            r->last_use[n->in[k]->id] = id;
    }
    r->stamp = 0;
    r->n_order = 0;
    return KILN_OK;
}

/* Appends root and the released nodes it needs to r->order, inputs first
   (iterative post-order, so long segments need no deep recursion). */
static void collect(kiln_run_ctx *r, kiln_node *root)
{
    kiln_graph *g = r->g;
    int sp = 0;
    if (r->mark[root->id] == r->stamp)
        return;
    r->mark[root->id] = r->stamp;
    r->stack[sp] = root->id;
    r->next[sp++] = 0;
    while (sp > 0) {
        kiln_node *t = g->nodes[r->stack[sp - 1]];
        int k = r->next[sp - 1]++;
        if (k < t->n_in) {
            kiln_node *x = t->in[k];
            if (kiln_ckpt_released(r->rs, x) && r->mark[x->id] != r->stamp) {
                r->mark[x->id] = r->stamp;
                r->stack[sp] = x->id;
                r->next[sp++] = 0;
            }
        } else {
            r->order[r->n_order++] = t->id;
            sp--;
        }
    }
}

static kiln_status recompute_order(kiln_run_ctx *r)
{
    for (int i = 0; i < r->n_order; i++) {
        kiln_status st = kiln_run_compute(r, r->g->nodes[r->order[i]]);
        if (st != KILN_OK)
            return st;
    }
    return KILN_OK;
}

kiln_status kiln_ckpt_restore_inputs(kiln_run_ctx *r, kiln_node *n)
{
    r->n_order = 0;
    r->stamp++;
    for (int k = 0; k < n->n_in; k++)
        if (kiln_ckpt_released(r->rs, n->in[k]))
            collect(r, n->in[k]);
    return recompute_order(r);
}

kiln_status kiln_ckpt_restore(kiln_run_ctx *r, kiln_node *n)
{
    if (!kiln_ckpt_released(r->rs, n))
        return KILN_OK;
    r->n_order = 0;
    r->stamp++;
    collect(r, n);
    return recompute_order(r);
}

void kiln_ckpt_release_after(kiln_run_ctx *r, kiln_node *n)
{
    for (int k = 0; k < n->n_in; k++) {
        kiln_node *x = n->in[k];
        if (r->last_use[x->id] <= n->id && releasable(r->rs, x))
            kiln_ws_release(r->rs, x);
    }
    /* recomputed only to produce n's inputs */
    for (int i = 0; i < r->n_order; i++) {
        kiln_node *x = r->g->nodes[r->order[i]];
        if (r->last_use[x->id] <= n->id && releasable(r->rs, x))
            kiln_ws_release(r->rs, x);
    }
    r->n_order = 0;
}
