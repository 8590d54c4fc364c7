/* Gradient rules of issue 12's block (grad/index_rules.c,
   grad/scan_rules.c), listed in the rule table of grad/rules.c. */
#ifndef KILN_GRAD_INDEX_RULES_H
#define KILN_GRAD_INDEX_RULES_H

#include "grad/grad.h"

#define KILN_INDEX_RULE(OP)                                                    \
    void grad_##OP(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need, \
                   kiln_node **gin);
KILN_INDEX_RULE(INDEX_SELECT)
KILN_INDEX_RULE(INDEX_ADD)
KILN_INDEX_RULE(GATHER)
KILN_INDEX_RULE(SCATTER_ADD)
KILN_INDEX_RULE(CUMSUM)
KILN_INDEX_RULE(PROD)
#undef KILN_INDEX_RULE

#endif
