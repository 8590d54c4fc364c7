/* Gradient rules of the convolution ops (grad/conv_rules.c), listed in the
   rule table of grad/rules.c. */
#ifndef KILN_GRAD_CONV_RULES_H
#define KILN_GRAD_CONV_RULES_H

#include "grad/grad.h"

void grad_CONV(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
               kiln_node **gin);
void grad_CONV_TRANSPOSE(kiln_graph *g, kiln_node *n, kiln_node *adj,
                         unsigned need, kiln_node **gin);
void grad_CONV_WGRAD(kiln_graph *g, kiln_node *n, kiln_node *adj, unsigned need,
                     kiln_node **gin);

#endif
