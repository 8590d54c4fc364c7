/* Fused elementwise programs: the fusion pass (passes/fuse.c) turns a chain
   or tree of elementwise ops into one FUSED node whose attribute data is a
   kiln_fused_program; the FUSED kernels (cpu/fused.c) run it in one pass
   over the output, a block of elements at a time, so intermediate values
   stay in registers (small stack arrays) instead of memory.  The program is
   IR, defined here so that passes and printing need no kernel.

   Program: an SSA list.  Instruction i defines value i:
     KILN_FUSED_LOAD  the node's input arg[0], broadcast to the output shape
     KILN_FUSED_IMM   the constant imm in every element
     any unary, binary or select op of the op table, on values arg[0..2]
   (each arg < i).  The last instruction is the result.

   Reducing programs: when reduce is KILN_OP_SUM or KILN_OP_RMAX, the
   program runs over domain (its LOADs broadcast to domain, not to the
   node's shape) and its result is reduced over axes as that op would
   (keepdims as the op's attribute, sums accumulated in double), so a
   reduction absorbs its elementwise producers without an intermediate
   buffer.  The reduced axes, size-1 axes aside, form one run.

   Aliasing: the output of an elementwise program may be the same buffer as
   an input of the output's shape (in-place reuse by the memory planner);
   every block reads its inputs before writing the same elements of the
   output.  A reducing program's output never aliases an input. */
#ifndef KILN_GRAPH_FUSED_PROGRAM_H
#define KILN_GRAPH_FUSED_PROGRAM_H

#include "graph/graph.h"

enum {
    KILN_FUSED_MAX_INSTRS = 48, /* values per program */
    KILN_FUSED_MAX_INPUTS = 16, /* LOADs per program */
    KILN_FUSED_LOAD = -1,
    KILN_FUSED_IMM = -2,
};

typedef struct kiln_fused_instr {
    int op;     /* KILN_FUSED_LOAD, KILN_FUSED_IMM or a kiln_op */
    int arg[3]; /* value indices (LOAD: input index) */
    float imm;  /* KILN_FUSED_IMM */
} kiln_fused_instr;

typedef struct kiln_fused_program {
    int n;
    int reduce;        /* 0, or KILN_OP_SUM / KILN_OP_RMAX of the result */
    unsigned axes;     /* reducing: axes of domain reduced */
    int keepdims;      /* reducing: reduced axes kept with size 1 */
    kiln_shape domain; /* reducing: the shape the program runs over */
    kiln_fused_instr ins[KILN_FUSED_MAX_INSTRS];
} kiln_fused_program;

/* 1 when op can be an instruction of a program (f32 unary, binary, select). */
int kiln_fused_op_ok(kiln_op op);
/* 1 when a program can reduce the result over axes of domain: the reduced
   axes of size > 1 are adjacent. */
int kiln_fused_reduce_ok(kiln_shape domain, unsigned axes);
/* 1 when n is a FUSED node whose program reduces. */
int kiln_fused_is_reduction(const kiln_node *n);
/* The shape n's program runs over: its domain when reducing, else n's
   shape. */
kiln_shape kiln_fused_domain(const kiln_node *n);
/* 1 when two programs compute the same (instructions and reduction). */
int kiln_fused_program_equal(const kiln_fused_program *a,
                             const kiln_fused_program *b);
/* Writes the program of a FUSED node readably into buf, inputs named by
   their node ids: "add(%1, %2) -> relu(_) -> mul(_, 0.5)", "_" standing
   for the previous result, and a reduction last: "mul(%1, %2) -> sum(_)
   axes=0x2".  Returns buf. */
char *kiln_fused_format(const kiln_node *n, char *buf, size_t len);

#endif
