/* Gradient rules of the normalisation and dropout ops (norm_rules.c),
   entries of the rule table in rules.c. */
#ifndef KILN_GRAD_NORM_RULES_H
#define KILN_GRAD_NORM_RULES_H

#include "grad/grad.h"

#define KILN_NORM_RULE(OP)                                                     \
    void kiln_grad_##OP(kiln_graph *g, kiln_node *n, kiln_node *adj,           \
                        unsigned need, kiln_node **gin);
KILN_NORM_RULE(NORM_STATS)
KILN_NORM_RULE(NORM)
KILN_NORM_RULE(NORM_GRAD)
KILN_NORM_RULE(NORM_PARAM_GRAD)
KILN_NORM_RULE(DROPOUT)
#undef KILN_NORM_RULE

#define grad_NORM_STATS kiln_grad_NORM_STATS
#define grad_NORM kiln_grad_NORM
#define grad_NORM_GRAD kiln_grad_NORM_GRAD
#define grad_NORM_PARAM_GRAD kiln_grad_NORM_PARAM_GRAD
#define grad_DROPOUT kiln_grad_DROPOUT

#endif
