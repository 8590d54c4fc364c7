/* The character-level language model's training: the GPT of tools/gpt.h
   compiled into one function that runs forward, backward and the AdamW
   update, fed random windows of the corpus; a second function from the
   same graph computes the validation loss.  Options, corpus and sampling
   are in char_lm_options.c, char_lm_corpus.c and char_lm_sample.c.

   Under mpirun every rank draws the same global batch of windows and
   trains on its share of the rows (tools/dist.h): N ranks at --batch B
   take the steps one process takes at B; rank 0 prints, saves and
   samples. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "char_lm.h"
#include "char_lm_internal.h"
#include "dist.h"
#include "gpt.h"
#include "tool.h"

typedef struct trainer {
    kiln_session *s;
    kiln_graph *g;
    kiln_optimizer *opt;
    kiln_function *step, *eval;
    kiln_tensor *ids, *targets, *loss;
    gpt_config c;
    int batch;       /* the global batch */
    int first, rows; /* this rank's rows of it */
    tool_dist d;
} trainer;

static void trainer_free(trainer *t)
{
    kiln_tensor_free(t->ids);
    kiln_tensor_free(t->targets);
    kiln_tensor_free(t->loss);
    kiln_graph_free(t->g);
    kiln_optimizer_free(t->opt);
    kiln_session_free(t->s);
    tool_dist_end(&t->d);
}

/* AdamW with a linear warm-up then a cosine decay to min_lr over the rest
   of the steps, and the gradients clipped to a global norm. */
static kiln_optim_options adamw(const char_lm_options *o)
{
    kiln_optim_options a = kiln_optim_defaults(KILN_ADAMW);
    a.lr = o->lr;
    a.weight_decay = o->weight_decay;
    a.schedule = KILN_LR_COSINE;
    a.min_lr = o->min_lr;
    a.clip_norm = o->clip;
    a.warmup_steps = o->warmup < o->steps ? o->warmup : 0;
    a.total_steps = o->steps - a.warmup_steps;
    return a;
}

/* Builds the model's loss on ids [B, T] and compiles the training step
   and the evaluation; 0, or 1 after printing an error. */
/* FNV-1a over the corpus's ids and alphabet: ranks that read different
   text (of one length and vocabulary) would train different models. */
static uint64_t corpus_hash(const lm_corpus *c)
{
    uint64_t h = 1469598103934665603ull;
    const int32_t *parts[2] = {c->train, c->val};
    int64_t lens[2] = {c->n_train, c->n_val};
    for (int p = 0; p < 2; p++)
        for (int64_t i = 0; i < lens[p]; i++)
            h = (h ^ (uint32_t)parts[p][i]) * 1099511628211ull;
    for (int i = 0; i < c->vocab; i++)
        h = (h ^ c->chars[i]) * 1099511628211ull;
    return h;
}

static int trainer_init(trainer *t, const char_lm_options *o,
                        const lm_corpus *corpus)
{
    int vocab = corpus->vocab;
    t->c = (gpt_config){vocab, o->context, o->layers, o->heads, o->width, 1};
    t->batch = o->batch;
    if (o->batch < t->d.size)
        return kiln_tool_fail("--batch %d is the global batch, shared by %d "
                              "ranks: it needs at least one row per rank",
                              o->batch, t->d.size);
    t->first = (int)((int64_t)o->batch * t->d.rank / t->d.size);
    t->rows = (int)((int64_t)o->batch * (t->d.rank + 1) / t->d.size) - t->first;
    kiln_session_options so = {.seed = (uint64_t)o->seed,
                               .threads = o->threads};
    t->s = kiln_session_new(&so);
    t->g = kiln_graph_new();
    if (!t->s || !t->g)
        return kiln_tool_fail("out of memory");
    kiln_optim_options a = adamw(o);
    t->opt = kiln_optimizer_new(t->s, &a);
    if (!t->opt)
        return kiln_tool_fail("%s", kiln_session_error(t->s));
    if (tool_dist_attach(&t->d, t->s, 0))
        return 1;
    int64_t b = t->rows, n = o->context;
    kiln_node *ids = kiln_input(t->g, "ids", KILN_I32, KILN_SHAPE(b, n));
    kiln_node *tgt = kiln_input(t->g, "targets", KILN_I32, KILN_SHAPE(b * n));
    kiln_node *loss = kiln_softmax_cross_entropy(
        t->g, gpt_logits(t->g, &t->c, ids, 0, NULL), tgt);
    kiln_node *outs[2] = {loss, kiln_optimizer_build_step(t->opt, t->g, loss)};
    kiln_node *ins[2] = {ids, tgt};
    if (kiln_graph_status(t->g) != KILN_OK)
        return kiln_tool_fail("%s", kiln_graph_error(t->g));
    t->step = kiln_compile(t->s, t->g, outs, 2, ins, 2);
    t->eval = t->step ? kiln_compile(t->s, t->g, outs, 1, ins, 2) : NULL;
    if (!t->eval)
        return kiln_tool_fail("%s", kiln_session_error(t->s));
    t->ids = kiln_tensor_new(KILN_I32, KILN_SHAPE(b, n));
    t->targets = kiln_tensor_new(KILN_I32, KILN_SHAPE(b * n));
    t->loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    if (!t->ids || !t->targets || !t->loss)
        return kiln_tool_fail("out of memory");
    /* what every rank must agree on: the model, the schedule, the data,
       and the validation batches (collectives) */
    char config[512];
    snprintf(config, sizeof config,
             "transformer\nbatch %d\ncontext %d\nlayers %d\nheads %d\nwidth "
             "%d\nvocabulary %d\nseed %d\nsteps %d\nlr %g\nwarmup %d\neval "
             "batches %d\ncorpus %lld characters, hash %016llx",
             o->batch, o->context, o->layers, o->heads, o->width, vocab,
             o->seed, o->steps, (double)o->lr, o->warmup, o->eval_batches,
             (long long)(corpus->n_train + corpus->n_val),
             (unsigned long long)corpus_hash(corpus));
    return tool_dist_sync(&t->d, t->s, config);
}

/* Copies the window of context + 1 ids at text + start into row i of the
   global batch (the first context into the inputs, the last into the
   targets) when the row is this rank's. */
static void put_window(trainer *t, int i, const int32_t *text, int64_t start)
{
    i -= t->first;
    if (i < 0 || i >= t->rows)
        return;
    int n = t->c.ctx;
    int32_t *ids = kiln_tensor_i32(t->ids) + (int64_t)i * n;
    int32_t *tgt = kiln_tensor_i32(t->targets) + (int64_t)i * n;
    for (int j = 0; j < n; j++) {
        ids[j] = text[start + j];
        tgt[j] = text[start + j + 1];
    }
}

/* Runs f on the current batch; the global batch's mean loss, or NAN after
   printing an error (the other ranks, which would wait for this one,
   ended too). */
static double run_batch(trainer *t, kiln_function *f)
{
    kiln_tensor *in[2] = {t->ids, t->targets}, *out[2] = {t->loss, NULL};
    if (tool_dist_rows(&t->d, t->rows, t->batch) ||
        kiln_run(f, in, out) != KILN_OK) {
        kiln_tool_fail("%s", kiln_session_error(t->s));
        tool_dist_abort(&t->d);
        return NAN;
    }
    return tool_dist_loss(&t->d, kiln_tensor_f32(t->loss)[0], t->rows,
                          t->batch);
}

/* Mean loss over the first batches of consecutive, non-overlapping windows
   of the validation text (the same ones at every call): nats per
   character.  NAN after an error. */
static double validate(trainer *t, const lm_corpus *c, int max_batches)
{
    int64_t windows = (c->n_val - 1) / t->c.ctx;
    int64_t batches = windows / t->batch;
    if (batches > max_batches)
        batches = max_batches;
    double sum = 0;
    for (int64_t k = 0; k < batches; k++) {
        for (int i = 0; i < t->batch; i++)
            put_window(t, i, c->val, (k * t->batch + i) * t->c.ctx);
        sum += run_batch(t, t->eval);
    }
    return batches ? sum / (double)batches : NAN;
}

/* o->steps steps on random windows of the training text drawn from a
   generator seeded with o->seed; prints the loss every o->log_every
   steps.  0, or 1 after an error. */
static int train(trainer *t, const lm_corpus *c, const char_lm_options *o)
{
    kiln_rng rng;
    kiln_rng_seed(&rng, (uint64_t)o->seed);
    int leads = tool_dist_leads(&t->d);
    kiln_progress bar, *pb = leads ? &bar : NULL;
    kiln_progress_begin(pb, stderr, "training", o->steps);
    double sum = 0, start = kiln_now();
    int since = 0;
    for (int step = 1; step <= o->steps; step++) {
        int64_t span = c->n_train - t->c.ctx;
        for (int i = 0; i < t->batch; i++)
            put_window(t, i, c->train,
                       (int64_t)(kiln_rng_uniform(&rng) * (double)span));
        double loss = run_batch(t, t->step);
        if (!isfinite(loss))
            return isnan(loss)
                       ? 1
                       : kiln_tool_fail("training diverged: lower --lr");
        sum += loss;
        since++;
        kiln_progress_update(pb, step, loss, t->batch * t->c.ctx);
        if (leads && (step % o->log_every == 0 || step == o->steps)) {
            printf("step %d: loss %.4f lr %.2e %.1f s\n", step, sum / since,
                   kiln_optimizer_lr(t->opt), kiln_now() - start);
            fflush(stdout);
            sum = 0, since = 0;
        }
    }
    kiln_progress_end(pb, "done");
    return 0;
}

int char_lm_run(const char_lm_options *o)
{
    trainer t = {0};
    if (tool_dist_begin(&t.d))
        return 1;
    int leads = tool_dist_leads(&t.d);
    /* a --save that cannot be written fails now, not after training */
    if (leads && o->save && kiln_file_check_writable(o->save) != KILN_OK) {
        kiln_tool_fail("--save: %s", kiln_last_error());
        return tool_dist_finish(&t.d, 1);
    }
    lm_corpus corpus;
    if (lm_corpus_load(&corpus, o->corpus, o->context))
        return tool_dist_finish(&t.d, 1);
    if (leads)
        printf("corpus: %s, %lld characters, vocabulary %d, %lld train / "
               "%lld validation\n",
               o->corpus, (long long)(corpus.n_train + corpus.n_val),
               corpus.vocab, (long long)corpus.n_train,
               (long long)corpus.n_val);
    int bad = trainer_init(&t, o, &corpus);
    if (!bad) {
        if (leads)
            printf("model: %d layers, %d heads, width %d, context %d, batch "
                   "%d\n",
                   o->layers, o->heads, o->width, o->context, o->batch);
        bad = train(&t, &corpus, o);
    }
    double val = bad ? NAN : validate(&t, &corpus, o->eval_batches);
    if (!bad && !isnan(val) && leads)
        printf("Validation loss: %.4f nats/char (uniform %.4f)\n", val,
               log((double)corpus.vocab));
    bad = bad || isnan(val);
    if (!bad && o->save)
        bad = tool_dist_save(&t.d, t.s, o->save);
    if (!bad && leads)
        bad = lm_sample(t.s, &t.c, &corpus, o);
    /* a failure of this rank alone ends the job, not a hang */
    bad = tool_dist_finish(&t.d, bad);
    trainer_free(&t);
    lm_corpus_free(&corpus);
    return bad;
}
