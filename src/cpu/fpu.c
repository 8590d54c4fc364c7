/* Denormal flushing (FTZ and DAZ in MXCSR on x86; nothing elsewhere). */
#include "cpu/fpu.h"

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#define KILN_HAVE_MXCSR 1
#endif

#ifdef KILN_HAVE_MXCSR
enum { MXCSR_FTZ_DAZ = 0x8040 };

unsigned kiln_fpu_enter(int flush)
{
    unsigned saved = _mm_getcsr();
    if (flush && (saved & MXCSR_FTZ_DAZ) != MXCSR_FTZ_DAZ)
        _mm_setcsr(saved | MXCSR_FTZ_DAZ);
    return saved;
}

void kiln_fpu_leave(unsigned saved)
{
    if (_mm_getcsr() != saved)
        _mm_setcsr(saved);
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
