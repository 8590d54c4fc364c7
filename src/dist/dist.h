/* Data-parallel training over MPI: the communicator and its gradient
   buckets.  Only src/dist/ includes mpi.h; the runtime sees the gradient
   sync through the callbacks of kiln_grad_sync (runtime/runtime.h). */
#ifndef KILN_DIST_DIST_H
#define KILN_DIST_DIST_H

#include <mpi.h>

#include "kiln.h"
#include "runtime/runtime.h"

/* One gradient in a bucket: its place there, and in a dynamic plan the
   gradient node it is (NULL in a compiled one, found by hook key). */
typedef struct dist_slot {
    int bucket;
    int64_t offset, numel;
    const kiln_node *grad;
    int grad_id;
    unsigned grad_gen;
    int packed; /* copied into the bucket this round */
} dist_slot;

/* Gradients averaged by one MPI_Iallreduce: packed (weighted) as backward
   computes them, started when all are in, waited for by the first reader
   of one of them.  A round ends when it is waited for. */
typedef struct dist_bucket {
    float *buf;
    int64_t numel;
    int n_slots, n_packed;
    int started, done;
    MPI_Request req;
} dist_bucket;

/* The buckets of one training step's gradients, in the order backward
   computes them (ascending node id). */
typedef struct dist_plan {
    dist_slot *slots;
    int n_slots;
    dist_bucket *buckets;
    int n_buckets;
    float *mem; /* every bucket's buffer */
} dist_plan;

/* Where a hook key (kiln_node.hook) of a compiled step points. */
typedef struct dist_ref {
    int plan, slot;
} dist_ref;

struct kiln_comm {
    MPI_Comm comm; /* duplicated: Kiln's collectives never meet the user's */
    int rank, size;
    char err[KILN_ERRMSG_MAX];
    size_t bucket_bytes;
    double weight; /* this rank's share of the average: rows / global */
    kiln_session *s;
    kiln_grad_sync sync;
    dist_plan **plans; /* of the graph forms built on the session */
    int n_plans, cap_plans;
    dist_ref *refs; /* by hook key - 1 */
    int n_refs, cap_refs;
    dist_plan *dyn; /* of the last dynamic backward */
    kiln_comm_stats stats;
};

/* Records c's error message (and kiln_last_error) and returns st. */
kiln_status dist_fail(kiln_comm *c, kiln_status st, const char *fmt, ...)
    KILN_PRINTF(3, 4);
/* The MPI error text of rc into buf. */
const char *dist_mpi_error(int rc, char *buf, int size);

/* A plan over n gradients of the given sizes, in that order; NULL when
   out of memory. */
dist_plan *dist_plan_new(const kiln_comm *c, const int64_t *numel, int n);
void dist_plan_free(dist_plan *p);
/* Copies slot's gradient (weighted) into its bucket and starts the
   bucket's all-reduce when it is the last one in.  KILN_ERR_IO (the
   session's error) when MPI fails. */
kiln_status dist_pack(kiln_comm *c, dist_plan *p, int slot, const float *data);
/* Waits for slot's bucket (starting it first when a gradient never came:
   it then averages zeros for them) and copies the average into data. */
kiln_status dist_deliver(kiln_comm *c, dist_plan *p, int slot, float *data);
/* Lets the all-reduces in flight advance (MPI_Test). */
void dist_progress(kiln_comm *c);
/* Waits for every bucket in flight (before a plan is dropped). */
void dist_plan_settle(kiln_comm *c, dist_plan *p);

/* Fills c->sync with the callbacks of src/dist/sync.c. */
void dist_sync_init(kiln_comm *c);

#endif
