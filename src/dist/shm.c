/* Buckets summed through an MPI-3 shared-memory window when every rank
   runs on one machine.  MPI_Iallreduce moves a bucket through the
   shared-memory transport's fragments: each byte is copied into shared
   memory by its sender and out by its receiver, and the sum goes through
   a buffer of its own (about 41 MB of memory traffic per rank for the
   7.45 MB of the MLP's gradients on 2 ranks).  Here each rank's plan
   memory is its part of one window (MPI_Win_allocate_shared): backward
   writes a rank's gradients there, and once every rank's bucket is in
   (a barrier), rank r sums the r-th of N chunks of the bucket over the N
   ranks' copies, in rank order, and writes the sum into all N copies (15
   MB per rank); a second barrier ends the round, every copy then holding
   the whole sum.  The data still moves through memory MPI allocated and
   shares; the barriers are MPI's, non-blocking and advanced between
   kernels like the all-reduces. */
#include <stdlib.h>

#include "dist/dist.h"

int dist_on_one_node(MPI_Comm comm, int size)
{
    MPI_Comm node;
    int n = 0;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &node) != MPI_SUCCESS)
        return 0;
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    return n == size;
}

int dist_shm_setup(kiln_comm *c, dist_plan *p)
{
    float *mem = NULL;
    MPI_Info info;
    MPI_Info_create(&info);
    /* each rank's part close to it */
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    int rc = MPI_Win_allocate_shared((MPI_Aint)(p->total + 1) * 4, 4, info,
                                     c->comm, &mem, &p->win);
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS)
        return -1;
    p->peer = calloc((size_t)c->size, sizeof *p->peer);
    for (int r = 0; p->peer && r < c->size; r++) {
        MPI_Aint bytes;
        int unit;
        MPI_Win_shared_query(p->win, r, &bytes, &unit, &p->peer[r]);
    }
    if (!p->peer) {
        MPI_Win_free(&p->win);
        return -1;
    }
    MPI_Win_lock_all(MPI_MODE_NOCHECK, p->win);
    /* barriers on one communicator pair up in the order they are called,
       and a rank may start one bucket's second barrier before or after
       another's first one: each bucket has a communicator of its own */
    for (int i = 0; i < p->n_buckets; i++) {
        p->buckets[i].buf = mem + (p->buckets[i].buf - p->mem);
        MPI_Comm_dup(c->comm, &p->buckets[i].comm);
    }
    free(p->mem);
    p->mem = mem;
    p->shm = 1;
    return 0;
}

void dist_shm_free(dist_plan *p)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!p->shm || done || p->leak)
        return;
    MPI_Win_unlock_all(p->win);
    MPI_Win_free(&p->win); /* frees p->mem */
    for (int i = 0; i < p->n_buckets; i++)
        MPI_Comm_free(&p->buckets[i].comm);
    p->mem = NULL;
    free(p->peer);
}

/* Rank's chunk of b summed over every rank's copy, in rank order, into
   every copy. */
static void sum_chunk(const kiln_comm *c, dist_plan *p, const dist_bucket *b)
{
    int64_t at = b->buf - p->mem, lo = b->numel * c->rank / c->size,
            hi = b->numel * (c->rank + 1) / c->size;
    float **peer = p->peer;
    if (c->size == 2) {
        float *restrict x = peer[0] + at, *restrict y = peer[1] + at;
        for (int64_t i = lo; i < hi; i++)
            x[i] = y[i] = x[i] + y[i];
        return;
    }
    for (int64_t i = lo; i < hi; i++) {
        float s = peer[0][at + i];
        for (int r = 1; r < c->size; r++)
            s += peer[r][at + i];
        for (int r = 0; r < c->size; r++)
            peer[r][at + i] = s;
    }
}

int dist_shm_start(kiln_comm *c, dist_plan *p, dist_bucket *b)
{
    MPI_Win_sync(p->win); /* this rank's gradients visible to the others */
    (void)c;
    b->summed = 0;
    return MPI_Ibarrier(b->comm, &b->req);
}

/* After the first barrier: sums this rank's chunk and starts the second. */
static int next_phase(kiln_comm *c, dist_plan *p, dist_bucket *b)
{
    MPI_Win_sync(p->win);
    sum_chunk(c, p, b);
    MPI_Win_sync(p->win);
    b->summed = 1;
    return MPI_Ibarrier(b->comm, &b->req);
}

int dist_shm_test(kiln_comm *c, dist_plan *p, dist_bucket *b)
{
    int flag = 0;
    if (MPI_Test(&b->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag)
        return 0;
    if (b->summed) {
        MPI_Win_sync(p->win); /* the others' sums visible here */
        return 1;
    }
    next_phase(c, p, b);
    return 0;
}

int dist_shm_wait(kiln_comm *c, dist_plan *p, dist_bucket *b)
{
    int rc = dist_complete(c, &b->req);
    if (rc == MPI_SUCCESS && !b->summed &&
        (rc = next_phase(c, p, b)) == MPI_SUCCESS)
        rc = dist_complete(c, &b->req);
    MPI_Win_sync(p->win);
    return rc;
}
