/* The pooling group's gradient rules (grad/pool_rules.c), named as the
   rule table in grad/rules.c looks them up. */
#ifndef KILN_GRAD_POOL_RULES_H
#define KILN_GRAD_POOL_RULES_H

#include "grad/grad.h"

#define KILN_POOL_RULES(X)                                                     \
    X(MAX_POOL2D)                                                              \
    X(MAX_POOL2D_GRAD) X(MAX_POOL2D_GATHER) X(RESAMPLE2D) X(RESAMPLE2D_GRAD)

#define KILN_POOL_RULE_DECLARE(OP)                                             \
    void kiln_grad_rule_##OP(kiln_graph *g, kiln_node *n, kiln_node *adj,      \
                             unsigned need, kiln_node **gin);
KILN_POOL_RULES(KILN_POOL_RULE_DECLARE)
#undef KILN_POOL_RULE_DECLARE

#define grad_MAX_POOL2D kiln_grad_rule_MAX_POOL2D
#define grad_MAX_POOL2D_GRAD kiln_grad_rule_MAX_POOL2D_GRAD
#define grad_MAX_POOL2D_GATHER kiln_grad_rule_MAX_POOL2D_GATHER
#define grad_RESAMPLE2D kiln_grad_rule_RESAMPLE2D
#define grad_RESAMPLE2D_GRAD kiln_grad_rule_RESAMPLE2D_GRAD

#endif
