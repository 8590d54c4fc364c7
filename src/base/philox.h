/* Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
   as easy as 1, 2, 3", SC 2011): a counter-based generator.  The 128 bits
   for a counter under a key are a pure function of the two, so any element
   of a random tensor can be drawn alone, by any thread, in any order: the
   bits of random ops depend on (seed, step, stream, index) only. */
#ifndef KILN_BASE_PHILOX_H
#define KILN_BASE_PHILOX_H

#include <stdint.h>

typedef struct kiln_philox_out {
    uint32_t v[4];
} kiln_philox_out;

/* The ten rounds on counter c under key (k0, k1). */
static inline kiln_philox_out kiln_philox4x32(const uint32_t c[4], uint32_t k0,
                                              uint32_t k1)
{
    uint32_t x0 = c[0], x1 = c[1], x2 = c[2], x3 = c[3];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * x0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * x2;
        uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
        uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
        x1 = (uint32_t)p1;
        x3 = (uint32_t)p0;
        x0 = y0;
        x2 = y2;
        k0 += 0x9E3779B9u; /* the golden ratio and sqrt(3) - 1: Weyl bumps */
        k1 += 0xBB67AE85u;
    }
    return (kiln_philox_out){{x0, x1, x2, x3}};
}

/* The block holding the 32 random bits of element i of stream at (seed,
   step): word i % 4 of the block for counter (i / 4, stream, step) under
   the seed's two words. */
static inline kiln_philox_out kiln_philox_block(uint64_t seed, uint64_t step,
                                                uint32_t stream, uint64_t i)
{
    uint32_t c[4] = {(uint32_t)(i >> 2), stream ^ (uint32_t)(i >> 34) << 24,
                     (uint32_t)step, (uint32_t)(step >> 32)};
    return kiln_philox4x32(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

#endif
