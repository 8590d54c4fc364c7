/* Compiled functions: the needed part of a graph cloned into a private
   graph, rewritten by the pass pipeline (passes/), then a flat schedule of
   kernel calls over buffers placed by the memory plan in one block
   allocated at compile time, so kiln_run allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "cpu/check.h"
#include "cpu/dispatch.h"
#include "graph/clone.h"
#include "graph/fused_program.h"
#include "passes/passes.h"
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
    kiln_graph *g;      /* private graph: the clone after the passes */
    void **buf;         /* by node id of g */
    void *arena;        /* one block for every computed buffer */
    size_t arena_bytes; /* the memory plan's peak */
    size_t unplanned_bytes;
    int *inplace; /* by node id: input whose buffer it reuses, or -1 */
    int *storage; /* by node id: variable whose storage it is, or -1 */
    step *steps;
    int n_steps;
    kiln_node **inputs, **outputs;
    int n_in, n_out;
    assignment *assigns;
    int n_assigns;
    void **in_ptrs;        /* step operand arrays */
    kiln_function **owner; /* cleared when the function is freed */
};

/* Marks what outputs depend on, following every input edge. */
static unsigned char *mark_live(kiln_graph *g, kiln_node *const *outs,
                                int n_out)
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
    for (int i = 0; i < n_out; i++) {
        if (!outputs[i] || outputs[i]->graph != g ||
            outputs[i]->op == KILN_OP_ERROR)
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "%s: output %d is NULL, poisoned or from "
                                     "another graph",
                                     fn, i);
        if (kiln_node_stale(outputs[i]))
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "%s: output %d was built before "
                                     "kiln_graph_clear",
                                     fn, i);
    }
    for (int i = 0; i < n_in; i++) {
        if (!inputs[i] || inputs[i]->graph != g)
            return kiln_session_fail(
                s, KILN_ERR_ARG, "%s: input %d is NULL or from another graph",
                fn, i);
        if (inputs[i]->op != KILN_OP_ERROR && kiln_node_stale(inputs[i]))
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "%s: input %d was built before "
                                     "kiln_graph_clear",
                                     fn, i);
        if (inputs[i]->op != KILN_OP_INPUT)
            return kiln_session_fail(
                s, KILN_ERR_ARG, "%s: input %d (%%%d) is a %s, not an input",
                fn, i, inputs[i]->id, kiln_op_table[inputs[i]->op].name);
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
            return kiln_session_fail(
                s, KILN_ERR_ARG,
                "kiln_compile: input '%s' (%%%d) is needed "
                "but not in the inputs list",
                kiln_node_name(n), n->id);
    }
    return KILN_OK;
}

/* One run applies its assignments together after computing: two of one
   variable would race, so they are refused. */
static kiln_status check_assignments(kiln_session *s, const kiln_graph *g,
                                     const unsigned char *live)
{
    const kiln_node *v = NULL;
    int found = kiln_graph_find_double_assign(g, 0, live, &v);
    if (found < 0)
        return kiln_session_fail(s, KILN_ERR_MEMORY,
                                 "kiln_compile: out of memory");
    if (found)
        return kiln_session_fail(
            s, KILN_ERR_ARG,
            "kiln_compile: variable '%s' is assigned twice in one function "
            "(e.g. by two optimiser steps): the updates would race; assign "
            "it once",
            v->name);
    return KILN_OK;
}

/* A copy writing over its own input (in place) has nothing to do, so it
   gets no step: reshape, stop_gradient, a same-dtype cast, an assign's
   value. */
static int is_noop(const kiln_function *f, const kiln_node *n)
{
    if (f->inplace[n->id] < 0 || n->debug)
        return 0;
    return n->op == KILN_OP_RESHAPE || n->op == KILN_OP_STOPGRAD ||
           n->op == KILN_OP_ASSIGN ||
           (n->op == KILN_OP_CAST && n->dtype == n->in[0]->dtype);
}

/* Plans the buffers, binds leaves, and builds the schedule. */
static kiln_status plan(kiln_function *f, int reuse)
{
    kiln_graph *g = f->g;
    kiln_unit p = {g, f->outputs, f->n_out, f->inputs, f->n_in};
    kiln_memory_plan mp;
    if (kiln_plan_memory(&p, reuse, &mp) != KILN_OK)
        return kiln_session_fail(f->s, KILN_ERR_MEMORY,
                                 "kiln_compile: out of memory");
    f->inplace = mp.inplace;
    f->storage = mp.storage;
    f->arena_bytes = mp.peak;
    f->unplanned_bytes = mp.unplanned;
    size_t n_ptrs = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (kiln_op_table[n->op].kind != KILN_KIND_LEAF && !is_noop(f, n)) {
            f->n_steps++;
            n_ptrs += (size_t)n->n_in;
        }
        if (n->op == KILN_OP_ASSIGN)
            f->n_assigns++;
    }
    f->buf = calloc((size_t)g->n_nodes + 1, sizeof *f->buf);
    f->steps = calloc((size_t)f->n_steps + 1, sizeof *f->steps);
    f->assigns = calloc((size_t)f->n_assigns + 1, sizeof *f->assigns);
    f->in_ptrs = calloc(n_ptrs + 1, sizeof *f->in_ptrs);
    f->arena = aligned_alloc(64, f->arena_bytes + 64);
    if (!f->buf || !f->steps || !f->assigns || !f->in_ptrs || !f->arena) {
        free(mp.offset);
        return kiln_session_fail(f->s, KILN_ERR_MEMORY,
                                 "kiln_compile: out of memory (%zu bytes)",
                                 f->arena_bytes);
    }
    size_t ptr = 0;
    int si = 0, ai = 0;
    kiln_status st = KILN_OK;
    for (int id = 0; id < g->n_nodes && st == KILN_OK; id++) {
        kiln_node *n = g->nodes[id];
        if (n->op == KILN_OP_VARIABLE) {
            kiln_var *v = kiln_session_bind(f->s, n);
            if (!v)
                st = KILN_ERR_SHAPE;
            else
                f->buf[id] = v->data;
        } else if (n->op == KILN_OP_CONSTANT) {
            f->buf[id] = (void *)n->at.data;
        } else if (n->op == KILN_OP_INPUT) {
            f->buf[id] = NULL; /* bound per run */
        } else {
            f->buf[id] = f->storage[id] >= 0 ? f->buf[f->storage[id]]
                                             : (char *)f->arena + mp.offset[id];
            if (!is_noop(f, n)) {
                step *stp = &f->steps[si++];
                stp->n = n;
                stp->out = f->buf[id];
                stp->in = f->in_ptrs + ptr;
                ptr += (size_t)n->n_in;
            }
        }
        /* an update written into its variable needs no copy */
        if (n->op == KILN_OP_ASSIGN && f->buf[n->in[0]->id] != f->buf[id])
            f->assigns[ai++] =
                (assignment){f->buf[n->in[0]->id], f->buf[id], node_bytes(n)};
    }
    f->n_assigns = ai; /* the copies actually needed */
    free(mp.offset);
    return st;
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

/* Clones what the outputs need (and the listed inputs) into f's compile unit.
 */
static kiln_status extract(kiln_function *f, kiln_graph *g,
                           kiln_node *const *outputs, int n_out,
                           kiln_node *const *inputs, int n_in)
{
    kiln_session *s = f->s;
    unsigned char *live = mark_live(g, outputs, n_out);
    kiln_node **map = calloc((size_t)g->n_nodes + 1, sizeof *map);
    kiln_node *ins[64];
    kiln_status st = KILN_ERR_MEMORY;
    f->n_in = n_in;
    f->n_out = n_out;
    f->inputs = calloc((size_t)n_in + 1, sizeof *f->inputs);
    f->outputs = calloc((size_t)n_out + 1, sizeof *f->outputs);
    if (!live || !map || !f->inputs || !f->outputs ||
        !(f->g = kiln_graph_new())) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        goto done;
    }
    if ((st = check_inputs_fed(s, g, live, inputs, n_in)) != KILN_OK ||
        (st = check_assignments(s, g, live)) != KILN_OK)
        goto done;
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (!live[id])
            continue;
        kiln_node **in =
            n->n_in <= 64 ? ins : malloc((size_t)n->n_in * sizeof *in);
        if (!in) {
            kiln_graph_fail(f->g, KILN_ERR_MEMORY,
                            "kiln_compile: out of memory");
            break;
        }
        for (int k = 0; k < n->n_in; k++)
            in[k] = map[n->in[k]->id];
        map[id] = kiln_node_clone(f->g, n, in);
        if (in != ins)
            free(in);
    }
    /* inputs that nothing needs are still accepted (and ignored) */
    for (int i = 0; i < n_in; i++)
        if (!map[inputs[i]->id])
            map[inputs[i]->id] = kiln_node_clone(f->g, inputs[i], NULL);
    if ((st = f->g->status) != KILN_OK) {
        kiln_session_fail(s, st, "%s", f->g->err);
        goto done;
    }
    for (int i = 0; i < n_in; i++)
        f->inputs[i] = map[inputs[i]->id];
    for (int i = 0; i < n_out; i++)
        f->outputs[i] = map[outputs[i]->id];
done:
    free(live);
    free(map);
    return st;
}

/* Runs the pass pipeline over f's compile unit. */
static kiln_status optimise(kiln_function *f, const kiln_compile_options *opt)
{
    kiln_unit p = {f->g, f->outputs, f->n_out, f->inputs, f->n_in};
    char err[KILN_ERRMSG_MAX];
    kiln_status st = kiln_passes_run(&p, opt, err, sizeof err);
    f->g = p.g;
    f->outputs = p.outputs;
    f->inputs = p.inputs;
    if (st != KILN_OK)
        return kiln_session_fail(f->s, st, "kiln_compile: %s", err);
    return KILN_OK;
}

kiln_function *kiln_compile_ex(kiln_session *s, kiln_graph *g,
                               kiln_node *const *outputs, int n_out,
                               kiln_node *const *inputs, int n_in,
                               const kiln_compile_options *opt)
{
    if (!s)
        return NULL;
    kiln_compile_options defaults = kiln_compile_defaults();
    char err[KILN_ERRMSG_MAX];
    if (!opt)
        opt = &defaults;
    if (check_compile_args(s, g, outputs, n_out, inputs, n_in) != KILN_OK)
        return NULL;
    if (kiln_passes_check_options(opt, err, sizeof err) != KILN_OK) {
        kiln_session_fail(s, KILN_ERR_ARG, "kiln_compile: %s", err);
        return NULL;
    }
    kiln_function *f = calloc(1, sizeof *f);
    if (!f) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        return NULL;
    }
    f->s = s;
    if (extract(f, g, outputs, n_out, inputs, n_in) != KILN_OK ||
        optimise(f, opt) != KILN_OK || plan(f, opt->plan_memory) != KILN_OK) {
        f->s = NULL;
        kiln_function_free(f);
        return NULL;
    }
    register_function(s, f);
    return f;
}

kiln_function *kiln_compile(kiln_session *s, kiln_graph *g,
                            kiln_node *const *outputs, int n_out,
                            kiln_node *const *inputs, int n_in)
{
    return kiln_compile_ex(s, g, outputs, n_out, inputs, n_in, NULL);
}

void kiln_function_set_owner(kiln_function *f, kiln_function **owner)
{
    if (f)
        f->owner = owner;
}

void kiln_function_free(kiln_function *f)
{
    if (!f)
        return;
    if (f->owner)
        *f->owner = NULL;
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
    free(f->inplace);
    free(f->storage);
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
    return kiln_session_fail(
        s, t->dtype == n->dtype ? KILN_ERR_SHAPE : KILN_ERR_DTYPE,
        "kiln_run: %s %d ('%s') wants %s%s, got %s%s", what, i,
        kiln_node_name(n), kiln_dtype_name(n->dtype),
        kiln_shape_str(n->shape, b1, sizeof b1), kiln_dtype_name(t->dtype),
        kiln_shape_str(t->shape, b2, sizeof b2));
}

static int is_leaf(const kiln_node *n)
{
    return n->op == KILN_OP_INPUT || n->op == KILN_OP_CONSTANT ||
           n->op == KILN_OP_VARIABLE;
}

/* Checks the values kernels rely on (kiln_cpu_check_inputs) where they are
   leaves (fed inputs, constants, variables) before any kernel runs, so that
   a refused run leaves the variables as they were even where the plan
   updates them in place.  Computed values are checked as they are used. */
static kiln_status check_leaf_values(kiln_function *f)
{
    char msg[KILN_ERRMSG_MAX - 16];
    for (int i = 0; i < f->n_steps; i++) {
        step *st = &f->steps[i];
        for (int k = 0; k < st->n->n_in; k++)
            st->in[k] = is_leaf(st->n->in[k]) ? f->buf[st->n->in[k]->id] : NULL;
        if (kiln_cpu_check_inputs(st->n, st->in, msg, sizeof msg) != KILN_OK)
            return kiln_session_fail(f->s, KILN_ERR_ARG, "kiln_run: %s", msg);
    }
    return KILN_OK;
}

kiln_status kiln_run(kiln_function *f, kiln_tensor *const *in,
                     kiln_tensor *const *out)
{
    if (!f)
        return kiln_null_arg("kiln_run", "function");
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
            out[i] ? check_tensor(s, f->outputs[i], out[i], "output", i)
                   : KILN_OK;
        if (st != KILN_OK)
            return st;
    }
    for (int i = 0; i < f->n_in; i++)
        f->buf[f->inputs[i]->id] = in[i]->data;
    kiln_status checked = check_leaf_values(f);
    if (checked != KILN_OK)
        return checked;
    for (int i = 0; i < f->n_steps; i++) {
        step *st = &f->steps[i];
        char msg[KILN_ERRMSG_MAX - 16];
        for (int k = 0; k < st->n->n_in; k++)
            st->in[k] = f->buf[st->n->in[k]->id];
        if (kiln_cpu_run_kernel(&s->exec, st->n, st->out, st->in, msg,
                                sizeof msg) != KILN_OK)
            return kiln_session_fail(s, KILN_ERR_ARG, "kiln_run: %s", msg);
        if (st->n->debug)
            kiln_debug_print(st->n, st->out, "value");
    }
    for (int i = 0; i < f->n_out; i++)
        if (out[i] && out[i]->data != f->buf[f->outputs[i]->id])
            memcpy(out[i]->data, f->buf[f->outputs[i]->id],
                   kiln_tensor_bytes(out[i]));
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

size_t kiln_function_memory(const kiln_function *f)
{
    return f ? f->arena_bytes : 0;
}

size_t kiln_function_memory_unplanned(const kiln_function *f)
{
    return f ? f->unplanned_bytes : 0;
}

int kiln_function_num_kernels(const kiln_function *f)
{
    return f ? f->n_steps : -1;
}

static void print_buffer(const kiln_function *f, const kiln_node *n, FILE *out)
{
    char b[96];
    const char *kind = n->op == KILN_OP_INPUT      ? "input"
                       : n->op == KILN_OP_VARIABLE ? "variable"
                       : n->op == KILN_OP_CONSTANT ? "constant"
                                                   : NULL;
    kiln_shape_str(n->shape, b, sizeof b);
    if (!kind && f->storage[n->id] >= 0) {
        fprintf(out, "  %%%d: in the storage of variable %%%d %zu bytes %s%s",
                n->id, f->storage[n->id], node_bytes(n),
                kiln_dtype_name(n->dtype), b);
    } else if (!kind) {
        fprintf(out, "  %%%d: buffer +%zu %zu bytes %s%s", n->id,
                (size_t)((char *)f->buf[n->id] - (char *)f->arena),
                node_bytes(n), kiln_dtype_name(n->dtype), b);
        if (f->inplace[n->id] >= 0)
            fprintf(out, " (in place of %%%d)", f->inplace[n->id]);
    } else {
        fprintf(out, "  %%%d: %s %s %s%s", n->id, kind, kiln_node_name(n),
                kiln_dtype_name(n->dtype), b);
        if (n->op == KILN_OP_CONSTANT && kiln_shape_numel(n->shape) == 1)
            fprintf(out, " = %g",
                    n->dtype == KILN_F32
                        ? *(const float *)n->at.data
                        : (double)*(const int32_t *)n->at.data);
    }
    fputc('\n', out);
}

static void print_step(const kiln_node *n, FILE *out)
{
    char b[96], prog[1024];
    if (n->op == KILN_OP_FUSED)
        fprintf(out, "  %%%d = fused[%s](", n->id,
                kiln_fused_format(n, prog, sizeof prog));
    else
        fprintf(out, "  %%%d = %s(", n->id, kiln_op_table[n->op].name);
    for (int k = 0; k < n->n_in; k++)
        fprintf(out, "%s%%%d", k ? ", " : "", n->in[k]->id);
    fprintf(out, ") %s%s", kiln_dtype_name(n->dtype),
            kiln_shape_str(n->shape, b, sizeof b));
    if ((n->op == KILN_OP_MATMUL || n->op == KILN_OP_MATMUL_ACC) &&
        (n->at.trans_a || n->at.trans_b))
        fprintf(out, " trans_a=%d trans_b=%d", n->at.trans_a, n->at.trans_b);
    else if (kiln_op_table[n->op].kind == KILN_KIND_REDUCE)
        fprintf(out, " axes=0x%x%s", n->at.axes,
                n->at.keepdims ? " keepdims" : "");
    fputc('\n', out);
}

kiln_status kiln_function_print(const kiln_function *f, FILE *out)
{
    if (!f || !out)
        return kiln_null_arg("kiln_function_print", f ? "stream" : "function");
    fprintf(out,
            "function: %d inputs, %d outputs, %d kernels, %zu bytes of "
            "buffers (%zu with one buffer per value)\n",
            f->n_in, f->n_out, f->n_steps, f->arena_bytes, f->unplanned_bytes);
    fprintf(out, "buffers:\n");
    for (int id = 0; id < f->g->n_nodes; id++)
        print_buffer(f, f->g->nodes[id], out);
    fprintf(out, "schedule:\n");
    for (int i = 0; i < f->n_steps; i++)
        print_step(f->steps[i].n, out);
    fprintf(out, "outputs:");
    for (int i = 0; i < f->n_out; i++)
        fprintf(out, " %%%d", f->outputs[i]->id);
    for (int i = 0; i < f->n_assigns; i++)
        fprintf(out, "%s",
                i ? ""
                  : "\nafter the run, assigns copy their values into the "
                    "variables");
    fputc('\n', out);
    return KILN_OK;
}
