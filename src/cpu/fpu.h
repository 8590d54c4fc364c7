/* Denormal control of the calling thread.  A leaf of cpu/. */
#ifndef KILN_CPU_FPU_H
#define KILN_CPU_FPU_H

/* kiln_fpu_enter switches flushing to zero (FTZ and DAZ) on when flush is
   set and returns the previous state to give back to kiln_fpu_leave. */
unsigned kiln_fpu_enter(int flush);
void kiln_fpu_leave(unsigned saved);

#endif
