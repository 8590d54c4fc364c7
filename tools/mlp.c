/* Training and evaluation of a fully connected classifier with the compiled
   path: one function runs forward, backward and the optimiser update. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mlp.h"
#include "onnx_run.h"
#include "plot.h"

enum { N_CLASSES = MLP_CLASSES, EVAL_BATCH = 1000 };

mlp_config mlp_defaults(void)
{
    mlp_config c = {0};
    c.hidden[0] = 800;
    c.n_hidden = 1;
    c.optimizer = 2;
    c.epochs = 10;
    c.batch = 128;
    c.seed = 1;
    return c;
}

typedef struct model {
    kiln_node *x, *y, *logits, *loss;
} model;

kiln_node *mlp_activate(kiln_graph *g, kiln_node *h, int act)
{
    return act == 0   ? kiln_relu(g, h)
           : act == 1 ? kiln_gelu(g, h)
                      : kiln_tanh(g, h);
}

/* X [batch, rows * cols] -> hidden layers -> logits [batch, 10];
   variables fcK.W and fcK.b, shared by every graph built on the same
   session. */
static kiln_node *mlp_logits(kiln_graph *g, const mlp_config *c, kiln_node *x,
                             int64_t in_dim)
{
    kiln_node *h = x;
    int64_t width = in_dim;
    for (int i = 0; i <= c->n_hidden; i++) {
        int64_t out = i < c->n_hidden ? c->hidden[i] : N_CLASSES;
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "fc%d.W", i);
        snprintf(bn, sizeof bn, "fc%d.b", i);
        /* He-style uniform init for relu keeps activations at unit scale */
        double lim = sqrt((c->activation == 0 ? 6.0 : 3.0) / (double)width);
        kiln_node *w = kiln_variable(g, wn, KILN_F32, KILN_SHAPE(width, out),
                                     kiln_init_uniform(-lim, lim));
        kiln_node *b =
            kiln_variable(g, bn, KILN_F32, KILN_SHAPE(out), kiln_init_zeros());
        h = kiln_affine(g, h, w, b);
        if (i < c->n_hidden)
            h = mlp_activate(g, h, c->activation);
        width = out;
    }
    return h;
}

/* The model c names on images of rows x cols.  The batch is symbolic:
   functions compiled from the graph run at any batch size. */
static model build(kiln_graph *g, const mlp_config *c, int batch, int64_t rows,
                   int64_t cols)
{
    model m;
    m.x = kiln_input_sym(g, "X", KILN_F32, KILN_SHAPE(batch, rows * cols),
                         KILN_AXIS(0));
    m.y = kiln_input_sym(g, "Y", KILN_I32, KILN_SHAPE(batch), KILN_AXIS(0));
    m.logits = c->arch == 1 ? cnn_logits(g, m.x, rows, cols, c->hidden[0],
                                         N_CLASSES, mlp_activate, c->activation)
                            : mlp_logits(g, c, m.x, rows * cols);
    m.loss = kiln_softmax_cross_entropy(g, m.logits, m.y);
    return m;
}

typedef struct evaluator {
    kiln_graph *own; /* the graph built for it, if any */
    kiln_session *s;
    kiln_function *f;
    float *logits; /* EVAL_BATCH rows */
} evaluator;

/* Compiles the logits of m (in g) for evaluation at any batch size. */
static int evaluator_init(evaluator *e, kiln_session *s, kiln_graph *g, model m)
{
    e->s = s;
    e->f = kiln_compile(s, g, &m.logits, 1, &m.x, 1);
    if (!e->f)
        return kiln_tool_fail("%s", kiln_session_error(s));
    if (!(e->logits = malloc(EVAL_BATCH * N_CLASSES * sizeof *e->logits)))
        return kiln_tool_fail("out of memory");
    return 0;
}

static void evaluator_free(evaluator *e)
{
    free(e->logits);
    kiln_graph_free(e->own);
}

/* Adds batch's loss (summed over its rows) and correct predictions. */
static void score(const float *z, const int32_t *ys, int64_t rows,
                  double *total, int64_t *correct)
{
    for (int64_t i = 0; i < rows; i++) {
        const float *row = z + i * N_CLASSES;
        int best = 0;
        for (int k = 1; k < N_CLASSES; k++)
            best = row[k] > row[best] ? k : best;
        double sum = 0;
        for (int k = 0; k < N_CLASSES; k++)
            sum += exp((double)row[k] - row[best]);
        *total += -((double)row[ys[i]] - row[best] - log(sum));
        *correct += best == ys[i];
    }
}

/* Test loss and accuracy over every image, in batches of EVAL_BATCH and
   a last smaller one, read in place from the data set.  The data set's
   loader guarantees rows >= 1 and labels in [0, 10). */
static int evaluate(evaluator *e, const kiln_dataset *set, double *loss,
                    double *acc)
{
    int64_t n = set->count, d = set->rows * set->cols;
    float *xs = kiln_tensor_f32(set->images);
    const int32_t *ys = kiln_tensor_i32(set->labels);
    double total = 0;
    int64_t correct = 0;
    for (int64_t start = 0; start < n; start += EVAL_BATCH) {
        int64_t rows = n - start < EVAL_BATCH ? n - start : EVAL_BATCH;
        kiln_tensor *x =
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(rows, d), xs + start * d);
        kiln_tensor *z =
            kiln_tensor_wrap(KILN_F32, KILN_SHAPE(rows, N_CLASSES), e->logits);
        kiln_status st = x && z ? kiln_run(e->f, &x, &z) : KILN_ERR_MEMORY;
        kiln_tensor_free(x);
        kiln_tensor_free(z);
        if (st != KILN_OK)
            return kiln_tool_fail("%s", x && z ? kiln_session_error(e->s)
                                               : "out of memory");
        score(e->logits, ys + start, rows, &total, &correct);
    }
    *loss = total / (double)n;
    *acc = (double)correct / (double)n;
    return 0;
}

static int load_split(const mlp_config *c, int train, kiln_dataset *d)
{
    if (kiln_mnist_dataset(d, c->data_dir, train, 1.0f / 255) != KILN_OK)
        return kiln_tool_fail("%s", kiln_last_error());
    if (d->classes != N_CLASSES)
        return kiln_tool_fail("%s: %d classes, the model has %d",
                              d->labels_path, d->classes, N_CLASSES);
    return 0;
}

/* The training set, and a test set that fits the same model. */
static int load_both(const mlp_config *c, kiln_dataset *train,
                     kiln_dataset *test)
{
    if (load_split(c, 1, train) || load_split(c, 0, test))
        return 1;
    if (kiln_dataset_match(train, test) != KILN_OK)
        return kiln_tool_fail("%s", kiln_last_error());
    return 0;
}

/* A cosine decay of the learning rate over the whole run: the last epochs
   take small steps, which settles the test accuracy. */
static kiln_optimizer *make_optimizer(kiln_session *s, const mlp_config *c,
                                      int64_t total_steps)
{
    static const kiln_optim_kind kinds[] = {KILN_SGD, KILN_SGD, KILN_ADAM,
                                            KILN_ADAMW, KILN_ADAGRAD};
    static const float default_lr[] = {0.1f, 0.05f, 1e-3f, 1e-3f, 0.05f};
    kiln_optim_options o = kiln_optim_defaults(kinds[c->optimizer]);
    o.lr = c->lr > 0 ? c->lr : default_lr[c->optimizer];
    if (c->optimizer == 1)
        o.momentum = 0.9f;
    o.schedule = KILN_LR_COSINE;
    o.total_steps = (int)total_steps;
    o.min_lr = o.lr * 0.01f;
    return kiln_optimizer_new(s, &o);
}

/* Every output path is checked before the (long) training starts. */
static int check_outputs(const mlp_config *c)
{
    const char *paths[] = {c->save, c->log, c->plot};
    const char *flags[] = {"--save", "--log", "--plot"};
    for (int i = 0; i < 3; i++)
        if (paths[i] && kiln_file_check_writable(paths[i]) != KILN_OK)
            return kiln_tool_fail("%s: %s", flags[i], kiln_last_error());
    if (c->plot && !have_program("gnuplot"))
        fprintf(stderr, "kiln: gnuplot not found: no plot will be written "
                        "(apt-get install gnuplot-nox)\n");
    return 0;
}

typedef struct trainer {
    kiln_session *s;
    kiln_graph *g;
    kiln_optimizer *opt;
    kiln_function *step;
    kiln_batcher *batches;
    kiln_tensor *xb, *yb, *loss;
    evaluator eval;
    model m; /* its logits are what --save model.onnx exports */
    tool_dist d;
    int64_t done, total, per_epoch; /* steps */
} trainer;

static void trainer_free(trainer *t)
{
    evaluator_free(&t->eval);
    kiln_tensor_free(t->xb);
    kiln_tensor_free(t->yb);
    kiln_tensor_free(t->loss);
    kiln_batcher_free(t->batches);
    kiln_optimizer_free(t->opt);
    kiln_graph_free(t->g);
    kiln_session_free(t->s);
    tool_dist_end(&t->d);
}

/* One step on the first rows of the batch tensors: the whole batch, or
   the smaller last one of the epoch, by the same function. */
static kiln_status run_step(trainer *t, int rows, kiln_tensor **out)
{
    kiln_tensor *in[2] = {t->xb, t->yb};
    kiln_shape xs = kiln_tensor_shape(t->xb);
    if (rows == xs.d[0])
        return kiln_run(t->step, in, out);
    xs.d[0] = rows;
    in[0] = kiln_tensor_wrap(KILN_F32, xs, kiln_tensor_data(t->xb));
    in[1] =
        kiln_tensor_wrap(KILN_I32, KILN_SHAPE(rows), kiln_tensor_data(t->yb));
    kiln_status st =
        in[0] && in[1] ? kiln_run(t->step, in, out) : KILN_ERR_MEMORY;
    kiln_tensor_free(in[0]);
    kiln_tensor_free(in[1]);
    return st;
}

/* This rank's step on its shard of the next global batch; the global
   batch's loss into *loss.  1 after an error (the other ranks ended). */
static int train_step(trainer *t, int rows, double *loss)
{
    kiln_tensor *out[2] = {t->loss, NULL};
    int global = kiln_batcher_global_rows(t->batches);
    if (tool_dist_rows(&t->d, rows, global) ||
        run_step(t, rows, out) != KILN_OK) {
        kiln_tool_fail("%s", kiln_session_error(t->s));
        tool_dist_abort(&t->d);
        return 1;
    }
    *loss = tool_dist_loss(&t->d, kiln_tensor_f32(t->loss)[0], rows, global);
    return 0;
}

/* Trains to the end of the epoch or of the run (t->total steps). */
static int run_epoch(trainer *t, const mlp_config *c, int epoch,
                     double *train_loss)
{
    char label[32];
    int leads = tool_dist_leads(&t->d);
    /* --steps decides the number of epochs when given */
    snprintf(label, sizeof label, "epoch %d/%lld", epoch,
             (long long)((t->total + t->per_epoch - 1) / t->per_epoch));
    kiln_progress bar, *pb = leads ? &bar : NULL;
    kiln_progress_begin(pb, stderr, label, t->per_epoch);
    double sum = 0, loss;
    int64_t steps = 0;
    int rows;
    while (t->done < t->total &&
           (rows = kiln_batcher_next(t->batches, t->xb, t->yb)) > 0) {
        if (train_step(t, rows, &loss))
            return 1;
        sum += loss;
        steps++;
        t->done++;
        if (c->steps && leads)
            printf("step %lld: loss %.9g\n", (long long)t->done, loss);
        kiln_progress_update(pb, t->done - (int64_t)(epoch - 1) * t->per_epoch,
                             sum / (double)steps, c->batch);
    }
    *train_loss = steps ? sum / (double)steps : 0;
    char summary[64];
    snprintf(summary, sizeof summary, "train loss %.4f", *train_loss);
    kiln_progress_end(pb, summary);
    if (!isfinite(*train_loss))
        return kiln_tool_fail("training diverged (loss %g): lower --lr",
                              *train_loss);
    return 0;
}

/* Saves the session's variables and the activation to c->save, or, for a
   .onnx path, the inference graph X -> logits with the trained weights;
   0, or 1 after an error. */
static int save_model(trainer *t, const mlp_config *c)
{
    if (onnx_path(c->save)) /* the variables every rank has: rank 0 */
        return tool_dist_leads(&t->d) &&
               onnx_save_logits(t->g, t->s, t->m.logits, c->save);
    int32_t code = c->activation;
    kiln_tensor *act = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(1), &code);
    int bad = kiln_session_declare(t->s, MLP_ACT_KEY, KILN_I32, KILN_SHAPE(1),
                                   kiln_init_zeros(), 0) != KILN_OK ||
              kiln_variable_write(t->s, MLP_ACT_KEY, act) != KILN_OK;
    kiln_tensor_free(act);
    if (bad)
        return kiln_tool_fail("%s", kiln_session_error(t->s));
    /* every rank: a ZeRO-1 state is gathered for rank 0 to write */
    if (tool_dist_save(&t->d, t->s, c->save))
        return 1;
    if (tool_dist_leads(&t->d))
        fprintf(stderr, "kiln: model saved to %s\n", c->save);
    return 0;
}

/* Prints the epoch's line (and the CSV row) after evaluating on test;
   only the leading rank does.  0, or 1 after an error. */
static int end_epoch(trainer *t, const kiln_dataset *test, int epoch,
                     epoch_row *row, FILE *log)
{
    if (!tool_dist_leads(&t->d))
        return 0;
    if (evaluate(&t->eval, test, &row->test_loss, &row->acc))
        return 1;
    printf("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.4f\n",
           epoch, row->train_loss, row->test_loss, row->acc);
    fflush(stdout);
    if (log)
        fprintf(log, "%d,%.6f,%.6f,%.6f,%.3f\n", epoch, row->train_loss,
                row->test_loss, row->acc, row->seconds);
    return 0;
}

/* Trains from step t->done to t->total, evaluating on test after each
   epoch (and after the last step), printing a line per epoch and filling
   rows (and the CSV log when asked); 0, or 1 after an error. */
static int train_epochs(trainer *t, const mlp_config *c,
                        const kiln_dataset *test, epoch_row *rows)
{
    FILE *log = NULL;
    int leads = tool_dist_leads(&t->d);
    if (leads && c->log && !(log = fopen(c->log, "w")))
        return kiln_tool_fail("--log: cannot write %s", c->log);
    if (log)
        fprintf(log, "epoch,train_loss,test_loss,test_accuracy,seconds\n");
    double start = kiln_now();
    epoch_row *row = NULL;
    for (int epoch = (int)(t->done / t->per_epoch) + 1; t->done < t->total;
         epoch++) {
        row = &rows[epoch - 1];
        if (run_epoch(t, c, epoch, &row->train_loss)) {
            if (log)
                fclose(log);
            return 1;
        }
        row->seconds = kiln_now() - start;
        if (end_epoch(t, test, epoch, row, log)) {
            if (log)
                fclose(log);
            return 1;
        }
    }
    if (leads && row)
        printf("test accuracy: %.4f\n", row->acc);
    if (log && fclose(log) != 0)
        return kiln_tool_fail("--log: cannot write %s", c->log);
    return 0;
}

/* FNV-1a over the 8-byte words (and the tail bytes) of n bytes at p. */
static uint64_t hash_bytes(uint64_t h, const unsigned char *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The training images and labels hashed: ranks that read different files
   (of one count) would train on different data. */
static uint64_t data_hash(const kiln_dataset *d)
{
    uint64_t h = 1469598103934665603ull;
    const kiln_tensor *t[2] = {d->images, d->labels};
    for (int i = 0; i < 2; i++)
        h = hash_bytes(h, kiln_tensor_data(t[i]),
                       (size_t)kiln_tensor_numel(t[i]) *
                           kiln_dtype_size(kiln_tensor_dtype(t[i])));
    return h;
}

/* What every rank must agree on, for the start-up check. */
static void config_text(const mlp_config *c, const kiln_dataset *train,
                        char *out, size_t size)
{
    int n = snprintf(
        out, size,
        "batch %d\nseed %d\ndataset %d\nimages %lld, hash %016llx\nmodel "
        "%d\nactivation %d\noptimizer %d\nlr %g\nepochs %d\nsteps %d\nzero1 "
        "%d\nhidden",
        c->batch, c->seed, c->dataset, (long long)train->count,
        (unsigned long long)data_hash(train), c->arch, c->activation,
        c->optimizer, (double)c->lr, c->epochs, c->steps, c->zero1);
    for (int i = 0; i < c->n_hidden && n > 0 && (size_t)n < size; i++)
        n += snprintf(out + n, size - (size_t)n, " %d", c->hidden[i]);
}

/* The session, the model and its compiled training step, with the
   communicator attached before the step is built. */
static int build_trainer(trainer *t, const mlp_config *c,
                         const kiln_dataset *train, int64_t per_epoch)
{
    kiln_session_options so = {.seed = (uint64_t)c->seed,
                               .threads = c->threads};
    if (!(t->s = kiln_session_new(&so)) || !(t->g = kiln_graph_new()))
        return kiln_tool_fail("out of memory");
    if (tool_dist_attach(&t->d, t->s, c->zero1))
        return 1;
    model m = t->m = build(t->g, c, c->batch, train->rows, train->cols);
    if (!(t->opt = make_optimizer(t->s, c, per_epoch * c->epochs)))
        return kiln_tool_fail("%s", kiln_session_error(t->s));
    kiln_node *update = kiln_optimizer_build_step(t->opt, t->g, m.loss);
    kiln_node *outs[2] = {m.loss, update}, *ins[2] = {m.x, m.y};
    if (!(t->step = kiln_compile(t->s, t->g, outs, 2, ins, 2)))
        return kiln_tool_fail("%s", kiln_session_error(t->s));
    return evaluator_init(&t->eval, t->s, t->g, m);
}

/* The batches of this rank (its shard of every global batch), the model
   resumed from c->resume when asked, every rank then starting from rank
   0's variables, and the batches of the steps already done skipped. */
static int start_position(trainer *t, const mlp_config *c,
                          const kiln_dataset *train)
{
    char config[512];
    int local = (c->batch + t->d.size - 1) / t->d.size;
    int64_t in_dim = train->rows * train->cols;
    t->batches = kiln_batcher_new(train->images, train->labels, c->batch, 1, 0,
                                  (uint64_t)c->seed);
    t->xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(local, in_dim));
    t->yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(local));
    t->loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    if (!t->batches || !t->xb || !t->yb || !t->loss)
        return kiln_tool_fail("out of memory");
    if (c->batch < t->d.size)
        return kiln_tool_fail("--batch %d is the global batch, shared by %d "
                              "ranks: it needs at least one row per rank",
                              c->batch, t->d.size);
    if (kiln_batcher_shard(t->batches, t->d.rank, t->d.size) != KILN_OK)
        return kiln_tool_fail("%s", kiln_batcher_error(t->batches));
    if (c->resume && tool_dist_load(&t->d, t->s, c->resume))
        return 1;
    config_text(c, train, config, sizeof config);
    if (tool_dist_sync(&t->d, t->s, config))
        return 1;
    t->per_epoch = kiln_batcher_num_batches(t->batches);
    t->total = c->steps ? c->steps : t->per_epoch * c->epochs;
    t->done = kiln_optimizer_step_count(t->opt);
    for (int64_t i = 0; i < t->done; i++)
        if (kiln_batcher_next(t->batches, t->xb, t->yb) == 0)
            kiln_batcher_next(t->batches, t->xb, t->yb);
    if (t->done > t->total)
        return kiln_tool_fail("--resume: %s has done %lld steps, more than the "
                              "%lld asked",
                              c->resume, (long long)t->done,
                              (long long)t->total);
    return 0;
}

int mlp_train(const mlp_config *c)
{
    kiln_dataset train = {0}, test = {0};
    trainer t = {0};
    epoch_row *rows = NULL;
    int rc = 1;
    if (tool_dist_begin(&t.d) || (tool_dist_leads(&t.d) && check_outputs(c)) ||
        load_both(c, &train, &test))
        goto done;
    kiln_set_num_threads(c->threads);
    mlp_config cnn;
    if (c->arch == 1) { /* one dense hidden layer, 512 wide by default */
        cnn = *c;
        cnn.hidden[0] = c->hidden_given ? c->hidden[0] : 512;
        cnn.n_hidden = 1;
        c = &cnn;
    }
    int64_t per_epoch = train.count / c->batch;
    if (per_epoch < 1) {
        kiln_tool_fail("--batch %d is larger than the %lld training images",
                       c->batch, (long long)train.count);
        goto done;
    }
    per_epoch += train.count % c->batch != 0; /* the last, smaller batch */
    if (build_trainer(&t, c, &train, per_epoch) ||
        start_position(&t, c, &train))
        goto done;
    int epochs = (int)((t.total + t.per_epoch - 1) / t.per_epoch);
    if (!(rows = calloc((size_t)epochs + 1, sizeof *rows))) {
        kiln_tool_fail("out of memory");
        goto done;
    }
    if (train_epochs(&t, c, &test, rows))
        goto done;
    rc = 0;
    /* the save is collective: every rank reaches it, whatever the plot */
    int plot_failed = tool_dist_leads(&t.d) && c->plot &&
                      have_program("gnuplot") && plot(rows, epochs, c->plot);
    if ((c->save && save_model(&t, c)) || plot_failed)
        rc = 1;
done:
    /* a failure of this rank alone ends the job, not a hang */
    rc = tool_dist_finish(&t.d, rc);
    trainer_free(&t);
    free(rows);
    kiln_dataset_free(&train);
    kiln_dataset_free(&test);
    return rc;
}

int mlp_eval(const mlp_config *c0)
{
    mlp_config c = *c0;
    int64_t in_dim = 0;
    if (mlp_read_architecture(c.model, &c, &in_dim))
        return 1;
    kiln_dataset test = {0};
    if (load_split(&c, 0, &test)) {
        kiln_dataset_free(&test);
        return 1;
    }
    int rc = 1;
    kiln_session *s = kiln_session_new(NULL);
    evaluator e = {0};
    double loss, acc;
    if (c.arch == 0 && test.rows * test.cols != in_dim) {
        kiln_tool_fail("%s expects %lld inputs, the data has %lld", c.model,
                       (long long)in_dim, (long long)(test.rows * test.cols));
    } else if (kiln_session_load(s, c.model) != KILN_OK) {
        kiln_tool_fail("%s", kiln_session_error(s));
    } else if ((e.own = kiln_graph_new()) &&
               !evaluator_init(
                   &e, s, e.own,
                   build(e.own, &c, EVAL_BATCH, test.rows, test.cols)) &&
               !evaluate(&e, &test, &loss, &acc)) {
        printf("test loss: %.4f\ntest accuracy: %.4f\n", loss, acc);
        rc = 0;
    }
    evaluator_free(&e);
    kiln_session_free(s);
    kiln_dataset_free(&test);
    return rc;
}
