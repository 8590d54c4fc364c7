/* The optimiser's graph form under a gradient sync (kiln_grad_sync, the
   data-parallel hook): the updates are built in the order backward makes
   the gradients (the last layer's first), so a compiled step asks for the
   synchronised gradient of the last layer first and for the first layer's
   (summed last) at the end, instead of waiting for that one before any
   update can run.  Without a sync the order does not matter and the
   values are those of the same step without it. */
#include "test_helpers.h"

#include "runtime/runtime.h"

enum { LAYERS = 3 };

/* Hooks every gradient (keys 1.. in the variables' order) and records the
   order the run needs them in. */
typedef struct order_sync {
    int seen[16], n_seen;
} order_sync;

static void build(void *ctx, kiln_graph *g, kiln_node *const *vars,
                  kiln_node **grads, int n)
{
    (void)ctx, (void)vars;
    for (int i = 0; i < n; i++) {
        kiln_node *m = kiln_stop_gradient(g, grads[i]);
        m->hook = i + 1;
        grads[i] = m;
    }
}

static kiln_status computed(void *ctx, int hook, void *data)
{
    (void)ctx, (void)hook, (void)data;
    return KILN_OK;
}

static kiln_status needed(void *ctx, int hook, void *data)
{
    (void)data;
    order_sync *o = ctx;
    if (o->n_seen < 16)
        o->seen[o->n_seen++] = hook;
    return KILN_OK;
}

static void progress(void *ctx)
{
    (void)ctx;
}

/* A 3-layer tanh MLP's SGD step on fixed data, run once; W0 (the first
   layer's weight) into w0. */
static void run_step(kiln_grad_sync *sync, float *w0)
{
    kiln_session_options so = {.seed = 4, .threads = 1};
    kiln_session *s = kiln_session_new(&so);
    s->sync = sync;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(4, 5));
    kiln_node *h = x;
    const int width[LAYERS + 1] = {5, 6, 7, 3};
    for (int l = 0; l < LAYERS; l++) {
        char name[8];
        snprintf(name, sizeof name, "W%d", l);
        kiln_node *w =
            kiln_variable(g, name, KILN_F32, KILN_SHAPE(width[l], width[l + 1]),
                          kiln_init_uniform(-0.5, 0.5));
        h = kiln_tanh(g, kiln_matmul(g, h, w, 0, 0));
    }
    kiln_node *loss = kiln_sum(g, kiln_mul(g, h, h), KILN_ALL_AXES, 0);
    kiln_optim_options oo = kiln_optim_defaults(KILN_SGD);
    oo.lr = 0.1f;
    kiln_optimizer *opt = kiln_optimizer_new(s, &oo);
    kiln_node *outs[2] = {loss, kiln_optimizer_build_step(opt, g, loss)};
    kiln_function *f = kiln_compile(s, g, outs, 2, &x, 1);
    assert_non_null(f);
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(4, 5));
    for (int i = 0; i < 20; i++)
        kiln_tensor_f32(in)[i] = 0.05f * (float)(i - 7);
    kiln_tensor *out[2] = {NULL, NULL};
    assert_int_equal(kiln_run(f, &in, out), KILN_OK);
    kiln_tensor *w = kiln_tensor_new(KILN_F32, KILN_SHAPE(5, 6));
    assert_int_equal(kiln_variable_read(s, "W0", w), KILN_OK);
    memcpy(w0, kiln_tensor_f32(w), 30 * sizeof(float));
    s->sync = NULL;
    kiln_tensor_free(w);
    kiln_tensor_free(in);
    kiln_optimizer_free(opt);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_last_layer_first(void **state)
{
    (void)state;
    order_sync o = {0};
    kiln_grad_sync sync = {.ctx = &o,
                           .build = build,
                           .computed = computed,
                           .needed = needed,
                           .progress = progress};
    float with[30], without[30];
    run_step(&sync, with);
    /* W2's gradient is made first, W0's last */
    assert_int_equal(o.n_seen, LAYERS);
    for (int k = 0; k < LAYERS; k++)
        assert_int_equal(o.seen[k], LAYERS - k);
    /* the sync changes no value: the same update as without it */
    run_step(NULL, without);
    for (int i = 0; i < 30; i++)
        assert_float_equal(with[i], without[i], 1e-6);
    assert_true(fabsf(with[0]) > 0.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_layer_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
