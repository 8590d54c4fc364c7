/* The optimiser object and the state naming shared by its lifecycle
   (optim.c) and the builder of its update nodes (optim_update.c). */
#ifndef KILN_TRAIN_OPTIM_H
#define KILN_TRAIN_OPTIM_H

#include <stdio.h>

#include "kiln.h"

#define OPTIM_NAME_MAX 64
#define STATE_NAME_MAX 512
#define KILN_PI 3.14159265358979323846

struct kiln_optimizer {
    kiln_session *s;      /* NULL once the session was freed */
    kiln_optim_options o; /* o.name points at name */
    char name[OPTIM_NAME_MAX];
    int custom_name; /* per-variable slots carry the name too */
};

static inline int is_adam(const kiln_optimizer *o)
{
    return o->o.kind == KILN_ADAM || o->o.kind == KILN_ADAMW;
}

static inline int accumulating(const kiln_optimizer *o)
{
    return o->o.accumulate > 1;
}

/* "<name>.<slot>" for the optimiser-wide state. */
static inline const char *global_name(const kiln_optimizer *o, const char *slot,
                                      char *buf)
{
    snprintf(buf, STATE_NAME_MAX, "%s.%s", o->name, slot);
    return buf;
}

/* "<var>.<slot>" ("<var>.<name>.<slot>" for a named optimiser); NULL when
   the name does not fit. */
static inline const char *slot_name(const kiln_optimizer *o, const char *var,
                                    const char *slot, char *buf)
{
    int n = o->custom_name
                ? snprintf(buf, STATE_NAME_MAX, "%s.%s.%s", var, o->name, slot)
                : snprintf(buf, STATE_NAME_MAX, "%s.%s", var, slot);
    return n > 0 && n < STATE_NAME_MAX ? buf : NULL;
}

/* Learning rate for a step with e steps before it, in double. */
double kiln_optim_schedule_lr(const kiln_optim_options *o, double e);

#endif
