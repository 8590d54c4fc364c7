/* The optimiser's update as graph nodes: the scheduled learning rate,
   bias corrections, accumulation, clipping and each kind's step, written
   back with kiln_assign; and the two forms that use it (run-time update of
   a dynamic graph, graph-form step for compiled functions). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad/grad.h"
#include "runtime/dynamic.h"
#include "train/optim.h"

/* ------------------------------------------------------------ update nodes */

typedef struct builder {
    kiln_optimizer *o;
    kiln_graph *g;
    kiln_node *apply; /* 1 on calls that apply the update; NULL: all do */
    kiln_node **assigns;
    int n_assigns, cap_assigns;
} builder;

static kiln_node *num(builder *b, float v)
{
    return kiln_scalar(b->g, v);
}

/* 1 - v, rounded once from double. */
static kiln_node *one_minus(builder *b, float v)
{
    return num(b, (float)(1.0 - (double)v));
}

/* The non-trainable f32 state variable name, created with value init. */
static kiln_node *state_var(builder *b, const char *name, kiln_shape shape,
                            float init)
{
    if (!name)
        return kiln_graph_fail(b->g, KILN_ERR_ARG,
                               "optimiser: state variable name too long");
    kiln_node *v =
        kiln_variable(b->g, name, KILN_F32, shape,
                      init == 0.0f ? kiln_init_zeros() : kiln_init_value(init));
    return kiln_node_set_trainable(v, 0);
}

static void assign(builder *b, kiln_node *var, kiln_node *value)
{
    if (b->n_assigns < b->cap_assigns)
        b->assigns[b->n_assigns++] = kiln_assign(b->g, var, value);
    else
        kiln_graph_fail(b->g, KILN_ERR_MEMORY,
                        "optimiser: too many assignments");
}

/* Assigns value on the calls that apply the update, keeps var otherwise. */
static void update(builder *b, kiln_node *var, kiln_node *value)
{
    assign(b, var, b->apply ? kiln_select(b->g, b->apply, value, var) : value);
}

/* The scheduled learning rate for the step counted by t (steps applied,
   this one included), as schedule_lr in f32 nodes. */
static kiln_node *lr_node(builder *b, kiln_node *t)
{
    const kiln_optim_options *o = &b->o->o;
    kiln_graph *g = b->g;
    if (o->schedule == KILN_LR_CONSTANT && o->warmup_steps <= 0)
        return num(b, o->lr);
    kiln_node *e = kiln_max(g, kiln_sub(g, t, num(b, 1.0f)), num(b, 0.0f));
    kiln_node *em = e;
    if (o->warmup_steps > 0)
        em = kiln_max(g, kiln_sub(g, e, num(b, (float)o->warmup_steps)),
                      num(b, 0.0f));
    kiln_node *lr;
    switch (o->schedule) {
    case KILN_LR_STEP: {
        kiln_node *k = kiln_div(g, em, num(b, (float)o->step_size));
        /* floor (k >= 0) as a round trip through i32 */
        k = kiln_cast(g, kiln_cast(g, k, KILN_I32), KILN_F32);
        lr = kiln_mul(g, num(b, o->lr), kiln_pow(g, num(b, o->gamma), k));
        break;
    }
    case KILN_LR_COSINE: {
        float total = (float)o->total_steps;
        kiln_node *p =
            kiln_div(g, kiln_min(g, em, num(b, total)), num(b, total));
        kiln_node *c = kiln_cos(g, kiln_mul(g, p, num(b, (float)KILN_PI)));
        kiln_node *h = kiln_mul(g, kiln_add(g, num(b, 1.0f), c), num(b, 0.5f));
        lr = kiln_add(
            g, num(b, o->min_lr),
            kiln_mul(g, num(b, (float)((double)o->lr - o->min_lr)), h));
        break;
    }
    default:
        lr = num(b, o->lr);
        break;
    }
    if (o->warmup_steps > 0) {
        kiln_node *w = num(b, (float)o->warmup_steps);
        kiln_node *warm = kiln_mul(
            g, num(b, o->lr), kiln_div(g, kiln_add(g, e, num(b, 1.0f)), w));
        lr = kiln_select(g, kiln_lt(g, e, w), warm, lr);
    }
    return lr;
}

/* Bias correction 1 - beta^t kept as a state variable c and advanced by
   c' = (1 - beta) + beta c, which stays accurate in f32 where computing
   1 - beta^t would cancel. */
static kiln_node *bias_correction(builder *b, const char *slot, float beta)
{
    char buf[STATE_NAME_MAX];
    kiln_node *c =
        state_var(b, global_name(b->o, slot, buf), KILN_SCALAR, 0.0f);
    kiln_node *c1 =
        kiln_add(b->g, kiln_mul(b->g, c, num(b, beta)), one_minus(b, beta));
    update(b, c, c1);
    return c1;
}

/* Gradient accumulation: sums each gradient into "<var>.accum" and sets
   b->apply, true on every accumulate-th call, when grads become the mean. */
static void accumulate(builder *b, kiln_node **vars, kiln_node **grads, int n)
{
    kiln_optimizer *o = b->o;
    kiln_graph *g = b->g;
    char buf[STATE_NAME_MAX];
    float k = (float)o->o.accumulate;
    kiln_node *micro =
        state_var(b, global_name(o, "micro", buf), KILN_SCALAR, 0.0f);
    kiln_node *m1 = kiln_add(g, micro, num(b, 1.0f));
    b->apply = kiln_ge(g, m1, num(b, k));
    assign(b, micro, kiln_select(g, b->apply, num(b, 0.0f), m1));
    for (int i = 0; i < n; i++) {
        kiln_node *acc = state_var(b, slot_name(o, vars[i]->name, "accum", buf),
                                   vars[i]->shape, 0.0f);
        kiln_node *a1 = kiln_add(g, acc, grads[i]);
        assign(b, acc, kiln_select(g, b->apply, num(b, 0.0f), a1));
        grads[i] = kiln_div(g, a1, num(b, k));
    }
}

/* Clipping by global norm, as torch.nn.utils.clip_grad_norm_. */
static void clip_grads(builder *b, kiln_node **grads, int n, float clip_norm)
{
    kiln_graph *g = b->g;
    kiln_node *sq = NULL;
    for (int i = 0; i < n; i++) {
        kiln_node *s =
            kiln_sum(g, kiln_mul(g, grads[i], grads[i]), KILN_ALL_AXES, 0);
        sq = sq ? kiln_add(g, sq, s) : s;
    }
    kiln_node *norm = kiln_add(g, kiln_sqrt(g, sq), num(b, 1e-6f));
    kiln_node *coef =
        kiln_min(g, kiln_div(g, num(b, clip_norm), norm), num(b, 1.0f));
    for (int i = 0; i < n; i++)
        grads[i] = kiln_mul(g, grads[i], coef);
}

/* Optimiser-wide factors of one step: the learning rate, Adagrad's
   decayed rate, Adam's bias-corrected step size and sqrt(bias2). */
typedef struct step_factors {
    kiln_node *lr, *clr, *step_size, *bc2_sqrt;
} step_factors;

/* The new value of variable p given its gradient gr, updating its state. */
static kiln_node *step_one(builder *b, const step_factors *f, const char *vn,
                           kiln_node *p, kiln_node *gr)
{
    kiln_optimizer *o = b->o;
    const kiln_optim_options *op = &o->o;
    kiln_graph *g = b->g;
    kiln_node *np, *lr = f->lr, *clr = f->clr, *step_size = f->step_size,
                   *bc2_sqrt = f->bc2_sqrt;
    char buf[STATE_NAME_MAX];
    switch (op->kind) {
    case KILN_SGD: {
        kiln_node *d = gr;
        if (op->momentum != 0.0f) {
            kiln_node *buf_v =
                state_var(b, slot_name(o, vn, "momentum", buf), p->shape, 0.0f);
            kiln_node *b1 =
                kiln_add(g, kiln_mul(g, buf_v, num(b, op->momentum)), gr);
            update(b, buf_v, b1);
            d = op->nesterov
                    ? kiln_add(g, gr, kiln_mul(g, b1, num(b, op->momentum)))
                    : b1;
        }
        np = kiln_sub(g, p, kiln_mul(g, d, lr));
        break;
    }
    case KILN_ADAGRAD: {
        kiln_node *sum = state_var(b, slot_name(o, vn, "adagrad_sum", buf),
                                   p->shape, op->initial_accumulator);
        kiln_node *s1 = kiln_add(g, sum, kiln_mul(g, gr, gr));
        update(b, sum, s1);
        kiln_node *std = kiln_add(g, kiln_sqrt(g, s1), num(b, op->eps));
        np = kiln_sub(g, p, kiln_mul(g, kiln_div(g, gr, std), clr));
        break;
    }
    default: { /* Adam, AdamW */
        kiln_node *m =
            state_var(b, slot_name(o, vn, "adam_m", buf), p->shape, 0.0f);
        kiln_node *v =
            state_var(b, slot_name(o, vn, "adam_v", buf), p->shape, 0.0f);
        kiln_node *m1 = kiln_add(g, kiln_mul(g, m, num(b, op->beta1)),
                                 kiln_mul(g, gr, one_minus(b, op->beta1)));
        kiln_node *v1 =
            kiln_add(g, kiln_mul(g, v, num(b, op->beta2)),
                     kiln_mul(g, kiln_mul(g, gr, one_minus(b, op->beta2)), gr));
        update(b, m, m1);
        update(b, v, v1);
        kiln_node *denom = kiln_add(g, kiln_div(g, kiln_sqrt(g, v1), bc2_sqrt),
                                    num(b, op->eps));
        kiln_node *p0 = p;
        if (op->kind == KILN_ADAMW && op->weight_decay != 0.0f)
            p0 = kiln_mul(g, p,
                          kiln_sub(g, num(b, 1.0f),
                                   kiln_mul(g, lr, num(b, op->weight_decay))));
        np = kiln_sub(g, p0, kiln_mul(g, kiln_div(g, m1, denom), step_size));
        break;
    }
    }
    return np;
}

/* ------------------------------------------------------------ ZeRO-1 */

/* The ranges of the variables this process updates when the session's
   gradient sync shards the optimiser state (runtime.h), and the new
   values of those ranges, in order. */
typedef struct shards {
    int on;
    int64_t *lo, *hi;
    kiln_node **parts;
    int n_parts;
} shards;

/* An output of the step that is not an assignment: computed, kept. */
static void assign_raw(builder *b, kiln_node *x)
{
    if (b->n_assigns < b->cap_assigns)
        b->assigns[b->n_assigns++] = x;
}

/* x flattened, values [lo, hi). */
static kiln_node *flat_range(kiln_graph *g, kiln_node *x, int64_t lo,
                             int64_t hi)
{
    kiln_node *f = kiln_reshape(g, x, KILN_SHAPE(kiln_shape_numel(x->shape)));
    return kiln_slice(g, f, &lo, &hi);
}

/* The per-variable state slots of the optimiser's kind. */
static int state_slots(const kiln_optimizer *o, const char **slots)
{
    switch (o->o.kind) {
    case KILN_SGD:
        slots[0] = "momentum";
        return o->o.momentum != 0.0f;
    case KILN_ADAGRAD:
        slots[0] = "adagrad_sum";
        return 1;
    default:
        slots[0] = "adam_m";
        slots[1] = "adam_v";
        return 2;
    }
}

/* Fills sh from the session's gradient sync and tells it where each
   state slot's shard lives; -1 with the graph's error. */
static int find_shards(builder *b, kiln_node **vars, int n, shards *sh)
{
    const kiln_grad_sync *sync = b->o->s->sync;
    kiln_graph *g = b->g;
    memset(sh, 0, sizeof *sh);
    if (!sync || !sync->shard)
        return 0;
    sh->lo = kiln_graph_alloc(g, 2 * (size_t)n * sizeof *sh->lo);
    sh->parts = kiln_graph_alloc(g, (size_t)n * sizeof *sh->parts);
    if (!sh->lo || !sh->parts) {
        kiln_graph_fail(g, KILN_ERR_MEMORY, "optimiser: out of memory");
        return -1;
    }
    sh->hi = sh->lo + n;
    sh->on = sync->shard(sync->ctx, g, vars, n, sh->lo, sh->hi);
    const char *slots[2];
    char buf[STATE_NAME_MAX];
    for (int i = 0; sh->on > 0 && i < n; i++)
        for (int k = 0; k < state_slots(b->o, slots); k++)
            if (slot_name(b->o, vars[i]->name, slots[k], buf))
                sync->shard_state(sync->ctx, buf, vars[i], sh->lo[i],
                                  sh->hi[i]);
    return sh->on;
}

/* Every variable's new value from the gathered ranges of all processes. */
static void gather_updates(builder *b, kiln_node **vars, int n,
                           const shards *sh)
{
    const kiln_grad_sync *sync = b->o->s->sync;
    kiln_graph *g = b->g;
    int64_t total = 0, lo = -1;
    for (int i = 0; i < n; i++) {
        if (lo < 0 && sh->lo[i] < sh->hi[i])
            lo = total + sh->lo[i];
        total += kiln_shape_numel(vars[i]->shape);
    }
    kiln_node *flat = sh->n_parts == 1
                          ? sh->parts[0]
                          : kiln_concat(g, sh->parts, sh->n_parts, 0);
    kiln_node *all = sync->gather(sync->ctx, g, flat, lo, total);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int64_t end = at + kiln_shape_numel(vars[i]->shape);
        kiln_node *v = kiln_slice(g, all, &at, &end);
        update(b, vars[i], kiln_reshape(g, v, vars[i]->shape));
        at = end;
    }
}

/* With a gradient sync and no sharding, the variables in the order
   backward makes their gradients (ready[i], the node id of vars[i]'s
   gradient before the sync hooked it): the updates of the buckets summed
   first run while the last ones are still being summed, rather than
   waiting first for the last.  NULL otherwise (or out of memory): the
   variables' own order. */
static const int *update_order(builder *b, const int *ready, int n,
                               const shards *sh)
{
    if (!ready || !b->o->s->sync || sh->on)
        return NULL;
    int *order = kiln_graph_alloc(b->g, (size_t)n * sizeof *order);
    for (int i = 0; order && i < n; i++) {
        int j = i;
        for (; j > 0 && ready[order[j - 1]] > ready[i]; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    return order;
}

/* Adds the update of vars (their gradients in grads, overwritten; ready
   as update_order's, or NULL) and returns the doall of every assignment,
   or the poison node. */
static kiln_node *build_update(kiln_optimizer *o, kiln_graph *g,
                               kiln_node **vars, kiln_node **grads,
                               const int *ready, int n)
{
    const kiln_optim_options *op = &o->o;
    char buf[STATE_NAME_MAX];
    builder bb = {o, g, NULL, NULL, 0, 5 * n + 8};
    builder *b = &bb;
    b->assigns =
        kiln_graph_alloc(g, (size_t)b->cap_assigns * sizeof *b->assigns);
    if (!b->assigns)
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "optimiser: out of memory");

    if (accumulating(o))
        accumulate(b, vars, grads, n);

    /* step counter t (this step included) and learning rate */
    kiln_node *step =
        state_var(b, global_name(o, "step", buf), KILN_SCALAR, 0.0f);
    kiln_node *t = kiln_add(g, step, b->apply ? b->apply : num(b, 1.0f));
    assign(b, step, t);
    kiln_node *lr = lr_node(b, t);

    if (op->clip_norm > 0.0f)
        clip_grads(b, grads, n, op->clip_norm);

    /* optimiser-wide factors */
    step_factors f = {lr, lr, NULL, NULL};
    if (is_adam(o)) {
        f.step_size = kiln_div(g, lr, bias_correction(b, "bias1", op->beta1));
        f.bc2_sqrt = kiln_sqrt(g, bias_correction(b, "bias2", op->beta2));
    } else if (op->kind == KILN_ADAGRAD && op->lr_decay != 0.0f) {
        kiln_node *d =
            kiln_mul(g, kiln_sub(g, t, num(b, 1.0f)), num(b, op->lr_decay));
        f.clr = kiln_div(g, lr, kiln_add(g, num(b, 1.0f), d));
    }

    shards sh;
    if (find_shards(b, vars, n, &sh) < 0)
        return &g->poison;
    const int *order = update_order(b, ready, n, &sh);
    for (int k = 0; k < n && g->status == KILN_OK; k++) {
        int i = order ? order[k] : k;
        kiln_node *p = vars[i], *gr = grads[i];
        if (sh.on) {
            if (sh.lo[i] == sh.hi[i]) {
                /* computed all the same: every rank joins every bucket */
                assign_raw(b, gr);
                continue;
            }
            p = flat_range(g, p, sh.lo[i], sh.hi[i]);
            gr = flat_range(g, gr, sh.lo[i], sh.hi[i]);
        }
        if (op->weight_decay != 0.0f && op->kind != KILN_ADAMW)
            gr = kiln_add(g, gr, kiln_mul(g, p, num(b, op->weight_decay)));
        kiln_node *np = step_one(b, &f, vars[i]->name, p, gr);
        if (sh.on)
            sh.parts[sh.n_parts++] = np;
        else
            update(b, p, np);
    }
    if (sh.on && g->status == KILN_OK)
        gather_updates(b, vars, n, &sh);
    if (g->status != KILN_OK)
        return &g->poison;
    return kiln_doall(g, b->assigns, b->n_assigns);
}

/* ------------------------------------------------------------ the two forms */

/* The session's gradient sync (runtime.h) on the gradients kiln_backward
   computed, in place, before the run-time form reads them. */
static kiln_status sync_gradients(kiln_session *s, kiln_graph *g,
                                  kiln_node *const *grads, int n)
{
    if (!s->sync)
        return KILN_OK;
    kiln_run_state *rs = kiln_run_find(s, g);
    void **values = malloc((size_t)(n + 1) * sizeof *values);
    if (!values)
        return kiln_session_fail(s, KILN_ERR_MEMORY,
                                 "kiln_optimizer_update: out of memory");
    for (int i = 0; i < n; i++)
        values[i] = rs->e[grads[i]->id].value;
    kiln_status st = s->sync->before_update(s->sync->ctx, grads, values, n);
    free(values);
    return st;
}

kiln_status kiln_optimizer_update(kiln_optimizer *o, kiln_graph *g)
{
    const char *fn = "kiln_optimizer_update";
    if (!o) {
        kiln_set_last_error("%s: optimizer is NULL", fn);
        return KILN_ERR_ARG;
    }
    kiln_session *s = o->s;
    if (!s) {
        kiln_set_last_error("%s: the optimiser's session was freed", fn);
        return KILN_ERR_STATE;
    }
    kiln_session_begin(s, fn);
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG, "%s: graph is NULL", fn);
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status, "%s: the graph failed: %s", fn,
                                 g->err);
    kiln_node **vars = malloc((size_t)(2 * g->n_vars + 1) * sizeof *vars);
    if (!vars)
        return kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory", fn);
    kiln_node **grads = vars + g->n_vars;
    int n = kiln_dynamic_trained(s, g, fn, vars, grads);
    kiln_status st;
    if (n < 0) {
        st = KILN_ERR_STATE;
    } else if (n == 0) {
        st = kiln_session_fail(s, KILN_ERR_ARG,
                               "%s: the loss depends on no trainable variable",
                               fn);
    } else if ((st = sync_gradients(s, g, grads, n)) == KILN_OK) {
        build_update(o, g, vars, grads, NULL, n);
        st = g->status != KILN_OK
                 ? kiln_session_fail(s, g->status, "%s: %s", fn, g->err)
                 : kiln_forward(s, g);
    }
    free(vars);
    return st;
}

kiln_node *kiln_optimizer_build_step(kiln_optimizer *o, kiln_graph *g,
                                     kiln_node *loss)
{
    const char *fn = "kiln_optimizer_build_step";
    char b1[96];
    if (!g)
        return NULL;
    if (!o)
        return kiln_graph_fail(g, KILN_ERR_ARG, "%s: optimizer is NULL", fn);
    if (!kiln_graph_check(g, fn, loss))
        return &g->poison;
    if (loss->dtype != KILN_F32 || kiln_shape_numel(loss->shape) != 1)
        return kiln_graph_fail(g, KILN_ERR_SHAPE,
                               "%s: loss %%%d must be an f32 "
                               "scalar, not %s%s",
                               fn, loss->id, kiln_dtype_name(loss->dtype),
                               kiln_shape_str(loss->shape, b1, sizeof b1));
    int top = loss->id, n_wrt = 0, n = 0;
    /* the variables and adjoints kiln_backward would build */
    kiln_node **wrt = malloc((size_t)(3 * g->n_vars + 1) * sizeof *wrt);
    kiln_node **adj = calloc((size_t)top + 1, sizeof *adj);
    if (!wrt || !adj) {
        free(wrt);
        free(adj);
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory", fn);
    }
    kiln_node **vars = wrt + g->n_vars, **grads = vars + g->n_vars;
    for (int i = 0; i < g->n_vars; i++)
        if (g->vars[i]->at.trainable && g->vars[i]->id <= top)
            wrt[n_wrt++] = g->vars[i];
    kiln_node *out = &g->poison;
    if (kiln_build_adjoints(g, loss, NULL, wrt, n_wrt, adj) == KILN_OK) {
        for (int i = 0; i < n_wrt; i++)
            if (adj[wrt[i]->id]) {
                vars[n] = wrt[i];
                grads[n++] = adj[wrt[i]->id];
            }
        int *ready = n ? kiln_graph_alloc(g, (size_t)n * sizeof *ready) : NULL;
        for (int i = 0; ready && i < n; i++)
            ready[i] = grads[i]->id;
        const kiln_grad_sync *sync = o->s->sync;
        /* plain SGD: each process may add its share of the sum to
           variables the processes of a machine share (runtime.h) */
        const kiln_optim_options *op = &o->o;
        int plain = op->kind == KILN_SGD && op->momentum == 0.0f &&
                    op->weight_decay == 0.0f && op->clip_norm <= 0.0f &&
                    !accumulating(o);
        int local = n && sync && plain && sync->build_local
                        ? sync->build_local(sync->ctx, g, vars, grads, n)
                        : 0;
        if (n && sync && local == 0)
            sync->build(sync->ctx, g, vars, grads, n);
        out = n ? build_update(o, g, vars, grads, ready, n)
                : kiln_graph_fail(
                      g, KILN_ERR_ARG,
                      "%s: loss %%%d depends on no trainable variable", fn,
                      loss->id);
    }
    free(wrt);
    free(adj);
    return out;
}
