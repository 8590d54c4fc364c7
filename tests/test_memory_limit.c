#define _POSIX_C_SOURCE 200809L /* setenv */

/* The process-wide limit on the large buffers a session holds
   (src/base/big_alloc.c), lowered to 64 MiB with KILN_MEMORY_LIMIT before
   anything is allocated: variables that fit one by one but not together
   are refused with KILN_ERR_MEMORY naming the variable, nothing held
   changes, and the room comes back when a session is freed; a compiled
   function whose planned buffers do not fit fails to run, as it would at
   the machine's physical memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln.h"

enum { MIB = 1 << 20 };

/* 40 MiB of f32 */
#define BIG KILN_SHAPE(10 * MIB)

static void test_variables_past_the_limit(void **state)
{
    (void)state;
    kiln_session *a = kiln_session_new(NULL), *b = kiln_session_new(NULL);
    assert_int_equal(
        kiln_session_declare(a, "w", KILN_F32, BIG, kiln_init_ones(), 1),
        KILN_OK);
    /* a second 40 MiB does not fit in 64 */
    assert_int_equal(
        kiln_session_declare(b, "w", KILN_F32, BIG, kiln_init_ones(), 1),
        KILN_ERR_MEMORY);
    assert_non_null(strstr(kiln_session_error(b), "'w'"));
    assert_non_null(strstr(kiln_session_error(b), "out of memory"));
    /* a's variable is intact */
    kiln_tensor *t = kiln_tensor_new(KILN_F32, BIG);
    if (kiln_variable_read(a, "w", t) != KILN_OK)
        fail_msg("%s", kiln_session_error(a));
    assert_true(kiln_tensor_f32(t)[0] == 1.0f &&
                kiln_tensor_f32(t)[10 * MIB - 1] == 1.0f);
    /* freeing a gives the room back */
    kiln_session_free(a);
    assert_int_equal(
        kiln_session_declare(b, "w", KILN_F32, BIG, kiln_init_ones(), 1),
        KILN_OK);
    kiln_tensor_free(t);
    kiln_session_free(b);
}

static void test_planned_buffers_past_the_limit(void **state)
{
    (void)state;
    /* x * 2 + 1 over 24M values: 96 MiB of output and more in buffers */
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(24 * MIB));
    kiln_node *y = kiln_exp(g, kiln_mul(g, x, kiln_scalar(g, 2.0f)));
    kiln_session *s = kiln_session_new(NULL);
    kiln_compile_options o = kiln_compile_defaults();
    o.fuse = 0; /* keep an intermediate buffer */
    kiln_function *f = kiln_compile_ex(s, g, &y, 1, &x, 1, &o);
    if (f) {
        kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SHAPE(24 * MIB));
        kiln_tensor *out = NULL;
        if (in) {
            assert_int_equal(kiln_run(f, &in, &out), KILN_ERR_MEMORY);
            assert_non_null(strstr(kiln_session_error(s), "out of memory"));
        }
        kiln_tensor_free(in);
        kiln_tensor_free(out);
    } else {
        assert_non_null(strstr(kiln_session_error(s), "out of memory"));
    }
    kiln_session_free(s);
    kiln_graph_free(g);
}

/* The dynamic path's values come from the same count. */
static void test_dynamic_values_past_the_limit(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(4));
    /* 4 x 5M floats: 80 MiB */
    kiln_node *big = kiln_broadcast_to(g, x, KILN_SHAPE(5 * MIB, 4));
    kiln_node *y = kiln_sum(g, big, KILN_ALL_AXES, 0);
    kiln_session *s = kiln_session_new(NULL);
    kiln_tensor *t = kiln_tensor_new(KILN_F32, KILN_SHAPE(4));
    assert_int_equal(kiln_feed(s, x, t), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_ERR_MEMORY);
    assert_non_null(strstr(kiln_session_error(s), "memory"));
    assert_null(kiln_node_value(s, y));
    kiln_tensor_free(t);
    kiln_session_free(s);
    kiln_graph_free(g);
}

int main(void)
{
    setenv("KILN_MEMORY_LIMIT", "67108864", 1); /* 64 MiB */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variables_past_the_limit),
        cmocka_unit_test(test_planned_buffers_past_the_limit),
        cmocka_unit_test(test_dynamic_values_past_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
