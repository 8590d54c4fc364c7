/* Input checks that kernels rely on (check.c). */
#ifndef KILN_CPU_CHECK_H
#define KILN_CPU_CHECK_H

#include "graph/graph.h"

/* Checks the input values n's kernel relies on: the labels of softmax
   cross-entropy (and its gradient) and of a strict one_hot lie in [0, C).
   Inputs whose buffer is NULL (not computed yet) are not checked.  KILN_OK,
   or KILN_ERR_ARG with a message naming the node, the bad value and where
   it is written to msg (when msg is not NULL). */
kiln_status kiln_cpu_check_inputs(const kiln_node *n, void *const *in,
                                  char *msg, size_t len);

#endif
