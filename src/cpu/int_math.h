/* Kernels of the i32 arithmetic ops (cpu/int_math.c) and the check of
   their divisors. */
#ifndef KILN_CPU_INT_MATH_H
#define KILN_CPU_INT_MATH_H

#include "graph/graph.h"

/* KILN_OK unless n is int_floor_div or int_mod and a divisor is 0: then
   KILN_ERR_ARG and "int_mod %3: division by zero at [1,0] of the divisor
   [2,3]" in msg (PyTorch's ZeroDivisionError). */
kiln_status kiln_cpu_check_int_div(const kiln_node *n, void *const *in,
                                   char *msg, size_t len);

void kiln_ref_int_map(const kiln_node *n, void *out, void *const *in);

#endif
