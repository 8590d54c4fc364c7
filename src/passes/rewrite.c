/* The walk every pass is built on: copy a compile unit into a new graph node by
   node, letting the pass replace any node as it goes. */
#include <stdlib.h>
#include <string.h>

#include "graph/clone.h"
#include "passes/passes.h"

kiln_status kiln_rewrite(const kiln_unit *in, kiln_unit *out,
                         const kiln_compile_options *opt, kiln_eval_fn eval,
                         const unsigned char *keep, kiln_rewrite_fn fn,
                         void *state)
{
    kiln_graph *g = out->g;
    kiln_rewriter rw = {in, out, NULL, opt, eval, state};
    rw.map = calloc((size_t)in->g->n_nodes + 1, sizeof *rw.map);
    kiln_node **ins = NULL;
    int cap = 0;
    if (!rw.map)
        goto oom;
    for (int id = 0; id < in->g->n_nodes && g->status == KILN_OK; id++) {
        const kiln_node *n = in->g->nodes[id];
        if (keep && !keep[id])
            continue;
        if (n->n_in > cap) {
            cap = n->n_in * 2;
            kiln_node **grown = realloc(ins, (size_t)cap * sizeof *ins);
            if (!grown)
                goto oom;
            ins = grown;
        }
        int dropped = -1; /* an input the pass left out (fn may absorb it) */
        for (int k = 0; k < n->n_in; k++)
            if (!(ins[k] = rw.map[n->in[k]->id]))
                dropped = n->in[k]->id;
        kiln_node *r = fn ? fn(&rw, n, ins) : NULL;
        if (!r && dropped >= 0) {
            kiln_graph_fail(g, KILN_ERR_STATE,
                            "%%%d (%s) uses %%%d, which the pass dropped",
                            n->id, kiln_op_table[n->op].name, dropped);
            break;
        }
        rw.map[id] = r ? r : kiln_node_clone(g, n, ins);
    }
    for (int i = 0; i < in->n_out && g->status == KILN_OK; i++)
        if (!(out->outputs[i] = rw.map[in->outputs[i]->id]))
            kiln_graph_fail(g, KILN_ERR_STATE, "the pass dropped output %d", i);
    for (int i = 0; i < in->n_in && g->status == KILN_OK; i++)
        if (!(out->inputs[i] = rw.map[in->inputs[i]->id]))
            kiln_graph_fail(g, KILN_ERR_STATE, "the pass dropped input %d", i);
    free(rw.map);
    free(ins);
    return g->status;
oom:
    free(rw.map);
    free(ins);
    kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_compile: out of memory");
    return g->status;
}

int *kiln_unit_uses(const kiln_unit *p)
{
    int *uses = calloc((size_t)p->g->n_nodes + 1, sizeof *uses);
    if (!uses)
        return NULL;
    for (int id = 0; id < p->g->n_nodes; id++)
        for (int k = 0; k < p->g->nodes[id]->n_in; k++)
            uses[p->g->nodes[id]->in[k]->id]++;
    for (int i = 0; i < p->n_out; i++)
        uses[p->outputs[i]->id]++;
    return uses;
}

int kiln_is_constant_value(const kiln_node *n, float v)
{
    if (n->op != KILN_OP_CONSTANT || n->dtype != KILN_F32)
        return 0;
    const float *d = n->at.data;
    int64_t len = kiln_shape_numel(n->shape);
    for (int64_t i = 0; i < len; i++)
        if (memcmp(&d[i], &v, sizeof v) != 0)
            return 0;
    return len > 0;
}
