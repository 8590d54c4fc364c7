/* Text from the trained language model: one character at a time through
   the key/value cache (gpt_kv_feed), drawn with a temperature among the
   top k (kiln_topk in the generation graph). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "char_lm_internal.h"
#include "tool.h"

/* An id drawn from softmax(logits / temperature) over the k candidates
   (logits with their ids); temperature 0 takes the first (the generation
   then gives the largest alone). */
static int draw(const float *logits, const int32_t *ids, int k,
                float temperature, kiln_rng *rng)
{
    if (!(temperature > 0))
        return ids[0];
    double max = logits[0], sum = 0;
    for (int i = 1; i < k; i++)
        max = logits[i] > max ? logits[i] : max;
    for (int i = 0; i < k; i++)
        sum += exp((logits[i] - max) / temperature);
    double u = kiln_rng_uniform(rng) * sum;
    for (int i = 0; i < k - 1; i++) {
        u -= exp((logits[i] - max) / temperature);
        if (u < 0)
            return ids[i];
    }
    return ids[k - 1];
}

/* The prompt's ids in hist (its last context characters at most, as the
   model sees no more); their count, or -1 after printing an error. */
static int prompt_ids(const lm_corpus *c, const char *prompt, int context,
                      int32_t *hist)
{
    size_t len = strlen(prompt);
    if (len == 0) {
        kiln_tool_fail("--prompt: empty");
        return -1;
    }
    const char *p = len > (size_t)context ? prompt + len - context : prompt;
    int n = 0;
    for (; *p; p++) {
        int id = c->ids[(unsigned char)*p];
        if (id < 0) {
            kiln_tool_fail("--prompt: character 0x%02x is not in the corpus",
                           (unsigned char)*p);
            return -1;
        }
        hist[n++] = id;
    }
    return n;
}

/* Feeds the token just drawn (hist[n - 1]); when the window is full,
   starts again from the last half of it, so the cost per character stays
   O(context). */
static kiln_status feed_next(gpt_kv *kv, const int32_t *hist, int n,
                             float *logits, int32_t *ids)
{
    if (kv->len < kv->c.ctx)
        return gpt_kv_feed(kv, hist + n - 1, 1, logits, ids);
    int keep = kv->c.ctx / 2 > 0 ? kv->c.ctx / 2 : 1;
    kv->len = 0;
    return gpt_kv_feed(kv, hist + n - keep, keep, logits, ids);
}

int lm_sample(kiln_session *s, const gpt_config *g, const lm_corpus *c,
              const char_lm_options *o)
{
    gpt_kv kv;
    if (gpt_kv_init(&kv, s, g))
        return kiln_tool_fail("out of memory");
    int32_t *hist = malloc((size_t)(g->ctx + o->sample_len) * sizeof *hist);
    float *logits = malloc((size_t)g->vocab * sizeof *logits);
    int32_t *ids = malloc((size_t)g->vocab * sizeof *ids);
    int bad = !hist || !logits || !ids ? kiln_tool_fail("out of memory") : 0;
    int n = bad ? -1 : prompt_ids(c, o->prompt, g->ctx, hist);
    bad = n < 0;
    kiln_rng rng;
    kiln_rng_seed(&rng, (uint64_t)o->seed + 1);
    /* greedy decoding needs the largest only */
    kv.top_k = o->temperature > 0 ? o->top_k : 1;
    int k = kv.top_k > 0 && kv.top_k < g->vocab ? kv.top_k : g->vocab;
    if (!bad && gpt_kv_feed(&kv, hist, n, logits, ids) != KILN_OK)
        bad = kiln_tool_fail("generation: %s", gpt_kv_error(&kv));
    if (!bad)
        printf("Sample (temperature %g, top-k %d):\n", o->temperature,
               o->top_k);
    for (int i = 0; !bad && i < n; i++)
        putchar(c->chars[hist[i]]);
    double start = kiln_now();
    for (int i = 0; !bad && i < o->sample_len; i++) {
        hist[n] = draw(logits, ids, k, o->temperature, &rng);
        putchar(c->chars[hist[n++]]);
        if (i + 1 < o->sample_len &&
            feed_next(&kv, hist, n, logits, ids) != KILN_OK)
            bad = kiln_tool_fail("generation: %s", gpt_kv_error(&kv));
    }
    double secs = kiln_now() - start;
    if (!bad)
        printf("\n(%d characters in %.2f s: %.0f characters/s with the "
               "key/value cache)\n",
               o->sample_len, secs, secs > 0 ? o->sample_len / secs : 0.0);
    gpt_kv_free(&kv);
    free(hist);
    free(logits);
    free(ids);
    return bad;
}
