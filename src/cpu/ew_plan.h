/* The broadcast plan shared by the fast elementwise and movement kernels:
   an elementwise op's operands seen through broadcasting, with adjacent
   axes merged and size-1 axes dropped: the last axis (inner) is contiguous
   (stride 1) or constant (stride 0) in every operand, and rows walk the
   remaining axes. */
#ifndef KILN_CPU_EW_PLAN_H
#define KILN_CPU_EW_PLAN_H

#include "graph/graph.h"

typedef struct kiln_ew_plan {
    int nd, nin;
    int64_t dim[KILN_MAX_DIMS];
    int64_t st[3][KILN_MAX_DIMS];
    int64_t inner, rows;
} kiln_ew_plan;

void kiln_ew_plan_init(kiln_ew_plan *p, const kiln_node *n);
/* Element offsets of row r in each operand. */
void kiln_ew_row_offsets(const kiln_ew_plan *p, int64_t r, int64_t *off);

#endif
