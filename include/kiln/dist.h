/* Kiln: data-parallel training over MPI (docs/distributed.md).
   Part of the public API: include "kiln.h", which includes every part.

   Each process (rank) keeps a full copy of the model in its own session and
   trains on its own shard of every global batch; the gradients are
   averaged across ranks inside the training step, so N ranks at batch B/N
   follow the trajectory of one process at batch B up to float rounding.
   MPI is optional: built without it (cmake -DKILN_MPI=OFF, or no MPI
   found), every call below that needs it fails with KILN_ERR_STATE and
   "built without MPI" (kiln_last_error or the session's error). */
#ifndef KILN_DIST_H
#define KILN_DIST_H

#include "kiln/train.h"

KILN_DECLS_BEGIN

/* A communicator: the ranks that train one model together. */
typedef struct kiln_comm kiln_comm;

/* 1 when Kiln was built with MPI, else 0. */
int kiln_dist_available(void);
/* The processes mpirun started (a duplicate of MPI_COMM_WORLD); MPI is
   initialised on first use and finalised at exit.  NULL (kiln_last_error)
   without MPI, when MPI fails, or when an environment variable read below
   (KILN_DIST_TIMEOUT, KILN_DIST_SHARED_WEIGHTS) is set to something else
   than a value it takes (empty is unset), before any MPI call. */
kiln_comm *kiln_comm_world(void);
/* A communicator from the caller's: mpi_comm points to an MPI_Comm, which
   is duplicated (MPI must be initialised).  NULL (kiln_last_error) for a
   NULL mpi_comm or MPI_COMM_NULL, without MPI, when MPI fails, or for the
   environment as kiln_comm_world. */
kiln_comm *kiln_comm_from_mpi(const void *mpi_comm);
/* Detaches c from its session and frees it.  NULL is a no-op. */
void kiln_comm_free(kiln_comm *c);
/* This process's rank in c and the number of ranks; -1 for NULL. */
int kiln_comm_rank(const kiln_comm *c);
int kiln_comm_size(const kiln_comm *c);
/* Message of c's last failed call; "" after a success. */
const char *kiln_comm_error(const kiln_comm *c);
/* Gradients are averaged in buckets of about bytes (default 1 MiB; a
   gradient larger than that has its own): each bucket's all-reduce starts
   as soon as backward computed its gradients.  Takes effect for training
   steps built afterwards.  KILN_ERR_ARG for 0 or a NULL c. */
kiln_status kiln_comm_set_bucket_bytes(kiln_comm *c, size_t bytes);
/* When every rank runs on one machine, sum the gradient buckets through
   an MPI shared-memory window (on: the default) rather than by
   MPI_Iallreduce (off); takes effect for training steps not yet run.
   Every rank must choose the same (kiln_comm_sync_session checks).
   KILN_ERR_ARG for a NULL c. */
kiln_status kiln_comm_set_shared_memory(kiln_comm *c, int on);
/* When every rank runs on one machine (and shared memory is on), a
   training step of plain SGD (no momentum, weight decay, clipping or
   accumulation; not ZeRO-1) keeps one copy of its trained variables in
   memory the ranks share, and each rank adds its own share of the update
   to it, in turns: no gradient is all-reduced, and a weight's update stays
   one accumulating GEMM (on: the default, unless the environment variable
   KILN_DIST_SHARED_WEIGHTS is 0).  The values are those of the averaged
   update up to rounding.  While shared, a variable of 4 KiB or more
   written through one rank (kiln_variable_write, a load) changes for
   every rank of the machine (a smaller one for that rank only: write the
   same values on every rank); a step that all-reduces gradients,
   kiln_backward's run-time form or detaching c makes each rank's copy
   private again.  on = 2 (or KILN_DIST_SHARED_WEIGHTS=private) builds
   the steps the same way but keeps the copies private, all-reducing the
   change each update makes (what happens anyway where the memory cannot
   be shared): slower, for comparisons.  on = 3 (or
   KILN_DIST_SHARED_WEIGHTS=exact) shares them and rounds each variable
   once per step as one process does (the ranks' changes summed apart in
   a shared scratch of the variables' size, then added): ten times closer
   to one process step by step than in turns, 3-5% slower on two
   ranks.  Takes effect for training steps
   built afterwards; every rank must choose the same.  KILN_ERR_ARG for a
   NULL c. */
kiln_status kiln_comm_set_shared_weights(kiln_comm *c, int on);
/* Whether c shares variables that way (0 for NULL). */
int kiln_comm_shared_weights(const kiln_comm *c);
/* How long (seconds) any collective of c may wait for the other ranks:
   the gradient sums of a training step, the start-up check, checkpoint
   gathers.  0 (the default, unless the environment variable
   KILN_DIST_TIMEOUT gives seconds) waits for ever, as MPI does.  Every
   rank must have one or none (kiln_comm_sync_session and the checkpoint
   calls check, KILN_ERR_ARG).  A collective that times out fails with
   KILN_ERR_IO and a message saying that a rank died, stopped, or does
   not make the same calls; c is then unusable (every later collective
   fails at once) and the job should end with kiln_comm_abort.  KILN_ERR_ARG for
   a NULL c or seconds not in [0, 1e9]. */
kiln_status kiln_comm_set_timeout(kiln_comm *c, double seconds);
/* c's timeout in seconds (0: none); -1 for NULL. */
double kiln_comm_timeout(const kiln_comm *c);
/* Ends the whole job (every rank) with status code: for an error one rank
   found alone, which would leave the others waiting.  Returns when c is
   NULL. */
void kiln_comm_abort(kiln_comm *c, int code);

/* Attaches c to s (NULL c detaches): from then on the optimiser steps of s
   average the gradients over c's ranks, in the graph form
   (kiln_optimizer_build_step, attach before building it) and in the
   run-time form (kiln_backward then kiln_optimizer_update).  One session
   per communicator.  A step built with c attached runs only while c is:
   detached, or with another communicator attached, its runs fail with
   KILN_ERR_STATE and change nothing (it would otherwise apply one rank's
   gradient, scaled for the average); conversely a training step built
   with none attached fails the same way while one is (each rank would
   train alone).  KILN_ERR_ARG (the session's error) when c is attached to
   another session; KILN_ERR_STATE without MPI. */
kiln_status kiln_session_set_comm(kiln_session *s, kiln_comm *c);
/* Collective, once every rank has built and compiled its model (and loaded
   a checkpoint, if any): checks that every rank has the same variables
   (names, dtypes, shapes), the same settings of c (buckets, shared memory,
   shared weights, ZeRO-1) and the same config text (the caller's
   description of what must agree: batch, optimiser...), then copies rank
   0's variables and initialiser RNG to every rank, so that all start
   equal.  On a mismatch every rank returns KILN_ERR_ARG with the same
   message naming the first difference ("rank 1 differs from rank 0: rank 0
   has 'fc0.W f32 [784,800]', rank 1 has 'fc0.W f32 [784,100]'") and no
   variable changes; KILN_ERR_IO when MPI fails (kiln_comm_error). */
kiln_status kiln_comm_sync_session(kiln_comm *c, kiln_session *s,
                                   const char *config);
/* The share of this rank in the next training steps: rows of a global
   batch of global_rows.  The average of the gradients is weighted by rows
   / global_rows (default 1 / size: equal shards), so that a short last
   batch split unevenly still gives the gradient of the global mean.
   KILN_ERR_ARG unless 0 <= rows <= global_rows and global_rows > 0. */
kiln_status kiln_comm_set_rows(kiln_comm *c, int64_t rows, int64_t global_rows);
/* Sums v[0..n) over the ranks, in place (blocking, collective).
   KILN_ERR_ARG for bad arguments, KILN_ERR_IO when MPI fails. */
kiln_status kiln_comm_allreduce_sum(kiln_comm *c, double *v, int n);

/* ZeRO stage 1 (on != 0): the optimiser state (momentum, Adam moments,
   Adagrad sums) is sharded across the ranks.  The trained variables, laid
   end to end, are cut into one contiguous range per rank (sizes differ by
   at most one value); each rank keeps the state of its range only, so
   about 1/size of it, updates only its range from the averaged gradients
   and then all-gathers the updated values, so every rank ends each step
   with every variable, as without ZeRO (to float rounding: the same
   operations on the same values).  Takes effect for training steps built
   afterwards; write and read checkpoints with kiln_comm_save_session and
   kiln_comm_load_session.  KILN_ERR_ARG for a NULL c. */
kiln_status kiln_comm_set_zero1(kiln_comm *c, int on);
/* 1 when ZeRO-1 is on for c, else 0 (also for NULL). */
int kiln_comm_zero1(const kiln_comm *c);
/* Collective: rank 0 writes s's variables to path as kiln_session_save
   in one process would, with each ZeRO-1 sharded state slot first
   gathered whole under its usual name, so that one process or any number
   of ranks can resume from the file.  Every rank returns rank 0's status
   and message (kiln_comm_error).  KILN_ERR_ARG when s is not c's
   session. */
kiln_status kiln_comm_save_session(kiln_comm *c, kiln_session *s,
                                   const char *path);
/* kiln_session_load on every rank (collective), except that each whole
   state slot ZeRO-1 shards gives s this rank's range of it: build
   (compile) the training step first, so that the shards are known.  Every
   rank reads and checks the file before any loads it: when one cannot (a
   file missing or corrupt there), every rank returns KILN_ERR_IO naming
   the lowest such rank and its reason ("kiln_comm_load_session: rank 1:
   ..."), and no variable changes.  Also in kiln_comm_error; KILN_ERR_ARG
   when s is not c's session (on that rank alone: call it on every rank
   with c's session). */
kiln_status kiln_comm_load_session(kiln_comm *c, kiln_session *s,
                                   const char *path);

/* What c's gradient averaging did since the last reset. */
typedef struct kiln_comm_stats {
    int64_t allreduces;     /* buckets all-reduced */
    int64_t shared;         /* of those, summed through shared memory */
    int64_t bytes;          /* bytes of gradient all-reduced */
    double wait_seconds;    /* time blocked waiting for all-reduces to end
                               (communication not hidden behind backward) */
    int64_t gathers;        /* ZeRO-1: all-gathers of updated variables */
    int64_t gathered_bytes; /* ZeRO-1: bytes of variables all-gathered */
    double gather_seconds;  /* ZeRO-1: time in those all-gathers */
} kiln_comm_stats;
/* Fills st; KILN_ERR_ARG for NULL arguments. */
kiln_status kiln_comm_get_stats(const kiln_comm *c, kiln_comm_stats *st);
void kiln_comm_reset_stats(kiln_comm *c);

KILN_DECLS_END
#endif /* KILN_DIST_H */
