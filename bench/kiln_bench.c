/* Kiln's side of the benchmarks: one measurement per run, printed as
 *   RESULT <value> <unit>
 * so that bench/run can interleave it with the PyTorch script doing the same
 * work (bench/torch_bench.py takes the same arguments).
 *
 *   kiln_bench train  LAYERS ACT BATCH THREADS   samples/s of SGD steps
 *   kiln_bench logreg BATCH THREADS              samples/s, 4 features
 *   kiln_bench infer  LAYERS BATCH THREADS       latency of a forward, us
 *   kiln_bench epoch  DATA_DIR THREADS           seconds of an MNIST epoch
 *   kiln_bench memory LAYERS BATCH THREADS       peak RSS (MiB) and buffers
 *   kiln_bench memory-unplanned LAYERS BATCH THREADS   the same, compiled
 *                                                without memory planning
 *
 * LAYERS is "784-600-10"; ACT is relu or gelu.  KILN_BENCH_SECONDS sets the
 * timed duration of one measurement (default 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kiln.h"
#include "timing.h"

enum { MAX_LAYERS = 8 };

typedef struct net {
    int n; /* number of sizes: n - 1 layers */
    int64_t size[MAX_LAYERS];
    int gelu;
} net;

static int parse_layers(const char *s, net *m)
{
    m->n = 0;
    while (*s && m->n < MAX_LAYERS) {
        char *end;
        m->size[m->n++] = strtoll(s, &end, 10);
        if (end == s)
            return -1;
        s = *end == '-' ? end + 1 : end;
    }
    return m->n >= 2 ? 0 : -1;
}

static void die(const char *what, const char *msg)
{
    bench_die("kiln_bench", what, msg);
}

typedef struct model {
    kiln_node *x, *y, *logits, *loss;
} model;

/* The MLP of tools/mlp.c: affine layers with relu or gelu between them and
   softmax cross-entropy on the logits. */
static model build_mlp(kiln_graph *g, const net *m, int batch)
{
    model r;
    r.x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(batch, m->size[0]));
    r.y = kiln_input(g, "Y", KILN_I32, KILN_SHAPE(batch));
    kiln_node *h = r.x;
    for (int i = 0; i + 1 < m->n; i++) {
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "fc%d.W", i);
        snprintf(bn, sizeof bn, "fc%d.b", i);
        kiln_node *w = kiln_variable(g, wn, KILN_F32,
                                     KILN_SHAPE(m->size[i], m->size[i + 1]),
                                     kiln_init_glorot_uniform());
        kiln_node *b = kiln_variable(
            g, bn, KILN_F32, KILN_SHAPE(m->size[i + 1]), kiln_init_zeros());
        h = kiln_affine(g, h, w, b);
        if (i + 2 < m->n)
            h = m->gelu ? kiln_gelu(g, h) : kiln_relu(g, h);
    }
    r.logits = h;
    r.loss = kiln_softmax_cross_entropy(g, h, r.y);
    return r;
}

/* Logistic regression on 4 features: sigmoid(x w + b), binary
   cross-entropy, labels as f32 0/1. */
static model build_logreg(kiln_graph *g, int batch)
{
    model r;
    r.x = kiln_input(g, "X", KILN_F32, KILN_SHAPE(batch, 4));
    r.y = kiln_input(g, "Y", KILN_F32, KILN_SHAPE(batch, 1));
    kiln_node *w =
        kiln_variable(g, "w", KILN_F32, KILN_SHAPE(4, 1), kiln_init_zeros());
    kiln_node *b =
        kiln_variable(g, "b", KILN_F32, KILN_SHAPE(1), kiln_init_zeros());
    r.logits = kiln_sigmoid(g, kiln_affine(g, r.x, w, b));
    r.loss = kiln_binary_cross_entropy(g, r.logits, r.y);
    return r;
}

typedef struct trainer {
    kiln_session *s;
    kiln_graph *g;
    kiln_optimizer *opt;
    kiln_function *f;
    model m;
} trainer;

/* Session, graph and the compiled SGD step (forward, backward, update);
   plan = 0 compiles without memory planning. */
static void trainer_init_ex(trainer *t, const net *m, int batch, int logreg,
                            int plan)
{
    kiln_session_options so = {.seed = 1};
    t->s = kiln_session_new(&so);
    t->g = kiln_graph_new();
    t->m = logreg ? build_logreg(t->g, batch) : build_mlp(t->g, m, batch);
    kiln_optim_options o = kiln_optim_defaults(KILN_SGD);
    o.lr = 0.01f;
    t->opt = kiln_optimizer_new(t->s, &o);
    if (!t->opt)
        die("optimizer", kiln_session_error(t->s));
    kiln_node *step = kiln_optimizer_build_step(t->opt, t->g, t->m.loss);
    kiln_node *outs[2] = {t->m.loss, step}, *ins[2] = {t->m.x, t->m.y};
    kiln_compile_options co = kiln_compile_defaults();
    co.plan_memory = plan;
    t->f = kiln_compile_ex(t->s, t->g, outs, 2, ins, 2, &co);
    if (!t->f)
        die("compile", kiln_session_error(t->s));
    if (getenv("KILN_BENCH_PRINT"))
        kiln_function_print(t->f, stderr);
}

static void trainer_init(trainer *t, const net *m, int batch, int logreg)
{
    trainer_init_ex(t, m, batch, logreg, 1);
}

static void trainer_free(trainer *t)
{
    kiln_optimizer_free(t->opt);
    kiln_graph_free(t->g);
    kiln_session_free(t->s);
}

/* Inputs with plausible values: pixels in [0, 1), labels in range. */
static void fill_inputs(kiln_tensor *x, kiln_tensor *y, int classes, int logreg)
{
    kiln_rng r;
    kiln_rng_seed(&r, 7);
    float *xs = kiln_tensor_f32(x);
    for (int64_t i = 0; i < kiln_tensor_numel(x); i++)
        xs[i] = (float)kiln_rng_uniform(&r);
    for (int64_t i = 0; i < kiln_tensor_numel(y); i++) {
        if (logreg)
            kiln_tensor_f32(y)[i] = (float)(kiln_rng_u32(&r) & 1);
        else
            kiln_tensor_i32(y)[i] =
                (int32_t)(kiln_rng_u32(&r) % (uint32_t)classes);
    }
}

/* Runs f repeatedly for about the benchmark duration after a warm-up;
   returns seconds per run. */
static double time_runs(kiln_function *f, kiln_session *s,
                        kiln_tensor *const *in, kiln_tensor *const *out)
{
    double budget = bench_seconds();
    double t0 = kiln_now();
    while (kiln_now() - t0 < 0.1 * budget)
        if (kiln_run(f, in, out) != KILN_OK)
            die("run", kiln_session_error(s));
    long runs = 0;
    t0 = kiln_now();
    double t;
    do {
        for (int i = 0; i < 8; i++)
            kiln_run(f, in, out);
        runs += 8;
        t = kiln_now() - t0;
    } while (t < budget);
    return t / (double)runs;
}

static int cmd_train(const net *m, int batch, int logreg)
{
    trainer t;
    trainer_init(&t, m, batch, logreg);
    kiln_tensor *x = kiln_tensor_new(KILN_F32, kiln_node_shape(t.m.x));
    kiln_tensor *y =
        kiln_tensor_new(kiln_node_dtype(t.m.y), kiln_node_shape(t.m.y));
    kiln_tensor *loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    fill_inputs(x, y, logreg ? 2 : (int)m->size[m->n - 1], logreg);
    kiln_tensor *in[2] = {x, y}, *out[2] = {loss, NULL};
    double sec = time_runs(t.f, t.s, in, out);
    printf("RESULT %.1f samples/s\n", batch / sec);
    fprintf(stderr, "loss after the runs: %g\n", kiln_tensor_f32(loss)[0]);
    kiln_tensor_free(x);
    kiln_tensor_free(y);
    kiln_tensor_free(loss);
    trainer_free(&t);
    return 0;
}

static int cmd_infer(const net *m, int batch)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *g = kiln_graph_new();
    model r = build_mlp(g, m, batch);
    kiln_function *f = kiln_compile(s, g, &r.logits, 1, &r.x, 1);
    if (!f)
        die("compile", kiln_session_error(s));
    kiln_tensor *x = kiln_tensor_new(KILN_F32, kiln_node_shape(r.x));
    kiln_tensor *y = kiln_function_new_output(f, 0);
    kiln_tensor *lab = kiln_tensor_new(KILN_I32, KILN_SHAPE(batch));
    fill_inputs(x, lab, 10, 0);
    double sec = time_runs(f, s, &x, &y);
    printf("RESULT %.2f us\n", sec * 1e6);
    kiln_tensor_free(x);
    kiln_tensor_free(y);
    kiln_tensor_free(lab);
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}

/* One shuffled epoch of 784-600-10 relu at batch 128 over the MNIST
   training set, batching included; the data is loaded before the clock. */
static int cmd_epoch(const char *dir)
{
    kiln_tensor *tx, *ty;
    if (kiln_mnist_load(dir, 1, 1.0f / 255, &tx, &ty) != KILN_OK)
        die("mnist", kiln_last_error());
    net m = {3, {784, 600, 10}, 0};
    trainer t;
    trainer_init(&t, &m, 128, 0);
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(128, 784));
    kiln_tensor *yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(128));
    kiln_tensor *loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_tensor *in[2] = {xb, yb}, *out[2] = {loss, NULL};
    double t0 = kiln_now(), sum = 0;
    kiln_batcher *b = kiln_batcher_new(tx, ty, 128, 1, 1, 1);
    int steps = 0;
    while (kiln_batcher_next(b, xb, yb) > 0) {
        if (kiln_run(t.f, in, out) != KILN_OK)
            die("run", kiln_session_error(t.s));
        sum += kiln_tensor_f32(loss)[0];
        steps++;
    }
    double sec = kiln_now() - t0;
    printf("RESULT %.3f s\n", sec);
    fprintf(stderr, "%d steps, mean loss %.4f\n", steps, sum / steps);
    kiln_batcher_free(b);
    kiln_tensor_free(xb);
    kiln_tensor_free(yb);
    kiln_tensor_free(loss);
    kiln_tensor_free(tx);
    kiln_tensor_free(ty);
    trainer_free(&t);
    return 0;
}

/* Bytes of buffers of the compiled function and of one buffer per value,
   read from its printed schedule's header line. */
static void buffer_bytes(const kiln_function *f, size_t *planned,
                         size_t *unplanned)
{
    char *text = NULL;
    size_t len = 0;
    *planned = *unplanned = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return;
    kiln_function_print(f, mem);
    fclose(mem);
    const char *p = strstr(text, "kernels, "),
               *q = strstr(text, "bytes of buffers (");
    if (p)
        *planned = *unplanned = (size_t)strtoull(p + 9, NULL, 10);
    if (q)
        *unplanned = (size_t)strtoull(q + 18, NULL, 10);
    free(text);
}

static int cmd_memory(const net *m, int batch, int plan)
{
    trainer t;
    trainer_init_ex(&t, m, batch, 0, plan);
    kiln_tensor *x = kiln_tensor_new(KILN_F32, kiln_node_shape(t.m.x));
    kiln_tensor *y = kiln_tensor_new(KILN_I32, kiln_node_shape(t.m.y));
    kiln_tensor *loss = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    fill_inputs(x, y, (int)m->size[m->n - 1], 0);
    kiln_tensor *in[2] = {x, y}, *out[2] = {loss, NULL};
    for (int i = 0; i < 20; i++)
        kiln_run(t.f, in, out);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("RESULT %.1f MiB\n", ru.ru_maxrss / 1024.0);
    size_t planned, unplanned;
    buffer_bytes(t.f, &planned, &unplanned);
    printf("BUFFERS %zu bytes\n", planned);
    if (plan)
        printf("BUFFERS_ONE_PER_VALUE %zu bytes\n", unplanned);
    kiln_tensor_free(x);
    kiln_tensor_free(y);
    kiln_tensor_free(loss);
    trainer_free(&t);
    return 0;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: kiln_bench train LAYERS relu|gelu BATCH THREADS\n"
            "       kiln_bench logreg BATCH THREADS\n"
            "       kiln_bench infer LAYERS BATCH THREADS\n"
            "       kiln_bench epoch DATA_DIR THREADS\n"
            "       kiln_bench memory[-unplanned] LAYERS BATCH THREADS\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    net m = {0};
    kiln_set_num_threads(atoi(argv[argc - 1]));
    if (!strcmp(cmd, "train") && argc == 6) {
        if (parse_layers(argv[2], &m))
            return usage();
        m.gelu = !strcmp(argv[3], "gelu");
        return cmd_train(&m, atoi(argv[4]), 0);
    }
    if (!strcmp(cmd, "logreg") && argc == 4)
        return cmd_train(&m, atoi(argv[2]), 1);
    if (!strcmp(cmd, "infer") && argc == 5) {
        if (parse_layers(argv[2], &m))
            return usage();
        return cmd_infer(&m, atoi(argv[3]));
    }
    if (!strcmp(cmd, "epoch") && argc == 4)
        return cmd_epoch(argv[2]);
    if ((!strcmp(cmd, "memory") || !strcmp(cmd, "memory-unplanned")) &&
        argc == 5) {
        if (parse_layers(argv[2], &m))
            return usage();
        return cmd_memory(&m, atoi(argv[3]), !strcmp(cmd, "memory"));
    }
    return usage();
}
