/* Communicators: MPI set up on first use, a duplicate of the caller's
   communicator, attached to one session whose optimiser steps it averages. */
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"

kiln_status dist_fail(kiln_comm *c, kiln_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    kiln_set_last_error("%s", c->err);
    return st;
}

int dist_agree(kiln_comm *c, int ok, char *msg, int size)
{
    int mine = ok ? c->size : c->rank, low;
    if (MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS)
        return -2;
    if (low == c->size)
        return -1;
    return MPI_Bcast(msg, size, MPI_CHAR, low, c->comm) == MPI_SUCCESS ? low
                                                                       : -2;
}

const char *dist_mpi_error(int rc, char *buf, int size)
{
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, (size_t)size, "MPI error %d", rc);
    return buf;
}

static void finalize_mpi(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done)
        MPI_Finalize();
}

/* Kernel threads never call MPI: the thread that runs the session does. */
static int init_mpi(void)
{
    int up = 0, provided;
    MPI_Initialized(&up);
    if (up)
        return 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS) {
        kiln_set_last_error("kiln_comm_world: MPI_Init_thread failed");
        return -1;
    }
    atexit(finalize_mpi);
    return 0;
}

/* Communicators made so far: each numbers its hook keys from its own
   base (DIST_KEYS apart, all below INT_MAX). */
static atomic_int made;

static kiln_comm *comm_new(MPI_Comm from, const char *fn)
{
    int k = atomic_fetch_add(&made, 1);
    if (k >= INT_MAX / DIST_KEYS - 1) {
        kiln_set_last_error("%s: more than %d communicators made by this "
                            "process",
                            fn, INT_MAX / DIST_KEYS - 1);
        return NULL;
    }
    kiln_comm *c = calloc(1, sizeof *c);
    if (!c) {
        kiln_set_last_error("%s: out of memory", fn);
        return NULL;
    }
    c->key_base = k * DIST_KEYS;
    char msg[MPI_MAX_ERROR_STRING];
    int rc = MPI_Comm_dup(from, &c->comm);
    if (rc != MPI_SUCCESS) {
        kiln_set_last_error("%s: MPI_Comm_dup: %s", fn,
                            dist_mpi_error(rc, msg, sizeof msg));
        free(c);
        return NULL;
    }
    /* failures come back as codes, turned into Kiln errors */
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    dist_tune_allreduce();
    c->on_node = dist_on_one_node(c->comm, c->size);
    c->shm = 1;
    c->bucket_bytes = (size_t)1 << 20;
    c->weight = 1.0 / c->size;
    dist_sync_init(c);
    return c;
}

int kiln_dist_available(void)
{
    return 1;
}

kiln_comm *kiln_comm_world(void)
{
    return init_mpi() ? NULL : comm_new(MPI_COMM_WORLD, "kiln_comm_world");
}

kiln_comm *kiln_comm_from_mpi(const void *mpi_comm)
{
    const char *fn = "kiln_comm_from_mpi";
    int up = 0;
    if (!mpi_comm) {
        kiln_set_last_error("%s: communicator is NULL", fn);
        return NULL;
    }
    MPI_Initialized(&up);
    if (!up) {
        kiln_set_last_error("%s: MPI is not initialised", fn);
        return NULL;
    }
    /* duplicating it would call MPI's fatal error handler */
    if (*(const MPI_Comm *)mpi_comm == MPI_COMM_NULL) {
        kiln_set_last_error("%s: the communicator is MPI_COMM_NULL", fn);
        return NULL;
    }
    return comm_new(*(const MPI_Comm *)mpi_comm, fn);
}

static void forget_session(void *holder)
{
    kiln_comm *c = holder;
    c->s = NULL;
}

static void detach(kiln_comm *c)
{
    if (!c->s)
        return;
    if (c->s->sync == &c->sync)
        c->s->sync = NULL;
    kiln_session_detach(c->s, c);
    c->s = NULL;
}

void kiln_comm_free(kiln_comm *c)
{
    if (!c)
        return;
    detach(c);
    dist_plan_settle(c, c->dyn);
    dist_plan_free(c->dyn);
    for (int i = 0; i < c->n_plans; i++) {
        dist_plan_settle(c, c->plans[i]);
        dist_plan_free(c->plans[i]);
    }
    free(c->plans);
    free(c->refs);
    dist_zero_free(c);
    int done = 0;
    MPI_Finalized(&done);
    if (!done)
        MPI_Comm_free(&c->comm);
    free(c);
}

int kiln_comm_rank(const kiln_comm *c)
{
    return c ? c->rank : -1;
}

int kiln_comm_size(const kiln_comm *c)
{
    return c ? c->size : -1;
}

const char *kiln_comm_error(const kiln_comm *c)
{
    return c ? c->err : "communicator is NULL";
}

kiln_status kiln_comm_set_bucket_bytes(kiln_comm *c, size_t bytes)
{
    if (!c)
        return kiln_null_arg("kiln_comm_set_bucket_bytes", "communicator");
    c->err[0] = 0;
    if (bytes < sizeof(float))
        return dist_fail(c, KILN_ERR_ARG,
                         "kiln_comm_set_bucket_bytes: %zu bytes is less than "
                         "one value",
                         bytes);
    c->bucket_bytes = bytes;
    return KILN_OK;
}

kiln_status kiln_comm_set_shared_memory(kiln_comm *c, int on)
{
    if (!c)
        return kiln_null_arg("kiln_comm_set_shared_memory", "communicator");
    c->err[0] = 0;
    c->shm = on != 0;
    return KILN_OK;
}

void kiln_comm_abort(kiln_comm *c, int code)
{
    if (c)
        MPI_Abort(c->comm, code);
}

kiln_status kiln_session_set_comm(kiln_session *s, kiln_comm *c)
{
    const char *fn = "kiln_session_set_comm";
    if (kiln_session_begin(s, fn) != KILN_OK)
        return KILN_ERR_ARG;
    if (c && c->s && c->s != s)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "%s: the communicator is attached to another "
                                 "session",
                                 fn);
    int cur = 0;
    kiln_comm *old = kiln_session_next_holder(s, forget_session, &cur);
    if (old == c)
        return KILN_OK;
    if (old)
        detach(old);
    if (!c)
        return KILN_OK;
    if (kiln_session_attach(s, c, forget_session, fn) != KILN_OK)
        return KILN_ERR_MEMORY;
    if (c->s != s) /* the slots sharded were another session's */
        dist_zero_forget(c);
    c->s = s;
    s->sync = &c->sync;
    return KILN_OK;
}

kiln_status kiln_comm_set_rows(kiln_comm *c, int64_t rows, int64_t global_rows)
{
    if (!c)
        return kiln_null_arg("kiln_comm_set_rows", "communicator");
    c->err[0] = 0;
    if (global_rows < 1 || rows < 0 || rows > global_rows)
        return dist_fail(c, KILN_ERR_ARG,
                         "kiln_comm_set_rows: %lld rows of a global batch of "
                         "%lld",
                         (long long)rows, (long long)global_rows);
    c->weight = (double)rows / (double)global_rows;
    return KILN_OK;
}

kiln_status kiln_comm_allreduce_sum(kiln_comm *c, double *v, int n)
{
    if (!c || (!v && n))
        return kiln_null_arg("kiln_comm_allreduce_sum",
                             c ? "values" : "communicator");
    c->err[0] = 0;
    if (n < 0)
        return dist_fail(c, KILN_ERR_ARG, "kiln_comm_allreduce_sum: n = %d", n);
    char msg[MPI_MAX_ERROR_STRING];
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, c->comm);
    if (rc != MPI_SUCCESS)
        return dist_fail(c, KILN_ERR_IO, "kiln_comm_allreduce_sum: %s",
                         dist_mpi_error(rc, msg, sizeof msg));
    return KILN_OK;
}

kiln_status kiln_comm_get_stats(const kiln_comm *c, kiln_comm_stats *st)
{
    if (!c || !st)
        return kiln_null_arg("kiln_comm_get_stats",
                             c ? "stats" : "communicator");
    *st = c->stats;
    return KILN_OK;
}

void kiln_comm_reset_stats(kiln_comm *c)
{
    if (c)
        c->stats = (kiln_comm_stats){0};
}
