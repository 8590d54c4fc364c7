/* Gradient rules of the attention group (grad/attention_rules.c), named as
   the rule table in grad/rules.c looks them up. */
#ifndef KILN_GRAD_ATTENTION_RULES_H
#define KILN_GRAD_ATTENTION_RULES_H

#include "grad/grad.h"

#define KILN_ATTENTION_RULE_DECLARE(OP)                                        \
    void kiln_grad_rule_##OP(kiln_graph *g, kiln_node *n, kiln_node *adj,      \
                             unsigned need, kiln_node **gin);
KILN_ATTENTION_RULE_DECLARE(ATTENTION)
KILN_ATTENTION_RULE_DECLARE(RMS_NORM)
KILN_ATTENTION_RULE_DECLARE(RMS_NORM_GRAD)
#undef KILN_ATTENTION_RULE_DECLARE

#define grad_ATTENTION kiln_grad_rule_ATTENTION
#define grad_RMS_NORM kiln_grad_rule_RMS_NORM
#define grad_RMS_NORM_GRAD kiln_grad_rule_RMS_NORM_GRAD

#endif
