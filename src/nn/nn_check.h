/* Argument checks the losses of src/nn share (nn/composite.c). */
#ifndef KILN_NN_CHECK_H
#define KILN_NN_CHECK_H

#include "graph/graph.h"

/* 1 when scores are f32 [N, C] with 0 < C <= INT_MAX and labels i32 [N];
   else records an error naming fn (what names the scores) and returns 0. */
int kiln_nn_check_scores_labels(kiln_graph *g, const char *fn,
                                kiln_node *scores, kiln_node *labels,
                                const char *what);

#endif
