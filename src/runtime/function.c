/* Compiled functions: the needed part of a graph cloned into a private
   graph, then a flat schedule of kernel calls over buffers allocated once at
   compile time, so kiln_run allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "runtime/runtime.h"

typedef struct step {
    kiln_node *n;
    void *out;
    void **in;
} step;

typedef struct assignment {
    void *dst;
    const void *src;
    size_t bytes;
} assignment;

struct kiln_function {
    kiln_session *s;
    kiln_graph *g;       /* private clone of the needed nodes */
    void **buf;          /* by node id of g */
    void *arena;         /* one block for every computed buffer */
    size_t arena_bytes;
    step *steps;
    int n_steps;
    kiln_node **inputs, **outputs;
    int n_in, n_out;
    assignment *assigns;
    int n_assigns;
    void **in_ptrs;      /* step operand arrays */
};

/* Marks what outputs depend on, following every input edge. */
static unsigned char *mark_live(kiln_graph *g, kiln_node *const *outs, int n_out)
{
    unsigned char *live = calloc((size_t)g->n_nodes + 1, 1);
    if (!live)
        return NULL;
    for (int i = 0; i < n_out; i++)
        live[outs[i]->id] = 1;
    for (int id = g->n_nodes - 1; id >= 0; id--)
        if (live[id])
            for (int k = 0; k < g->nodes[id]->n_in; k++)
                live[g->nodes[id]->in[k]->id] = 1;
    return live;
}

/* Copies node n into g2 with inputs remapped through map. */
static kiln_node *clone_node(kiln_graph *g2, const kiln_node *n, kiln_node **map)
{
    kiln_node *in[64] = {0};
    kiln_node **ins = n->n_in <= 64 ? in : malloc((size_t)n->n_in * sizeof *ins);
    if (!ins)
        return kiln_graph_fail(g2, KILN_ERR_MEMORY, "kiln_compile: out of memory");
    for (int k = 0; k < n->n_in; k++)
        ins[k] = map[n->in[k]->id];
    kiln_node *c = kiln_node_make(g2, n->op, n->dtype, n->shape, ins, n->n_in);
    if (ins != in)
        free(ins);
    if (c->op == KILN_OP_ERROR)
        return c;
    c->at = n->at;
    c->name = kiln_graph_strdup(g2, n->name);
    c->debug = n->debug;
    c->debug_msg = kiln_graph_strdup(g2, n->debug_msg);
    if (n->op == KILN_OP_CONSTANT) {
        size_t bytes = (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype);
        void *d = kiln_graph_alloc(g2, bytes);
        if (!d)
            return kiln_graph_fail(g2, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        memcpy(d, n->at.data, bytes);
        c->at.data = d;
    }
    return c;
}

static size_t node_bytes(const kiln_node *n)
{
    return (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype);
}

static kiln_status check_compile_args(kiln_session *s, kiln_graph *g,
                                      kiln_node *const *outputs, int n_out,
                                      kiln_node *const *inputs, int n_in)
{
    const char *fn = "kiln_compile";
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG, "%s: graph is NULL", fn);
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status, "%s: the graph failed: %s", fn,
                                 g->err);
    if ((!outputs && n_out) || n_out < 0 || (!inputs && n_in) || n_in < 0)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "%s: outputs or inputs array is NULL", fn);
    for (int i = 0; i < n_out; i++)
        if (!outputs[i] || outputs[i]->graph != g || outputs[i]->op == KILN_OP_ERROR)
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "%s: output %d is NULL, poisoned or from "
                                     "another graph", fn, i);
    for (int i = 0; i < n_in; i++) {
        if (!inputs[i] || inputs[i]->graph != g)
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "%s: input %d is NULL or from another graph",
                                     fn, i);
        if (inputs[i]->op != KILN_OP_INPUT)
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "%s: input %d (%%%d) is a %s, not an input",
                                     fn, i, inputs[i]->id,
                                     kiln_op_table[inputs[i]->op].name);
        for (int j = 0; j < i; j++)
            if (inputs[j] == inputs[i])
                return kiln_session_fail(s, KILN_ERR_ARG,
                                         "%s: input '%s' is listed twice", fn,
                                         kiln_node_name(inputs[i]));
    }
    return KILN_OK;
}

static kiln_status check_inputs_fed(kiln_session *s, kiln_graph *g,
                                    const unsigned char *live,
                                    kiln_node *const *inputs, int n_in)
{
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (!live[id] || n->op != KILN_OP_INPUT)
            continue;
        int fed = 0;
        for (int i = 0; i < n_in && !fed; i++)
            fed = inputs[i] == n;
        if (!fed)
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "kiln_compile: input '%s' (%%%d) is needed "
                                     "but not in the inputs list",
                                     kiln_node_name(n), n->id);
    }
    return KILN_OK;
}

/* Binds leaves, lays out every computed buffer in one block and builds the
   schedule. */
static kiln_status plan(kiln_function *f)
{
    kiln_graph *g = f->g;
    size_t total = 0, n_ops = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (kiln_op_table[n->op].kind != KILN_KIND_LEAF) {
            total += (node_bytes(n) + 63) / 64 * 64;
            n_ops++;
            f->n_steps++;
        }
        if (n->op == KILN_OP_ASSIGN)
            f->n_assigns++;
    }
    size_t n_ptrs = 0;
    for (int id = 0; id < g->n_nodes; id++)
        n_ptrs += (size_t)g->nodes[id]->n_in;
    f->buf = calloc((size_t)g->n_nodes + 1, sizeof *f->buf);
    f->steps = calloc(n_ops + 1, sizeof *f->steps);
    f->assigns = calloc((size_t)f->n_assigns + 1, sizeof *f->assigns);
    f->in_ptrs = calloc(n_ptrs + 1, sizeof *f->in_ptrs);
    f->arena_bytes = total;
    f->arena = aligned_alloc(64, total + 64);
    if (!f->buf || !f->steps || !f->assigns || !f->in_ptrs || !f->arena)
        return kiln_session_fail(f->s, KILN_ERR_MEMORY,
                                 "kiln_compile: out of memory (%zu bytes)", total);
    size_t off = 0, ptr = 0;
    int si = 0, ai = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (n->op == KILN_OP_VARIABLE) {
            kiln_var *v = kiln_session_bind(f->s, n);
            if (!v)
                return KILN_ERR_SHAPE;
            f->buf[id] = v->data;
        } else if (n->op == KILN_OP_CONSTANT) {
            f->buf[id] = (void *)n->at.data;
        } else if (n->op == KILN_OP_INPUT) {
            f->buf[id] = NULL; /* bound per run */
        } else {
            f->buf[id] = (char *)f->arena + off;
            off += (node_bytes(n) + 63) / 64 * 64;
            step *st = &f->steps[si++];
            st->n = n;
            st->out = f->buf[id];
            st->in = f->in_ptrs + ptr;
            ptr += (size_t)n->n_in;
        }
        if (n->op == KILN_OP_ASSIGN)
            f->assigns[ai++] = (assignment){f->buf[n->in[0]->id], f->buf[id],
                                            node_bytes(n)};
    }
    return KILN_OK;
}

static void register_function(kiln_session *s, kiln_function *f)
{
    if (s->n_funcs == s->cap_funcs) {
        int cap = s->cap_funcs ? 2 * s->cap_funcs : 8;
        kiln_function **fs = realloc(s->funcs, (size_t)cap * sizeof *fs);
        if (!fs)
            return; /* freed by the caller instead of the session */
        s->funcs = fs;
        s->cap_funcs = cap;
    }
    s->funcs[s->n_funcs++] = f;
}

kiln_function *kiln_compile(kiln_session *s, kiln_graph *g,
                            kiln_node *const *outputs, int n_out,
                            kiln_node *const *inputs, int n_in)
{
    if (!s)
        return NULL;
    if (check_compile_args(s, g, outputs, n_out, inputs, n_in) != KILN_OK)
        return NULL;
    unsigned char *live = mark_live(g, outputs, n_out);
    kiln_node **map = calloc((size_t)g->n_nodes + 1, sizeof *map);
    kiln_function *f = calloc(1, sizeof *f);
    if (!live || !map || !f || !(f->g = kiln_graph_new())) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        goto fail;
    }
    f->s = s;
    if (check_inputs_fed(s, g, live, inputs, n_in) != KILN_OK)
        goto fail;
    for (int id = 0; id < g->n_nodes; id++)
        if (live[id])
            map[id] = clone_node(f->g, g->nodes[id], map);
    /* inputs that nothing needs are still accepted (and ignored) */
    for (int i = 0; i < n_in; i++)
        if (!map[inputs[i]->id])
            map[inputs[i]->id] = clone_node(f->g, inputs[i], map);
    if (f->g->status != KILN_OK) {
        kiln_session_fail(s, f->g->status, "%s", f->g->err);
        goto fail;
    }
    f->n_in = n_in;
    f->n_out = n_out;
    f->inputs = calloc((size_t)n_in + 1, sizeof *f->inputs);
    f->outputs = calloc((size_t)n_out + 1, sizeof *f->outputs);
    if (!f->inputs || !f->outputs) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        goto fail;
    }
    for (int i = 0; i < n_in; i++)
        f->inputs[i] = map[inputs[i]->id];
    for (int i = 0; i < n_out; i++)
        f->outputs[i] = map[outputs[i]->id];
    if (plan(f) != KILN_OK)
        goto fail;
    free(live);
    free(map);
    register_function(s, f);
    return f;
fail:
    free(live);
    free(map);
    if (f)
        f->s = NULL;
    kiln_function_free(f);
    return NULL;
}

void kiln_function_free(kiln_function *f)
{
    if (!f)
        return;
    kiln_session *s = f->s;
    for (int i = 0; s && i < s->n_funcs; i++) {
        if (s->funcs[i] == f) {
            s->funcs[i] = s->funcs[--s->n_funcs];
            break;
        }
    }
    kiln_graph_free(f->g);
    free(f->buf);
    free(f->arena);
    free(f->steps);
    free(f->assigns);
    free(f->in_ptrs);
    free(f->inputs);
    free(f->outputs);
    free(f);
}

static kiln_status check_tensor(kiln_session *s, const kiln_node *n,
                                const kiln_tensor *t, const char *what, int i)
{
    char b1[96], b2[96];
    if (kiln_dtype_supported(t->dtype) && t->dtype == n->dtype &&
        kiln_shape_equal(t->shape, n->shape))
        return KILN_OK;
    return kiln_session_fail(s, t->dtype == n->dtype ? KILN_ERR_SHAPE : KILN_ERR_DTYPE,
                             "kiln_run: %s %d ('%s') wants %s%s, got %s%s", what,
                             i, kiln_node_name(n), kiln_dtype_name(n->dtype),
                             kiln_shape_str(n->shape, b1, sizeof b1),
                             kiln_dtype_name(t->dtype),
                             kiln_shape_str(t->shape, b2, sizeof b2));
}

kiln_status kiln_run(kiln_function *f, kiln_tensor *const *in,
                     kiln_tensor *const *out)
{
    if (!f)
        return KILN_ERR_ARG;
    kiln_session *s = f->s;
    if ((f->n_in && !in) || (f->n_out && !out))
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_run: inputs or outputs array is NULL");
    for (int i = 0; i < f->n_in; i++) {
        if (!in[i])
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "kiln_run: input %d ('%s') is not fed", i,
                                     kiln_node_name(f->inputs[i]));
        kiln_status st = check_tensor(s, f->inputs[i], in[i], "input", i);
        if (st != KILN_OK)
            return st;
    }
    for (int i = 0; i < f->n_out; i++) {
        kiln_status st =
            out[i] ? check_tensor(s, f->outputs[i], out[i], "output", i) : KILN_OK;
        if (st != KILN_OK)
            return st;
    }
    for (int i = 0; i < f->n_in; i++)
        f->buf[f->inputs[i]->id] = in[i]->data;
    for (int i = 0; i < f->n_steps; i++) {
        step *st = &f->steps[i];
        for (int k = 0; k < st->n->n_in; k++)
            st->in[k] = f->buf[st->n->in[k]->id];
        kiln_cpu_exec(st->n, st->out, st->in);
        if (st->n->debug)
            kiln_debug_print(st->n, st->out, "value");
    }
    for (int i = 0; i < f->n_out; i++)
        if (out[i] && out[i]->data != f->buf[f->outputs[i]->id])
            memcpy(out[i]->data, f->buf[f->outputs[i]->id], kiln_tensor_bytes(out[i]));
    for (int i = 0; i < f->n_assigns; i++)
        memcpy(f->assigns[i].dst, f->assigns[i].src, f->assigns[i].bytes);
    return KILN_OK;
}

kiln_tensor *kiln_function_new_output(const kiln_function *f, int i)
{
    if (!f || i < 0 || i >= f->n_out) {
        kiln_set_last_error("kiln_function_new_output: no output %d", i);
        return NULL;
    }
    return kiln_tensor_new(f->outputs[i]->dtype, f->outputs[i]->shape);
}

kiln_status kiln_function_print(const kiln_function *f, FILE *out)
{
    if (!f || !out)
        return KILN_ERR_ARG;
    char b[96];
    fprintf(out, "function: %d inputs, %d outputs, %d kernels, %zu bytes of "
                 "buffers\n",
            f->n_in, f->n_out, f->n_steps, f->arena_bytes);
    for (int id = 0; id < f->g->n_nodes; id++) {
        kiln_node *n = f->g->nodes[id];
        const char *kind = n->op == KILN_OP_INPUT      ? "input"
                           : n->op == KILN_OP_VARIABLE ? "variable"
                           : n->op == KILN_OP_CONSTANT ? "constant"
                                                       : NULL;
        if (kind)
            fprintf(out, "  %%%d: %s %s %s%s\n", n->id, kind, kiln_node_name(n),
                    kiln_dtype_name(n->dtype), kiln_shape_str(n->shape, b, sizeof b));
        else
            fprintf(out, "  %%%d: buffer +%zu %zu bytes %s%s\n", n->id,
                    (size_t)((char *)f->buf[id] - (char *)f->arena), node_bytes(n),
                    kiln_dtype_name(n->dtype), kiln_shape_str(n->shape, b, sizeof b));
    }
    for (int i = 0; i < f->n_steps; i++) {
        kiln_node *n = f->steps[i].n;
        fprintf(out, "  %s(", kiln_op_table[n->op].name);
        for (int k = 0; k < n->n_in; k++)
            fprintf(out, "%s%%%d", k ? ", " : "", n->in[k]->id);
        fprintf(out, ") -> %%%d\n", n->id);
    }
    return KILN_OK;
}
