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
    int summed;    /* through shared memory: the second barrier's round */
    MPI_Comm comm; /* through shared memory: the bucket's barriers' own */
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
    int64_t total;
    /* summed through a shared-memory window (shm.c): every rank's mem */
    int shm, shm_tried;
    /* its communicator broke (a timeout): MPI may still write the
       buckets, and freeing the window would wait for every rank */
    int leak;
    MPI_Win win;
    float **peer;
    /* the graph form's: its graph divides the sum of the ranks' gradients
       by their number, so a rank weights its own by weight * size (1,
       nothing to do, unless a batch splits unevenly) */
    int graph_weighted;
} dist_plan;

/* Where a hook key (kiln_node.hook) points: a gradient's slot in a plan,
   (plan -1) the gather of updated variables numbered slot, or (plan -2)
   the share of shared-variable step slot (share.c). */
typedef struct dist_ref {
    int plan, slot;
} dist_ref;

/* Hook keys per communicator: communicator k of the process numbers its
   keys from k * DIST_KEYS + 1, so that a step built with one communicator
   is never read with another's refs (dist_find_ref). */
enum { DIST_KEYS = 1 << 20 };

/* ZeRO-1: an optimiser state slot of which this rank holds the flat range
   [lo, hi) (no variable when empty); shape is the whole slot's. */
typedef struct dist_state {
    char *name;
    kiln_shape shape;
    int64_t lo, hi;
} dist_state;

/* The variables a step built by dist_build_local updates where the ranks
   of one machine share them (share.c). */
typedef struct dist_share_set {
    char **names;
    unsigned char *shared; /* by name: its pages are shared (state 1) */
    int n;
    int state; /* 0 not yet shared; 1 shared where shared[i]; 2 none: every
                  variable private, its changes summed after each write */
} dist_share_set;

/* A variable whose pages are shared, to make private again. */
typedef struct dist_shared_var {
    void *data;
    size_t pages;  /* bytes, whole pages */
    void *scratch; /* as many shared bytes: its update's changes summed */
} dist_shared_var;

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
    dist_ref *refs; /* by hook key - key_base - 1 */
    int n_refs, cap_refs;
    int key_base;
    dist_plan *dyn; /* of the last dynamic backward */
    kiln_comm_stats stats;
    int zero1;          /* shard the optimiser state */
    dist_state *states; /* sharded slots, in the order steps built them */
    int n_states, cap_states;
    int64_t *gathers; /* values of each gather of updated variables */
    int n_gathers, cap_gathers;
    int *counts, *displs; /* per rank, for gathers */
    int on_node;          /* every rank on this machine */
    int shm;              /* sum buckets through shared memory there */
    double timeout;       /* seconds a collective may wait; 0: for ever */
    int broken;           /* a collective timed out: no more MPI calls */
    /* shared variables (share.c) */
    int share_weights;    /* steps of plain SGD may share the variables */
    dist_share_set *sets; /* by step */
    int n_sets, cap_sets;
    int cur_set; /* of the run going on, or -1 */
    dist_shared_var *shared;
    int n_shared, cap_shared;
    MPI_Comm phase_comm; /* the phases' barriers; MPI_COMM_NULL until used */
    int phases_open;     /* a shared write's last phase not closed */
    int write_private;   /* the write going on is to a private copy */
    float *saved;        /* a write's variable before it (state 2) */
    int write_delta;     /* ... or its change, to add once summed */
    size_t saved_bytes;
};

/* What a collective of c returns when it did not complete within c's
   timeout (kiln_comm_set_timeout), or when an earlier one did not (c is
   then broken: its ranks no longer agree on which call comes next, so c
   calls MPI no more); distinct from MPI's error codes. */
enum { DIST_TIMED_OUT = -7001 };
/* Room in the array *items (*cap items of size bytes) for item n, grown
   by doubling; -1 (nothing changed) when out of memory. */
int dist_room(void **items, int *cap, int n, size_t size);
/* Completes *req within c's timeout (for ever when 0): MPI's status or
   DIST_TIMED_OUT. */
int dist_complete(kiln_comm *c, MPI_Request *req);
/* Keeps p, which MPI may still write after a collective timed out, until
   the process ends. */
void dist_orphan(void *p);
/* MPI's collectives on c->comm, completed by dist_complete. */
int dist_bcast(kiln_comm *c, void *buf, int n, MPI_Datatype t, int root);
int dist_allreduce(kiln_comm *c, const void *in, void *out, int n,
                   MPI_Datatype t, MPI_Op op);
int dist_allgather(kiln_comm *c, const void *in, int n, MPI_Datatype t,
                   void *out, int m, MPI_Datatype u);
int dist_allgatherv(kiln_comm *c, const void *in, int n, MPI_Datatype t,
                    void *out, const int *counts, const int *displs,
                    MPI_Datatype u);
int dist_gather_root(kiln_comm *c, const void *in, int n, MPI_Datatype t,
                     void *out, int m, MPI_Datatype u, int root);
int dist_gatherv_root(kiln_comm *c, const void *in, int n, MPI_Datatype t,
                      void *out, const int *counts, const int *displs,
                      MPI_Datatype u, int root);

/* The defaults the environment sets for a new communicator: the
   timeout (KILN_DIST_TIMEOUT, seconds in [0, 1e9]; 0 when unset or
   empty) and the shared weights (KILN_DIST_SHARED_WEIGHTS 0, 1 or
   private; 1 when unset or empty).  -1 (kiln_last_error, naming fn) for
   another value: a typo must not silently wait for ever, or share what
   the user meant to keep private. */
int dist_env_defaults(const char *fn, double *timeout, int *share);
/* Records c's error message (and kiln_last_error) and returns st. */
kiln_status dist_fail(kiln_comm *c, kiln_status st, const char *fmt, ...)
    KILN_PRINTF(3, 4);
/* Whether every rank of c has a timeout or none has (collective): a
   blocking collective (no timeout) never pairs with a non-blocking one,
   so ranks that differ would wait for each other for ever in the next
   one; this one is non-blocking on every rank.  KILN_OK, or c's error
   naming fn and the first rank that differs from rank 0 (KILN_ERR_ARG;
   KILN_ERR_IO when MPI fails). */
kiln_status dist_same_timeouts(kiln_comm *c, const char *fn);
/* Whether every rank is ok (collective): -1 when all are, else the
   lowest rank that is not, whose msg (size bytes) every rank then holds
   in msg; -2 when MPI fails. */
int dist_agree(kiln_comm *c, int ok, char *msg, int size);
/* The MPI error text of rc into buf (DIST_TIMED_OUT's too). */
const char *dist_mpi_error(int rc, char *buf, int size);

/* A plan over n gradients of the given sizes, in that order; NULL when
   out of memory. */
dist_plan *dist_plan_new(const kiln_comm *c, const int64_t *numel, int n);
void dist_plan_free(dist_plan *p);
/* Copies slot's gradient (weighted) into its bucket, or weights it in
   place when data is its place there (dist_slot_data), and starts the
   bucket's all-reduce when it is the last one in.  KILN_ERR_IO (the
   session's error) when MPI fails. */
kiln_status dist_pack(kiln_comm *c, dist_plan *p, int slot, const float *data);
/* Waits for slot's bucket (starting it first when a gradient never came:
   it then averages zeros for them) and copies the average into data
   (unless data is its place in the bucket). */
kiln_status dist_deliver(kiln_comm *c, dist_plan *p, int slot, float *data);
/* Where slot's gradient is kept in its bucket. */
float *dist_slot_data(dist_plan *p, int slot);
/* Lets the all-reduces in flight advance (MPI_Test). */
void dist_progress(kiln_comm *c);
/* Waits for every bucket in flight (before a plan is dropped). */
void dist_plan_settle(kiln_comm *c, dist_plan *p);

/* Shared-memory buckets (shm.c).  1 when every rank of comm (of size
   ranks) runs on this machine; collective. */
int dist_on_one_node(MPI_Comm comm, int size);
/* Moves p's buckets into a window shared by the ranks; collective, with p
   settled; -1 (p unchanged) when MPI refuses. */
int dist_shm_setup(kiln_comm *c, dist_plan *p);
void dist_shm_free(dist_plan *p);
/* Starts b's round (its gradients are in); MPI's status. */
int dist_shm_start(kiln_comm *c, dist_plan *p, dist_bucket *b);
/* Advances b's round; 1 when it is over (every copy holds the sum). */
int dist_shm_test(kiln_comm *c, dist_plan *p, dist_bucket *b);
/* Finishes b's round; MPI's status. */
int dist_shm_wait(kiln_comm *c, dist_plan *p, dist_bucket *b);

/* Has the MPI library all-reduce buckets by reduce-scatter + all-gather
   where it would send them through one rank (tune.c). */
void dist_tune_allreduce(void);

/* Shared variables (share.c): the callbacks of kiln_grad_sync, the
   marker's run-time value, and making every shared variable private
   again (keeping its values). */
int dist_build_local(void *ctx, kiln_graph *g, kiln_node *const *vars,
                     kiln_node **grads, int n);
int dist_phases(void *ctx, kiln_var *var);
int dist_phase(void *ctx, int p);
int dist_sum_into(void *ctx, kiln_var *var, int p, int can, float **acc);
kiln_status dist_phase_end(void *ctx, kiln_var *var);
void dist_share_mark(kiln_comm *c, int set, float *data);
void dist_unshare_all(kiln_comm *c);
void dist_share_free(kiln_comm *c);

/* Fills c->sync with the callbacks of src/dist/sync.c and zero.c. */
void dist_sync_init(kiln_comm *c);
/* Room for n more hook keys in c->refs; -1 when out of memory or out of
   c's keys. */
int dist_reserve_refs(kiln_comm *c, int n);
/* A new hook key pointing at r (room reserved by dist_reserve_refs). */
int dist_new_key(kiln_comm *c, dist_ref r);
/* What hook key points at, or NULL when the key is not one of c's (a step
   built with another communicator); then c's session has the error. */
const dist_ref *dist_find_ref(kiln_comm *c, int hook);

/* ZeRO-1 (zero.c): the sharding callbacks of kiln_grad_sync. */
int dist_shard(void *ctx, kiln_graph *g, kiln_node *const *vars, int n,
               int64_t *lo, int64_t *hi);
void dist_shard_state(void *ctx, const char *name, const kiln_node *var,
                      int64_t lo, int64_t hi);
kiln_node *dist_gather_node(void *ctx, kiln_graph *g, kiln_node *flat,
                            int64_t lo, int64_t total);
/* Gathers the ranges of total values in place in data (every rank's
   values at its offset); KILN_ERR_IO when MPI fails. */
kiln_status dist_gather(kiln_comm *c, int64_t total, float *data);
/* The sharded slot named name, or NULL. */
const dist_state *dist_find_state(const kiln_comm *c, const char *name);
/* Forgets the sharded slots (c is attached to another session). */
void dist_zero_forget(kiln_comm *c);
/* Frees the ZeRO-1 records of c. */
void dist_zero_free(kiln_comm *c);

#endif
