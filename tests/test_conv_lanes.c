/* The direct kernel with output channels in the lanes (cpu/conv_lanes.c)
   against the reference conv: called directly on random shapes (1 to 20
   input channels, 16 to 80 output channels: tails of the 32-channel
   blocks and of their 16-lane halves; rows 8 to 40 wide: tiles of 14 past
   the row's end; strides down of 1 to 3, dilations of 1 and 2, padding
   wider than the kernel, bias and relu or not; the tiles split over 2
   threads or not), and through the fast conv kernel with batches of 1 to
   3 (which takes it at rows of 14 and 28, the MNIST CNN's shapes); the
   shapes it refuses (stride along rows, groups, 15 output channels, rows
   of 7) are not taken and still agree.  A compiled conv with constant
   weights packs them once (cpu/prepared.c) for conv_lanes and conv_rows:
   its outputs equal, bit for bit, those of the same conv with the weights
   fed as an input (packed at every run), at batches 1 and 3 of a symbolic
   batch and 1 and 2 threads. */
#include "test_helpers.h"

#include "cpu/conv.h"
#include "graph/conv.h"

#include "test_conv_check.h"

static int rnd(kiln_rng *r, int lo, int hi)
{
    return lo + (int)(kiln_rng_u32(r) % (uint32_t)(hi - lo + 1));
}

/* The conv node of x [xs] and w [ws] under win (bias when asked). */
static kiln_node *conv_node(kiln_graph *g, kiln_shape xs, kiln_shape ws,
                            kiln_window win, int bias)
{
    kiln_node *x = kiln_input(g, "x", KILN_F32, xs);
    kiln_node *w = kiln_input(g, "w", KILN_F32, ws);
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(ws.d[0]));
    kiln_node *y = kiln_conv_fused(g, x, w, bias ? b : NULL, &win, NULL);
    th_assert_graph_ok(g);
    return y;
}

/* conv n through kiln_conv_lanes_pack and kiln_conv_lanes_image, image by
   image, against its reference kernel. */
static void lanes_match_reference(kiln_rng *r, const kiln_node *n, int split)
{
    kiln_conv_geom g = kiln_conv_geom_of(n);
    assert_true(kiln_conv_lanes_ok(&g));
    float *x = random_values(r, n->in[0]->shape);
    float *w = random_values(r, n->in[1]->shape);
    float *b = n->n_in > 2 ? random_values(r, n->in[2]->shape) : NULL;
    int64_t len = kiln_shape_numel(n->shape), isz = g.in[0] * g.in[1],
            osz = g.out[0] * g.out[1];
    float *want = calloc((size_t)len + 1, sizeof *want);
    float *got = calloc((size_t)len + 1, sizeof *got);
    float *wp = malloc((size_t)kiln_conv_lanes_shared_floats(&g) * 4 + 4);
    float *scratch = malloc((size_t)kiln_conv_lanes_floats(&g) * 4 + 4);
    assert_true(want && got && wp && scratch);
    void *in[3] = {x, w, b};
    assert_int_equal(kiln_cpu_run_reference(n, want, in), KILN_OK);
    kiln_conv_lanes_pack(&g, w, wp);
    for (int64_t i = 0; i < g.n; i++)
        kiln_conv_lanes_image(&g, x + i * g.c * isz, wp, b,
                              n->at.win.flags & KILN_WINDOW_RELU,
                              got + i * g.o * osz, scratch, split);
    char line[512];
    kiln_node_format(n, NULL, 0, line, sizeof line);
    th_assert_close_f(line, got, want, len, 1e-4, 1e-4);
    free(x);
    free(w);
    free(b);
    free(want);
    free(got);
    free(wp);
    free(scratch);
}

static void test_random_shapes(void **state)
{
    (void)state;
    if (!__builtin_cpu_supports("avx512f"))
        skip();
    kiln_rng r;
    kiln_rng_seed(&r, 31);
    for (int it = 0; it < 40; it++) {
        kiln_set_num_threads(1 + it % 2);
        kiln_window win = {.nd = 2, .groups = 1};
        win.flags = it % 3 == 1 ? KILN_WINDOW_RELU : 0;
        int64_t in[2], out[2];
        do {
            for (int d = 0; d < 2; d++) {
                win.kernel[d] = rnd(&r, 1, 5);
                win.stride[d] = d ? 1 : rnd(&r, 1, 3);
                win.dilation[d] = rnd(&r, 1, 2);
                win.pad_lo[d] = rnd(&r, 0, win.kernel[d] + 1);
                win.pad_hi[d] = rnd(&r, 0, win.kernel[d] + 1);
                in[d] = rnd(&r, 1, d ? 40 : 16);
                int64_t reach = win.dilation[d] * (win.kernel[d] - 1) + 1;
                out[d] = (in[d] + win.pad_lo[d] + win.pad_hi[d] - reach) /
                             win.stride[d] +
                         1;
            }
        } while (out[0] < 1 || out[1] < 8);
        int64_t c = rnd(&r, 1, 20), o = rnd(&r, 16, 80);
        kiln_graph *g = kiln_graph_new();
        kiln_node *y = conv_node(g, KILN_SHAPE(rnd(&r, 1, 2), c, in[0], in[1]),
                                 KILN_SHAPE(o, c, win.kernel[0], win.kernel[1]),
                                 win, it % 2);
        lanes_match_reference(&r, y, it % 4 < 2);
        kiln_graph_free(g);
    }
    kiln_set_num_threads(0);
}

/* 5x5, padding 2: the MNIST CNN's window. */
static kiln_window same_5x5(void)
{
    return (kiln_window){.nd = 2,
                         .groups = 1,
                         .kernel = {5, 5},
                         .stride = {1, 1},
                         .dilation = {1, 1},
                         .pad_lo = {2, 2},
                         .pad_hi = {2, 2},
                         .flags = KILN_WINDOW_RELU};
}

/* Whether the fast conv kernel took conv_lanes for y: its scratch is the
   packed weights and one padded input per image (8 at most). */
static int took_lanes(const kiln_node *y)
{
    kiln_conv_geom g = kiln_conv_geom_of(y);
    int64_t slots = g.n < 8 ? g.n : 8;
    return kiln_cpu_scratch_bytes(y) ==
           (size_t)(kiln_conv_lanes_shared_floats(&g) +
                    slots * kiln_conv_lanes_floats(&g)) *
               sizeof(float);
}

/* Through the fast conv kernel (its scratch, its pool split of one image
   or of the batch) at the CNN's shapes and odd ones near them; where
   conv_rows fills its lanes as well or better (33 channels: two blocks of
   32; rows of 27) it keeps them, and so does conv_direct the CNN's first
   layer (one input channel; its blocks split over the pool at batch 1). */
static void test_dispatch(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 5);
    const int64_t shapes[][6] = {
        /* n, c, o, h, w, taken */
        {1, 32, 64, 14, 14, 1}, {3, 32, 64, 14, 14, 1}, {1, 9, 33, 11, 28, 0},
        {2, 5, 17, 7, 14, 1},   {1, 12, 50, 9, 27, 0},  {1, 12, 32, 9, 28, 1},
        {1, 1, 32, 28, 28, 0},
    };
    for (int t = 1; t <= 2; t++) {
        kiln_set_num_threads(t);
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            const int64_t *s = shapes[i];
            kiln_graph *g = kiln_graph_new();
            kiln_node *y =
                conv_node(g, KILN_SHAPE(s[0], s[1], s[3], s[4]),
                          KILN_SHAPE(s[2], s[1], 5, 5), same_5x5(), (int)i % 2);
            kiln_conv_geom geom = kiln_conv_geom_of(y);
            if (__builtin_cpu_supports("avx512f")) {
                assert_true(kiln_conv_lanes_ok(&geom));
                assert_int_equal(took_lanes(y), s[5]);
            }
            fast_matches_reference(&r, y);
            kiln_graph_free(g);
        }
    }
    kiln_set_num_threads(0);
}

/* Each shape differs from the CNN's in one respect the kernel refuses. */
static void test_refused(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 7);
    kiln_shape xs = KILN_SHAPE(1, 8, 14, 14), ws = KILN_SHAPE(16, 8, 5, 5);
    kiln_window w = same_5x5();
    w.stride[1] = 2;
    kiln_window grouped = same_5x5();
    grouped.groups = 2;
    const struct {
        kiln_shape xs, ws;
        kiln_window win;
    } cases[] = {
        {xs, ws, w},
        {xs, KILN_SHAPE(16, 4, 5, 5), grouped},
        {xs, KILN_SHAPE(15, 8, 5, 5), same_5x5()},
        {KILN_SHAPE(1, 8, 14, 7), ws, same_5x5()},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_graph *g = kiln_graph_new();
        kiln_node *y = conv_node(g, cases[i].xs, cases[i].ws, cases[i].win, 1);
        kiln_conv_geom geom = kiln_conv_geom_of(y);
        assert_false(kiln_conv_lanes_ok(&geom));
        fast_matches_reference(&r, y);
        kiln_graph_free(g);
    }
}

/* Whether f's listing says a step keeps a prepared operand: read back
   line by line. */
static int listing_prepared(const kiln_function *f)
{
    FILE *fp = tmpfile();
    assert_non_null(fp);
    assert_int_equal(kiln_function_print(f, fp), KILN_OK);
    rewind(fp);
    char line[1024];
    int has = 0;
    while (!has && fgets(line, sizeof line, fp))
        has = strstr(line, "prepared once") != NULL;
    fclose(fp);
    return has;
}

/* conv(x, w) + b, relu, with w [ws] a constant (fc) and an input (fi). */
static void check_prepared(kiln_rng *r, kiln_shape xs, kiln_shape ws,
                           kiln_window win, int threads)
{
    kiln_session_options so = {.threads = threads};
    kiln_session *s = kiln_session_new(&so);
    kiln_graph *g = kiln_graph_new();
    kiln_tensor *w = th_rand(r, ws, -1, 1),
                *b = th_rand(r, KILN_SHAPE(ws.d[0]), -1, 1);
    kiln_node *x = kiln_input_sym(g, "x", KILN_F32, xs, 1);
    kiln_node *wi = kiln_input(g, "w", KILN_F32, ws);
    kiln_node *wc = kiln_constant(g, KILN_F32, ws, kiln_tensor_f32(w));
    kiln_node *bc =
        kiln_constant(g, KILN_F32, KILN_SHAPE(ws.d[0]), kiln_tensor_f32(b));
    kiln_node *yc = kiln_conv_fused(g, x, wc, bc, &win, NULL);
    kiln_node *yi = kiln_conv_fused(g, x, wi, bc, &win, NULL);
    th_assert_graph_ok(g);
    kiln_function *fc = kiln_compile(s, g, &yc, 1, &x, 1);
    kiln_function *fi = kiln_compile(s, g, &yi, 1, (kiln_node *[]){x, wi}, 2);
    assert_true(fc && fi);
    assert_int_equal(listing_prepared(fc),
                     __builtin_cpu_supports("avx512f") != 0);
    assert_false(listing_prepared(fi));
    for (int64_t n = 1; n <= 3; n += 2) {
        kiln_shape at = xs;
        at.d[0] = n;
        kiln_tensor *in = th_rand(r, at, -1, 1);
        kiln_shape os = kiln_node_shape(yc);
        os.d[0] = n;
        kiln_tensor *oc = kiln_tensor_new(KILN_F32, os),
                    *oi = kiln_tensor_new(KILN_F32, os);
        assert_true(oc && oi && kiln_tensor_numel(oc) > 0);
        assert_int_equal(kiln_run(fc, &in, &oc), KILN_OK);
        assert_int_equal(kiln_run(fi, (kiln_tensor *[]){in, w}, &oi), KILN_OK);
        assert_memory_equal(kiln_tensor_f32(oc), kiln_tensor_f32(oi),
                            (size_t)kiln_tensor_numel(oc) * sizeof(float));
        kiln_tensor_free(in);
        kiln_tensor_free(oc);
        kiln_tensor_free(oi);
    }
    kiln_tensor_free(w);
    kiln_tensor_free(b);
    kiln_graph_free(g);
    kiln_session_free(s);
}

static void test_constant_weights_prepared(void **state)
{
    (void)state;
    kiln_rng r;
    kiln_rng_seed(&r, 13);
    kiln_window same_3x3 = same_5x5();
    for (int d = 0; d < 2; d++) {
        same_3x3.kernel[d] = 3;
        same_3x3.pad_lo[d] = same_3x3.pad_hi[d] = 1;
    }
    for (int t = 1; t <= 2; t++) {
        /* conv_lanes (rows of 14), conv_rows (rows of 32) */
        check_prepared(&r, KILN_SHAPE(1, 32, 14, 14), KILN_SHAPE(64, 32, 5, 5),
                       same_5x5(), t);
        check_prepared(&r, KILN_SHAPE(1, 16, 12, 32), KILN_SHAPE(24, 16, 3, 3),
                       same_3x3, t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_constant_weights_prepared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
