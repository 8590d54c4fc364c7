/* Optimisers: SGD, Adagrad, Adam and AdamW with learning-rate schedules,
   gradient clipping by global norm and gradient accumulation.

   One builder adds the update to a graph as nodes: the scheduled learning
   rate and bias corrections are computed from state variables, and every
   new value (parameters and state) is written back with kiln_assign.  The
   graph form (kiln_optimizer_build_step) returns those assignments for a
   compiled training step; the run-time form (kiln_optimizer_update) adds
   them to a dynamic graph after kiln_backward and computes them at once.
   Both therefore run the same kernels on the same values and agree to the
   bit, unless the compiler's gemm_acc pass (on by default) folds a weight
   gradient's matmul into its update: then they agree to float rounding.
   All state is in the session, so checkpoints hold it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad/grad.h"
#include "runtime/runtime.h"

#define OPTIM_NAME_MAX 64
#define STATE_NAME_MAX 512
#define KILN_PI 3.14159265358979323846

struct kiln_optimizer {
    kiln_session *s;      /* NULL once the session was freed */
    kiln_optim_options o; /* o.name points at name */
    char name[OPTIM_NAME_MAX];
    int custom_name; /* per-variable slots carry the name too */
};

kiln_optim_options kiln_optim_defaults(kiln_optim_kind kind)
{
    kiln_optim_options o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.lr = 1e-3f;
    o.schedule = KILN_LR_CONSTANT;
    o.step_size = 1;
    o.gamma = 0.1f;
    o.total_steps = 1;
    switch (kind) {
    case KILN_ADAGRAD:
        o.lr = 1e-2f;
        o.eps = 1e-10f;
        break;
    case KILN_ADAMW:
        o.weight_decay = 1e-2f;
        /* fall through */
    case KILN_ADAM:
        o.beta1 = 0.9f;
        o.beta2 = 0.999f;
        o.eps = 1e-8f;
        break;
    default:
        break;
    }
    return o;
}

/* ------------------------------------------------------------ options */

static int nonneg(float v)
{
    return isfinite(v) && v >= 0.0f;
}

/* Writes why o is unusable into why; returns 0 then, 1 when it is fine. */
static int check_options(const kiln_optim_options *o, char *why, size_t n)
{
#define BAD(...) return snprintf(why, n, __VA_ARGS__), 0
    if ((unsigned)o->kind > KILN_ADAMW)
        BAD("unknown optimiser kind %d", (int)o->kind);
    if (!nonneg(o->lr))
        BAD("lr must be finite and >= 0 (got %g)", o->lr);
    if (!nonneg(o->weight_decay))
        BAD("weight_decay must be finite and >= 0 (got %g)", o->weight_decay);
    if (o->kind == KILN_SGD) {
        if (!nonneg(o->momentum))
            BAD("momentum must be finite and >= 0 (got %g)", o->momentum);
        if (o->nesterov && o->momentum <= 0.0f)
            BAD("Nesterov momentum needs momentum > 0");
    }
    if (o->kind == KILN_ADAM || o->kind == KILN_ADAMW) {
        if (!(o->beta1 >= 0.0f && o->beta1 < 1.0f))
            BAD("beta1 must be in [0, 1) (got %g)", o->beta1);
        if (!(o->beta2 >= 0.0f && o->beta2 < 1.0f))
            BAD("beta2 must be in [0, 1) (got %g)", o->beta2);
    }
    if (!nonneg(o->eps))
        BAD("eps must be finite and >= 0 (got %g)", o->eps);
    if (o->kind == KILN_ADAGRAD) {
        if (!nonneg(o->lr_decay))
            BAD("lr_decay must be finite and >= 0 (got %g)", o->lr_decay);
        if (!nonneg(o->initial_accumulator))
            BAD("initial_accumulator must be finite and >= 0 (got %g)",
                o->initial_accumulator);
    }
    switch (o->schedule) {
    case KILN_LR_CONSTANT:
        break;
    case KILN_LR_STEP:
        if (o->step_size < 1)
            BAD("the step schedule needs step_size >= 1 (got %d)",
                o->step_size);
        if (!(isfinite(o->gamma) && o->gamma > 0.0f))
            BAD("the step schedule needs gamma > 0 (got %g)", o->gamma);
        break;
    case KILN_LR_COSINE:
        if (o->total_steps < 1)
            BAD("the cosine schedule needs total_steps >= 1 (got %d)",
                o->total_steps);
        if (!nonneg(o->min_lr))
            BAD("min_lr must be finite and >= 0 (got %g)", o->min_lr);
        break;
    default:
        BAD("unknown schedule %d", (int)o->schedule);
    }
    if (o->warmup_steps < 0)
        BAD("warmup_steps must be >= 0 (got %d)", o->warmup_steps);
    if (!nonneg(o->clip_norm))
        BAD("clip_norm must be finite and >= 0 (got %g)", o->clip_norm);
    if (o->accumulate < 0)
        BAD("accumulate must be >= 0 (got %d)", o->accumulate);
    if (o->name && (!*o->name || strlen(o->name) >= OPTIM_NAME_MAX))
        BAD("name must have 1 to %d characters", OPTIM_NAME_MAX - 1);
    return 1;
#undef BAD
}

static int is_adam(const kiln_optimizer *o)
{
    return o->o.kind == KILN_ADAM || o->o.kind == KILN_ADAMW;
}

static int accumulating(const kiln_optimizer *o)
{
    return o->o.accumulate > 1;
}

/* "<name>.<slot>" for the optimiser-wide state. */
static const char *global_name(const kiln_optimizer *o, const char *slot,
                               char *buf)
{
    snprintf(buf, STATE_NAME_MAX, "%s.%s", o->name, slot);
    return buf;
}

/* "<var>.<slot>" ("<var>.<name>.<slot>" for a named optimiser); NULL when
   the name does not fit. */
static const char *slot_name(const kiln_optimizer *o, const char *var,
                             const char *slot, char *buf)
{
    int n = o->custom_name
                ? snprintf(buf, STATE_NAME_MAX, "%s.%s.%s", var, o->name, slot)
                : snprintf(buf, STATE_NAME_MAX, "%s.%s", var, slot);
    return n > 0 && n < STATE_NAME_MAX ? buf : NULL;
}

static const char *kind_name(kiln_optim_kind kind)
{
    static const char *const names[] = {"SGD", "Adagrad", "Adam", "AdamW"};
    return names[kind];
}

static void optimizer_forget_session(void *holder)
{
    ((kiln_optimizer *)holder)->s = NULL;
}

/* Two live optimisers of one name share the step counter (and the
   accumulation state); of different kinds they would each advance it and
   mix their schedules, so the second is refused. */
static int shares_state_with_other_kind(kiln_session *s,
                                        const kiln_optim_options *opt,
                                        const char *fn)
{
    const char *name = opt->name ? opt->name : "optim";
    kiln_optimizer *q;
    int at = 0;
    while ((q = kiln_session_next_holder(s, optimizer_forget_session, &at))) {
        if (strcmp(q->name, name) != 0 || q->o.kind == opt->kind)
            continue;
        kiln_session_fail(s, KILN_ERR_ARG,
                          "%s: an %s optimiser named '%s' would share its "
                          "step state ('%s.step') with the live %s optimiser "
                          "of that name: give it another options.name",
                          fn, kind_name(opt->kind), name, name,
                          kind_name(q->o.kind));
        return 1;
    }
    return 0;
}

kiln_optimizer *kiln_optimizer_new(kiln_session *s,
                                   const kiln_optim_options *opt)
{
    const char *fn = "kiln_optimizer_new";
    char why[160], buf[STATE_NAME_MAX];
    if (!s) {
        kiln_set_last_error("%s: session is NULL", fn);
        return NULL;
    }
    if (!opt) {
        kiln_session_fail(s, KILN_ERR_ARG, "%s: options are NULL", fn);
        return NULL;
    }
    if (!check_options(opt, why, sizeof why)) {
        kiln_session_fail(s, KILN_ERR_ARG, "%s: %s", fn, why);
        return NULL;
    }
    if (shares_state_with_other_kind(s, opt, fn))
        return NULL;
    kiln_optimizer *o = calloc(1, sizeof *o);
    if (!o) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    o->s = s;
    o->o = *opt;
    o->custom_name = opt->name && strcmp(opt->name, "optim") != 0;
    snprintf(o->name, sizeof o->name, "%s", opt->name ? opt->name : "optim");
    o->o.name = o->name;
    const char *slots[4] = {"step", NULL, NULL, NULL};
    int n_slots = 1;
    if (accumulating(o))
        slots[n_slots++] = "micro";
    if (is_adam(o)) {
        slots[n_slots++] = "bias1";
        slots[n_slots++] = "bias2";
    }
    for (int i = 0; i < n_slots; i++)
        if (kiln_session_declare(s, global_name(o, slots[i], buf), KILN_F32,
                                 KILN_SCALAR, kiln_init_zeros(),
                                 0) != KILN_OK) {
            char prev[KILN_ERRMSG_MAX];
            snprintf(prev, sizeof prev, "%s", s->err);
            kiln_session_fail(s, KILN_ERR_SHAPE, "%s: state variable '%s': %s",
                              fn, buf, prev);
            free(o);
            return NULL;
        }
    if (kiln_session_attach(s, o, optimizer_forget_session, fn) != KILN_OK) {
        free(o);
        return NULL;
    }
    return o;
}

void kiln_optimizer_free(kiln_optimizer *o)
{
    if (o)
        kiln_session_detach(o->s, o);
    free(o);
}

/* ------------------------------------------------------------ schedule */

/* Learning rate for a step with e steps before it, in double. */
static double schedule_lr(const kiln_optim_options *o, double e)
{
    double w = o->warmup_steps;
    if (o->warmup_steps > 0) {
        if (e < w)
            return (double)o->lr * (e + 1.0) / w;
        e -= w;
    }
    switch (o->schedule) {
    case KILN_LR_STEP:
        return (double)o->lr * pow(o->gamma, floor(e / o->step_size));
    case KILN_LR_COSINE: {
        double t = e < o->total_steps ? e : o->total_steps;
        return o->min_lr + ((double)o->lr - o->min_lr) *
                               (1.0 + cos(KILN_PI * t / o->total_steps)) / 2.0;
    }
    default:
        return o->lr;
    }
}

static const float *state_value(const kiln_optimizer *o, const char *slot)
{
    char buf[STATE_NAME_MAX];
    if (!o->s)
        return NULL;
    kiln_var *v = kiln_session_find(o->s, global_name(o, slot, buf));
    return v && v->dtype == KILN_F32 ? v->data : NULL;
}

int64_t kiln_optimizer_step_count(const kiln_optimizer *o)
{
    if (!o || !o->s)
        return -1;
    const float *t = state_value(o, "step");
    return t ? (int64_t)*t : 0;
}

float kiln_optimizer_lr(const kiln_optimizer *o)
{
    if (!o || !o->s)
        return 0.0f;
    return (float)schedule_lr(&o->o, (double)kiln_optimizer_step_count(o));
}

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
static kiln_node *step_one(builder *b, const step_factors *f, kiln_node *p,
                           kiln_node *gr)
{
    kiln_optimizer *o = b->o;
    const kiln_optim_options *op = &o->o;
    kiln_graph *g = b->g;
    kiln_node *np, *lr = f->lr, *clr = f->clr, *step_size = f->step_size,
                   *bc2_sqrt = f->bc2_sqrt;
    const char *vn = p->name;
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

/* Adds the update of vars (their gradients in grads, overwritten) and
   returns the doall of every assignment, or the poison node. */
static kiln_node *build_update(kiln_optimizer *o, kiln_graph *g,
                               kiln_node **vars, kiln_node **grads, int n)
{
    const kiln_optim_options *op = &o->o;
    char buf[STATE_NAME_MAX];
    builder bb = {o, g, NULL, NULL, 0, 4 * n + 8};
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

    for (int i = 0; i < n && g->status == KILN_OK; i++) {
        kiln_node *p = vars[i], *gr = grads[i];
        if (op->weight_decay != 0.0f && op->kind != KILN_ADAMW)
            gr = kiln_add(g, gr, kiln_mul(g, p, num(b, op->weight_decay)));
        update(b, p, step_one(b, &f, p, gr));
    }
    if (g->status != KILN_OK)
        return &g->poison;
    return kiln_doall(g, b->assigns, b->n_assigns);
}

/* ------------------------------------------------------------ the two forms */

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
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG, "%s: graph is NULL", fn);
    if (g->status != KILN_OK)
        return kiln_session_fail(s, g->status, "%s: the graph failed: %s", fn,
                                 g->err);
    kiln_status st = kiln_dynamic_gradients(s, g, fn);
    if (st != KILN_OK)
        return st;
    int top = g->backward_loss->id, n = 0;
    kiln_node **vars = malloc((size_t)(2 * g->n_vars + 1) * sizeof *vars);
    if (!vars)
        return kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory", fn);
    kiln_node **grads = vars + g->n_vars;
    for (int i = 0; i < g->n_vars; i++) {
        kiln_node *v = g->vars[i];
        if (v->at.trainable && v->id <= top && v->grad && v->grad->value) {
            vars[n] = v;
            grads[n++] = v->grad;
        }
    }
    if (n == 0) {
        st = kiln_session_fail(s, KILN_ERR_ARG,
                               "%s: the loss depends on no trainable variable",
                               fn);
    } else {
        build_update(o, g, vars, grads, n);
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
        out = n ? build_update(o, g, vars, grads, n)
                : kiln_graph_fail(
                      g, KILN_ERR_ARG,
                      "%s: loss %%%d depends on no trainable variable", fn,
                      loss->id);
    }
    free(wrt);
    free(adj);
    return out;
}
