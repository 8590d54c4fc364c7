/* Fused elementwise programs: the fusion pass (passes/fuse.c) turns a chain
   or tree of elementwise ops into one FUSED node whose attribute data is a
   kiln_fused_program; the kernel here runs it in one pass over the output,
   a block of elements at a time, so intermediate values stay in registers
   (small stack arrays) instead of memory.

   Program: an SSA list.  Instruction i defines value i:
     KILN_FUSED_LOAD  the node's input arg[0], broadcast to the output shape
     KILN_FUSED_IMM   the constant imm in every element
     any unary, binary or select op of the op table, on values arg[0..2]
   (each arg < i).  The last instruction is the result.  Every op computes
   exactly the expression of its reference kernel in cpu/ref.c, so a fused
   node gives bit-identical results to the ops it replaced.

   Aliasing: the output may be the same buffer as an input of the output's
   shape (in-place reuse by the memory planner); every block reads its
   inputs before writing the same elements of the output. */
#ifndef KILN_CPU_FUSED_H
#define KILN_CPU_FUSED_H

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
    kiln_fused_instr ins[KILN_FUSED_MAX_INSTRS];
} kiln_fused_program;

/* 1 when op can be an instruction of a program (f32 unary, binary, select). */
int kiln_fused_op_ok(kiln_op op);
/* Reference kernel of FUSED: runs n's program (n->at.data). */
void kiln_fused_ref(const kiln_node *n, void *out, void *const *in);
/* Writes the program of a FUSED node readably into buf, inputs named by
   their node ids: "add(%1, %2) -> relu(_) -> mul(_, 0.5)", "_" standing
   for the previous result.  Returns buf. */
char *kiln_fused_format(const kiln_node *n, char *buf, size_t len);

#endif
