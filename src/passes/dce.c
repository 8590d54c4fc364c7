/* Dead-code elimination: keeps what the outputs need and the listed inputs
   (fed on every run even when unused). */
#include <stdlib.h>

#include "passes/passes.h"

kiln_status kiln_pass_dce(const kiln_unit *in, kiln_unit *out,
                          const kiln_compile_options *opt, kiln_eval_fn eval)
{
    kiln_graph *g = in->g;
    unsigned char *live = calloc((size_t)g->n_nodes + 1, 1);
    if (!live)
        return KILN_ERR_MEMORY;
    for (int i = 0; i < in->n_out; i++)
        live[in->outputs[i]->id] = 1;
    for (int i = 0; i < in->n_in; i++)
        live[in->inputs[i]->id] = 1;
    for (int id = g->n_nodes - 1; id >= 0; id--)
        if (live[id])
            for (int k = 0; k < g->nodes[id]->n_in; k++)
                live[g->nodes[id]->in[k]->id] = 1;
    kiln_status st = kiln_rewrite(in, out, opt, eval, live, NULL, NULL);
    free(live);
    return st;
}
