/* The start-up collective: every rank checks that it trains the same model
   the same way as rank 0, then takes rank 0's variables.  A mismatch is
   found by every rank together, so each returns the same error instead of
   some waiting forever in a collective the others never reach. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

enum { LINE_MAX_LEN = 192 };

/* One line per variable, "name dtype [shape]" (a ZeRO-1 shard's slot
   whole, after the others: each rank holds another range of it), then one
   per line of the config text, "config: line". */
static char *signature(const kiln_comm *c, const kiln_session *s,
                       const char *config)
{
    size_t cap = 256 + 9 * strlen(config), len = 0;
    for (int i = 0; i < s->n_vars; i++)
        cap += strlen(s->vars[i].name) + 160;
    for (int i = 0; i < c->n_states; i++)
        cap += strlen(c->states[i].name) + 160;
    char *sig = malloc(cap);
    char shape[128];
    for (int i = 0; sig && i < s->n_vars; i++) {
        const kiln_var *v = &s->vars[i];
        if (!dist_find_state(c, v->name))
            len +=
                (size_t)snprintf(sig + len, cap - len, "%s %s %s\n", v->name,
                                 kiln_dtype_name(v->dtype),
                                 kiln_shape_str(v->shape, shape, sizeof shape));
    }
    for (int i = 0; sig && i < c->n_states; i++)
        len += (size_t)snprintf(
            sig + len, cap - len, "%s f32 %s\n", c->states[i].name,
            kiln_shape_str(c->states[i].shape, shape, sizeof shape));
    /* a rank summing through shared memory and one calling MPI_Iallreduce,
       buckets cut differently, a rank sharing plain SGD's variables and
       one keeping private copies (or one with ZeRO-1, whose step then
       gathers instead) would wait for each other forever */
    int shared = c->shm && c->on_node && c->share_weights;
    if (sig)
        len += (size_t)snprintf(
            sig + len, cap - len, "comm: buckets of %zu bytes, %s%s%s%s\n",
            c->bucket_bytes,
            c->shm && c->on_node ? "shared memory" : "MPI_Iallreduce",
            shared ? ", shared weights" : "",
            shared && c->share_weights == 2   ? " (private copies)"
            : shared && c->share_weights == 3 ? " (changes summed once)"
                                              : "",
            c->zero1 ? ", ZeRO-1" : "");
    while (sig && *config) {
        size_t n = strcspn(config, "\n");
        len += (size_t)snprintf(sig + len, cap - len, "config: %.*s\n", (int)n,
                                config);
        config += n + (config[n] == '\n');
    }
    return sig;
}

/* The first line where mine differs from rank 0's (ref), as "rank 0 has
   '...', rank R has '...'", into out; "" when they agree. */
static void first_difference(const char *ref, const char *mine, int rank,
                             char *out, size_t size)
{
    out[0] = 0;
    while (*ref || *mine) {
        size_t a = strcspn(ref, "\n"), b = strcspn(mine, "\n");
        if (a != b || memcmp(ref, mine, a) != 0) {
            snprintf(out, size, "rank 0 has '%.*s', rank %d has '%.*s'",
                     (int)(a ? a : 6), a ? ref : "(none)", rank,
                     (int)(b ? b : 6), b ? mine : "(none)");
            return;
        }
        ref += a + (ref[a] == '\n');
        mine += b + (mine[b] == '\n');
    }
}

static kiln_status mpi_fail(kiln_comm *c, kiln_session *s, int rc,
                            const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    dist_fail(c, KILN_ERR_IO, "kiln_comm_sync_session: %s: %s", what,
              dist_mpi_error(rc, msg, sizeof msg));
    return kiln_session_fail(s, KILN_ERR_IO, "%s", c->err);
}

/* Every rank's difference from rank 0 (rank 0's own is empty) gathered
   on every rank; the message of the first rank that differs into c and
   s, or KILN_OK when none does. */
static kiln_status compare(kiln_comm *c, kiln_session *s, const char *sig)
{
    int len = (int)strlen(sig) + 1, rc;
    if ((rc = dist_bcast(c, &len, 1, MPI_INT, 0)) != MPI_SUCCESS)
        return mpi_fail(c, s, rc, "MPI_Bcast");
    char *ref = malloc((size_t)len), mine[LINE_MAX_LEN * 2];
    char *all = malloc((size_t)c->size * sizeof mine);
    kiln_status st = KILN_OK;
    if (!ref || !all) {
        free(ref);
        free(all);
        kiln_comm_abort(c, 1); /* the others are waiting in MPI_Bcast */
        return KILN_ERR_MEMORY;
    }
    if (c->rank == 0)
        memcpy(ref, sig, (size_t)len);
    if ((rc = dist_bcast(c, ref, len, MPI_CHAR, 0)) != MPI_SUCCESS ||
        (first_difference(ref, sig, c->rank, mine, sizeof mine),
         rc = dist_allgather(c, mine, (int)sizeof mine, MPI_CHAR, all,
                             (int)sizeof mine, MPI_CHAR)) != MPI_SUCCESS) {
        st = mpi_fail(c, s, rc, "MPI_Bcast/MPI_Allgather");
    } else {
        for (int r = 1; r < c->size && st == KILN_OK; r++)
            if (all[(size_t)r * sizeof mine]) {
                dist_fail(c, KILN_ERR_ARG,
                          "kiln_comm_sync_session: rank %d differs from "
                          "rank 0: %s",
                          r, all + (size_t)r * sizeof mine);
                st = kiln_session_fail(s, KILN_ERR_ARG, "%s", c->err);
            }
    }
    free(ref);
    free(all);
    return st;
}

static int bcast_bytes(kiln_comm *c, void *data, size_t bytes)
{
    for (size_t at = 0; at < bytes;) {
        size_t n = bytes - at < INT_MAX ? bytes - at : INT_MAX;
        int rc = dist_bcast(c, (char *)data + at, (int)n, MPI_BYTE, 0);
        if (rc != MPI_SUCCESS)
            return rc;
        at += n;
    }
    return MPI_SUCCESS;
}

kiln_status dist_same_timeouts(kiln_comm *c, const char *fn)
{
    char why[MPI_MAX_ERROR_STRING];
    if (c->broken)
        return dist_fail(c, KILN_ERR_IO, "%s: %s", fn,
                         dist_mpi_error(DIST_TIMED_OUT, why, sizeof why));
    /* every rank's timeout, then its own: MPI may write them after a
       timeout, so they are never the caller's */
    double *all = malloc(((size_t)c->size + 1) * sizeof *all);
    MPI_Request req;
    if (!all) {
        kiln_comm_abort(c, 1); /* out of memory alone: end the job */
        return KILN_ERR_MEMORY;
    }
    all[c->size] = c->timeout;
    int rc = MPI_Iallgather(all + c->size, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE,
                            c->comm, &req);
    if (rc == MPI_SUCCESS)
        rc = dist_complete(c, &req);
    if (rc == DIST_TIMED_OUT)
        dist_orphan(all);
    if (rc != MPI_SUCCESS)
        return dist_fail(c, KILN_ERR_IO, "%s: MPI_Iallgather: %s", fn,
                         dist_mpi_error(rc, why, sizeof why));
    kiln_status st = KILN_OK;
    for (int r = 1; r < c->size && st == KILN_OK; r++)
        if ((all[r] > 0) != (all[0] > 0)) {
            char t0[48], tr[48];
            snprintf(t0, sizeof t0, all[0] > 0 ? "a timeout of %g s" : "none",
                     all[0]);
            snprintf(tr, sizeof tr, all[r] > 0 ? "a timeout of %g s" : "none",
                     all[r]);
            st = dist_fail(c, KILN_ERR_ARG,
                           "%s: rank %d differs from rank 0: rank 0 has %s, "
                           "rank %d has %s (kiln_comm_set_timeout, "
                           "KILN_DIST_TIMEOUT): set one on every rank or on "
                           "none",
                           fn, r, t0, r, tr);
        }
    free(all);
    return st;
}

kiln_status kiln_comm_sync_session(kiln_comm *c, kiln_session *s,
                                   const char *config)
{
    const char *fn = "kiln_comm_sync_session";
    if (!c)
        return kiln_null_arg(fn, "communicator");
    c->err[0] = 0;
    if (kiln_session_begin(s, fn) != KILN_OK)
        return dist_fail(c, KILN_ERR_ARG, "%s: session is NULL", fn);
    kiln_status st = dist_same_timeouts(c, fn);
    if (st != KILN_OK)
        return kiln_session_fail(s, st, "%s", c->err);
    char *sig = signature(c, s, config ? config : "");
    if (!sig) {
        kiln_comm_abort(c, 1); /* out of memory alone: end the job */
        return KILN_ERR_MEMORY;
    }
    st = compare(c, s, sig);
    free(sig);
    int rc = MPI_SUCCESS;
    for (int i = 0; st == KILN_OK && rc == MPI_SUCCESS && i < s->n_vars; i++) {
        kiln_var *v = &s->vars[i];
        if (dist_find_state(c, v->name))
            continue; /* each rank keeps its own range */
        rc = bcast_bytes(c, v->data,
                         (size_t)kiln_shape_numel(v->shape) *
                             kiln_dtype_size(v->dtype));
    }
    if (st == KILN_OK && rc == MPI_SUCCESS)
        rc = bcast_bytes(c, &s->rng, sizeof s->rng);
    if (st == KILN_OK && rc != MPI_SUCCESS)
        st = mpi_fail(c, s, rc, "MPI_Bcast");
    return st;
}
