/* `mpirun -np N kiln train ...`: the kiln command as one rank of a
   data-parallel run.  Without mpirun (or with one rank) nothing changes. */
#ifndef KILN_TOOLS_DIST_H
#define KILN_TOOLS_DIST_H

#include "kiln.h"

typedef struct tool_dist {
    kiln_comm *comm; /* NULL when the command runs alone */
    int rank, size;
    int agreed; /* a failure every rank reported (tool_dist_end) */
} tool_dist;

/* Seconds a rank waits for the others at any collective before it gives
   up with an error (the job then ends): kiln_comm_set_timeout's, unless
   the environment variable KILN_DIST_TIMEOUT sets it (0: for ever). */
#define TOOL_DIST_TIMEOUT 60.0

/* Joins the ranks mpirun started, if it started this process (with
   TOOL_DIST_TIMEOUT); 0, or 1 after printing an error (MPI missing from
   the build, MPI failed). */
int tool_dist_begin(tool_dist *d);
/* Leaves MPI.  After a failure (rc nonzero) of this rank alone, which the
   others do not know of (they wait for it in a collective, and it would
   wait for them in MPI_Finalize), first ends the whole job; a failure
   every rank reported (start-up check, checkpoint load or save) ends
   each rank normally.  Returns rc. */
int tool_dist_finish(tool_dist *d, int rc);
void tool_dist_end(tool_dist *d);
/* 1 on the rank that prints and saves (rank 0, or the only process). */
int tool_dist_leads(const tool_dist *d);
/* Attaches the communicator to s before the training step is built,
   sharding the optimiser state when zero1 (ZeRO-1); 0, or 1 after
   printing the error. */
int tool_dist_attach(tool_dist *d, kiln_session *s, int zero1);
/* Loads a checkpoint into s (each rank its own shard of a sharded
   optimiser state) / saves one from rank 0 (collective: with every shard
   gathered); 0, or 1 after printing the error. */
int tool_dist_load(tool_dist *d, kiln_session *s, const char *path);
int tool_dist_save(tool_dist *d, kiln_session *s, const char *path);
/* The start-up check (config must agree on every rank) and rank 0's
   variables to every rank; 0, or 1 after printing the error. */
int tool_dist_sync(tool_dist *d, kiln_session *s, const char *config);
/* This rank's share of the next step (rows of global), then, after the
   step, the global batch's mean loss from this rank's mean. */
int tool_dist_rows(tool_dist *d, int rows, int global);
double tool_dist_loss(tool_dist *d, double loss, int rows, int global);
/* After a failure of this rank alone: ends the other ranks too, which
   would otherwise wait for it forever. */
void tool_dist_abort(tool_dist *d);

#endif
