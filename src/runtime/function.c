/* Compiled functions: the needed part of a graph cloned into a private
   compile unit, then one variant (runtime/variant.c: the unit through the
   pass pipeline, planned and scheduled) per size of its symbolic axes,
   built the first time it runs at that size and kept in a small cache, so
   that kiln_run allocates nothing at a size it has seen. */
#include <stdlib.h>
#include <string.h>

#include "graph/clone.h"
#include "runtime/live.h"
#include "runtime/variant.h"

/* Sizes kept at once: an epoch's batch and its last partial batch, an
   evaluation's, with room to spare. */
enum { CACHE = 8 };

struct kiln_function {
    kiln_session *s;
    kiln_unit base; /* before the passes, marks kept: specialised per size */
    int *ids;       /* by node id of base: its id in the graph compiled */
    int n_in, n_out;
    kiln_compile_options opt; /* its pipeline a copy, no dump stream */
    char *pipeline;
    kiln_variant *cache[CACHE];
    int n_cache;
    kiln_variant *last; /* compiled or run last: what print describes */
    unsigned long clock;
    kiln_function **owner; /* cleared when the function is freed */
};

/* Marks what outputs depend on, following every input edge, and the
   effects attached to what is marked (batch norm's running statistics:
   kiln_graph_add_effect) with what they depend on. */
static unsigned char *mark_live(kiln_graph *g, kiln_node *const *outs,
                                int n_out)
{
    unsigned char *live = calloc((size_t)g->n_nodes + 1, 1);
    if (!live)
        return NULL;
    for (int i = 0; i < n_out; i++)
        live[outs[i]->id] = 1;
    for (int more = 1; more;) {
        for (int id = g->n_nodes - 1; id >= 0; id--)
            if (live[id])
                for (int k = 0; k < g->nodes[id]->n_in; k++)
                    live[g->nodes[id]->in[k]->id] = 1;
        more = 0;
        for (int i = 0; i < g->n_effects; i++)
            if (live[g->effect_trigger[i]->id] && !live[g->effect[i]->id])
                live[g->effect[i]->id] = more = 1;
    }
    return live;
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

/* The effects (kiln_graph_add_effect) that live marks, as map maps them,
   into out (when not NULL); returns their count.  The compile unit lists
   them as outputs after the caller's, so every pass keeps them. */
static int live_effects(const kiln_graph *g, const unsigned char *live,
                        kiln_node *const *map, kiln_node **out)
{
    int k = 0;
    for (int i = 0; i < g->n_effects; i++)
        if (live[g->effect[i]->id]) {
            if (out)
                out[k] = map[g->effect[i]->id];
            k++;
        }
    return k;
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
    kiln_graph *fg;
    int n_effects = live ? live_effects(g, live, NULL, NULL) : 0;
    f->n_in = n_in;
    f->n_out = n_out;
    if (!live || !map ||
        kiln_unit_alloc(&f->base, n_out + n_effects, n_in) != KILN_OK) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        goto done;
    }
    if ((st = check_inputs_fed(s, g, live, inputs, n_in)) != KILN_OK ||
        (st = check_assignments(s, g, live)) != KILN_OK)
        goto done;
    fg = f->base.g;
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (!live[id])
            continue;
        kiln_node **in =
            n->n_in <= 64 ? ins : malloc((size_t)n->n_in * sizeof *in);
        if (!in) {
            kiln_graph_fail(fg, KILN_ERR_MEMORY, "kiln_compile: out of memory");
            break;
        }
        for (int k = 0; k < n->n_in; k++)
            in[k] = map[n->in[k]->id];
        map[id] = kiln_node_clone(fg, n, in);
        if (in != ins)
            free(in);
    }
    /* inputs that nothing needs are still accepted (and ignored) */
    for (int i = 0; i < n_in; i++)
        if (!map[inputs[i]->id])
            map[inputs[i]->id] = kiln_node_clone(fg, inputs[i], NULL);
    if ((st = fg->status) != KILN_OK) {
        kiln_session_fail(s, st, "%s", fg->err);
        goto done;
    }
    for (int i = 0; i < n_in; i++)
        f->base.inputs[i] = map[inputs[i]->id];
    for (int i = 0; i < n_out; i++)
        f->base.outputs[i] = map[outputs[i]->id];
    live_effects(g, live, map, f->base.outputs + n_out);
    if (!(f->ids = malloc(((size_t)fg->n_nodes + 1) * sizeof *f->ids))) {
        st = kiln_session_fail(s, KILN_ERR_MEMORY,
                               "kiln_compile: out of memory");
        goto done;
    }
    for (int id = 0; id < g->n_nodes; id++)
        if (map[id])
            f->ids[map[id]->id] = id;
done:
    free(live);
    free(map);
    return st;
}

/* Later variants run the same pipeline; the caller's dump stream is only
   used while compiling (it may be closed by the time a new size runs). */
static kiln_status keep_options(kiln_function *f,
                                const kiln_compile_options *opt)
{
    f->opt = *opt;
    f->opt.dump = NULL;
    if (opt->pipeline) {
        size_t n = strlen(opt->pipeline) + 1;
        if (!(f->pipeline = malloc(n)))
            return kiln_session_fail(f->s, KILN_ERR_MEMORY,
                                     "kiln_compile: out of memory");
        memcpy(f->pipeline, opt->pipeline, n);
        f->opt.pipeline = f->pipeline;
    }
    return KILN_OK;
}

/* The variant at the size the graph was built at.  A unit without
   symbolic axes is no longer needed once it goes through the passes. */
static kiln_variant *first_variant(kiln_function *f,
                                   const kiln_compile_options *opt)
{
    char err[KILN_ERRMSG_MAX];
    int64_t size = kiln_unit_sym_size(&f->base);
    kiln_unit u;
    if (size < 0)
        return kiln_variant_new(f->s, &f->base, -1, opt, "kiln_compile");
    if (kiln_unit_check_sym(&f->base, f->ids, err, sizeof err) != KILN_OK ||
        kiln_unit_specialise(&f->base, size, f->ids, &u, err, sizeof err) !=
            KILN_OK) {
        kiln_session_fail(f->s, KILN_ERR_SHAPE, "kiln_compile: %s", err);
        return NULL;
    }
    return kiln_variant_new(f->s, &u, size, opt, "kiln_compile");
}

/* Frees f, also one never made live (a compile that failed). */
static void destroy(kiln_function *f)
{
    if (f->owner)
        *f->owner = NULL;
    kiln_session *s = f->s;
    for (int i = 0; s && i < s->n_funcs; i++) {
        if (s->funcs[i] == f) {
            s->funcs[i] = s->funcs[--s->n_funcs];
            break;
        }
    }
    for (int i = 0; i < f->n_cache; i++)
        kiln_variant_free(f->cache[i]);
    kiln_unit_free(&f->base);
    free(f->ids);
    free(f->pipeline);
    free(f);
}

kiln_function *kiln_compile_ex(kiln_session *s, kiln_graph *g,
                               kiln_node *const *outputs, int n_out,
                               kiln_node *const *inputs, int n_in,
                               const kiln_compile_options *opt)
{
    if (kiln_session_begin(s, "kiln_compile") != KILN_OK)
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
        keep_options(f, opt) != KILN_OK || !(f->last = first_variant(f, opt))) {
        f->s = NULL;
        destroy(f);
        return NULL;
    }
    if (kiln_function_live_add(f) != 0) {
        f->s = NULL;
        destroy(f);
        kiln_session_fail(s, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        return NULL;
    }
    f->cache[f->n_cache++] = f->last;
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
    if (!f || !kiln_function_live(f, "kiln_function_free"))
        return;
    kiln_function_live_remove(f);
    destroy(f);
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

/* The symbolic size the inputs are fed at (-1 for a function without
   one); KILN_ERR_SHAPE when two of them disagree.  A tensor of the wrong
   rank is left to check_tensor. */
static kiln_status fed_size(kiln_function *f, kiln_tensor *const *in,
                            int64_t *size)
{
    int from = -1;
    *size = -1;
    if (!f->base.g) /* no symbolic axes: given up once compiled */
        return KILN_OK;
    for (int i = 0; i < f->n_in; i++) {
        kiln_shape s = f->base.inputs[i]->shape, t = in[i]->shape;
        if (!s.sym || s.ndim != t.ndim)
            continue;
        for (int d = 0; d < s.ndim; d++) {
            if (!(s.sym >> d & 1u) || t.d[d] == *size)
                continue;
            if (*size >= 0) {
                char b1[96], b2[96];
                return kiln_session_fail(
                    f->s, KILN_ERR_SHAPE,
                    "kiln_run: inputs '%s' %s and '%s' %s disagree on the "
                    "symbolic size (%lld and %lld)",
                    kiln_node_name(f->base.inputs[from]),
                    kiln_shape_str(in[from]->shape, b1, sizeof b1),
                    kiln_node_name(f->base.inputs[i]),
                    kiln_shape_str(t, b2, sizeof b2), (long long)*size,
                    (long long)t.d[d]);
            }
            *size = t.d[d];
            from = i;
        }
    }
    return KILN_OK;
}

/* The variant for size: from the cache, or specialised from the base unit
   and cached in place of the one run longest ago. */
static kiln_variant *variant_at(kiln_function *f, int64_t size)
{
    for (int i = 0; i < f->n_cache; i++)
        if (f->cache[i]->size == size)
            return f->cache[i];
    char err[KILN_ERRMSG_MAX], what[64];
    kiln_unit u;
    snprintf(what, sizeof what, "kiln_run: at symbolic size %lld",
             (long long)size);
    if (kiln_unit_specialise(&f->base, size, f->ids, &u, err, sizeof err) !=
        KILN_OK) {
        kiln_session_fail(f->s, KILN_ERR_SHAPE, "%s: %s", what, err);
        return NULL;
    }
    kiln_variant *v = kiln_variant_new(f->s, &u, size, &f->opt, what);
    if (!v)
        return NULL;
    int slot = f->n_cache;
    if (slot < CACHE) {
        f->n_cache++;
    } else {
        slot = f->cache[0] == f->last; /* what print describes stays */
        for (int i = 0; i < CACHE; i++)
            if (f->cache[i] != f->last &&
                f->cache[i]->used < f->cache[slot]->used)
                slot = i;
        kiln_variant_free(f->cache[slot]);
    }
    f->cache[slot] = v;
    return v;
}

kiln_status kiln_run(kiln_function *f, kiln_tensor *const *in,
                     kiln_tensor *const *out)
{
    if (!f)
        return kiln_null_arg("kiln_run", "function");
    if (!kiln_function_live(f, "kiln_run"))
        return KILN_ERR_STATE;
    kiln_session *s = f->s;
    kiln_session_begin(s, "kiln_run");
    int64_t size;
    kiln_variant *v;
    if ((f->n_in && !in) || (f->n_out && !out))
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_run: inputs or outputs array is NULL");
    for (int i = 0; i < f->n_in; i++)
        if (!in[i])
            return kiln_session_fail(s, KILN_ERR_ARG,
                                     "kiln_run: input %d ('%s') is not fed", i,
                                     kiln_node_name(f->last->u.inputs[i]));
    if (fed_size(f, in, &size) != KILN_OK)
        return KILN_ERR_SHAPE;
    /* no input of the right rank to give a size: check_tensor says which */
    if (!(v = size < 0 ? f->last : variant_at(f, size)))
        return KILN_ERR_SHAPE;
    for (int i = 0; i < f->n_in; i++) {
        kiln_status st = check_tensor(s, v->u.inputs[i], in[i], "input", i);
        if (st != KILN_OK)
            return st;
    }
    for (int i = 0; i < f->n_out; i++) {
        kiln_status st =
            out[i] ? check_tensor(s, v->u.outputs[i], out[i], "output", i)
                   : KILN_OK;
        if (st != KILN_OK)
            return st;
    }
    v->used = ++f->clock;
    f->last = v;
    return kiln_variant_run(s, v, in, out, f->n_out);
}

kiln_tensor *kiln_function_new_output(const kiln_function *f, int i)
{
    if (f && !kiln_function_live(f, "kiln_function_new_output"))
        return NULL;
    if (!f || i < 0 || i >= f->n_out) {
        kiln_set_last_error("kiln_function_new_output: no output %d", i);
        return NULL;
    }
    kiln_node *o = f->last->u.outputs[i];
    return kiln_tensor_new(o->dtype, o->shape);
}

size_t kiln_function_memory(const kiln_function *f)
{
    return f && kiln_function_live(f, "kiln_function_memory")
               ? f->last->arena_bytes
               : 0;
}

size_t kiln_function_memory_unplanned(const kiln_function *f)
{
    return f && kiln_function_live(f, "kiln_function_memory_unplanned")
               ? f->last->unplanned_bytes
               : 0;
}

int kiln_function_num_kernels(const kiln_function *f)
{
    return f && kiln_function_live(f, "kiln_function_num_kernels")
               ? f->last->n_steps
               : -1;
}

kiln_status kiln_function_print(const kiln_function *f, FILE *out)
{
    if (!f || !out)
        return kiln_null_arg("kiln_function_print", f ? "stream" : "function");
    if (!kiln_function_live(f, "kiln_function_print"))
        return KILN_ERR_STATE;
    kiln_variant_print(f->last, out);
    return KILN_OK;
}
