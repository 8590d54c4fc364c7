#include <math.h>

#include "kiln.h"

/* PCG32 (O'Neill): small state, good statistics, identical on every
   platform, which makes initialisation reproducible from a seed. */
void kiln_rng_seed(kiln_rng *r, uint64_t seed)
{
    if (!r)
        return;
    r->state = 0;
    r->inc = (seed << 1u) | 1u;
    kiln_rng_u32(r);
    r->state += 0x853c49e6748fea9bULL ^ seed;
    kiln_rng_u32(r);
}

uint32_t kiln_rng_u32(kiln_rng *r)
{
    if (!r)
        return 0;
    uint64_t old = r->state;
    r->state = old * 6364136223846793005ULL + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

double kiln_rng_uniform(kiln_rng *r)
{
    if (!r)
        return 0.0;
    uint64_t hi = kiln_rng_u32(r), lo = kiln_rng_u32(r);
    return (double)((hi << 21) ^ lo) / 9007199254740992.0; /* 2^53 */
}

double kiln_rng_normal(kiln_rng *r)
{
    if (!r)
        return 0.0;
    double u1 = kiln_rng_uniform(r), u2 = kiln_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
