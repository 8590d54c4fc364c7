/* Key tiles the fast attention forward may skip under an additive mask
   (cpu/attention_skip.c). */
#ifndef KILN_CPU_ATTENTION_SKIP_H
#define KILN_CPU_ATTENTION_SKIP_H

#include "graph/graph.h"

/* Whether n (an attention node) has a mask worth planning skips for: the
   forward op, not causal, with a mask that varies along the keys. */
int kiln_attn_skip_applies(const kiln_node *n);
/* Bytes of memory kiln_attn_skip_plan needs with qtiles query tiles per
   head (0 when it does not apply). */
size_t kiln_attn_skip_bytes(const kiln_node *n, int64_t qtiles);
/* The key end of every (batch, head, query tile of br rows) item of n run
   on in, in mem (kiln_attn_skip_bytes of it): keys from there on add
   exactly nothing to any row of the tile.  NULL when it does not apply. */
int64_t *kiln_attn_skip_plan(const kiln_node *n, void *const *in, int64_t br,
                             int64_t qtiles, void *mem);

#endif
