/* A GPT-style decoder built from Kiln ops: token and position embeddings,
 * pre-norm blocks of causal multi-head self-attention and a gelu MLP, a
 * final layer norm and a linear head (optionally tied to the token
 * embedding), and generation with a key/value cache.  Shared by
 * tools/char_lm_train.c (examples/char_lm.c and `kiln train --model
 * transformer`) and the tests: test_char_lm.c checks training against PyTorch
 * with tests/ref/make_char_lm_refs.py, which builds the same network under the
 * same variable names; test_gpt_cache.c checks cached generation against
 * full re-runs.
 *
 * Variables (d = width):
 *   wte [V, d], wpe [ctx, d],
 *   h<l>.ln1.w, h<l>.ln1.b [d], h<l>.qkv.W [d, 3d], h<l>.qkv.b [3d],
 *   h<l>.proj.W [d, d], h<l>.proj.b [d], h<l>.ln2.w, h<l>.ln2.b [d],
 *   h<l>.fc.W [d, 4d], h<l>.fc.b [4d], h<l>.out.W [4d, d], h<l>.out.b [d],
 *   lnf.w, lnf.b [d], head.W [d, V] (absent when tied).
 * Weights are initialised normal(0, 0.02), biases 0, norm weights 1.
 */
#ifndef KILN_TOOLS_GPT_H
#define KILN_TOOLS_GPT_H

#include "kiln.h"

typedef struct gpt_config {
    int vocab, ctx, layers, heads, width;
    int tie; /* the head is wte^T */
} gpt_config;

#define GPT_MAX_LAYERS 16

/* A key/value cache for generation: per layer, the keys and values of the
   earlier positions as inputs [B, H, T0, D] (D = width / heads), and those
   of the new positions as outputs [B, T, width] (heads side by side, as
   the qkv projection lays them out), for the caller to add to its store. */
typedef struct gpt_cache {
    kiln_node *k[GPT_MAX_LAYERS], *v[GPT_MAX_LAYERS];   /* NULL: no past */
    kiln_node *nk[GPT_MAX_LAYERS], *nv[GPT_MAX_LAYERS]; /* set by gpt_block */
    kiln_node *pos;  /* i32 [B, T]: the new tokens' positions; NULL: pos0 on */
    kiln_node *mask; /* f32 added to the scores of the cached keys,
                        broadcast to [B, H, T, T0]; NULL: none */
} gpt_cache;

/* Logits [B * T, V] for ids [B, T] (i32) at positions pos0 .. pos0 + T - 1
   (pos0 > 0 only with a cache holding the earlier positions); cache NULL
   when training.  Builds the variables above in g. */
kiln_node *gpt_logits(kiln_graph *g, const gpt_config *c, kiln_node *ids,
                      int64_t pos0, gpt_cache *cache);

/* Generation at batch 1 with a key/value cache: the keys and values of
   every position fed so far stay on the host, [layers, heads, ctx, D] each,
   so feeding one more token runs the network on that token alone and
   attends to the stored positions: O(T) per token instead of a re-run of
   the whole O(T^2) prefix.  One token runs a function compiled once (it
   reads all ctx stored rows, those not yet fed masked out); several build
   a graph for the dynamic path. */
typedef struct gpt_kv_step gpt_kv_step;
typedef struct gpt_kv {
    gpt_config c;
    kiln_session *s;      /* whose variables run */
    float *keys, *values; /* [layers, heads, ctx, width / heads] */
    int len;              /* positions held, at most c.ctx */
    int top_k; /* > 0: gpt_kv_feed gives only the top_k largest logits
                  (kiln_topk in the graph); 0 (gpt_kv_init's) all */
    kiln_graph *g;
    gpt_kv_step *step;
} gpt_kv;

/* Generation with s's variables (s must outlive kv).  0, or -1 when out of
   memory (kv left empty) or layers > GPT_MAX_LAYERS. */
int gpt_kv_init(gpt_kv *kv, kiln_session *s, const gpt_config *c);
void gpt_kv_free(gpt_kv *kv);
/* Runs the n tokens (1 <= n <= ctx - len) at positions len .. len + n - 1
   and stores their keys and values.  Writes the logits of the last one to
   logits: all vocab of them, or with top_k the top_k largest, largest
   first; top_ids (NULL: not wanted) receives their ids (0 .. vocab - 1
   without top_k).  KILN_ERR_ARG when the tokens do not fit (reset len to 0
   and feed the last tokens again to slide the window); other errors with
   the session's or the graph's message (gpt_kv_error). */
kiln_status gpt_kv_feed(gpt_kv *kv, const int32_t *tokens, int n, float *logits,
                        int32_t *top_ids);
/* The message of gpt_kv_feed's last error. */
const char *gpt_kv_error(const gpt_kv *kv);

#endif
