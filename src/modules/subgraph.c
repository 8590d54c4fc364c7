/* Subgraphs and calls: a call inlines the subgraph's nodes into the parent,
   binding its graph inputs, and records the mapping as call info. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/modules.h"

int kiln_push_node(kiln_node ***arr, int *n, int *cap, kiln_node *x)
{
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 8;
        kiln_node **a = realloc(*arr, (size_t)c * sizeof *a);
        if (!a)
            return 0;
        *arr = a;
        *cap = c;
    }
    (*arr)[(*n)++] = x;
    return 1;
}

kiln_subgraph *kiln_subgraph_new(const char *name)
{
    kiln_subgraph *sg = calloc(1, sizeof *sg);
    if (!sg || !(sg->g = kiln_graph_new())) {
        free(sg);
        return NULL;
    }
    const char *nm = name && *name ? name : "subgraph";
    sg->name = malloc(strlen(nm) + 1);
    if (!sg->name) {
        kiln_subgraph_free(sg);
        return NULL;
    }
    strcpy(sg->name, nm);
    return sg;
}

void kiln_subgraph_free(kiln_subgraph *sg)
{
    if (!sg)
        return;
    kiln_graph_free(sg->g);
    free(sg->name);
    free(sg->inputs);
    free(sg->outputs);
    free(sg);
}

kiln_graph *kiln_subgraph_graph(kiln_subgraph *sg)
{
    return sg ? sg->g : NULL;
}

kiln_node *kiln_subgraph_input(kiln_subgraph *sg, const char *name,
                               kiln_dtype dt, kiln_shape shape)
{
    if (!sg)
        return NULL;
    kiln_node *x = kiln_input(sg->g, name, dt, shape);
    if (x->op == KILN_OP_INPUT &&
        !kiln_push_node(&sg->inputs, &sg->n_in, &sg->cap_in, x))
        return kiln_graph_fail(sg->g, KILN_ERR_MEMORY,
                               "kiln_subgraph_input: out of memory");
    return x;
}

kiln_node *kiln_subgraph_output(kiln_subgraph *sg, kiln_node *y)
{
    if (!sg)
        return NULL;
    if (!kiln_graph_check(sg->g, "kiln_subgraph_output", y))
        return &sg->g->poison;
    if (!kiln_push_node(&sg->outputs, &sg->n_out, &sg->cap_out, y))
        return kiln_graph_fail(sg->g, KILN_ERR_MEMORY,
                               "kiln_subgraph_output: out of memory");
    return y;
}

int kiln_subgraph_num_inputs(const kiln_subgraph *sg)
{
    return sg ? sg->n_in : 0;
}
int kiln_subgraph_num_outputs(const kiln_subgraph *sg)
{
    return sg ? sg->n_out : 0;
}

kiln_node *kiln_subgraph_input_at(const kiln_subgraph *sg, int i)
{
    return sg && i >= 0 && i < sg->n_in ? sg->inputs[i] : NULL;
}

kiln_node *kiln_subgraph_output_at(const kiln_subgraph *sg, int i)
{
    return sg && i >= 0 && i < sg->n_out ? sg->outputs[i] : NULL;
}

kiln_subgraph *kiln_module_create_graph(kiln_module_build_fn build,
                                        void *module,
                                        kiln_node *const *examples, int n)
{
    kiln_subgraph *sg = kiln_subgraph_new(NULL);
    if (!sg)
        return NULL;
    const char *fn = "kiln_module_create_graph";
    kiln_node *stack[16],
        **ins = n > 16 ? calloc((size_t)n, sizeof *ins) : stack;
    if (!ins) {
        kiln_graph_fail(sg->g, KILN_ERR_MEMORY, "%s: out of memory", fn);
        return sg;
    }
    if (!build || n < 0 || (n && !examples))
        kiln_graph_fail(sg->g, KILN_ERR_ARG, "%s: build or examples is NULL",
                        fn);
    for (int i = 0; i < n && sg->g->status == KILN_OK; i++) {
        const kiln_node *e = examples[i];
        if (!e || e->op == KILN_OP_ERROR) {
            kiln_graph_fail(sg->g, KILN_ERR_ARG,
                            "%s: example input %d is NULL or poisoned", fn, i);
            break;
        }
        char name[32];
        snprintf(name, sizeof name, "x%d", i);
        ins[i] = kiln_subgraph_input(sg, e->name ? e->name : name, e->dtype,
                                     e->shape);
    }
    if (sg->g->status == KILN_OK)
        build(sg, module, ins, n);
    if (ins != stack)
        free(ins);
    return sg;
}

kiln_node *kiln_clone_into(kiln_graph *g, const kiln_node *n,
                           kiln_node *const *map)
{
    if (n->op == KILN_OP_VARIABLE)
        return kiln_node_set_trainable(
            kiln_variable(g, n->name, n->dtype, n->shape, n->at.init),
            n->at.trainable);
    if (n->op == KILN_OP_CONSTANT) {
        kiln_node *c = kiln_constant(g, n->dtype, n->shape, n->at.data);
        if (c->op == KILN_OP_CONSTANT) { /* a fill or count keeps following
                                            the symbolic size */
            c->shape.sym = n->shape.sym;
            c->at.count = n->at.count;
        }
        return kiln_node_set_name(c, n->name);
    }
    kiln_node *stack[8] = {0};
    kiln_node **ins =
        n->n_in <= 8 ? stack : calloc((size_t)n->n_in, sizeof *ins);
    if (!ins)
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_call: out of memory");
    for (int k = 0; k < n->n_in; k++)
        ins[k] = map[n->in[k]->id];
    kiln_node *c = kiln_node_make(g, n->op, n->dtype, n->shape, ins, n->n_in);
    if (ins != stack)
        free(ins);
    if (c->op == KILN_OP_ERROR)
        return c;
    c->at = n->at;
    c->name = kiln_graph_strdup(g, n->name);
    c->debug = n->debug;
    c->debug_msg = kiln_graph_strdup(g, n->debug_msg);
    return c;
}

static int input_index(const kiln_subgraph *sg, const kiln_node *x)
{
    for (int i = 0; i < sg->n_in; i++)
        if (sg->inputs[i] == x)
            return i;
    return -1;
}

/* Fills bound[i] with the parent tensor of each graph input; 0 (parent's
   error set) when one is missing, bound twice, or does not match. */
static int bind_inputs(kiln_graph *parent, const kiln_subgraph *sg,
                       kiln_node *const *args, int n_args,
                       const kiln_binding *dict, int n_dict, kiln_node **bound)
{
    const char *fn = "kiln_call";
    if (n_args < 0 || n_dict < 0 || (n_args && !args) || (n_dict && !dict) ||
        n_args > sg->n_in) {
        kiln_graph_fail(parent, KILN_ERR_ARG,
                        "%s: '%s' takes %d inputs, got %d arguments", fn,
                        sg->name, sg->n_in, n_args);
        return 0;
    }
    for (int i = 0; i < n_args; i++)
        bound[i] = args[i];
    for (int k = 0; k < n_dict; k++) {
        int i = input_index(sg, dict[k].input);
        if (i < 0 || bound[i]) {
            kiln_graph_fail(parent, KILN_ERR_ARG,
                            "%s: inputs_dict entry %d of '%s' %s", fn, k,
                            sg->name,
                            i < 0 ? "is not one of its graph inputs"
                                  : "binds an input already bound");
            return 0;
        }
        bound[i] = dict[k].value;
    }
    for (int i = 0; i < sg->n_in; i++) {
        kiln_node *in = sg->inputs[i], *v = bound[i];
        char b1[96], b2[96];
        if (!v) {
            kiln_graph_fail(parent, KILN_ERR_ARG,
                            "%s: input '%s' of '%s' is not bound", fn,
                            kiln_node_name(in), sg->name);
            return 0;
        }
        if (!kiln_graph_check(parent, fn, v))
            return 0;
        if (v->dtype != in->dtype || !kiln_shape_equal(v->shape, in->shape)) {
            kiln_graph_fail(parent, KILN_ERR_SHAPE,
                            "%s: input '%s' of '%s' wants %s%s, got %s%s", fn,
                            kiln_node_name(in), sg->name,
                            kiln_dtype_name(in->dtype),
                            kiln_shape_str(in->shape, b1, sizeof b1),
                            kiln_dtype_name(v->dtype),
                            kiln_shape_str(v->shape, b2, sizeof b2));
            return 0;
        }
    }
    return 1;
}

static kiln_status inline_call(kiln_call_info *ci, kiln_node *const *args,
                               int n_args, const kiln_binding *dict, int n_dict)
{
    kiln_graph *parent = ci->parent;
    kiln_subgraph *sg = ci->sg;
    if (sg->g->status != KILN_OK) {
        kiln_graph_fail(parent, sg->g->status,
                        "kiln_call: subgraph '%s' failed: %s", sg->name,
                        sg->g->err);
        return parent->status;
    }
    /* Inlining into its own graph would append to the graph being copied:
       the copy would never end (and outgrow the map sized below). */
    if (parent == sg->g) {
        kiln_graph_fail(parent, KILN_ERR_ARG,
                        "kiln_call: cannot call subgraph '%s' into its own "
                        "graph",
                        sg->name);
        return parent->status;
    }
    /* The map is sized for the nodes the subgraph has now; only those are
       copied, whatever is appended meanwhile. */
    int n_nodes = sg->g->n_nodes;
    kiln_node **bound = calloc((size_t)sg->n_in + 1, sizeof *bound);
    ci->map = kiln_graph_alloc(parent, ((size_t)n_nodes + 1) * sizeof *ci->map);
    if (!bound || !ci->map) {
        free(bound);
        kiln_graph_fail(parent, KILN_ERR_MEMORY, "kiln_call: out of memory");
        return parent->status;
    }
    if (bind_inputs(parent, sg, args, n_args, dict, n_dict, bound)) {
        ci->n_nodes = n_nodes;
        for (int id = 0; id < n_nodes && parent->status == KILN_OK; id++) {
            kiln_node *n = sg->g->nodes[id];
            int i = n->op == KILN_OP_INPUT ? input_index(sg, n) : -2;
            if (i == -1)
                kiln_graph_fail(
                    parent, KILN_ERR_ARG,
                    "kiln_call: '%s' has an input '%s' that is not a "
                    "graph input (use kiln_subgraph_input)",
                    sg->name, kiln_node_name(n));
            else
                ci->map[id] =
                    i >= 0 ? bound[i] : kiln_clone_into(parent, n, ci->map);
        }
    }
    free(bound);
    if (parent->status == KILN_OK)
        for (int i = 0; i < ci->n_out; i++)
            ci->outputs[i] = ci->map[sg->outputs[i]->id];
    return parent->status;
}

kiln_call_info *kiln_call_with_info(kiln_graph *parent, kiln_subgraph *sg,
                                    kiln_node *const *args, int n_args,
                                    const kiln_binding *dict, int n_dict)
{
    if (!parent)
        return NULL;
    kiln_call_info *ci = kiln_graph_alloc(parent, sizeof *ci);
    int n_out = sg ? sg->n_out : 0;
    kiln_node **outs =
        kiln_graph_alloc(parent, ((size_t)n_out + 1) * sizeof *outs);
    if (!ci || !outs) {
        kiln_graph_fail(parent, KILN_ERR_MEMORY, "kiln_call: out of memory");
        return NULL;
    }
    *ci = (kiln_call_info){
        .sg = sg, .parent = parent, .outputs = outs, .n_out = n_out};
    for (int i = 0; i < n_out; i++)
        outs[i] = &parent->poison;
    if (!sg)
        kiln_graph_fail(parent, KILN_ERR_ARG, "kiln_call: subgraph is NULL");
    else if (parent->status == KILN_OK)
        inline_call(ci, args, n_args, dict, n_dict);
    return ci;
}

kiln_status kiln_call(kiln_graph *parent, kiln_subgraph *sg,
                      kiln_node *const *args, int n_args,
                      const kiln_binding *dict, int n_dict, kiln_node **outs)
{
    kiln_call_info *ci =
        kiln_call_with_info(parent, sg, args, n_args, dict, n_dict);
    if (!ci)
        return parent ? parent->status : KILN_ERR_ARG;
    for (int i = 0; outs && i < ci->n_out; i++)
        outs[i] = ci->outputs[i];
    return parent->status;
}

kiln_node *kiln_call_info_output(const kiln_call_info *ci, int i)
{
    if (!ci)
        return NULL;
    if (i < 0 || i >= ci->n_out)
        return kiln_graph_fail(ci->parent, KILN_ERR_ARG,
                               "kiln_call_info_output: no output %d (of %d)", i,
                               ci->n_out);
    return ci->outputs[i];
}

kiln_node *kiln_call_info_parent_input(const kiln_call_info *ci,
                                       const kiln_node *input)
{
    if (!ci || !ci->sg || !ci->map)
        return NULL;
    int i = input_index(ci->sg, input);
    return i >= 0 ? ci->map[input->id] : NULL;
}

kiln_subgraph *kiln_call_info_graph(const kiln_call_info *ci)
{
    return ci ? ci->sg : NULL;
}
