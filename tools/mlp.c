/* Training and evaluation of a fully connected classifier with the compiled
   path: one function runs forward, backward and the optimiser update. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

enum { N_CLASSES = 10, EVAL_BATCH = 1000 };
static const char *const ACT_KEY = "kiln.activation";

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

static kiln_node *activate(kiln_graph *g, kiln_node *h, int act)
{
    return act == 0   ? kiln_relu(g, h)
           : act == 1 ? kiln_gelu(g, h)
                      : kiln_tanh(g, h);
}

/* X [batch, in] -> hidden layers -> logits [batch, 10]; variables fcK.W and
   fcK.b, shared by every graph built on the same session. */
static model build(kiln_graph *g, const mlp_config *c, int batch,
                   int64_t in_dim)
{
    model m;
    m.x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(batch, in_dim));
    m.y = kiln_input(g, "Y", KILN_I32, KILN_SHAPE(batch));
    kiln_node *h = m.x;
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
            h = activate(g, h, c->activation);
        width = out;
    }
    m.logits = h;
    m.loss = kiln_softmax_cross_entropy(g, m.logits, m.y);
    return m;
}

typedef struct evaluator {
    kiln_graph *g;
    kiln_function *f;
    kiln_tensor *x, *logits;
} evaluator;

static int evaluator_init(evaluator *e, kiln_session *s, const mlp_config *c,
                          int64_t in_dim)
{
    e->g = kiln_graph_new();
    model m = build(e->g, c, EVAL_BATCH, in_dim);
    e->f = kiln_compile(s, e->g, &m.logits, 1, &m.x, 1);
    if (!e->f)
        return kiln_tool_fail("%s", kiln_session_error(s));
    e->x = kiln_tensor_new(KILN_F32, KILN_SHAPE(EVAL_BATCH, in_dim));
    e->logits = kiln_function_new_output(e->f, 0);
    return 0;
}

static void evaluator_free(evaluator *e)
{
    kiln_tensor_free(e->x);
    kiln_tensor_free(e->logits);
    kiln_graph_free(e->g);
}

/* Test loss and accuracy in batches of EVAL_BATCH, the last one padded. */
static int evaluate(evaluator *e, const kiln_tensor *x, const kiln_tensor *y,
                    double *loss, double *acc)
{
    int64_t n = kiln_tensor_shape(x).d[0], d = kiln_tensor_shape(x).d[1];
    const float *xs = kiln_tensor_f32(x);
    const int32_t *ys = kiln_tensor_i32(y);
    double total = 0;
    int64_t correct = 0;
    for (int64_t start = 0; start < n; start += EVAL_BATCH) {
        int64_t rows = n - start < EVAL_BATCH ? n - start : EVAL_BATCH;
        memset(kiln_tensor_f32(e->x), 0,
               (size_t)(EVAL_BATCH * d) * sizeof(float));
        memcpy(kiln_tensor_f32(e->x), xs + start * d,
               (size_t)(rows * d) * sizeof(float));
        if (kiln_run(e->f, &e->x, &e->logits) != KILN_OK)
            return 1;
        const float *z = kiln_tensor_f32(e->logits);
        for (int64_t i = 0; i < rows; i++) {
            const float *row = z + i * N_CLASSES;
            int best = 0;
            for (int k = 1; k < N_CLASSES; k++)
                best = row[k] > row[best] ? k : best;
            double sum = 0;
            for (int k = 0; k < N_CLASSES; k++)
                sum += exp((double)row[k] - row[best]);
            total += -((double)row[ys[start + i]] - row[best] - log(sum));
            correct += best == ys[start + i];
        }
    }
    *loss = total / (double)n;
    *acc = (double)correct / (double)n;
    return 0;
}

static int load_split(const mlp_config *c, int train, kiln_tensor **x,
                      kiln_tensor **y)
{
    if (kiln_mnist_load(c->data_dir, train, 1.0f / 255, x, y) != KILN_OK)
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

static void plot(const char *csv, const char *png)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "kiln: gnuplot not found: no plot written (apt-get "
                        "install gnuplot-nox)\n");
        return;
    }
    FILE *gp = popen("gnuplot", "w");
    if (!gp)
        return;
    fprintf(gp,
            "set terminal png size 900,400\nset output '%s'\n"
            "set datafile separator ','\nset multiplot layout 1,2\n"
            "set xlabel 'epoch'\nset title 'loss'\n"
            "plot '%s' every ::1 using 1:2 with linespoints title 'train', "
            "'' every ::1 using 1:3 with linespoints title 'test'\n"
            "set title 'test accuracy'\n"
            "plot '%s' every ::1 using 1:4 with linespoints notitle\n"
            "unset multiplot\n",
            png, csv, csv);
    if (pclose(gp) == 0)
        fprintf(stderr, "kiln: plot written to %s\n", png);
}

typedef struct trainer {
    kiln_session *s;
    kiln_graph *g;
    kiln_optimizer *opt;
    kiln_function *step;
    kiln_batcher *batches;
    kiln_tensor *xb, *yb, *loss;
    evaluator eval;
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
}

static int run_epoch(trainer *t, const mlp_config *c, int epoch,
                     double *train_loss)
{
    char label[32];
    snprintf(label, sizeof label, "epoch %d/%d", epoch, c->epochs);
    kiln_progress bar;
    kiln_progress_begin(&bar, stderr, label,
                        kiln_batcher_num_batches(t->batches));
    double sum = 0;
    int64_t steps = 0;
    kiln_tensor *in[2] = {t->xb, t->yb}, *out[2] = {t->loss, NULL};
    while (kiln_batcher_next(t->batches, t->xb, t->yb) > 0) {
        if (kiln_run(t->step, in, out) != KILN_OK)
            return kiln_tool_fail("%s", kiln_session_error(t->s));
        sum += kiln_tensor_f32(t->loss)[0];
        steps++;
        kiln_progress_update(&bar, steps, sum / (double)steps, c->batch);
    }
    *train_loss = steps ? sum / (double)steps : 0;
    char summary[64];
    snprintf(summary, sizeof summary, "train loss %.4f", *train_loss);
    kiln_progress_end(&bar, summary);
    if (!isfinite(*train_loss))
        return kiln_tool_fail("training diverged (loss %g): lower --lr",
                              *train_loss);
    return 0;
}

int mlp_train(const mlp_config *c)
{
    kiln_tensor *tx, *ty, *vx, *vy;
    if (load_split(c, 1, &tx, &ty))
        return 1;
    if (load_split(c, 0, &vx, &vy)) {
        kiln_tensor_free(tx);
        kiln_tensor_free(ty);
        return 1;
    }
    kiln_set_num_threads(c->threads);
    int64_t in_dim = kiln_tensor_shape(tx).d[1];
    trainer t = {0};
    kiln_session_options so = {(uint64_t)c->seed, c->threads};
    t.s = kiln_session_new(&so);
    t.g = kiln_graph_new();
    model m = build(t.g, c, c->batch, in_dim);
    int rc = 1;
    FILE *log = NULL;
    int64_t per_epoch = kiln_tensor_shape(tx).d[0] / c->batch;
    if (per_epoch < 1) {
        kiln_tool_fail("--batch %d is larger than the %lld training images",
                       c->batch, (long long)kiln_tensor_shape(tx).d[0]);
        goto done;
    }
    if (!(t.opt = make_optimizer(t.s, c, per_epoch * c->epochs))) {
        kiln_tool_fail("%s", kiln_session_error(t.s));
        goto done;
    }
    kiln_node *update = kiln_optimizer_build_step(t.opt, t.g, m.loss);
    kiln_node *outs[2] = {m.loss, update}, *ins[2] = {m.x, m.y};
    if (!(t.step = kiln_compile(t.s, t.g, outs, 2, ins, 2))) {
        kiln_tool_fail("%s", kiln_session_error(t.s));
        goto done;
    }
    if (evaluator_init(&t.eval, t.s, c, in_dim))
        goto done;
    t.batches = kiln_batcher_new(tx, ty, c->batch, 1, 1, (uint64_t)c->seed);
    t.xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(c->batch, in_dim));
    t.yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(c->batch));
    t.loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    if (!t.batches || !t.xb || !t.yb || !t.loss) {
        kiln_tool_fail("out of memory");
        goto done;
    }
    if (c->log && !(log = fopen(c->log, "w"))) {
        kiln_tool_fail("--log: cannot write %s", c->log);
        goto done;
    }
    if (log)
        fprintf(log, "epoch,train_loss,test_loss,test_accuracy,seconds\n");
    double start = kiln_now(), acc = 0;
    for (int epoch = 1; epoch <= c->epochs; epoch++) {
        double train_loss = 0, test_loss = 0;
        if (run_epoch(&t, c, epoch, &train_loss) ||
            evaluate(&t.eval, vx, vy, &test_loss, &acc))
            goto done;
        printf(
            "epoch %d: train loss %.4f, test loss %.4f, test accuracy %.4f\n",
            epoch, train_loss, test_loss, acc);
        fflush(stdout);
        if (log)
            fprintf(log, "%d,%.6f,%.6f,%.6f,%.3f\n", epoch, train_loss,
                    test_loss, acc, kiln_now() - start);
    }
    printf("test accuracy: %.4f\n", acc);
    if (log) {
        fclose(log);
        log = NULL;
        if (c->plot)
            plot(c->log, c->plot);
    } else if (c->plot) {
        fprintf(stderr,
                "kiln: --plot needs --log (the curves are drawn from it)\n");
    }
    if (c->save) {
        int32_t code = c->activation;
        kiln_tensor *act = kiln_tensor_wrap(KILN_I32, KILN_SHAPE(1), &code);
        if (kiln_session_declare(t.s, ACT_KEY, KILN_I32, KILN_SHAPE(1),
                                 kiln_init_zeros(), 0) != KILN_OK ||
            kiln_variable_write(t.s, ACT_KEY, act) != KILN_OK ||
            kiln_session_save(t.s, c->save) != KILN_OK) {
            kiln_tensor_free(act);
            kiln_tool_fail("%s", kiln_session_error(t.s));
            goto done;
        }
        kiln_tensor_free(act);
        fprintf(stderr, "kiln: model saved to %s\n", c->save);
    }
    rc = 0;
done:
    if (log)
        fclose(log);
    trainer_free(&t);
    kiln_tensor_free(tx);
    kiln_tensor_free(ty);
    kiln_tensor_free(vx);
    kiln_tensor_free(vy);
    return rc;
}

/* Recovers the architecture from the variable shapes in the model file. */
static int read_architecture(const char *path, mlp_config *c, int64_t *in_dim)
{
    kiln_tensor_list *l = kiln_file_read(path);
    if (!l)
        return kiln_tool_fail("%s", kiln_last_error());
    c->n_hidden = 0;
    int layers = 0;
    for (; layers < MLP_MAX_LAYERS; layers++) {
        char name[32];
        snprintf(name, sizeof name, "fc%d.W", layers);
        kiln_tensor *w = kiln_tensor_list_find(l, name);
        if (!w)
            break;
        kiln_shape s = kiln_tensor_shape(w);
        if (s.ndim != 2) {
            kiln_tensor_list_free(l);
            return kiln_tool_fail("%s: %s is not a matrix", path, name);
        }
        if (layers == 0)
            *in_dim = s.d[0];
        c->hidden[layers] = (int)s.d[1];
    }
    kiln_tensor *act = kiln_tensor_list_find(l, ACT_KEY);
    c->activation = act && kiln_tensor_i32(act) ? kiln_tensor_i32(act)[0] : 0;
    kiln_tensor_list_free(l);
    if (layers < 1 || c->hidden[layers - 1] != N_CLASSES || c->activation < 0 ||
        c->activation > 2)
        return kiln_tool_fail(
            "%s: not a kiln MLP model (no fc0.W ... with 10 outputs)", path);
    c->n_hidden = layers - 1;
    return 0;
}

int mlp_eval(const mlp_config *c0)
{
    mlp_config c = *c0;
    int64_t in_dim = 0;
    if (read_architecture(c.model, &c, &in_dim))
        return 1;
    kiln_tensor *vx, *vy;
    if (load_split(&c, 0, &vx, &vy))
        return 1;
    int rc = 1;
    kiln_session *s = kiln_session_new(NULL);
    evaluator e = {0};
    double loss, acc;
    if (kiln_tensor_shape(vx).d[1] != in_dim) {
        kiln_tool_fail("%s expects %lld inputs, the data has %lld", c.model,
                       (long long)in_dim,
                       (long long)kiln_tensor_shape(vx).d[1]);
    } else if (kiln_session_load(s, c.model) != KILN_OK) {
        kiln_tool_fail("%s", kiln_session_error(s));
    } else if (!evaluator_init(&e, s, &c, in_dim) &&
               !evaluate(&e, vx, vy, &loss, &acc)) {
        printf("test loss: %.4f\ntest accuracy: %.4f\n", loss, acc);
        rc = 0;
    }
    evaluator_free(&e);
    kiln_session_free(s);
    kiln_tensor_free(vx);
    kiln_tensor_free(vy);
    return rc;
}
