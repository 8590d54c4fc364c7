/* relu(conv(x, w, b)) becomes one conv with its relu fused (the kernel
   applies it to each image's output while it is in cache), when nothing
   else reads the conv's own output but comparisons conv <= 0: relu's
   gradient rule (PyTorch's threshold_backward) tests its input that way,
   and relu(z) <= 0 exactly where z <= 0 (NaN included), so those read the
   fused output instead and a training graph fuses too.  The conv must not
   be an output, nor either node marked for debugging. */
#include <stdlib.h>

#include "graph/conv.h"
#include "passes/passes.h"

static int le_zero_of(const kiln_node *u, const kiln_node *c)
{
    return u->op == KILN_OP_LE && u->in[0] == c &&
           kiln_is_constant_value(u->in[1], 0.0f);
}

static int fusable(const kiln_node *c)
{
    return c->op == KILN_OP_CONV && !(c->at.win.flags & KILN_WINDOW_RELU) &&
           !c->debug;
}

/* fuse[id]: conv node id takes its relu. */
static void find(const kiln_graph *g, const int *uses, unsigned char *fuse)
{
    int n = g->n_nodes;
    int *relus = calloc((size_t)n + 1, sizeof *relus),
        *tests = calloc((size_t)n + 1, sizeof *tests);
    for (int id = 0; relus && tests && id < n; id++) {
        const kiln_node *u = g->nodes[id];
        if (u->op == KILN_OP_RELU && !u->debug && fusable(u->in[0]))
            relus[u->in[0]->id]++;
        else if (u->n_in == 2 && le_zero_of(u, u->in[0]) && fusable(u->in[0]))
            tests[u->in[0]->id]++;
    }
    for (int id = 0; relus && tests && id < n; id++)
        fuse[id] = relus[id] > 0 && uses[id] == relus[id] + tests[id];
    free(relus);
    free(tests);
}

static kiln_node *rewrite(kiln_rewriter *rw, const kiln_node *old,
                          kiln_node **in)
{
    const unsigned char *fuse = rw->state;
    if (old->op == KILN_OP_RELU && fuse[old->in[0]->id])
        return in[0];
    if (!fuse[old->id])
        return NULL;
    kiln_window win = old->at.win;
    win.flags |= KILN_WINDOW_RELU;
    kiln_node *c = kiln_conv_fused(rw->out->g, in[0], in[1],
                                   old->n_in > 2 ? in[2] : NULL, &win, NULL);
    c->name = kiln_graph_strdup(rw->out->g, old->name);
    return c;
}

kiln_status kiln_pass_conv_fuse(const kiln_unit *in, kiln_unit *out,
                                const kiln_compile_options *opt,
                                kiln_eval_fn eval)
{
    int *uses = kiln_unit_uses(in);
    unsigned char *fuse = calloc((size_t)in->g->n_nodes + 1, 1);
    kiln_status s = KILN_ERR_MEMORY;
    if (uses && fuse) {
        find(in->g, uses, fuse);
        s = kiln_rewrite(in, out, opt, eval, NULL, rewrite, fuse);
    } else {
        kiln_graph_fail(out->g, s, "kiln_compile: out of memory");
    }
    free(uses);
    free(fuse);
    return s;
}
