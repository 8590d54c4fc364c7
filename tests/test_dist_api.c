/* The data-parallel API in every build: without MPI each call that needs
   it fails with "built without MPI" (never trains alone silently); with
   it, the calls refuse NULL arguments.  tests/mpi/ runs the real thing
   under mpirun. */
#include "test_helpers.h"

static void test_calls_without_a_communicator(void **state)
{
    (void)state;
    if (!kiln_dist_available())
        skip();
    assert_int_equal(kiln_comm_rank(NULL), -1);
    assert_int_equal(kiln_comm_size(NULL), -1);
    assert_int_equal(kiln_comm_set_rows(NULL, 1, 2), KILN_ERR_ARG);
    assert_int_equal(kiln_comm_allreduce_sum(NULL, NULL, 0), KILN_ERR_ARG);
    assert_int_equal(kiln_comm_sync_session(NULL, NULL, ""), KILN_ERR_ARG);
    kiln_comm_stats st;
    assert_int_equal(kiln_comm_get_stats(NULL, &st), KILN_ERR_ARG);
    assert_null(kiln_comm_from_mpi(NULL));
    kiln_comm_free(NULL);
    kiln_comm_abort(NULL, 1);
    kiln_session *s = kiln_session_new(NULL);
    /* detaching what is not attached is fine in every build */
    assert_int_equal(kiln_session_set_comm(s, NULL), KILN_OK);
    assert_string_equal(kiln_session_error(s), "");
    assert_int_equal(kiln_session_set_comm(NULL, NULL), KILN_ERR_ARG);
    kiln_session_free(s);
}

static void test_built_without_mpi(void **state)
{
    (void)state;
    if (kiln_dist_available())
        skip();
    assert_null(kiln_comm_world());
    assert_non_null(strstr(kiln_last_error(), "built without MPI"));
    assert_int_equal(kiln_comm_set_rows(NULL, 1, 2), KILN_ERR_STATE);
    assert_non_null(
        strstr(kiln_last_error(), "kiln_comm_set_rows: built without MPI"));
    assert_int_equal(kiln_comm_rank(NULL), -1);
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_set_comm(s, NULL), KILN_OK);
    kiln_session_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_without_a_communicator),
        cmocka_unit_test(test_built_without_mpi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
