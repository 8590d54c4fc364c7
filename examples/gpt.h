/* A GPT-style decoder built from Kiln ops: token and position embeddings,
 * pre-norm blocks of causal multi-head self-attention and a gelu MLP, a
 * final layer norm and a linear head (optionally tied to the token
 * embedding).  Shared by examples/char_lm.c and tests/test_char_lm.c (the
 * second checks it against PyTorch with tests/ref/make_char_lm_refs.py,
 * which builds the same network under the same variable names).
 *
 * Variables (d = width):
 *   wte [V, d], wpe [ctx, d],
 *   h<l>.ln1.w, h<l>.ln1.b [d], h<l>.qkv.W [d, 3d], h<l>.qkv.b [3d],
 *   h<l>.proj.W [d, d], h<l>.proj.b [d], h<l>.ln2.w, h<l>.ln2.b [d],
 *   h<l>.fc.W [d, 4d], h<l>.fc.b [4d], h<l>.out.W [4d, d], h<l>.out.b [d],
 *   lnf.w, lnf.b [d], head.W [d, V] (absent when tied).
 * Weights are initialised normal(0, 0.02), biases 0, norm weights 1.
 */
#ifndef KILN_EXAMPLES_GPT_H
#define KILN_EXAMPLES_GPT_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kiln.h"

typedef struct gpt_config {
    int vocab, ctx, layers, heads, width;
    int tie; /* the head is wte^T */
} gpt_config;

static kiln_node *gpt_var(kiln_graph *g, const char *name, int layer,
                          kiln_shape s, kiln_init init)
{
    char full[48];
    if (layer >= 0)
        snprintf(full, sizeof full, "h%d.%s", layer, name);
    else
        snprintf(full, sizeof full, "%s", name);
    return kiln_variable(g, full, KILN_F32, s, init);
}

/* x [rows, in] W + b, W [in, out] named <name>.W and b <name>.b. */
static kiln_node *gpt_linear(kiln_graph *g, kiln_node *x, const char *name,
                             int layer, int64_t in, int64_t out)
{
    char w[32], b[32];
    snprintf(w, sizeof w, "%s.W", name);
    snprintf(b, sizeof b, "%s.b", name);
    return kiln_affine(
        g, x,
        gpt_var(g, w, layer, KILN_SHAPE(in, out), kiln_init_normal(0, 0.02)),
        gpt_var(g, b, layer, KILN_SHAPE(out), kiln_init_zeros()));
}

static kiln_node *gpt_norm(kiln_graph *g, kiln_node *x, const char *name,
                           int layer, int64_t d)
{
    char w[32], b[32];
    snprintf(w, sizeof w, "%s.w", name);
    snprintf(b, sizeof b, "%s.b", name);
    return kiln_layer_norm(
        g, x, KILN_SHAPE(d),
        gpt_var(g, w, layer, KILN_SHAPE(d), kiln_init_ones()),
        gpt_var(g, b, layer, KILN_SHAPE(d), kiln_init_zeros()), 1e-5f);
}

/* softmax(q k^T / sqrt(D) + causal) v for q [B, H, Tq, D] and k, v [B, H,
   Tk, D]; query i sees keys 0 .. i + Tk - Tq (the last Tq positions of a
   sequence of Tk). */
static kiln_node *gpt_attend(kiln_graph *g, kiln_node *q, kiln_node *k,
                             kiln_node *v)
{
    kiln_shape qs = kiln_node_shape(q), ks = kiln_node_shape(k);
    int64_t tq = qs.d[2], tk = ks.d[2], d = qs.d[3];
    kiln_node *s = kiln_scale(g, kiln_matmul(g, q, k, 0, 1),
                              (float)(1.0 / sqrt((double)d)));
    if (tq > 1) { /* a single new query sees every key: no mask */
        /* out of memory: m NULL makes a constant without data, which
           poisons the graph */
        float *m = malloc((size_t)(tq * tk) * sizeof *m);
        for (int64_t i = 0; m && i < tq; i++)
            for (int64_t j = 0; j < tk; j++)
                m[i * tk + j] = j > i + tk - tq ? -1e9f : 0.0f;
        s = kiln_add(g, s, kiln_constant(g, KILN_F32, KILN_SHAPE(tq, tk), m));
        free(m);
    }
    return kiln_matmul(g, kiln_softmax(g, s, -1), v, 0, 0);
}

/* [B, T, H * D] -> [B, H, T, D] */
static kiln_node *gpt_heads(kiln_graph *g, kiln_node *x, int64_t b, int64_t t,
                            int h, int64_t d)
{
    static const int perm[4] = {0, 2, 1, 3};
    return kiln_permute(g, kiln_reshape(g, x, KILN_SHAPE(b, t, h, d)), perm);
}

/* A key/value cache for generation: per layer, the keys and values of
   every position so far ([B, H, T, D] nodes of the caller's graph), or
   NULL while training. */
typedef struct gpt_cache {
    kiln_node *k[16], *v[16];   /* in: the past (NULL: none) */
    kiln_node *nk[16], *nv[16]; /* out: past and new positions */
} gpt_cache;

/* One block on x [B * T, d]: x + attn(ln1 x), then + mlp(ln2 x). */
static kiln_node *gpt_block(kiln_graph *g, const gpt_config *c, kiln_node *x,
                            int l, int64_t b, int64_t t, gpt_cache *cache)
{
    int64_t d = c->width, hd = d / c->heads;
    kiln_node *qkv =
        gpt_linear(g, gpt_norm(g, x, "ln1", l, d), "qkv", l, d, 3 * d);
    kiln_node *part[3];
    for (int i = 0; i < 3; i++) {
        int64_t lo[2] = {0, i * d}, hi[2] = {b * t, (i + 1) * d};
        part[i] = gpt_heads(g, kiln_slice(g, qkv, lo, hi), b, t, c->heads, hd);
    }
    kiln_node *k = part[1], *v = part[2];
    if (cache) { /* attend to the cached positions too */
        if (cache->k[l]) {
            kiln_node *ks[2] = {cache->k[l], k}, *vs[2] = {cache->v[l], v};
            k = kiln_concat(g, ks, 2, 2);
            v = kiln_concat(g, vs, 2, 2);
        }
        cache->nk[l] = k;
        cache->nv[l] = v;
    }
    static const int back[4] = {0, 2, 1, 3};
    kiln_node *a = kiln_permute(g, gpt_attend(g, part[0], k, v), back);
    a = gpt_linear(g, kiln_reshape(g, a, KILN_SHAPE(b * t, d)), "proj", l, d,
                   d);
    x = kiln_add(g, x, a);
    kiln_node *m =
        gpt_linear(g, gpt_norm(g, x, "ln2", l, d), "fc", l, d, 4 * d);
    m = gpt_linear(g, kiln_gelu(g, m), "out", l, 4 * d, d);
    return kiln_add(g, x, m);
}

/* Logits [B * T, V] for ids [B, T] (i32) at positions pos0 .. pos0 + T - 1
   (pos0 > 0 only with a cache holding the earlier positions). */
static kiln_node *gpt_logits(kiln_graph *g, const gpt_config *c, kiln_node *ids,
                             int64_t pos0, gpt_cache *cache)
{
    kiln_shape s = kiln_node_shape(ids);
    int64_t b = s.d[0], t = s.d[1], d = c->width;
    kiln_node *wte = gpt_var(g, "wte", -1, KILN_SHAPE(c->vocab, d),
                             kiln_init_normal(0, 0.02));
    kiln_node *wpe =
        gpt_var(g, "wpe", -1, KILN_SHAPE(c->ctx, d), kiln_init_normal(0, 0.02));
    int64_t lo[2] = {pos0, 0}, hi[2] = {pos0 + t, d};
    kiln_node *pos = kiln_slice(g, wpe, lo, hi);
    kiln_node *x = kiln_add(g, kiln_embedding(g, wte, ids), pos); /* [B,T,d] */
    x = kiln_reshape(g, x, KILN_SHAPE(b * t, d));
    for (int l = 0; l < c->layers; l++)
        x = gpt_block(g, c, x, l, b, t, cache);
    x = gpt_norm(g, x, "lnf", -1, d);
    if (c->tie)
        return kiln_matmul(g, x, wte, 0, 1);
    return kiln_matmul(g, x,
                       gpt_var(g, "head.W", -1, KILN_SHAPE(d, c->vocab),
                               kiln_init_normal(0, 0.02)),
                       0, 0);
}

#endif
