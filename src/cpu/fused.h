/* The FUSED kernels: run a fused program (graph/fused_program.h) over
   blocks of the output.  In the reference kernel every op computes exactly
   the expression of its reference kernel in cpu/ref.c, so a fused node
   gives bit-identical results to the ops it replaced; the fast kernel
   (kiln_fast_FUSED, declared in cpu/fast.h, threaded over blocks) uses the
   fast kernels' exp, log, tanh and sigmoid (cpu/vmath.h). */
#ifndef KILN_CPU_FUSED_H
#define KILN_CPU_FUSED_H

#include "graph/fused_program.h"

/* Reference kernel of FUSED: runs n's program (n->at.data). */
void kiln_fused_ref(const kiln_node *n, void *out, void *const *in);

#endif
