/* Generation with the key/value cache of gpt.h.  One new token runs a
   function compiled once: its inputs are the token, its position, a mask
   and every layer's whole key and value store ([1, H, ctx, D]), so its
   shapes never change; it attends to the ctx stored rows, those not yet
   fed masked out, and to itself, so each token costs O(ctx) whatever the
   position.  Several tokens at once (a prompt, a window restart) build a
   graph for the dynamic path that reads the fed rows only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

enum { STEP_IN = 3, STEP_OUT = 2 }; /* before the per-layer ones */

struct gpt_kv_step {
    kiln_graph *g;
    kiln_function *f;
    int top_k; /* f's */
    int n_out;
    kiln_tensor *in[STEP_IN + 2 * GPT_MAX_LAYERS];   /* id, pos, mask, k, v */
    kiln_tensor *out[STEP_OUT + 2 * GPT_MAX_LAYERS]; /* logits, ids, k, v */
};

int gpt_kv_init(gpt_kv *kv, kiln_session *s, const gpt_config *c)
{
    size_t n = (size_t)c->layers * (size_t)c->ctx * (size_t)c->width;
    memset(kv, 0, sizeof *kv);
    kv->c = *c;
    kv->s = s;
    if (c->layers > GPT_MAX_LAYERS)
        return -1;
    /* zeros, not garbage: masked rows still enter the products (times 0) */
    kv->keys = calloc(n, sizeof(float));
    kv->values = calloc(n, sizeof(float));
    kv->g = kiln_graph_new();
    kv->step = calloc(1, sizeof *kv->step);
    if (kv->keys && kv->values && kv->g && kv->step)
        return 0;
    gpt_kv_free(kv);
    return -1;
}

static void step_clear(gpt_kv_step *st)
{
    for (int i = 0; i < STEP_IN + 2 * GPT_MAX_LAYERS; i++)
        kiln_tensor_free(st->in[i]);
    for (int i = 0; i < STEP_OUT + 2 * GPT_MAX_LAYERS; i++)
        kiln_tensor_free(st->out[i]);
    kiln_function_free(st->f);
    kiln_graph_free(st->g);
    memset(st, 0, sizeof *st);
}

void gpt_kv_free(gpt_kv *kv)
{
    if (kv->step)
        step_clear(kv->step);
    free(kv->step);
    free(kv->keys);
    free(kv->values);
    kiln_graph_free(kv->g);
    memset(kv, 0, sizeof *kv);
}

const char *gpt_kv_error(const gpt_kv *kv)
{
    if (kv->g && kiln_graph_status(kv->g) != KILN_OK)
        return kiln_graph_error(kv->g);
    if (kv->step && kv->step->g && kiln_graph_status(kv->step->g) != KILN_OK)
        return kiln_graph_error(kv->step->g);
    return kiln_session_error(kv->s);
}

/* The last position's logits [1, vocab] of gpt_logits, or with top_k the
   top_k largest (out[0]) and their ids (out[1]); out[1] NULL otherwise. */
static void last_logits(gpt_kv *kv, kiln_graph *g, kiln_node *ids, int64_t pos0,
                        gpt_cache *cache, kiln_node **out)
{
    int64_t n = kiln_node_shape(ids).d[1];
    int64_t lo[2] = {n - 1, 0}, hi[2] = {n, kv->c.vocab};
    out[0] = gpt_logits(g, &kv->c, ids, pos0, cache);
    if (n > 1)
        out[0] = kiln_slice(g, out[0], lo, hi);
    out[1] = NULL;
    if (kv->top_k > 0 && kv->top_k < kv->c.vocab)
        kiln_topk(g, out[0], kv->top_k, 1, &out[0], &out[1]);
}

/* Builds and compiles the one-token step for kv->top_k, with its input and
   output tensors. */
static kiln_status step_build(gpt_kv *kv)
{
    gpt_kv_step *st = kv->step;
    step_clear(st);
    st->top_k = kv->top_k;
    kiln_graph *g = st->g = kiln_graph_new();
    int64_t ctx = kv->c.ctx, d = kv->c.width, plane = ctx * d;
    int layers = kv->c.layers, n_in = STEP_IN + 2 * layers;
    kiln_shape store = KILN_SHAPE(1, kv->c.heads, ctx, d / kv->c.heads);
    gpt_cache cache = {0};
    kiln_node *in[STEP_IN + 2 * GPT_MAX_LAYERS], *out[2 + 2 * GPT_MAX_LAYERS];
    in[0] = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(1, 1));
    in[1] = cache.pos = kiln_input(g, "pos", KILN_I32, KILN_SHAPE(1, 1));
    in[2] = cache.mask = kiln_input(g, "mask", KILN_F32, KILN_SHAPE(1, ctx));
    for (int l = 0; l < layers; l++) {
        char name[24];
        snprintf(name, sizeof name, "past_k%d", l);
        in[STEP_IN + 2 * l] = cache.k[l] = kiln_input(g, name, KILN_F32, store);
        snprintf(name, sizeof name, "past_v%d", l);
        in[STEP_IN + 2 * l + 1] = cache.v[l] =
            kiln_input(g, name, KILN_F32, store);
        st->in[STEP_IN + 2 * l] =
            kiln_tensor_wrap(KILN_F32, store, kv->keys + l * plane);
        st->in[STEP_IN + 2 * l + 1] =
            kiln_tensor_wrap(KILN_F32, store, kv->values + l * plane);
    }
    last_logits(kv, g, in[0], 0, &cache, out);
    st->n_out = out[1] ? 2 : 1;
    for (int l = 0; l < layers; l++) {
        out[st->n_out++] = cache.nk[l];
        out[st->n_out++] = cache.nv[l];
    }
    if (kiln_graph_status(g) != KILN_OK)
        return kiln_graph_status(g);
    st->f = kiln_compile(kv->s, g, out, st->n_out, in, n_in);
    if (!st->f)
        return KILN_ERR_STATE;
    for (int i = 0; i < STEP_IN; i++)
        st->in[i] =
            kiln_tensor_new(kiln_node_dtype(in[i]), kiln_node_shape(in[i]));
    for (int i = 0; i < st->n_out; i++)
        st->out[i] = kiln_function_new_output(st->f, i);
    for (int i = 0; i < n_in; i++)
        if (!st->in[i])
            return KILN_ERR_MEMORY;
    for (int i = 0; i < st->n_out; i++)
        if (!st->out[i])
            return KILN_ERR_MEMORY;
    return KILN_OK;
}

/* Copies the new keys and values (new[2 l], new[2 l + 1]: layer l's, [n,
   H * D] each) into the stores ([H, ctx, D] a layer) at kv->len. */
static void store_rows(gpt_kv *kv, const float *const *new, int n)
{
    int64_t d = kv->c.width, ctx = kv->c.ctx, hd = d / kv->c.heads;
    for (int l = 0; l < kv->c.layers; l++)
        for (int i = 0; i < n; i++)
            for (int h = 0; h < kv->c.heads; h++) {
                size_t at = (size_t)((l * kv->c.heads + h) * ctx + kv->len + i);
                size_t from = (size_t)(i * d + h * hd);
                memcpy(kv->keys + at * hd, new[2 * l] + from,
                       (size_t)hd * sizeof(float));
                memcpy(kv->values + at * hd, new[2 * l + 1] + from,
                       (size_t)hd * sizeof(float));
            }
}

/* Copies the logits (count of them) and their ids (ids NULL: 0, 1, ...). */
static void give_logits(const float *values, const int32_t *ids, int count,
                        float *logits, int32_t *top_ids)
{
    memcpy(logits, values, (size_t)count * sizeof *logits);
    for (int i = 0; top_ids && i < count; i++)
        top_ids[i] = ids ? ids[i] : i;
}

static kiln_status step_run(gpt_kv *kv, int32_t token, float *logits,
                            int32_t *top_ids)
{
    gpt_kv_step *st = kv->step;
    kiln_status rc;
    if ((!st->f || st->top_k != kv->top_k) && (rc = step_build(kv)) != KILN_OK)
        return rc;
    kiln_tensor_i32(st->in[0])[0] = token;
    kiln_tensor_i32(st->in[1])[0] = kv->len;
    float *mask = kiln_tensor_f32(st->in[2]);
    for (int j = 0; j < kv->c.ctx; j++)
        mask[j] = j < kv->len ? 0.0f : -1e9f;
    if ((rc = kiln_run(st->f, st->in, st->out)) != KILN_OK)
        return rc;
    int first = st->n_out - 2 * kv->c.layers;
    const float *new[2 * GPT_MAX_LAYERS];
    for (int i = 0; i < 2 * kv->c.layers; i++)
        new[i] = kiln_tensor_f32(st->out[first + i]);
    store_rows(kv, new, 1);
    give_logits(kiln_tensor_f32(st->out[0]),
                first == 2 ? kiln_tensor_i32(st->out[1]) : NULL,
                (int)kiln_tensor_numel(st->out[0]), logits, top_ids);
    return KILN_OK;
}

/* The dynamic graph's inputs: the tokens, and the stores. */
static kiln_status feed_inputs(gpt_kv *kv, kiln_node *ids,
                               const int32_t *tokens, int n,
                               kiln_node *const *past)
{
    int64_t plane = (int64_t)kv->c.ctx * kv->c.width;
    kiln_status st = KILN_ERR_MEMORY;
    kiln_tensor *t = kiln_tensor_new(KILN_I32, KILN_SHAPE(1, n));
    if (t) {
        memcpy(kiln_tensor_i32(t), tokens, (size_t)n * sizeof *tokens);
        st = kiln_feed(kv->s, ids, t);
        kiln_tensor_free(t);
    }
    for (int i = 0; st == KILN_OK && kv->len && i < 2 * kv->c.layers; i++) {
        float *store = (i % 2 ? kv->values : kv->keys) + i / 2 * plane;
        t = kiln_tensor_wrap(KILN_F32, kiln_node_shape(past[i]), store);
        st = t ? kiln_feed(kv->s, past[i], t) : KILN_ERR_MEMORY;
        kiln_tensor_free(t);
    }
    return st;
}

/* Several tokens on the dynamic path: the past inputs hold the len fed
   rows only, and the new queries are causal among themselves. */
static kiln_status dynamic_run(gpt_kv *kv, const int32_t *tokens, int n,
                               float *logits, int32_t *top_ids)
{
    kiln_graph *g = kv->g;
    int64_t hd = kv->c.width / kv->c.heads;
    gpt_cache cache = {0};
    kiln_node *past[2 * GPT_MAX_LAYERS];
    kiln_graph_clear(g);
    kiln_node *ids = kiln_input(g, "ids", KILN_I32, KILN_SHAPE(1, n));
    int64_t lo[4] = {0, 0, 0, 0}, hi[4] = {1, kv->c.heads, kv->len, hd};
    for (int i = 0; kv->len && i < 2 * kv->c.layers; i++) {
        char name[24];
        snprintf(name, sizeof name, "past_%c%d", i % 2 ? 'v' : 'k', i / 2);
        past[i] = kiln_input(g, name, KILN_F32,
                             KILN_SHAPE(1, kv->c.heads, kv->c.ctx, hd));
        *(i % 2 ? &cache.v[i / 2] : &cache.k[i / 2]) =
            kiln_slice(g, past[i], lo, hi);
    }
    kiln_node *out[2];
    last_logits(kv, g, ids, kv->len, &cache, out);
    if (kiln_graph_status(g) != KILN_OK)
        return kiln_graph_status(g);
    kiln_status st = feed_inputs(kv, ids, tokens, n, past);
    if (st == KILN_OK)
        st = kiln_forward(kv->s, g);
    const float *new[2 * GPT_MAX_LAYERS];
    for (int l = 0; st == KILN_OK && l < kv->c.layers; l++) {
        new[2 * l] = kiln_node_value_f32(kv->s, cache.nk[l]);
        new[2 * l + 1] = kiln_node_value_f32(kv->s, cache.nv[l]);
    }
    kiln_tensor *idx =
        st == KILN_OK && out[1] ? kiln_node_value(kv->s, out[1]) : NULL;
    if (st == KILN_OK && out[1] && !idx)
        st = KILN_ERR_MEMORY;
    if (st == KILN_OK) {
        store_rows(kv, new, n);
        give_logits(kiln_node_value_f32(kv->s, out[0]),
                    idx ? kiln_tensor_i32(idx) : NULL,
                    (int)kiln_node_shape(out[0]).d[1], logits, top_ids);
    }
    kiln_tensor_free(idx);
    return st;
}

kiln_status gpt_kv_feed(gpt_kv *kv, const int32_t *tokens, int n, float *logits,
                        int32_t *top_ids)
{
    if (n < 1 || n > kv->c.ctx - kv->len)
        return KILN_ERR_ARG;
    kiln_status st = n == 1 ? step_run(kv, tokens[0], logits, top_ids)
                            : dynamic_run(kv, tokens, n, logits, top_ids);
    if (st == KILN_OK)
        kv->len += n;
    return st;
}
