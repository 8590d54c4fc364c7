/* Gradient buckets: each one all-reduced by one non-blocking MPI call,
   started as soon as backward computed its last gradient, so that the
   transfer of the last layers' gradients overlaps the backward pass of
   the first ones. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

dist_plan *dist_plan_new(const kiln_comm *c, const int64_t *numel, int n)
{
    dist_plan *p = calloc(1, sizeof *p);
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += numel[i];
    if (!p || !(p->slots = calloc((size_t)n + 1, sizeof *p->slots)) ||
        !(p->buckets = calloc((size_t)n + 1, sizeof *p->buckets)) ||
        !(p->mem = malloc(((size_t)total + 1) * sizeof *p->mem))) {
        dist_plan_free(p);
        return NULL;
    }
    int64_t cap = (int64_t)(c->bucket_bytes / sizeof(float)), at = 0;
    dist_bucket *b = NULL;
    for (int i = 0; i < n; i++) {
        /* a gradient larger than the cap gets a bucket of its own */
        if (!b || b->numel + numel[i] > cap) {
            b = &p->buckets[p->n_buckets++];
            b->buf = p->mem + at;
            b->req = MPI_REQUEST_NULL;
        }
        p->slots[i] = (dist_slot){.bucket = (int)(b - p->buckets),
                                  .offset = b->numel,
                                  .numel = numel[i]};
        b->numel += numel[i];
        b->n_slots++;
        at += numel[i];
    }
    p->n_slots = n;
    p->total = total;
    return p;
}

void dist_plan_free(dist_plan *p)
{
    if (!p)
        return;
    if (p->shm)
        dist_shm_free(p);
    else if (!p->leak)
        free(p->mem);
    else /* after a timeout MPI may still write there */
        dist_orphan(p->mem);
    free(p->slots);
    free(p->buckets);
    free(p);
}

static kiln_status mpi_failed(kiln_comm *c, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    dist_mpi_error(rc, msg, sizeof msg);
    if (c->s)
        kiln_session_fail(c->s, KILN_ERR_IO, "gradient all-reduce: %s: %s",
                          what, msg);
    return dist_fail(c, KILN_ERR_IO, "gradient all-reduce: %s: %s", what, msg);
}

static kiln_status wait_bucket(kiln_comm *c, dist_plan *p, dist_bucket *b)
{
    double t0 = MPI_Wtime();
    int rc = p->shm ? dist_shm_wait(c, p, b) : dist_complete(c, &b->req);
    c->stats.wait_seconds += MPI_Wtime() - t0;
    b->done = 1;
    return rc == MPI_SUCCESS ? KILN_OK : mpi_failed(c, rc, "waiting");
}

static kiln_status start_bucket(kiln_comm *c, dist_plan *p, dist_bucket *b)
{
    if (b->numel > 0x7fffffff)
        return dist_fail(c, KILN_ERR_ARG,
                         "gradient all-reduce: a gradient of %lld values is "
                         "over MPI's count limit",
                         (long long)b->numel);
    int rc = c->broken ? DIST_TIMED_OUT
             : p->shm  ? dist_shm_start(c, p, b)
                       : MPI_Iallreduce(MPI_IN_PLACE, b->buf, (int)b->numel,
                                        MPI_FLOAT, MPI_SUM, c->comm, &b->req);
    if (rc != MPI_SUCCESS)
        return mpi_failed(c, rc, p->shm ? "MPI_Ibarrier" : "MPI_Iallreduce");
    b->started = 1;
    c->stats.allreduces++;
    c->stats.shared += p->shm;
    c->stats.bytes += b->numel * (int64_t)sizeof(float);
    return KILN_OK;
}

/* A bucket whose last round was waited for starts a new one; a round left
   in flight (a run that failed midway) is finished first, since MPI wants
   every request completed. */
static kiln_status new_round(kiln_comm *c, dist_plan *p, dist_bucket *b)
{
    kiln_status st = KILN_OK;
    if (b->started && !b->done)
        st = wait_bucket(c, p, b);
    b->started = b->done = 0;
    b->n_packed = 0;
    for (int i = 0; i < p->n_slots; i++)
        if (&p->buckets[p->slots[i].bucket] == b)
            p->slots[i].packed = 0;
    return st;
}

float *dist_slot_data(dist_plan *p, int slot)
{
    const dist_slot *sl = &p->slots[slot];
    return p->buckets[sl->bucket].buf + sl->offset;
}

kiln_status dist_pack(kiln_comm *c, dist_plan *p, int slot, const float *data)
{
    dist_slot *sl = &p->slots[slot];
    dist_bucket *b = &p->buckets[sl->bucket];
    kiln_status st;
    if ((b->started || sl->packed) && (st = new_round(c, p, b)) != KILN_OK)
        return st;
    float *dst = b->buf + sl->offset;
    float w = (float)(p->graph_weighted ? c->weight * c->size : c->weight);
    /* a rank with no rows has a NaN mean: it contributes nothing */
    if (w == 0.0f)
        memset(dst, 0, (size_t)sl->numel * sizeof *dst);
    else if (w != 1.0f || dst != data)
        for (int64_t j = 0; j < sl->numel; j++)
            dst[j] = data[j] * w;
    sl->packed = 1;
    return ++b->n_packed == b->n_slots ? start_bucket(c, p, b) : KILN_OK;
}

kiln_status dist_deliver(kiln_comm *c, dist_plan *p, int slot, float *data)
{
    dist_slot *sl = &p->slots[slot];
    dist_bucket *b = &p->buckets[sl->bucket];
    kiln_status st = KILN_OK;
    if (!b->started) {
        for (int i = 0; i < p->n_slots; i++)
            if (p->slots[i].bucket == sl->bucket && !p->slots[i].packed)
                memset(b->buf + p->slots[i].offset, 0,
                       (size_t)p->slots[i].numel * sizeof *b->buf);
        st = start_bucket(c, p, b);
    }
    if (st == KILN_OK && !b->done)
        st = wait_bucket(c, p, b);
    if (st == KILN_OK && data != b->buf + sl->offset)
        memcpy(data, b->buf + sl->offset, (size_t)sl->numel * sizeof *data);
    return st;
}

void dist_progress(kiln_comm *c)
{
    for (int k = -1; !c->broken && k < c->n_plans; k++) {
        dist_plan *p = k < 0 ? c->dyn : c->plans[k];
        for (int i = 0; p && i < p->n_buckets; i++) {
            dist_bucket *b = &p->buckets[i];
            int flag = 0;
            if (!b->started || b->done)
                continue;
            if (p->shm)
                b->done = dist_shm_test(c, p, b);
            else if (MPI_Test(&b->req, &flag, MPI_STATUS_IGNORE) ==
                         MPI_SUCCESS &&
                     flag)
                b->done = 1;
        }
    }
}

void dist_plan_settle(kiln_comm *c, dist_plan *p)
{
    /* a broken communicator's requests never complete */
    for (int i = 0; p && !c->broken && i < p->n_buckets; i++)
        if (p->buckets[i].started && !p->buckets[i].done)
            wait_bucket(c, p, &p->buckets[i]);
}
