/* Variants: a compile unit through the pass pipeline, its memory plan, and
   the flat schedule of kernel calls that kiln_run follows. */
#include <stdlib.h>
#include <string.h>

#include "base/big_alloc.h"
#include "cpu/check.h"
#include "cpu/dispatch.h"
#include "cpu/fpu.h"
#include "runtime/variant.h"

static size_t node_bytes(const kiln_node *n)
{
    return (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype);
}

/* A copy writing over its own input (in place) has nothing to do, so it
   gets no step (kiln_node_alias: reshape, stop_gradient, a same-dtype
   cast, an assign's value). */
static int is_noop(const kiln_variant *v, const kiln_node *n)
{
    return v->inplace[n->id] >= 0 && !kiln_node_pinned(n) &&
           kiln_node_alias(n).copy;
}

int kiln_variant_noop(const kiln_variant *v, int id)
{
    return is_noop(v, v->u.g->nodes[id]);
}

/* Counts v's steps and assignments, notes whether any node is hooked
   and whether one writes a trainable variable; the number of input
   pointers the steps need. */
static size_t count_steps(kiln_variant *v)
{
    kiln_graph *g = v->u.g;
    size_t n_ptrs = 0;
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_node *n = g->nodes[id];
        if (kiln_op_table[n->op].kind != KILN_KIND_LEAF && !is_noop(v, n)) {
            v->n_steps++;
            n_ptrs += (size_t)n->n_in;
        }
        if (n->op == KILN_OP_ASSIGN) {
            v->n_assigns++;
            v->trains |=
                n->in[0]->op == KILN_OP_VARIABLE && n->in[0]->at.trainable;
        }
        v->hooked |= n->hook != 0;
    }
    return n_ptrs;
}

/* 1 for the leaves whose buffer is not planned. */
static int bound_leaf(const kiln_node *n)
{
    return n->op == KILN_OP_VARIABLE || n->op == KILN_OP_CONSTANT ||
           n->op == KILN_OP_INPUT || n->op == KILN_OP_MODE ||
           n->op == KILN_OP_RNG_KEY;
}

/* The buffer of leaf n: a variable's storage, a constant's data, nothing
   for an input (bound per run), the variant's mode or key. */
static kiln_status bind_leaf(kiln_session *s, kiln_variant *v, kiln_node *n)
{
    void **buf = &v->buf[n->id];
    if (n->op == KILN_OP_VARIABLE) {
        kiln_var *var = kiln_session_bind(s, n);
        if (!var)
            return KILN_ERR_SHAPE;
        *buf = var->data;
    } else if (n->op == KILN_OP_CONSTANT)
        *buf = (void *)n->at.data;
    else if (n->op == KILN_OP_MODE)
        *buf = &v->mode;
    else if (n->op == KILN_OP_RNG_KEY)
        *buf = v->key;
    else
        *buf = NULL; /* an input: bound per run */
    return KILN_OK;
}

/* Plans the buffers, binds leaves, and builds the schedule. */
static kiln_status plan(kiln_session *s, kiln_variant *v, int reuse,
                        const char *what)
{
    kiln_graph *g = v->u.g;
    kiln_memory_plan mp;
    if (kiln_schedule_hooks(g) != KILN_OK ||
        kiln_plan_memory(&v->u, reuse, &mp) != KILN_OK)
        return kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory", what);
    v->inplace = mp.inplace;
    v->storage = mp.storage;
    v->arena_bytes = mp.peak;
    v->unplanned_bytes = mp.unplanned;
    size_t n_ptrs = count_steps(v);
    v->buf = calloc((size_t)g->n_nodes + 1, sizeof *v->buf);
    v->steps = calloc((size_t)v->n_steps + 1, sizeof *v->steps);
    v->assigns = calloc((size_t)v->n_assigns + 1, sizeof *v->assigns);
    v->in_ptrs = calloc(n_ptrs + 1, sizeof *v->in_ptrs);
    v->arena = kiln_big_alloc(v->arena_bytes + 64);
    if (!v->buf || !v->steps || !v->assigns || !v->in_ptrs || !v->arena) {
        free(mp.offset);
        free(mp.scratch);
        return kiln_session_fail(s, KILN_ERR_MEMORY,
                                 "%s: out of memory (%zu bytes)", what,
                                 v->arena_bytes);
    }
    size_t ptr = 0;
    int si = 0, ai = 0;
    kiln_status st = KILN_OK;
    for (int id = 0; id < g->n_nodes && st == KILN_OK; id++) {
        kiln_node *n = g->nodes[id];
        if (bound_leaf(n)) {
            st = bind_leaf(s, v, n);
        } else {
            v->buf[id] = v->storage[id] >= 0 ? v->buf[v->storage[id]]
                                             : (char *)v->arena + mp.offset[id];
            if (!is_noop(v, n)) {
                kiln_step *stp = &v->steps[si++];
                stp->n = n;
                stp->out = v->buf[id];
                stp->scratch = mp.scratch[id] == (size_t)-1
                                   ? NULL
                                   : (char *)v->arena + mp.scratch[id];
                stp->in = v->in_ptrs + ptr;
                ptr += (size_t)n->n_in;
                /* packs a constant weight once for every run */
                stp->prep = kiln_cpu_prepare(n);
            }
        }
        /* an update written into its variable needs no copy */
        if (n->op == KILN_OP_ASSIGN && v->buf[n->in[0]->id] != v->buf[id])
            v->assigns[ai++] = (kiln_assignment){v->buf[n->in[0]->id],
                                                 v->buf[id], node_bytes(n)};
    }
    v->n_assigns = ai; /* the copies actually needed */
    free(mp.offset);
    free(mp.scratch);
    if (st == KILN_OK && kiln_hooks_find_storage(v) != KILN_OK)
        return kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory", what);
    return st;
}

kiln_variant *kiln_variant_new(kiln_session *s, kiln_unit *u, int64_t size,
                               const kiln_compile_options *opt,
                               const char *what)
{
    char err[KILN_ERRMSG_MAX];
    kiln_variant *v = calloc(1, sizeof *v);
    if (!v) {
        kiln_unit_free(u);
        kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory", what);
        return NULL;
    }
    v->size = size;
    v->u = *u;
    *u = (kiln_unit){0};
    kiln_status st =
        kiln_passes_run(&v->u, opt, kiln_cpu_run_reference, err, sizeof err);
    if (st != KILN_OK)
        kiln_session_fail(s, st, "%s: %s", what, err);
    else
        st = plan(s, v, opt->plan_memory, what);
    if (st != KILN_OK) {
        kiln_variant_free(v);
        return NULL;
    }
    return v;
}

void kiln_variant_free(kiln_variant *v)
{
    if (!v)
        return;
    for (int i = 0; v->steps && i < v->n_steps; i++)
        kiln_cpu_prepared_free(v->steps[i].prep);
    kiln_unit_free(&v->u);
    free(v->buf);
    kiln_big_free(v->arena, v->arena_bytes + 64);
    free(v->steps);
    free(v->assigns);
    free(v->in_ptrs);
    free(v->inplace);
    free(v->storage);
    free(v->ext);
    free(v);
}

static int is_leaf(const kiln_node *n)
{
    return kiln_op_table[n->op].kind == KILN_KIND_LEAF;
}

/* Checks the values kernels rely on (kiln_cpu_check_inputs) where they are
   leaves (fed inputs, constants, variables) before any kernel runs, so that
   a refused run leaves the variables as they were even where the plan
   updates them in place.  Computed values are checked as they are used. */
static kiln_status check_leaf_values(kiln_session *s, kiln_variant *v)
{
    char msg[KILN_ERRMSG_MAX - 16];
    for (int i = 0; i < v->n_steps; i++) {
        kiln_step *st = &v->steps[i];
        for (int k = 0; k < st->n->n_in; k++)
            st->in[k] = is_leaf(st->n->in[k]) ? v->buf[st->n->in[k]->id] : NULL;
        if (kiln_cpu_check_inputs(st->n, st->in, msg, sizeof msg) != KILN_OK)
            return kiln_session_fail(s, KILN_ERR_ARG, "kiln_run: %s", msg);
    }
    return KILN_OK;
}

/* The hooked node whose storage x's value is (x itself, or through
   views that run no kernel: a reshape of a hooked gradient), or NULL. */
static const kiln_node *hooked_source(const kiln_variant *v, const kiln_node *x)
{
    while (!x->hook && kiln_op_table[x->op].kind != KILN_KIND_LEAF &&
           is_noop(v, x))
        x = v->u.g->nodes[v->inplace[x->id]];
    return x->hook ? x : NULL;
}

/* The session's gradient sync (runtime.h) around one step: before it
   reads hooked values (after = 0), or after it computed (after = 1). */
static kiln_status sync_step(const kiln_grad_sync *sync, const kiln_variant *v,
                             const kiln_step *st, int after)
{
    kiln_status rc = KILN_OK;
    if (after) {
        if (st->n->hook)
            rc = sync->computed(sync->ctx, st->n->hook, st->out);
        sync->progress(sync->ctx);
        return rc;
    }
    for (int k = 0; k < st->n->n_in && rc == KILN_OK; k++) {
        const kiln_node *h = hooked_source(v, st->n->in[k]);
        if (h)
            rc = sync->needed(sync->ctx, h->hook, v->buf[h->id]);
    }
    return rc;
}

/* Runs v's kernels in order. */
static kiln_status run_steps(kiln_session *s, kiln_variant *v)
{
    const kiln_grad_sync *sync = v->hooked ? s->sync : NULL;
    /* without its sync the step would scale unsummed gradients */
    if (v->hooked && !sync)
        return kiln_session_fail(
            s, KILN_ERR_STATE,
            "kiln_run: the training step was built to average gradients "
            "over a communicator, and none is attached now: attach it "
            "again (kiln_session_set_comm) or build the step without one");
    for (int i = 0; i < v->n_steps; i++) {
        kiln_step *st = &v->steps[i];
        char msg[KILN_ERRMSG_MAX - 16];
        for (int k = 0; k < st->n->n_in; k++)
            st->in[k] = v->buf[st->n->in[k]->id];
        kiln_status rc;
        if (sync && (rc = sync_step(sync, v, st, 0)) != KILN_OK)
            return rc;
        int n = sync ? kiln_variant_run_shared(s, sync, v, i, &rc) : 0;
        if (n < 0)
            return rc;
        if (n > 0) {
            for (int k = 1; k < n; k++) /* steps without hook or debug */
                sync_step(sync, v, &v->steps[i + k], 1);
            i += n - 1;
            st = &v->steps[i];
        } else if (kiln_cpu_run_prepared(&s->exec, st->n, st->out, st->in,
                                         st->scratch, st->prep, msg,
                                         sizeof msg) != KILN_OK)
            return kiln_session_fail(s, KILN_ERR_ARG, "kiln_run: %s", msg);
        if (st->n->debug)
            kiln_debug_print(s->exec.debug, st->n, st->out, "value");
        if (sync && (rc = sync_step(sync, v, st, 1)) != KILN_OK)
            return rc;
    }
    /* the shared writes are over on every process */
    if (sync && sync->phase_end)
        return sync->phase_end(sync->ctx, NULL);
    return KILN_OK;
}

kiln_status kiln_variant_run(kiln_session *s, kiln_variant *v,
                             kiln_tensor *const *in, kiln_tensor *const *out,
                             int n_out)
{
    for (int i = 0; i < v->u.n_in; i++)
        v->buf[v->u.inputs[i]->id] = in[i]->data;
    v->mode = s->training;
    kiln_session_next_key(s, v->key);
    /* a training step built without the communicator attached now: each
       rank would train alone (run_steps refuses the converse) */
    if (v->trains && !v->hooked && s->sync)
        return kiln_session_fail(
            s, KILN_ERR_STATE,
            "kiln_run: the training step was built without a communicator, "
            "and one is attached now: each rank would train alone; build and "
            "compile it again with the communicator attached, or detach it");
    kiln_status st = check_leaf_values(s, v);
    if (st != KILN_OK)
        return st;
    /* the session's denormal mode, set once for the run, not per kernel */
    unsigned saved = kiln_fpu_enter(s->exec.flush_denormals);
    kiln_hooks_bind(v, s->sync);
    st = run_steps(s, v);
    if (st == KILN_OK)
        st = kiln_variant_check_shared(s, v);
    kiln_fpu_leave(saved);
    for (int i = 0; i < n_out && st == KILN_OK; i++)
        if (out[i] && out[i]->data != v->buf[v->u.outputs[i]->id])
            memcpy(out[i]->data, v->buf[v->u.outputs[i]->id],
                   kiln_tensor_bytes(out[i]));
    kiln_hooks_unbind(v);
    if (st != KILN_OK)
        return st;
    for (int i = 0; i < v->n_assigns; i++)
        memcpy(v->assigns[i].dst, v->assigns[i].src, v->assigns[i].bytes);
    return KILN_OK;
}

static void print_buffer(const kiln_variant *v, const kiln_node *n, FILE *out)
{
    char b[96];
    const char *kind = n->op == KILN_OP_INPUT      ? "input"
                       : n->op == KILN_OP_VARIABLE ? "variable"
                       : n->op == KILN_OP_CONSTANT ? "constant"
                       : n->op == KILN_OP_MODE     ? "mode"
                       : n->op == KILN_OP_RNG_KEY  ? "rng_key"
                                                   : NULL;
    kiln_shape_str(n->shape, b, sizeof b);
    if (!kind && v->storage[n->id] >= 0) {
        fprintf(out, "  %%%d: in the storage of variable %%%d %zu bytes %s%s",
                n->id, v->storage[n->id], node_bytes(n),
                kiln_dtype_name(n->dtype), b);
    } else if (!kind) {
        fprintf(out, "  %%%d: buffer +%zu %zu bytes %s%s", n->id,
                (size_t)((char *)v->buf[n->id] - (char *)v->arena),
                node_bytes(n), kiln_dtype_name(n->dtype), b);
        if (v->inplace[n->id] >= 0)
            fprintf(out, " (in place of %%%d)", v->inplace[n->id]);
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

static void print_step(const kiln_step *st, FILE *out)
{
    char line[2048];
    kiln_node_format(st->n, NULL, 0, line, sizeof line);
    fprintf(out, "  %s%s\n", line,
            st->prep ? " (its constant operand prepared once)" : "");
}

void kiln_variant_print(const kiln_variant *v, FILE *out)
{
    const kiln_unit *u = &v->u;
    fprintf(out,
            "function: %d inputs, %d outputs, %d kernels, %zu bytes of "
            "buffers (%zu with one buffer per value)\n",
            u->n_in, u->n_out, v->n_steps, v->arena_bytes, v->unplanned_bytes);
    if (v->size >= 0)
        fprintf(out, "symbolic size: %lld (the size it ran at last)\n",
                (long long)v->size);
    fprintf(out, "buffers:\n");
    for (int id = 0; id < u->g->n_nodes; id++)
        print_buffer(v, u->g->nodes[id], out);
    fprintf(out, "schedule:\n");
    for (int i = 0; i < v->n_steps; i++)
        print_step(&v->steps[i], out);
    fprintf(out, "outputs:");
    for (int i = 0; i < u->n_out; i++)
        fprintf(out, " %%%d", u->outputs[i]->id);
    for (int i = 0; i < v->n_assigns; i++)
        fprintf(out, "%s",
                i ? ""
                  : "\nafter the run, assigns copy their values into the "
                    "variables");
    fputc('\n', out);
}
