/* The direct kernels of many channels (cpu/conv_rows.c: 2-D, one group,
   unit stride and dilation, padding under the kernel, 8 or more channels)
   against the reference kernels: conv (bias and relu fused or not),
   conv_transpose and conv_weight_grad on random shapes with odd channel
   counts (tails of the blocks of 8 output channels and of the weight
   gradient's 64 channels and 6 rows), odd widths and heights (tails of the
   vector pairs), uneven padding, batches of 1 to 3 at 1 and 2 threads (a
   batch under the thread count splits each image over the pool); the
   residual block's shape itself (one image, split); and the shapes next
   to the kernels' bounds (stride, dilation, groups, wide padding, 7
   channels, rows of 5), which the other kernels take, still agree. */
#include "test_helpers.h"

#include "cpu/conv.h"
#include "graph/conv.h"

#include "test_conv_check.h"

static int rnd(kiln_rng *r, int lo, int hi)
{
    return lo + (int)(kiln_rng_u32(r) % (uint32_t)(hi - lo + 1));
}

/* conv (with bias b and relu when asked), its input gradient and its
   weight gradient of x [xs] and w [ws] under win, each fast against the
   reference; whether the direct kernels take them is rows_expected. */
static void check_ops(kiln_rng *r, kiln_shape xs, kiln_shape ws,
                      kiln_window win, int bias, int rows_expected)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, xs);
    kiln_node *w = kiln_input(g, "w", KILN_F32, ws);
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(ws.d[0]));
    kiln_node *y = kiln_conv_fused(g, x, w, bias ? b : NULL, &win, NULL);
    kiln_node *ops[3];
    conv_and_grads(g, x, w, y, win, ops);
    th_assert_graph_ok(g);
    for (int k = 0; k < 3; k++) {
        kiln_conv_geom geom = kiln_conv_geom_of(ops[k]);
        if (__builtin_cpu_supports("avx512f"))
            assert_int_equal(kiln_conv_rows_ok(&geom), rows_expected);
        fast_matches_reference(r, ops[k]);
    }
    kiln_graph_free(g);
}

static void test_random_shapes(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 23);
    for (int it = 0; it < 36; it++) {
        kiln_set_num_threads(1 + it % 2);
        kiln_window win = {.nd = 2, .groups = 1};
        win.flags = it % 3 == 1 ? KILN_WINDOW_RELU : 0;
        int64_t in[2];
        for (int d = 0; d < 2; d++) {
            win.kernel[d] = rnd(&r, 1, 5);
            win.stride[d] = win.dilation[d] = 1;
            win.pad_lo[d] = rnd(&r, 0, win.kernel[d] - 1);
            win.pad_hi[d] = rnd(&r, 0, win.kernel[d] - 1);
            /* rows of 8 or more on both sides */
            in[d] = rnd(&r, 7 + win.kernel[d], d ? 40 : 14);
        }
        int64_t c = rnd(&r, 8, 20), o = rnd(&r, 8, 70);
        kiln_shape xs = KILN_SHAPE(rnd(&r, 1, 3), c, in[0], in[1]);
        kiln_shape ws = KILN_SHAPE(o, c, win.kernel[0], win.kernel[1]);
        check_ops(&r, xs, ws, win, it % 2, 1);
    }
    kiln_set_num_threads(0);
}

/* 3x3, stride 1, padding 1: the residual block's window. */
static kiln_window same_3x3(void)
{
    return (kiln_window){.nd = 2,
                         .groups = 1,
                         .kernel = {3, 3},
                         .stride = {1, 1},
                         .dilation = {1, 1},
                         .pad_lo = {1, 1},
                         .pad_hi = {1, 1}};
}

/* The residual block's convolution, one image split over 2 threads. */
static void test_resblock_shape(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 3);
    kiln_set_num_threads(2);
    check_ops(&r, KILN_SHAPE(1, 64, 32, 32), KILN_SHAPE(64, 64, 3, 3),
              same_3x3(), 0, 1);
    kiln_set_num_threads(0);
}

/* Next to the bounds: each shape differs from one the kernels take in one
   respect; the fast kernels still agree with the reference. */
static void test_outside_bounds(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 9);
    kiln_window base = same_3x3();
    kiln_shape xs = KILN_SHAPE(2, 8, 9, 17), ws = KILN_SHAPE(8, 8, 3, 3);
    check_ops(&r, xs, ws, base, 1, 1);
    kiln_window w = base;
    w.stride[1] = 2;
    check_ops(&r, xs, ws, w, 1, 0);
    w = base;
    w.dilation[0] = 2;
    check_ops(&r, xs, ws, w, 0, 0);
    w = base;
    w.pad_lo[1] = 3;
    check_ops(&r, xs, ws, w, 0, 0);
    w = base;
    w.pad_hi[0] = 3;
    check_ops(&r, xs, ws, w, 0, 0);
    w = base;
    w.groups = 2;
    check_ops(&r, xs, KILN_SHAPE(8, 4, 3, 3), w, 1, 0);
    check_ops(&r, KILN_SHAPE(2, 7, 9, 17), KILN_SHAPE(8, 7, 3, 3), base, 0, 0);
    check_ops(&r, xs, KILN_SHAPE(7, 8, 3, 3), base, 0, 0);
    check_ops(&r, KILN_SHAPE(2, 8, 9, 5), ws, base, 0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_resblock_shape),
        cmocka_unit_test(test_outside_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
