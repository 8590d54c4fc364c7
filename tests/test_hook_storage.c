/* Hooked values kept in a gradient sync's own memory (kiln_grad_sync
   .storage, runtime/hooks.c): a compiled run computes a hooked node and
   the buffers below it straight into the memory the sync offers, reads
   the value the sync leaves there, and falls back to its own buffers when
   the sync offers none, when another step reads a buffer below the hook,
   or when no sync is registered. */
#include "test_helpers.h"

#include "runtime/variant.h"

enum { N = 6 };

/* A sync that offers mem for hook 1 (when offer is set) and multiplies
   the value by 10 when it is needed, recording where it saw it. */
typedef struct fake {
    float mem[N];
    int offer;
    void *computed_at, *needed_at;
    int storage_calls;
} fake;

static kiln_status computed(void *ctx, int hook, void *data)
{
    fake *f = ctx;
    assert_int_equal(hook, 1);
    f->computed_at = data;
    return KILN_OK;
}

static kiln_status needed(void *ctx, int hook, void *data)
{
    fake *f = ctx;
    assert_int_equal(hook, 1);
    if (f->needed_at != data)
        for (int i = 0; i < N; i++)
            ((float *)data)[i] *= 10.0f;
    f->needed_at = data;
    return KILN_OK;
}

static void *storage(void *ctx, int hook, size_t bytes)
{
    fake *f = ctx;
    assert_int_equal(hook, 1);
    assert_int_equal(bytes, N * sizeof(float));
    f->storage_calls++;
    return f->offer ? f->mem : NULL;
}

static void progress(void *ctx)
{
    (void)ctx;
}

/* exp(x) through a view into a hooked copy, read through a view: out =
   2 * (the value the sync leaves); with shared set, exp(x) + 1 is a
   second output (exp(x) then has another reader). */
static void run_case(fake *f, int with_sync, int shared)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_grad_sync sync = {.ctx = f,
                           .computed = computed,
                           .needed = needed,
                           .storage = storage,
                           .progress = progress};
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *a = kiln_exp(g, x);
    kiln_node *h = kiln_stop_gradient(g, kiln_reshape(g, a, KILN_SHAPE(N)));
    h->hook = 1;
    kiln_node *outs[2] = {
        kiln_mul(g, kiln_reshape(g, h, KILN_SHAPE(3, 2)), kiln_scalar(g, 2)),
        kiln_add(g, a, kiln_scalar(g, 1))};
    kiln_function *fn = kiln_compile(s, g, outs, shared ? 2 : 1, &x, 1);
    assert_non_null(fn);
    if (with_sync)
        s->sync = &sync;
    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    kiln_tensor *out = kiln_tensor_new(KILN_F32, KILN_SHAPE(3, 2));
    kiln_tensor *out2 = kiln_tensor_new(KILN_F32, KILN_SHAPE(2, 3));
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            kiln_tensor_f32(in)[i] = 0.1f * (float)(i + round);
        kiln_tensor *outv[2] = {out, out2};
        f->needed_at = NULL;
        if (!with_sync) {
            /* the step would use values the sync never made */
            assert_int_equal(kiln_run(fn, &in, outv), KILN_ERR_STATE);
            assert_non_null(
                strstr(kiln_session_error(s), "none is attached now"));
            continue;
        }
        assert_int_equal(kiln_run(fn, &in, outv), KILN_OK);
        for (int i = 0; i < N; i++) {
            float e = expf(0.1f * (float)(i + round));
            assert_float_equal(kiln_tensor_f32(out)[i], 20.0f * e, 1e-5 * e);
            if (shared)
                assert_float_equal(kiln_tensor_f32(out2)[i], e + 1, 1e-5 * e);
        }
    }
    s->sync = NULL;
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_tensor_free(out2);
    kiln_graph_free(g);
    kiln_session_free(s);
}

/* The hook's value, and exp's, computed in the sync's memory. */
static void test_kept_in_sync_memory(void **state)
{
    (void)state;
    fake f = {.offer = 1};
    run_case(&f, 1, 0);
    assert_ptr_equal(f.computed_at, f.mem);
    assert_ptr_equal(f.needed_at, f.mem);
    assert_true(f.storage_calls >= 2);
    /* what the sync left there: 10 exp(x) of the second round */
    for (int i = 0; i < N; i++)
        assert_float_equal(f.mem[i], 10.0f * expf(0.1f * (float)(i + 1)), 1e-4);
}

/* No memory offered: the run's own buffers. */
static void test_not_offered(void **state)
{
    (void)state;
    fake f = {.offer = 0};
    run_case(&f, 1, 0);
    assert_non_null(f.computed_at);
    assert_ptr_not_equal(f.computed_at, f.mem);
    assert_ptr_equal(f.needed_at, f.computed_at);
}

/* exp(x) is also an output: it keeps its buffer (exp(x) + 1 sees exp(x),
   not what the sync wrote), the hooked copy is made into the sync's
   memory. */
static void test_shared_value_not_moved(void **state)
{
    (void)state;
    fake f = {.offer = 1};
    run_case(&f, 1, 1);
    assert_ptr_equal(f.computed_at, f.mem);
}

/* Compiled with a hook but run with no sync: refused, nothing called. */
static void test_no_sync(void **state)
{
    (void)state;
    fake f = {.offer = 1};
    run_case(&f, 0, 0);
    assert_null(f.computed_at);
    assert_int_equal(f.storage_calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_in_sync_memory),
        cmocka_unit_test(test_not_offered),
        cmocka_unit_test(test_shared_value_not_moved),
        cmocka_unit_test(test_no_sync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
