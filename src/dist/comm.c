/* Communicators: MPI set up on first use, a duplicate of the caller's
   communicator, attached to one session whose optimiser steps it averages. */
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Memory MPI may still write after a collective timed out: kept (and
   reachable) until the process ends. */
static void **orphans;
static int n_orphans, cap_orphans;

void dist_orphan(void *p)
{
    if (!p)
        return;
    if (n_orphans == cap_orphans) {
        int cap = cap_orphans ? 2 * cap_orphans : 16;
        void **grown = realloc(orphans, (size_t)cap * sizeof *grown);
        if (!grown)
            return; /* leaked, still never freed */
        orphans = grown;
        cap_orphans = cap;
    }
    orphans[n_orphans++] = p;
}

/* The timeout of the last collective that timed out, for its message. */
static double timed_out_after;

int dist_room(void **items, int *cap, int n, size_t size)
{
    if (n < *cap)
        return 0;
    int grown = *cap ? *cap : 8;
    while (grown <= n && grown < (1 << 29))
        grown *= 2;
    if (grown <= n)
        return -1;
    void *p = realloc(*items, (size_t)grown * size);
    if (!p)
        return -1;
    *items = p;
    *cap = grown;
    return 0;
}

int dist_complete(kiln_comm *c, MPI_Request *req)
{
    if (c->broken)
        return DIST_TIMED_OUT;
    if (!(c->timeout > 0))
        return MPI_Wait(req, MPI_STATUS_IGNORE);
    double end = MPI_Wtime() + c->timeout;
    for (;;) {
        int flag = 0, rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        if (MPI_Wtime() > end) {
            /* the request stays in flight: MPI cannot cancel a collective */
            c->broken = 1;
            timed_out_after = c->timeout;
            return DIST_TIMED_OUT;
        }
    }
}

/* With a timeout, a collective runs on copies of its buffers: MPI may
   still read and write them after the call timed out (a collective cannot
   be cancelled), so they are left allocated then, never the caller's
   memory.  Without one, MPI's blocking call on the caller's buffers. */
static size_t type_bytes(MPI_Datatype t, int64_t n)
{
    int size = 0;
    if (n <= 0 || t == MPI_DATATYPE_NULL)
        return 0; /* MPI_Type_size would fail on MPI_DATATYPE_NULL */
    MPI_Type_size(t, &size);
    return size > 0 ? (size_t)n * (size_t)size : 0;
}

/* The copies a collective runs on: a of its input (NULL: none, MPI_IN_PLACE
   or nothing sent), b of its output. */
typedef struct staged {
    void *a, *b;
} staged;

/* A copy of bytes of src, zeros when src is NULL; NULL when out of
   memory. */
static void *copy_of(const void *src, size_t bytes)
{
    void *p = malloc(bytes + 1);
    if (p && bytes) {
        if (src)
            memcpy(p, src, bytes);
        else
            memset(p, 0, bytes);
    }
    return p;
}

/* Stages in (in_bytes; NULL or MPI_IN_PLACE: no copy) and an output of
   out_bytes starting as a copy of out_init (zeros when NULL). */
static int stage(staged *st, const void *in, size_t in_bytes,
                 const void *out_init, size_t out_bytes)
{
    st->a = in && in != MPI_IN_PLACE ? copy_of(in, in_bytes) : NULL;
    st->b = copy_of(out_init, out_bytes);
    if (st->b && (st->a || !in || in == MPI_IN_PLACE))
        return MPI_SUCCESS;
    free(st->a);
    free(st->b);
    return MPI_ERR_NO_MEM;
}

/* Completes the request started with rc and copies the staged output
   into out (bytes); the copies are freed unless the call timed out, since
   MPI may still use them then. */
static int unstage(kiln_comm *c, int rc, MPI_Request *req, staged *st,
                   void *out, size_t bytes)
{
    if (rc == MPI_SUCCESS && (rc = dist_complete(c, req)) == MPI_SUCCESS &&
        bytes)
        memcpy(out, st->b, bytes);
    if (rc != DIST_TIMED_OUT) {
        free(st->a);
        free(st->b);
    } else {
        dist_orphan(st->a);
        dist_orphan(st->b);
    }
    return rc;
}

/* The extent in bytes of counts[r] values at displs[r] over size ranks. */
static size_t extent(MPI_Datatype t, const int *counts, const int *displs,
                     int size)
{
    int64_t end = 0;
    for (int r = 0; counts && displs && r < size; r++)
        if (counts[r] > 0 && (int64_t)displs[r] + counts[r] > end)
            end = (int64_t)displs[r] + counts[r];
    return type_bytes(t, end);
}

int dist_bcast(kiln_comm *c, void *buf, int n, MPI_Datatype t, int root)
{
    if (c->broken)
        return DIST_TIMED_OUT;
    if (!(c->timeout > 0))
        return MPI_Bcast(buf, n, t, root, c->comm);
    size_t bytes = type_bytes(t, n);
    staged st;
    MPI_Request req;
    int rc = stage(&st, NULL, 0, buf, bytes);
    if (rc == MPI_SUCCESS)
        rc = unstage(c, MPI_Ibcast(st.b, n, t, root, c->comm, &req), &req, &st,
                     buf, bytes);
    return rc;
}

int dist_allreduce(kiln_comm *c, const void *in, void *out, int n,
                   MPI_Datatype t, MPI_Op op)
{
    if (c->broken)
        return DIST_TIMED_OUT;
    if (!(c->timeout > 0))
        return MPI_Allreduce(in, out, n, t, op, c->comm);
    size_t bytes = type_bytes(t, n);
    staged st;
    MPI_Request req;
    int rc = stage(&st, NULL, 0, in == MPI_IN_PLACE ? out : in, bytes);
    if (rc == MPI_SUCCESS)
        rc = unstage(
            c, MPI_Iallreduce(MPI_IN_PLACE, st.b, n, t, op, c->comm, &req),
            &req, &st, out, bytes);
    return rc;
}

int dist_allgather(kiln_comm *c, const void *in, int n, MPI_Datatype t,
                   void *out, int m, MPI_Datatype u)
{
    if (c->broken)
        return DIST_TIMED_OUT;
    if (!(c->timeout > 0))
        return MPI_Allgather(in, n, t, out, m, u, c->comm);
    size_t bytes = type_bytes(u, (int64_t)m * c->size);
    staged st;
    MPI_Request req;
    int rc = stage(&st, in, type_bytes(t, n), NULL, bytes);
    if (rc == MPI_SUCCESS)
        rc = unstage(c, MPI_Iallgather(st.a, n, t, st.b, m, u, c->comm, &req),
                     &req, &st, out, bytes);
    return rc;
}

int dist_allgatherv(kiln_comm *c, const void *in, int n, MPI_Datatype t,
                    void *out, const int *counts, const int *displs,
                    MPI_Datatype u)
{
    if (c->broken)
        return DIST_TIMED_OUT;
    if (!(c->timeout > 0))
        return MPI_Allgatherv(in, n, t, out, counts, displs, u, c->comm);
    /* in place (the ZeRO-1 gather): out holds this rank's range */
    size_t bytes = extent(u, counts, displs, c->size);
    staged st;
    MPI_Request req;
    int rc = stage(&st, in, type_bytes(t, n), in == MPI_IN_PLACE ? out : NULL,
                   bytes);
    if (rc == MPI_SUCCESS)
        rc =
            unstage(c,
                    MPI_Iallgatherv(in == MPI_IN_PLACE ? MPI_IN_PLACE : st.a, n,
                                    t, st.b, counts, displs, u, c->comm, &req),
                    &req, &st, out, bytes);
    return rc;
}

int dist_gather_root(kiln_comm *c, const void *in, int n, MPI_Datatype t,
                     void *out, int m, MPI_Datatype u, int root)
{
    if (c->broken)
        return DIST_TIMED_OUT;
    if (!(c->timeout > 0))
        return MPI_Gather(in, n, t, out, m, u, root, c->comm);
    size_t bytes = c->rank == root ? type_bytes(u, (int64_t)m * c->size) : 0;
    staged st;
    MPI_Request req;
    int rc = stage(&st, in, type_bytes(t, n), NULL, bytes);
    if (rc == MPI_SUCCESS)
        rc =
            unstage(c, MPI_Igather(st.a, n, t, st.b, m, u, root, c->comm, &req),
                    &req, &st, out, bytes);
    return rc;
}

int dist_gatherv_root(kiln_comm *c, const void *in, int n, MPI_Datatype t,
                      void *out, const int *counts, const int *displs,
                      MPI_Datatype u, int root)
{
    if (c->broken)
        return DIST_TIMED_OUT;
    if (!(c->timeout > 0))
        return MPI_Gatherv(in, n, t, out, counts, displs, u, root, c->comm);
    size_t bytes = c->rank == root ? extent(u, counts, displs, c->size) : 0;
    staged st;
    MPI_Request req;
    int rc = stage(&st, in, type_bytes(t, n), NULL, bytes);
    if (rc == MPI_SUCCESS)
        rc = unstage(c,
                     MPI_Igatherv(st.a, n, t, st.b, counts, displs, u, root,
                                  c->comm, &req),
                     &req, &st, out, bytes);
    return rc;
}

int dist_agree(kiln_comm *c, int ok, char *msg, int size)
{
    int mine = ok ? c->size : c->rank, low;
    if (dist_allreduce(c, &mine, &low, 1, MPI_INT, MPI_MIN) != MPI_SUCCESS)
        return -2;
    if (low == c->size)
        return -1;
    return dist_bcast(c, msg, size, MPI_CHAR, low) == MPI_SUCCESS ? low : -2;
}

const char *dist_mpi_error(int rc, char *buf, int size)
{
    int len = 0;
    if (rc == DIST_TIMED_OUT)
        snprintf(buf, (size_t)size,
                 "no answer from every rank within %g s (a rank died or "
                 "stopped, or does not make the same calls); the "
                 "communicator is unusable: end the job (kiln_comm_abort)",
                 (double)timed_out_after);
    else if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
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
    double timeout;
    int share;
    /* checked before any MPI call */
    if (dist_env_defaults(fn, &timeout, &share) != 0)
        return NULL;
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
    c->timeout = timeout;
    c->share_weights = share;
    c->cur_set = -1;
    c->phase_comm = MPI_COMM_NULL;
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
    /* the session's variables, shared pages included, are gone: their
       scratches are unmapped */
    dist_unshare_all(c);
    for (int i = 0; i < c->n_sets; i++)
        c->sets[i].state = 0;
}

static void detach(kiln_comm *c)
{
    if (!c->s)
        return;
    dist_unshare_all(c); /* the session keeps private copies */
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
    if (c->dyn)
        c->dyn->leak = c->broken;
    dist_plan_free(c->dyn);
    for (int i = 0; i < c->n_plans; i++) {
        dist_plan_settle(c, c->plans[i]);
        /* MPI_Win_free waits for every rank: not after a timeout */
        c->plans[i]->leak = c->broken;
        dist_plan_free(c->plans[i]);
    }
    free(c->plans);
    free(c->refs);
    dist_zero_free(c);
    dist_share_free(c);
    int done = 0;
    MPI_Finalized(&done);
    if (!done && !c->broken)
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

kiln_status kiln_comm_set_shared_weights(kiln_comm *c, int on)
{
    if (!c)
        return kiln_null_arg("kiln_comm_set_shared_weights", "communicator");
    c->err[0] = 0;
    c->share_weights = on == 2 || on == 3 ? on : on ? 1 : 0;
    return KILN_OK;
}

int kiln_comm_shared_weights(const kiln_comm *c)
{
    return c ? c->share_weights : 0;
}

kiln_status kiln_comm_set_timeout(kiln_comm *c, double seconds)
{
    if (!c)
        return kiln_null_arg("kiln_comm_set_timeout", "communicator");
    c->err[0] = 0;
    if (!(seconds >= 0 && seconds <= 1e9))
        return dist_fail(c, KILN_ERR_ARG,
                         "kiln_comm_set_timeout: %g s: a timeout is 0 (none) "
                         "or a positive number of seconds up to 1e9",
                         seconds);
    c->timeout = seconds;
    return KILN_OK;
}

double kiln_comm_timeout(const kiln_comm *c)
{
    return c ? c->timeout : -1.0;
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
    int rc = dist_allreduce(c, MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM);
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
