#define _DEFAULT_SOURCE
/* Checkpoints: resume gives bitwise-identical weights, and bad files leave
   the session's variables untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiln.h"
#include "test_helpers.h"

enum { BATCH = 16, DIM = 4, CLASSES = 3, HIDDEN = 8 };

typedef struct run {
    kiln_session *s;
    kiln_graph *g;
    kiln_optimizer *opt;
    kiln_function *step;
    kiln_node *x, *y;
} run;

static void run_init(run *r, uint64_t seed)
{
    kiln_session_options so = {.seed = seed, .threads = 1};
    r->s = kiln_session_new(&so);
    r->g = kiln_graph_new();
    kiln_graph *g = r->g;
    r->x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(BATCH, DIM));
    r->y = kiln_input(g, "y", KILN_I32, KILN_SHAPE(BATCH));
    kiln_node *w0 = kiln_variable(g, "w0", KILN_F32, KILN_SHAPE(DIM, HIDDEN),
                                  kiln_init_glorot_uniform());
    kiln_node *b0 =
        kiln_variable(g, "b0", KILN_F32, KILN_SHAPE(HIDDEN), kiln_init_zeros());
    kiln_node *w1 =
        kiln_variable(g, "w1", KILN_F32, KILN_SHAPE(HIDDEN, CLASSES),
                      kiln_init_normal(0, 0.5));
    kiln_node *h = kiln_tanh(g, kiln_affine(g, r->x, w0, b0));
    kiln_node *loss =
        kiln_softmax_cross_entropy(g, kiln_matmul(g, h, w1, 0, 0), r->y);
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAM);
    o.lr = 0.05f;
    o.weight_decay = 0.01f;
    r->opt = kiln_optimizer_new(r->s, &o);
    assert_non_null(r->opt);
    kiln_node *outs[2] = {loss, kiln_optimizer_build_step(r->opt, g, loss)};
    kiln_node *ins[2] = {r->x, r->y};
    r->step = kiln_compile(r->s, g, outs, 2, ins, 2);
    assert_non_null(r->step);
}

static void run_free(run *r)
{
    kiln_optimizer_free(r->opt);
    kiln_graph_free(r->g);
    kiln_session_free(r->s);
}

/* Steps [from, to) of a fixed data stream: batch k is regenerated from seed
   k, so an interrupted run sees the same batches. */
static void train(run *r, int from, int to)
{
    double pv[CLASSES] = {0.3, 0.3, 0.4};
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(BATCH, DIM));
    kiln_tensor *yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(BATCH));
    for (int k = from; k < to; k++) {
        kiln_mixture *m = kiln_mixture_new(pv, CLASSES, DIM, 100 + (uint64_t)k);
        assert_int_equal(kiln_mixture_batch(m, BATCH, kiln_tensor_f32(xb),
                                            kiln_tensor_i32(yb)),
                         KILN_OK);
        kiln_mixture_free(m);
        kiln_tensor *in[2] = {xb, yb}, *out[2] = {NULL, NULL};
        assert_int_equal(kiln_run(r->step, in, out), KILN_OK);
    }
    kiln_tensor_free(xb);
    kiln_tensor_free(yb);
}

static void read_var(kiln_session *s, const char *name, kiln_shape shape,
                     float *out)
{
    kiln_tensor *t = kiln_tensor_wrap(KILN_F32, shape, out);
    assert_int_equal(kiln_variable_read(s, name, t), KILN_OK);
    kiln_tensor_free(t);
}

static void check_resume(const char *path)
{
    run a, b, c;
    run_init(&a, 7);
    train(&a, 0, 10);

    run_init(&b, 7);
    train(&b, 0, 4);
    assert_int_equal(kiln_session_save(b.s, path), KILN_OK);
    run_free(&b);

    run_init(&c, 999); /* other seed: every value must come from the file */
    assert_int_equal(kiln_session_load(c.s, path), KILN_OK);
    train(&c, 4, 10);

    const char *names[] = {"w0", "b0", "w1"};
    kiln_shape shapes[] = {KILN_SHAPE(DIM, HIDDEN), KILN_SHAPE(HIDDEN),
                           KILN_SHAPE(HIDDEN, CLASSES)};
    float va[64], vc[64];
    for (int i = 0; i < 3; i++) {
        read_var(a.s, names[i], shapes[i], va);
        read_var(c.s, names[i], shapes[i], vc);
        assert_memory_equal(
            va, vc, (size_t)kiln_shape_numel(shapes[i]) * sizeof(float));
    }
    /* and training really moved the weights */
    run d;
    run_init(&d, 7);
    float vd[64];
    read_var(d.s, "w1", shapes[2], vd);
    read_var(a.s, "w1", shapes[2], va);
    assert_true(memcmp(va, vd, sizeof(float) * HIDDEN * CLASSES) != 0);
    run_free(&a);
    run_free(&c);
    run_free(&d);
    unlink(path);
}

static void test_resume_npz(void **state)
{
    (void)state;
    char path[] = "/tmp/kiln_ckpt_XXXXXX.npz";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    close(fd);
    check_resume(path);
}

static void test_resume_safetensors(void **state)
{
    (void)state;
    char path[] = "/tmp/kiln_ckpt_XXXXXX.safetensors";
    int fd = mkstemps(path, 12);
    assert_true(fd >= 0);
    close(fd);
    check_resume(path);
}

static void test_bad_files_leave_variables(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    float w[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2, 3),
                                          kiln_init_values(w), 1),
                     KILN_OK);
    char path[] = "/tmp/kiln_bad_XXXXXX.npz";
    int fd = mkstemps(path, 4);
    close(fd);

    /* a file whose "w" has another shape */
    kiln_session *other = kiln_session_new(NULL);
    assert_int_equal(kiln_session_declare(other, "w", KILN_F32,
                                          KILN_SHAPE(3, 2), kiln_init_ones(),
                                          1),
                     KILN_OK);
    assert_int_equal(kiln_session_declare(other, "extra", KILN_F32,
                                          KILN_SHAPE(2), kiln_init_ones(), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_save(other, path), KILN_OK);
    assert_int_equal(kiln_session_load(s, path), KILN_ERR_SHAPE);
    assert_non_null(strstr(kiln_session_error(s), "'w'"));
    assert_int_equal(kiln_session_num_variables(s),
                     1); /* "extra" not created */

    /* truncated and corrupt files */
    FILE *f = fopen(path, "rb");
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_bytes(path, buf, n / 2);
    assert_int_equal(kiln_session_load(s, path), KILN_ERR_IO);
    assert_true(strlen(kiln_session_error(s)) > 0);
    write_bytes(path, "not a zip file at all", 21);
    assert_int_equal(kiln_session_load(s, path), KILN_ERR_IO);
    unlink(path);
    assert_int_equal(kiln_session_load(s, path), KILN_ERR_IO); /* missing */

    float now[6];
    read_var(s, "w", KILN_SHAPE(2, 3), now);
    assert_memory_equal(now, w, sizeof w);
    kiln_session_free(other);
    kiln_session_free(s);
}

static void test_save_failure_keeps_file(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_ones(), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_save(s, "/nonexistent-dir/model.npz"),
                     KILN_ERR_IO);
    assert_true(strlen(kiln_session_error(s)) > 0);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_npz),
        cmocka_unit_test(test_resume_safetensors),
        cmocka_unit_test(test_bad_files_leave_variables),
        cmocka_unit_test(test_save_failure_keeps_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
