/* The all-reduce algorithm a communicator asks Open MPI for (src/dist/
   tune.c), run by ctest under mpirun with 2 ranks: without a choice of the
   user's, kiln_comm_world switches libnbc's MPI_Iallreduce from its
   automatic pick (a binomial tree for in-place buckets on fewer than 4
   ranks) to 3, reduce-scatter + all-gather; a choice made through
   mpirun --mca or OMPI_MCA_coll_libnbc_iallreduce_algorithm is kept.
   Under an MPI without that control variable there is nothing to check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <mpi.h>

#include "kiln.h"

static const char ENV[] = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";

/* The control variable's value, or -1 when the MPI has none. */
static int algorithm(void)
{
    int provided, idx, count, value = -1;
    MPI_T_cvar_handle h;
    assert_int_equal(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided),
                     MPI_SUCCESS);
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &idx) ==
        MPI_SUCCESS) {
        assert_int_equal(MPI_T_cvar_handle_alloc(idx, NULL, &h, &count),
                         MPI_SUCCESS);
        assert_int_equal(count, 1);
        assert_int_equal(MPI_T_cvar_read(h, &value), MPI_SUCCESS);
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return value;
}

static void test_algorithm(void **state)
{
    (void)state;
    kiln_comm *c = kiln_comm_world();
    assert_non_null(c);
    int want = getenv(ENV) ? atoi(getenv(ENV)) : 3, got = algorithm();
    if (got >= 0)
        assert_int_equal(got, want);
    /* the sum is still every rank's, whichever algorithm runs */
    double v = 1 + kiln_comm_rank(c);
    assert_int_equal(kiln_comm_allreduce_sum(c, &v, 1), KILN_OK);
    assert_true(v == 3.0);
    kiln_comm_free(c);
}

/* A communicator from the caller's: MPI_COMM_SELF makes one of a single
   rank; MPI_COMM_NULL is refused by name (MPI_Comm_dup would call the
   fatal error handler). */
static void test_from_user_communicator(void **state)
{
    (void)state;
    kiln_comm *world = kiln_comm_world(); /* initialises MPI */
    assert_non_null(world);
    MPI_Comm self = MPI_COMM_SELF, null = MPI_COMM_NULL;
    kiln_comm *c = kiln_comm_from_mpi(&self);
    assert_non_null(c);
    assert_int_equal(kiln_comm_size(c), 1);
    assert_int_equal(kiln_comm_rank(c), 0);
    double v = 2.5;
    assert_int_equal(kiln_comm_allreduce_sum(c, &v, 1), KILN_OK);
    assert_true(v == 2.5);
    kiln_comm_free(c);
    assert_null(kiln_comm_from_mpi(&null));
    assert_non_null(strstr(kiln_last_error(), "MPI_COMM_NULL"));
    kiln_comm_free(world);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algorithm),
        cmocka_unit_test(test_from_user_communicator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
