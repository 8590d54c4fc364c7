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

#include "train/optim.h"

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

double kiln_optim_schedule_lr(const kiln_optim_options *o, double e)
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
    return (float)kiln_optim_schedule_lr(&o->o,
                                         (double)kiln_optimizer_step_count(o));
}
