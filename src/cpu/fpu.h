/* Denormal control of the calling thread.  A leaf of cpu/. */
#ifndef KILN_CPU_FPU_H
#define KILN_CPU_FPU_H

/* kiln_fpu_enter switches flushing to zero (FTZ and DAZ) on when flush is
   set and returns the previous state to give back to kiln_fpu_leave.
   Inside an enter of the same mode on the same thread (a run around its
   kernels) it changes nothing and returns KILN_FPU_NESTED. */
#define KILN_FPU_NESTED 0xffffffffu /* never a real MXCSR value */
unsigned kiln_fpu_enter(int flush);
void kiln_fpu_leave(unsigned saved);

#endif
