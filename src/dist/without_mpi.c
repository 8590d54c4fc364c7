/* The data-parallel API in a build without MPI (cmake -DKILN_MPI=OFF, or
   no MPI found): each call says so, so that a program written for MPI
   fails clearly instead of training alone without knowing it. */
#include "kiln.h"
#include "runtime/runtime.h"

static const char *const WHY = "built without MPI (install libopenmpi-dev "
                               "and configure with -DKILN_MPI=ON)";

int kiln_dist_available(void)
{
    return 0;
}

kiln_comm *kiln_comm_world(void)
{
    kiln_set_last_error("kiln_comm_world: %s", WHY);
    return NULL;
}

kiln_comm *kiln_comm_from_mpi(const void *mpi_comm)
{
    (void)mpi_comm;
    kiln_set_last_error("kiln_comm_from_mpi: %s", WHY);
    return NULL;
}

/* No communicator can exist: the calls taking one only meet NULL. */
void kiln_comm_free(kiln_comm *c)
{
    (void)c;
}

int kiln_comm_rank(const kiln_comm *c)
{
    (void)c;
    return -1;
}

int kiln_comm_size(const kiln_comm *c)
{
    (void)c;
    return -1;
}

const char *kiln_comm_error(const kiln_comm *c)
{
    (void)c;
    return WHY;
}

static kiln_status unavailable(const char *fn)
{
    kiln_set_last_error("%s: %s", fn, WHY);
    return KILN_ERR_STATE;
}

kiln_status kiln_comm_set_bucket_bytes(kiln_comm *c, size_t bytes)
{
    (void)c, (void)bytes;
    return unavailable("kiln_comm_set_bucket_bytes");
}

kiln_status kiln_comm_set_shared_weights(kiln_comm *c, int on)
{
    (void)c, (void)on;
    return unavailable("kiln_comm_set_shared_weights");
}

int kiln_comm_shared_weights(const kiln_comm *c)
{
    (void)c;
    return 0;
}

void kiln_comm_abort(kiln_comm *c, int code)
{
    (void)c, (void)code;
}

kiln_status kiln_session_set_comm(kiln_session *s, kiln_comm *c)
{
    const char *fn = "kiln_session_set_comm";
    if (kiln_session_begin(s, fn) != KILN_OK)
        return KILN_ERR_ARG;
    if (!c) /* detaching: there is nothing attached */
        return KILN_OK;
    return kiln_session_fail(s, KILN_ERR_STATE, "%s: %s", fn, WHY);
}

kiln_status kiln_comm_sync_session(kiln_comm *c, kiln_session *s,
                                   const char *config)
{
    (void)c, (void)s, (void)config;
    return unavailable("kiln_comm_sync_session");
}

kiln_status kiln_comm_set_rows(kiln_comm *c, int64_t rows, int64_t global_rows)
{
    (void)c, (void)rows, (void)global_rows;
    return unavailable("kiln_comm_set_rows");
}

kiln_status kiln_comm_allreduce_sum(kiln_comm *c, double *v, int n)
{
    (void)c, (void)v, (void)n;
    return unavailable("kiln_comm_allreduce_sum");
}

kiln_status kiln_comm_get_stats(const kiln_comm *c, kiln_comm_stats *st)
{
    (void)c, (void)st;
    return unavailable("kiln_comm_get_stats");
}

void kiln_comm_reset_stats(kiln_comm *c)
{
    (void)c;
}

kiln_status kiln_comm_set_shared_memory(kiln_comm *c, int on)
{
    (void)c, (void)on;
    return unavailable("kiln_comm_set_shared_memory");
}

kiln_status kiln_comm_set_timeout(kiln_comm *c, double seconds)
{
    (void)c, (void)seconds;
    return unavailable("kiln_comm_set_timeout");
}

double kiln_comm_timeout(const kiln_comm *c)
{
    (void)c;
    return -1.0;
}

kiln_status kiln_comm_set_zero1(kiln_comm *c, int on)
{
    (void)c, (void)on;
    return unavailable("kiln_comm_set_zero1");
}

int kiln_comm_zero1(const kiln_comm *c)
{
    (void)c;
    return 0;
}

kiln_status kiln_comm_save_session(kiln_comm *c, kiln_session *s,
                                   const char *path)
{
    (void)c, (void)s, (void)path;
    return unavailable("kiln_comm_save_session");
}

kiln_status kiln_comm_load_session(kiln_comm *c, kiln_session *s,
                                   const char *path)
{
    (void)c, (void)s, (void)path;
    return unavailable("kiln_comm_load_session");
}
