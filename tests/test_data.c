/* Data: batching, the Gaussian-mixture generator, MNIST loading errors, and
   the training losses added for the front ends. */
#define _DEFAULT_SOURCE
#include <math.h>
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

static kiln_tensor *iota_rows(int rows, int cols)
{
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(rows, cols));
    for (int i = 0; i < rows * cols; i++)
        kiln_tensor_f32(t)[i] = (float)(i / cols);
    return t;
}

/* Every row appears once per epoch; rows stay paired with their labels. */
static void test_batcher_epoch(void **state)
{
    (void)state;
    kiln_tensor *x = iota_rows(10, 3);
    kiln_tensor *y = kiln_tensor_new(KILN_I32, KILN_SHAPE(10));
    for (int i = 0; i < 10; i++)
        kiln_tensor_i32(y)[i] = 100 + i;
    kiln_batcher *b = kiln_batcher_new(x, y, 4, 1, 0, 5);
    assert_int_equal(kiln_batcher_num_batches(b), 3);
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(4, 3));
    kiln_tensor *yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(4));
    int seen[10] = {0}, sizes[3], n, k = 0, shuffled = 0;
    while ((n = kiln_batcher_next(b, xb, yb)) > 0) {
        sizes[k++] = n;
        for (int i = 0; i < n; i++) {
            int row = (int)kiln_tensor_f32(xb)[i * 3];
            assert_int_equal(kiln_tensor_f32(xb)[i * 3 + 2], row);
            assert_int_equal(kiln_tensor_i32(yb)[i], 100 + row);
            seen[row]++;
            shuffled |= row != (k - 1) * 4 + i;
        }
    }
    assert_int_equal(k, 3);
    assert_int_equal(sizes[0], 4);
    assert_int_equal(sizes[2], 2);
    for (int i = 0; i < 10; i++)
        assert_int_equal(seen[i], 1);
    assert_true(shuffled);
    kiln_batcher_free(b);

    /* drop_last: 2 full batches, then the epoch ends */
    b = kiln_batcher_new(x, y, 4, 0, 1, 5);
    assert_int_equal(kiln_batcher_num_batches(b), 2);
    assert_int_equal(kiln_batcher_next(b, xb, yb), 4);
    assert_int_equal(kiln_tensor_f32(xb)[0], 0); /* unshuffled: in order */
    assert_int_equal(kiln_batcher_next(b, xb, yb), 4);
    assert_int_equal(kiln_batcher_next(b, xb, yb), 0);
    assert_int_equal(kiln_batcher_next(b, xb, yb), 4); /* next epoch */
    /* wrong batch shape */
    kiln_tensor *bad = kiln_tensor_new(KILN_F32, KILN_SHAPE(3, 3));
    assert_int_equal(kiln_batcher_next(b, bad, yb), -1);
    assert_non_null(strstr(kiln_batcher_error(b), "batch tensors must be"));
    assert_int_equal(kiln_batcher_next(b, xb, yb), 4);
    assert_string_equal(kiln_batcher_error(b), "");
    kiln_batcher_free(b);
    assert_null(kiln_batcher_new(x, y, 0, 0, 0, 1));
    kiln_tensor_free(bad);
    kiln_tensor_free(xb);
    kiln_tensor_free(yb);
    kiln_tensor_free(x);
    kiln_tensor_free(y);
}

/* The same seed gives the same order; another seed another one. */
static void test_batcher_seeded(void **state)
{
    (void)state;
    kiln_tensor *x = iota_rows(50, 1);
    kiln_tensor *b1 = kiln_tensor_new(KILN_F32, KILN_SHAPE(50, 1));
    kiln_tensor *b2 = kiln_tensor_new(KILN_F32, KILN_SHAPE(50, 1));
    kiln_tensor *b3 = kiln_tensor_new(KILN_F32, KILN_SHAPE(50, 1));
    kiln_batcher *p = kiln_batcher_new(x, NULL, 50, 1, 1, 9);
    kiln_batcher *q = kiln_batcher_new(x, NULL, 50, 1, 1, 9);
    kiln_batcher *r = kiln_batcher_new(x, NULL, 50, 1, 1, 10);
    assert_int_equal(kiln_batcher_next(p, b1, NULL), 50);
    assert_int_equal(kiln_batcher_next(q, b2, NULL), 50);
    assert_int_equal(kiln_batcher_next(r, b3, NULL), 50);
    assert_memory_equal(kiln_tensor_f32(b1), kiln_tensor_f32(b2),
                        50 * sizeof(float));
    assert_true(memcmp(kiln_tensor_f32(b1), kiln_tensor_f32(b3),
                       50 * sizeof(float)) != 0);
    kiln_batcher_free(p);
    kiln_batcher_free(q);
    kiln_batcher_free(r);
    kiln_tensor_free(b1);
    kiln_tensor_free(b2);
    kiln_tensor_free(b3);
    kiln_tensor_free(x);
}

/* Labels follow the priors; class means match the offsets b_c (the noise
   A_c z has mean zero); the stream is reproducible. */
static void test_mixture(void **state)
{
    (void)state;
    enum { N = 20000, D = 3 };
    double pv[2] = {0.25, 0.75};
    kiln_mixture *m = kiln_mixture_new(pv, 2, D, 3);
    float *x = malloc(sizeof(float) * N * D);
    int32_t *y = malloc(sizeof(int32_t) * N);
    assert_int_equal(kiln_mixture_batch(m, N, x, y), KILN_OK);
    double mean[2][D] = {{0}}, count[2] = {0};
    for (int i = 0; i < N; i++) {
        count[y[i]]++;
        for (int d = 0; d < D; d++)
            mean[y[i]][d] += x[i * D + d];
    }
    assert_true(fabs(count[0] / N - 0.25) < 0.02);
    for (int c = 0; c < 2; c++)
        for (int d = 0; d < D; d++)
            assert_true(fabs(mean[c][d] / count[c] -
                             kiln_mixture_mean(m, c)[d]) < 0.03);
    kiln_mixture *m2 = kiln_mixture_new(pv, 2, D, 3);
    float x2[D];
    int32_t y2;
    assert_int_equal(kiln_mixture_batch(m2, 1, x2, &y2), KILN_OK);
    assert_memory_equal(x2, x, sizeof x2);
    assert_int_equal(y2, y[0]);
    assert_null(kiln_mixture_new(pv, 0, D, 1));
    double neg[2] = {-1, 1};
    assert_null(kiln_mixture_new(neg, 2, D, 1));
    assert_null(kiln_mixture_mean(m, 2));
    kiln_mixture_free(m);
    kiln_mixture_free(m2);
    free(x);
    free(y);
}

static void test_mnist_errors(void **state)
{
    (void)state;
    kiln_tensor *x = (kiln_tensor *)1, *y = (kiln_tensor *)1;
    assert_int_equal(kiln_mnist_load("/nonexistent", 1, 1.0f, &x, &y),
                     KILN_ERR_IO);
    assert_null(x);
    assert_null(y);
    assert_non_null(strstr(kiln_last_error(), "train-images-idx3-ubyte"));
    assert_int_equal(kiln_mnist_load(NULL, 1, 1.0f, &x, &y), KILN_ERR_ARG);
    /* images and labels that disagree on the count */
    char dir[] = "/tmp/kiln_mnist_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    unsigned char img[16 + 2 * 4] = {0, 0, 8, 3, 0, 0, 0, 2,
                                     0, 0, 0, 2, 0, 0, 0, 2};
    unsigned char lab[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3};
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte", dir);
    FILE *f = fopen(path, "wb");
    fwrite(img, 1, sizeof img, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte", dir);
    f = fopen(path, "wb");
    fwrite(lab, 1, sizeof lab, f);
    fclose(f);
    assert_int_equal(kiln_mnist_load(dir, 0, 1.0f, &x, &y), KILN_ERR_IO);
    assert_non_null(strstr(kiln_last_error(), "2 images but 3 labels"));
    unlink(path);
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte", dir);
    unlink(path);
    rmdir(dir);
}

/* nll_loss_with_softmax_grad against values computed here by hand, and its
   dlogits against autodiff of the softmax cross-entropy. */
static void test_nll_with_softmax_grad(void **state)
{
    (void)state;
    float z[6] = {1, 2, 0.5f, -1, 0, 3};
    int32_t lab[2] = {1, 0};
    kiln_graph *g = kiln_graph_new();
    kiln_session *s = kiln_session_new(NULL);
    kiln_node *logits =
        kiln_variable(g, "z", KILN_F32, KILN_SHAPE(2, 3), kiln_init_values(z));
    kiln_node *labels = kiln_constant(g, KILN_I32, KILN_SHAPE(2), lab);
    kiln_node *probs = kiln_softmax(g, logits, 1), *loss, *dlogits;
    assert_int_equal(
        kiln_nll_loss_with_softmax_grad(g, probs, labels, &loss, &dlogits),
        KILN_OK);
    kiln_node *ce = kiln_softmax_cross_entropy(g, logits, labels);
    kiln_node *ce_sum =
        kiln_softmax_cross_entropy_reduce(g, logits, labels, KILN_REDUCE_SUM);
    kiln_node *auto_grad = kiln_grad(g, ce, logits);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    double want = 0;
    for (int r = 0; r < 2; r++) {
        double sum = 0;
        for (int c = 0; c < 3; c++)
            sum += exp(z[r * 3 + c]);
        want += -(z[r * 3 + lab[r]] - log(sum)) / 2;
    }
    assert_true(fabs(kiln_node_value_f32(s, loss)[0] - want) < 1e-5);
    assert_true(fabs(kiln_node_value_f32(s, ce)[0] - want) < 1e-5);
    assert_true(fabs(kiln_node_value_f32(s, ce_sum)[0] - 2 * want) < 1e-5);
    for (int i = 0; i < 6; i++)
        assert_true(fabs(kiln_node_value_f32(s, dlogits)[i] -
                         kiln_node_value_f32(s, auto_grad)[i]) < 1e-6);
    /* bad labels dtype: both outputs poisoned, error names the op */
    kiln_node *flab = kiln_fill(g, KILN_SHAPE(2), 0);
    assert_int_equal(
        kiln_nll_loss_with_softmax_grad(g, probs, flab, &loss, &dlogits),
        KILN_ERR_DTYPE);
    assert_non_null(
        strstr(kiln_graph_error(g), "kiln_nll_loss_with_softmax_grad"));
    assert_string_equal(kiln_node_op_name(loss), "error");
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* Restoring a batcher's RNG replays the same shuffled epoch. */
static void test_batcher_rng_restore(void **state)
{
    (void)state;
    kiln_tensor *x = iota_rows(20, 1);
    kiln_tensor *a = kiln_tensor_new(KILN_F32, KILN_SHAPE(20, 1));
    kiln_tensor *b = kiln_tensor_new(KILN_F32, KILN_SHAPE(20, 1));
    kiln_batcher *p = kiln_batcher_new(x, NULL, 20, 1, 1, 4);
    assert_int_equal(kiln_batcher_next(p, a, NULL), 20);
    kiln_rng saved = *kiln_batcher_rng(p); /* before the next shuffle */
    assert_int_equal(kiln_batcher_next(p, a, NULL), 0); /* reshuffles */
    assert_int_equal(kiln_batcher_next(p, a, NULL), 20);
    *kiln_batcher_rng(p) = saved;
    assert_int_equal(kiln_batcher_next(p, b, NULL), 0); /* same shuffle */
    assert_int_equal(kiln_batcher_next(p, b, NULL), 20);
    assert_memory_equal(kiln_tensor_f32(a), kiln_tensor_f32(b),
                        20 * sizeof(float));
    assert_null(kiln_batcher_rng(NULL));
    kiln_batcher_free(p);
    kiln_tensor_free(a);
    kiln_tensor_free(b);
    kiln_tensor_free(x);
}

/* kiln_file_read recognises each format by its first bytes, whatever the
   file is called, and names an unknown one. */
static void test_file_read_detects(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    float v[3] = {1, 2, 3};
    assert_int_equal(
        kiln_tensor_list_add(l, "v", kiln_tensor_from_f32(KILN_SHAPE(3), v)),
        KILN_OK);
    char path[] = "/tmp/kiln_detect_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int fmt = 0; fmt < 3; fmt++) {
        kiln_status st = fmt == 0   ? kiln_npz_write(path, l, 1)
                         : fmt == 1 ? kiln_safetensors_write(path, l)
                                    : kiln_bin_write(path, l);
        assert_int_equal(st, KILN_OK);
        kiln_tensor_list *r = kiln_file_read(path);
        assert_non_null(r);
        assert_memory_equal(kiln_tensor_f32(kiln_tensor_list_find(r, "v")), v,
                            sizeof v);
        kiln_tensor_list_free(r);
    }
    FILE *f = fopen(path, "wb");
    fputs("hello, world", f);
    fclose(f);
    assert_null(kiln_file_read(path));
    assert_non_null(
        strstr(kiln_last_error(), "not a .npz, .safetensors or .bin file"));
    assert_null(kiln_file_read(NULL));
    unlink(path);
    kiln_tensor_list_free(l);
}

/* Off a terminal the progress bar writes one plain summary line. */
static void test_progress_plain(void **state)
{
    (void)state;
    char buf[256] = {0};
    FILE *out = fmemopen(buf, sizeof buf - 1, "w");
    kiln_progress p;
    double t0 = kiln_now();
    kiln_progress_begin(&p, out, "epoch 1/2", 3);
    for (int i = 1; i <= 3; i++)
        kiln_progress_update(&p, i, 0.5, 128);
    kiln_progress_end(&p, "train loss 0.5000");
    fclose(out);
    assert_true(kiln_now() >= t0);
    assert_non_null(strstr(buf, "epoch 1/2 3/3 steps in"));
    assert_non_null(strstr(buf, "train loss 0.5000"));
    assert_null(strchr(buf, '\r')); /* no redraws off a terminal */
}

/* kiln_file_write picks the format from the extension. */
static void test_file_write_by_extension(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    float v[2] = {4, 5};
    assert_int_equal(
        kiln_tensor_list_add(l, "v", kiln_tensor_from_f32(KILN_SHAPE(2), v)),
        KILN_OK);
    const char *names[] = {"/tmp/kiln_fw_test.safetensors",
                           "/tmp/kiln_fw_test.bin", "/tmp/kiln_fw_test.npz"};
    kiln_tensor_list *(*readers[])(const char *) = {
        kiln_safetensors_read, kiln_bin_read, kiln_npz_read};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kiln_file_write(names[i], l), KILN_OK);
        kiln_tensor_list *r =
            readers[i](names[i]); /* only that reader accepts it */
        assert_non_null(r);
        assert_memory_equal(kiln_tensor_f32(kiln_tensor_list_find(r, "v")), v,
                            sizeof v);
        kiln_tensor_list_free(r);
        unlink(names[i]);
    }
    assert_int_equal(kiln_file_write(NULL, l), KILN_ERR_ARG);
    kiln_tensor_list_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batcher_epoch),
        cmocka_unit_test(test_batcher_seeded),
        cmocka_unit_test(test_mixture),
        cmocka_unit_test(test_mnist_errors),
        cmocka_unit_test(test_nll_with_softmax_grad),
        cmocka_unit_test(test_batcher_rng_restore),
        cmocka_unit_test(test_file_read_detects),
        cmocka_unit_test(test_progress_plain),
        cmocka_unit_test(test_file_write_by_extension),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
