/* Denormal flushing (FTZ and DAZ in MXCSR on x86; nothing elsewhere). */
#include "cpu/fpu.h"

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#define KILN_HAVE_MXCSR 1
#endif

#ifdef KILN_HAVE_MXCSR
enum { MXCSR_FTZ_DAZ = 0x8040 };

/* The mode an enclosing kiln_fpu_enter of this thread set (-1: none), so
   that the kernels of a run, each entering the mode its run already set,
   skip reading and writing MXCSR (slow: about 12% of a chain of scalar
   ops when done around every kernel). */
static _Thread_local int entered = -1;

unsigned kiln_fpu_enter(int flush)
{
    if (entered == (flush != 0))
        return KILN_FPU_NESTED;
    unsigned saved = _mm_getcsr();
    if (flush && (saved & MXCSR_FTZ_DAZ) != MXCSR_FTZ_DAZ)
        _mm_setcsr(saved | MXCSR_FTZ_DAZ);
    entered = flush != 0;
    return saved;
}

void kiln_fpu_leave(unsigned saved)
{
    if (saved == KILN_FPU_NESTED)
        return;
    if (_mm_getcsr() != saved)
        _mm_setcsr(saved);
    entered = -1;
}
#else
unsigned kiln_fpu_enter(int flush)
{
    (void)flush;
    return 0;
}

void kiln_fpu_leave(unsigned saved)
{
    (void)saved;
}
#endif
