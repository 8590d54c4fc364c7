/* Marian's expression-graph walkthrough in C, step by step:
     1. a graph over a reserved workspace: z = x*y + sin(x) from constants,
        and its layout in Graphviz;
     2. x becomes a parameter: forward, backward, dz/dx, with debug(x);
     3. the loss |6 - z| and one Sgd update (Marian's opt->update(graph)),
        then the same loss trained with each optimiser: Sgd, Adagrad, Adam;
     4. params(): the session's variables;
     5. save and load, in .npz and in Kiln's .bin;
     6. gradient checkpointing on a deeper graph: same gradients, less
        workspace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

static int fail(kiln_session *s, const char *what)
{
    fprintf(stderr, "expression_graph: %s: %s\n", what, kiln_session_error(s));
    return 1;
}

/* The log (and so debug output) on stdout, in line with the rest. */
static void log_to_stdout(kiln_logging_level level, const char *line,
                          void *user)
{
    (void)level;
    (void)user;
    printf("%s\n", line);
}

/* z = x*y + sin(x) with x a parameter and y = 3. */
static kiln_node *build_z(kiln_graph *graph, kiln_node **x)
{
    *x = kiln_variable(graph, "x", KILN_F32, KILN_SHAPE(1, 1),
                       kiln_init_value(2.0));
    kiln_node *y = kiln_fill(graph, KILN_SHAPE(1, 1), 3.0f);
    return kiln_add(graph, kiln_mul(graph, *x, y), kiln_sin(graph, *x));
}

/* loss = |actual - z| with actual = 6. */
static kiln_node *build_loss(kiln_graph *graph, kiln_node **x)
{
    kiln_node *z = build_z(graph, x);
    kiln_node *actual = kiln_fill(graph, KILN_SHAPE(1, 1), 6.0f);
    return kiln_sum(graph, kiln_abs(graph, kiln_sub(graph, actual, z)),
                    KILN_ALL_AXES, 0);
}

static float read_x(kiln_session *s)
{
    kiln_tensor *xv = kiln_tensor_new(KILN_F32, KILN_SHAPE(1, 1));
    float v = kiln_variable_read(s, "x", xv) == KILN_OK ? kiln_tensor_f32(xv)[0]
                                                        : -1.0f;
    kiln_tensor_free(xv);
    return v;
}

/* Trains x on the loss with one optimiser, rebuilding the graph each step
   as Marian does; prints where x and the loss end up. */
static int train_with(kiln_optim_kind kind, const char *name, float lr,
                      int steps)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *graph = kiln_graph_new();
    kiln_optim_options o = kiln_optim_defaults(kind);
    o.lr = lr;
    kiln_optimizer *opt = kiln_optimizer_new(s, &o);
    if (!opt)
        return fail(s, "optimizer");
    float loss_v = 0;
    for (int step = 0; step < steps; step++) {
        kiln_graph_clear(graph);
        kiln_node *x, *loss = build_loss(graph, &x);
        if (kiln_backprop(s, graph, loss) != KILN_OK)
            return fail(s, "backprop");
        loss_v = kiln_node_value_f32(s, loss)[0];
        if (kiln_optimizer_update(opt, graph) != KILN_OK)
            return fail(s, "update");
    }
    printf("%-7s lr=%-5g %d steps: x=%.5f loss=%.5f\n", name, lr, steps,
           read_x(s), loss_v);
    kiln_optimizer_free(opt);
    kiln_graph_free(graph);
    kiln_session_free(s);
    return 0;
}

/* A 12-layer tanh chain over a [64, 64] batch. */
static kiln_node *build_deep(kiln_graph *graph, int checkpoint_every,
                             kiln_node **w0)
{
    kiln_node *h = kiln_fill(graph, KILN_SHAPE(64, 64), 0.1f);
    for (int i = 0; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof name, "deep.W%d", i);
        kiln_node *w = kiln_variable(graph, name, KILN_F32, KILN_SHAPE(64, 64),
                                     kiln_init_glorot_uniform());
        if (i == 0)
            *w0 = w;
        h = kiln_tanh(graph, kiln_matmul(graph, h, w, 0, 0));
        if (checkpoint_every && (i + 1) % checkpoint_every == 0)
            kiln_checkpoint(h);
    }
    return kiln_mean(graph, kiln_mul(graph, h, h), KILN_ALL_AXES, 0);
}

static int checkpointing_demo(kiln_session *s, kiln_graph *graph)
{
    float *grads[2];
    size_t peak[2];
    for (int c = 0; c < 2; c++) {
        kiln_graph_clear(graph);
        kiln_session_set_checkpointing(s, graph, c);
        kiln_node *w0, *loss = build_deep(graph, c ? 4 : 0, &w0);
        if (kiln_backprop(s, graph, loss) != KILN_OK)
            return fail(s, "checkpointed backprop");
        kiln_tensor *g0 = kiln_node_grad(s, w0);
        if (!g0)
            return fail(s, "gradient of deep.W0");
        grads[c] = malloc(64 * 64 * sizeof(float));
        memcpy(grads[c], kiln_tensor_f32(g0), 64 * 64 * sizeof(float));
        kiln_tensor_free(g0);
        kiln_workspace_stats ws;
        kiln_session_workspace_stats(s, graph, &ws);
        peak[c] = ws.peak;
    }
    int same = memcmp(grads[0], grads[1], 64 * 64 * sizeof(float)) == 0;
    printf("checkpointing: gradients %s, peak workspace %zu kB -> %zu kB\n",
           same ? "identical" : "DIFFER", peak[0] >> 10, peak[1] >> 10);
    free(grads[0]);
    free(grads[1]);
    kiln_session_set_checkpointing(s, graph, 0);
    return same ? 0 : 1;
}

int main(void)
{
    kiln_set_logging_callback(log_to_stdout, NULL);
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *graph = kiln_graph_new();
    /* Marian: graph->setDevice({0, DeviceType::cpu}); reserveWorkspaceMB(8) */
    if (kiln_session_reserve_workspace_mb(s, graph, 8) != KILN_OK)
        return fail(s, "reserve");

    /* 1. Constants only; the layout is printed before the computation. */
    kiln_node *x = kiln_scalar(graph, 2.0f);
    kiln_node *y = kiln_scalar(graph, 3.0f);
    kiln_node *z = kiln_add(graph, kiln_mul(graph, x, y), kiln_sin(graph, x));
    printf("graphviz:\n");
    kiln_graph_write_dot(graph, stdout);
    if (kiln_forward(s, graph) != KILN_OK)
        return fail(s, "forward");
    printf("z=%.4f\n", kiln_node_value_f32(s, z)[0]);

    /* 2. x becomes a parameter, marked for debugging; backward gives dz/dx. */
    kiln_graph_clear(graph);
    z = build_z(graph, &x);
    kiln_debug(x, "Parameter x");
    kiln_node *zs = kiln_sum(graph, z, KILN_ALL_AXES, 0);
    if (kiln_backprop(s, graph, zs) != KILN_OK)
        return fail(s, "backprop");
    printf("z=%.4f\n", kiln_node_value_f32(s, z)[0]);
    printf("dz/dx=%.5f\n", kiln_node_grad_f32(s, x)[0]);

    /* 3. The loss |6 - z| and one Sgd update with learning rate 0.005. */
    kiln_graph_clear(graph);
    kiln_node *loss = build_loss(graph, &x);
    if (kiln_backprop(s, graph, loss) != KILN_OK)
        return fail(s, "backprop");
    printf("loss=%.4f\n", kiln_node_value_f32(s, loss)[0]);
    kiln_optim_options sgd = kiln_optim_defaults(KILN_SGD);
    sgd.lr = 0.005f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &sgd);
    if (!opt || kiln_optimizer_update(opt, graph) != KILN_OK)
        return fail(s, "sgd update");
    kiln_optimizer_free(opt);
    printf("x=%.5f\n", read_x(s));

    /* Choosing the optimiser: the same loss trained for 50 steps each. */
    if (train_with(KILN_SGD, "Sgd", 0.005f, 50) ||
        train_with(KILN_ADAGRAD, "Adagrad", 0.05f, 50) ||
        train_with(KILN_ADAM, "Adam", 0.01f, 50))
        return 1;

    /* 4. params(): every variable the session holds (x and the Sgd step). */
    printf("params:\n");
    kiln_session_print_variables(s, stdout);

    /* 5. Save and load the parameters, in .npz and in .bin. */
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    const char *ext[] = {"npz", "bin"};
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/expression_graph_model.%s", dir,
                 ext[i]);
        kiln_session *loaded = kiln_session_new(NULL);
        if (kiln_session_save(s, path) != KILN_OK)
            return fail(s, "save");
        if (kiln_session_load(loaded, path) != KILN_OK)
            return fail(loaded, "load");
        printf("saved and loaded .%s: %d variables, x=%.5f\n", ext[i],
               kiln_session_num_variables(loaded), read_x(loaded));
        kiln_session_free(loaded);
        remove(path);
    }

    /* 6. Gradient checkpointing. */
    if (checkpointing_demo(s, graph))
        return 1;

    kiln_graph_free(graph);
    kiln_session_free(s);
    kiln_set_logging_callback(NULL, NULL);
    return 0;
}
