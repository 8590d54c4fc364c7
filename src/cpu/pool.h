/* The kernels' thread pool (pool.c). */
#ifndef KILN_CPU_POOL_H
#define KILN_CPU_POOL_H

#include <stdint.h>

/* Below this many elements of work a kernel runs on the calling thread:
   waking the pool costs more than it saves. */
#define KILN_PAR_MIN 65536

/* Calls fn(ctx, lo, hi) over a split of [0, n) into T contiguous shares,
   T the running kernel's thread count (at most n), when n * cost_per_item
   >= KILN_PAR_MIN; else once over [0, n).  The shares depend on T alone:
   they run on the pool, or one after another on the calling thread when
   the pool is busy with another session's kernel or fn itself calls
   kiln_par_for, so results never depend on timing.  Pool threads run
   under the caller's execution context (threads, denormals). */
typedef void (*kiln_range_fn)(void *ctx, int64_t lo, int64_t hi);
void kiln_par_for(int64_t n, int64_t cost_per_item, kiln_range_fn fn,
                  void *ctx);

#endif
