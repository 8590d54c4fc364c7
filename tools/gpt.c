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

/* [B, T, H * D] (or [B * T, H * D]) -> [B, H, T, D] */
static kiln_node *gpt_heads(kiln_graph *g, kiln_node *x, int64_t b, int64_t t,
                            int h, int64_t d)
{
    static const int perm[4] = {0, 2, 1, 3};
    return kiln_permute(g, kiln_reshape(g, x, KILN_SHAPE(b, t, h, d)), perm);
}

/* The keys or values of the new positions, after the cached ones. */
static kiln_node *gpt_cached(kiln_graph *g, kiln_node *past, kiln_node *now,
                             kiln_node **out)
{
    *out = now;
    if (!past)
        return now;
    kiln_node *both[2] = {past, now};
    return kiln_concat(g, both, 2, 1);
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
    kiln_node *k = part[1], *v = part[2];
    int64_t tk = t;
    if (cache) { /* attend to the cached positions too */
        k = kiln_reshape(g, k, KILN_SHAPE(b, t, d));
        v = kiln_reshape(g, v, KILN_SHAPE(b, t, d));
        k = gpt_cached(g, cache->k[l], k, &cache->nk[l]);
        v = gpt_cached(g, cache->v[l], v, &cache->nv[l]);
        tk = kiln_node_shape(k).d[1];
    }
    static const int back[4] = {0, 2, 1, 3};
    kiln_node *a = gpt_attend(g, gpt_heads(g, part[0], b, t, c->heads, hd),
                              gpt_heads(g, k, b, tk, c->heads, hd),
                              gpt_heads(g, v, b, tk, c->heads, hd));
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

int gpt_kv_init(gpt_kv *kv, const gpt_config *c)
{
    size_t n = (size_t)c->layers * (size_t)c->ctx * (size_t)c->width;
    kv->c = *c;
    kv->len = 0;
    kv->top_k = 0;
    kv->keys = c->layers <= GPT_MAX_LAYERS ? malloc(n * sizeof(float)) : NULL;
    kv->values = kv->keys ? malloc(n * sizeof(float)) : NULL;
    kv->g = kv->values ? kiln_graph_new() : NULL;
    if (kv->g)
        return 0;
    free(kv->keys);
    free(kv->values);
    kv->keys = kv->values = NULL;
    return -1;
}

void gpt_kv_free(gpt_kv *kv)
{
    free(kv->keys);
    free(kv->values);
    kiln_graph_free(kv->g);
    kv->keys = kv->values = NULL;
    kv->g = NULL;
}

/* Feeds store[l] (the first len positions of layer l's keys or values) to
   the input node past; KILN_ERR_MEMORY when the wrapper cannot be made. */
static kiln_status gpt_kv_feed_past(kiln_session *s, kiln_node *past,
                                    float *store, int len, int64_t d)
{
    kiln_tensor *t = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(1, len, d), store);
    if (!t)
        return KILN_ERR_MEMORY;
    kiln_status st = kiln_feed(s, past, t);
    kiln_tensor_free(t);
    return st;
}

/* The step's graph: ids [1, n] after the kv->len stored positions.  The
   cache receives the past inputs and the new keys and values; out[0] is
   the logits of the last position ([1, vocab], or the top_k largest) and
   out[1] their ids (NULL without top_k). */
static void gpt_kv_graph(gpt_kv *kv, int n, gpt_cache *cache, kiln_node **ids,
                         kiln_node **out)
{
    kiln_graph *g = kv->g;
    int64_t d = kv->c.width, vocab = kv->c.vocab;
    kiln_graph_clear(g);
    *ids = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(1, n));
    for (int l = 0; l < kv->c.layers; l++) {
        cache->k[l] = cache->v[l] = NULL;
        if (kv->len == 0)
            continue;
        char name[24];
        snprintf(name, sizeof name, "past_k%d", l);
        cache->k[l] = kiln_input(g, name, KILN_F32, KILN_SHAPE(1, kv->len, d));
        snprintf(name, sizeof name, "past_v%d", l);
        cache->v[l] = kiln_input(g, name, KILN_F32, KILN_SHAPE(1, kv->len, d));
    }
    int64_t lo[2] = {n - 1, 0}, hi[2] = {n, vocab};
    out[0] = kiln_slice(g, gpt_logits(g, &kv->c, *ids, kv->len, cache), lo, hi);
    out[1] = NULL;
    if (kv->top_k > 0 && kv->top_k < vocab)
        kiln_topk(g, out[0], kv->top_k, 1, &out[0], &out[1]);
}

/* Feeds the tokens and the stored keys and values to the step's inputs. */
static kiln_status gpt_kv_inputs(gpt_kv *kv, kiln_session *s,
                                 const gpt_cache *cache, kiln_node *ids,
                                 const int32_t *tokens, int n)
{
    int64_t d = kv->c.width, plane = (int64_t)kv->c.ctx * d;
    kiln_status st = KILN_ERR_MEMORY;
    kiln_tensor *t = kiln_tensor_new(KILN_I32, KILN_SHAPE(1, n));
    if (t) {
        memcpy(kiln_tensor_i32(t), tokens, (size_t)n * sizeof *tokens);
        st = kiln_feed(s, ids, t);
        kiln_tensor_free(t);
    }
    for (int l = 0; st == KILN_OK && kv->len && l < kv->c.layers; l++) {
        st = gpt_kv_feed_past(s, cache->k[l], kv->keys + l * plane, kv->len, d);
        if (st == KILN_OK)
            st = gpt_kv_feed_past(s, cache->v[l], kv->values + l * plane,
                                  kv->len, d);
    }
    return st;
}

/* Copies the top_k ids (or 0 .. vocab - 1 without top_k) into top_ids. */
static kiln_status gpt_kv_ids(gpt_kv *kv, kiln_session *s, kiln_node *idx,
                              int32_t *top_ids)
{
    if (!idx) {
        for (int i = 0; i < kv->c.vocab; i++)
            top_ids[i] = i;
        return KILN_OK;
    }
    kiln_tensor *t = kiln_node_value(s, idx);
    if (!t)
        return KILN_ERR_STATE;
    memcpy(top_ids, kiln_tensor_i32(t), (size_t)kv->top_k * sizeof *top_ids);
    kiln_tensor_free(t);
    return KILN_OK;
}

kiln_status gpt_kv_feed(gpt_kv *kv, kiln_session *s, const int32_t *tokens,
                        int n, float *logits, int32_t *top_ids)
{
    if (n < 1 || n > kv->c.ctx - kv->len)
        return KILN_ERR_ARG;
    gpt_cache cache;
    kiln_node *ids, *out[2];
    gpt_kv_graph(kv, n, &cache, &ids, out);
    if (kiln_graph_status(kv->g) != KILN_OK)
        return kiln_graph_status(kv->g);
    kiln_status st = gpt_kv_inputs(kv, s, &cache, ids, tokens, n);
    if (st == KILN_OK)
        st = kiln_forward(s, kv->g);
    int64_t d = kv->c.width, plane = (int64_t)kv->c.ctx * d;
    for (int l = 0; st == KILN_OK && l < kv->c.layers; l++) {
        const float *k = kiln_node_value_f32(s, cache.nk[l]);
        const float *v = kiln_node_value_f32(s, cache.nv[l]);
        size_t at = (size_t)(l * plane + kv->len * d), bytes = (size_t)(n * d);
        memcpy(kv->keys + at, k, bytes * sizeof *k);
        memcpy(kv->values + at, v, bytes * sizeof *v);
    }
    if (st == KILN_OK && top_ids)
        st = gpt_kv_ids(kv, s, out[1], top_ids);
    if (st != KILN_OK)
        return st;
    memcpy(logits, kiln_node_value_f32(s, out[0]),
           (size_t)kiln_node_shape(out[0]).d[1] * sizeof *logits);
    kv->len += n;
    return KILN_OK;
}
