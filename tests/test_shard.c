/* The data-parallel sharding of kiln_batcher (kiln_batcher_shard): the
   shards of every rank, put together, are exactly the batches of an
   unsharded batcher with the same seed, epoch after epoch, with uneven
   splits of a short last batch; and the hooked nodes the data-parallel
   optimiser step adds are scheduled right after the gradient they copy. */
#include "test_helpers.h"

#include "runtime/variant.h"

enum { ROWS = 23, COLS = 3 };

static kiln_tensor *rows_tensor(void)
{
    kiln_tensor *x = kiln_tensor_new(KILN_F32, KILN_SHAPE(ROWS, COLS));
    assert_non_null(x);
    for (int i = 0; i < ROWS * COLS; i++)
        kiln_tensor_f32(x)[i] = (float)i;
    return x;
}

/* size ranks at batch b against one batcher at b, for three epochs. */
static void check_shards(int batch, int size)
{
    kiln_tensor *x = rows_tensor(),
                *y = kiln_tensor_new(KILN_I32, KILN_SHAPE(ROWS));
    for (int i = 0; i < ROWS; i++)
        kiln_tensor_i32(y)[i] = 100 + i;
    int local = (batch + size - 1) / size;
    kiln_batcher *one = kiln_batcher_new(x, y, batch, 1, 0, 9), *b[4];
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(batch, COLS));
    kiln_tensor *yb = kiln_tensor_new(KILN_I32, KILN_SHAPE(batch));
    kiln_tensor *xs = kiln_tensor_new(KILN_F32, KILN_SHAPE(local, COLS));
    kiln_tensor *ys = kiln_tensor_new(KILN_I32, KILN_SHAPE(local));
    for (int r = 0; r < size; r++) {
        b[r] = kiln_batcher_new(x, y, batch, 1, 0, 9);
        assert_int_equal(kiln_batcher_shard(b[r], r, size), KILN_OK);
        assert_int_equal(kiln_batcher_num_batches(b[r]),
                         ROWS / batch + (ROWS % batch >= size));
    }
    for (int step = 0; step < 3 * ROWS; step++) {
        int n = kiln_batcher_next(one, xb, yb), at = 0;
        if (n > 0 && n < size) /* the shards skip a batch this short */
            n = kiln_batcher_next(one, xb, yb);
        for (int r = 0; r < size; r++) {
            int got = kiln_batcher_next(b[r], xs, ys);
            assert_int_equal(kiln_batcher_global_rows(b[r]), n);
            assert_int_equal(got, n / size + (r < n % size));
            assert_memory_equal(kiln_tensor_f32(xs),
                                kiln_tensor_f32(xb) + at * COLS,
                                (size_t)got * COLS * sizeof(float));
            assert_memory_equal(kiln_tensor_i32(ys), kiln_tensor_i32(yb) + at,
                                (size_t)got * sizeof(int32_t));
            at += got;
        }
        assert_int_equal(at, n);
    }
    for (int r = 0; r < size; r++)
        kiln_batcher_free(b[r]);
    kiln_batcher_free(one);
    kiln_tensor_free(x);
    kiln_tensor_free(y);
    kiln_tensor_free(xb);
    kiln_tensor_free(yb);
    kiln_tensor_free(xs);
    kiln_tensor_free(ys);
}

static void test_even_shards(void **state)
{
    (void)state;
    check_shards(8, 2); /* last batch 7: 4 + 3 */
    check_shards(8, 4); /* last batch 7: 2 + 2 + 2 + 1 */
    check_shards(5, 1); /* a batcher of one rank is the plain one */
}

static void test_short_last_batch_skipped(void **state)
{
    (void)state;
    check_shards(10, 4); /* last batch 3 < 4 ranks: skipped */
    check_shards(11, 3); /* last batch 1 */
}

static void test_shard_errors(void **state)
{
    (void)state;
    kiln_tensor *x = rows_tensor();
    kiln_batcher *b = kiln_batcher_new(x, NULL, 4, 0, 0, 1);
    assert_int_equal(kiln_batcher_shard(b, 2, 2), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_batcher_error(b), "rank 2 of 2 ranks"));
    assert_int_equal(kiln_batcher_shard(b, 0, 5), KILN_ERR_ARG);
    assert_int_equal(kiln_batcher_shard(NULL, 0, 1), KILN_ERR_ARG);
    assert_int_equal(kiln_batcher_shard(b, 1, 2), KILN_OK);
    assert_string_equal(kiln_batcher_error(b), "");
    /* batch tensors of the whole batch no longer fit */
    kiln_tensor *xb = kiln_tensor_new(KILN_F32, KILN_SHAPE(4, COLS));
    assert_int_equal(kiln_batcher_next(b, xb, NULL), -1);
    assert_non_null(strstr(kiln_batcher_error(b), "[2, ...]"));
    kiln_tensor_free(xb);
    kiln_batcher_free(b);
    kiln_tensor_free(x);
    assert_int_equal(kiln_batcher_global_rows(NULL), 0);
}

/* Hooked nodes built after everything move to just after their input;
   the rest keeps its order and every node its inputs before it. */
static void test_schedule_hooks(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(3));
    kiln_node *a = kiln_exp(g, x), *b = kiln_neg(g, a), *c = kiln_sin(g, b);
    kiln_node *ha = kiln_stop_gradient(g, a), *hb = kiln_stop_gradient(g, b);
    ha->hook = 1;
    hb->hook = 2;
    kiln_node *out = kiln_add(g, ha, kiln_add(g, hb, c));
    assert_int_equal(kiln_schedule_hooks(g), KILN_OK);
    kiln_node *want[] = {x, a, ha, b, hb, c};
    for (int i = 0; i < 6; i++) {
        assert_ptr_equal(g->nodes[i], want[i]);
        assert_int_equal(want[i]->id, i);
    }
    for (int id = 0; id < g->n_nodes; id++)
        for (int k = 0; k < g->nodes[id]->n_in; k++)
            assert_true(g->nodes[id]->in[k]->id < id);
    assert_int_equal(out->id, g->n_nodes - 1);
    kiln_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_even_shards),
        cmocka_unit_test(test_short_last_batch_skipped),
        cmocka_unit_test(test_shard_errors),
        cmocka_unit_test(test_schedule_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
