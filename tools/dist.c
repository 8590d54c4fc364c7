/* The kiln command under mpirun: one rank of data-parallel training. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dist.h"
#include "tool.h"

/* mpirun (Open MPI) and the PMI launchers (MPICH, Slurm) say so in the
   environment; a command run alone does not start MPI at all. */
static int launched_by_mpirun(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (int i = 0; i < 3; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

int tool_dist_begin(tool_dist *d)
{
    *d = (tool_dist){NULL, 0, 1, 0};
    if (!launched_by_mpirun())
        return 0;
    if (!(d->comm = kiln_comm_world())) {
        /* maybe on this rank alone (its environment): MPI_Finalize at exit
           would wait for the others, which wait for this rank in
           kiln_comm_world; a rank ending without it ends the job */
        kiln_tool_fail("%s", kiln_last_error());
        fflush(NULL);
        _exit(1);
    }
    /* a rank that died or stopped ends the job within a minute, with a
       message, rather than leaving the others waiting for ever (an empty
       KILN_DIST_TIMEOUT is unset, as for kiln_comm_world) */
    const char *timeout = getenv("KILN_DIST_TIMEOUT");
    if (!timeout || !*timeout)
        kiln_comm_set_timeout(d->comm, TOOL_DIST_TIMEOUT);
    d->rank = kiln_comm_rank(d->comm);
    d->size = kiln_comm_size(d->comm);
    return 0;
}

int tool_dist_finish(tool_dist *d, int rc)
{
    if (rc && !d->agreed) {
        fflush(stdout);
        tool_dist_abort(d);
    }
    tool_dist_end(d);
    return rc;
}

void tool_dist_end(tool_dist *d)
{
    kiln_comm_free(d->comm);
    d->comm = NULL;
}

int tool_dist_leads(const tool_dist *d)
{
    return d->rank == 0;
}

int tool_dist_attach(tool_dist *d, kiln_session *s, int zero1)
{
    if (d->comm && (kiln_comm_set_zero1(d->comm, zero1) != KILN_OK ||
                    kiln_session_set_comm(s, d->comm) != KILN_OK))
        return kiln_tool_fail("%s", kiln_session_error(s));
    return 0;
}

int tool_dist_load(tool_dist *d, kiln_session *s, const char *path)
{
    if (!d->comm)
        return kiln_session_load(s, path) != KILN_OK
                   ? kiln_tool_fail("%s", kiln_session_error(s))
                   : 0;
    if (kiln_comm_load_session(d->comm, s, path) != KILN_OK) {
        d->agreed = 1;
        return kiln_tool_fail("%s", kiln_comm_error(d->comm));
    }
    return 0;
}

int tool_dist_save(tool_dist *d, kiln_session *s, const char *path)
{
    if (!d->comm)
        return kiln_session_save(s, path) != KILN_OK
                   ? kiln_tool_fail("%s", kiln_session_error(s))
                   : 0;
    if (kiln_comm_save_session(d->comm, s, path) != KILN_OK) {
        d->agreed = 1;
        return tool_dist_leads(d)
                   ? kiln_tool_fail("%s", kiln_comm_error(d->comm))
                   : 1;
    }
    return 0;
}

int tool_dist_sync(tool_dist *d, kiln_session *s, const char *config)
{
    if (d->comm && kiln_comm_sync_session(d->comm, s, config) != KILN_OK) {
        d->agreed = 1;
        return kiln_tool_fail("rank %d: %s", d->rank, kiln_comm_error(d->comm));
    }
    return 0;
}

int tool_dist_rows(tool_dist *d, int rows, int global)
{
    if (d->comm && kiln_comm_set_rows(d->comm, rows, global) != KILN_OK)
        return kiln_tool_fail("%s", kiln_comm_error(d->comm));
    return 0;
}

double tool_dist_loss(tool_dist *d, double loss, int rows, int global)
{
    if (!d->comm)
        return loss;
    double share = loss * rows / global;
    if (kiln_comm_allreduce_sum(d->comm, &share, 1) != KILN_OK) {
        kiln_tool_fail("%s", kiln_comm_error(d->comm));
        tool_dist_abort(d);
    }
    return share;
}

void tool_dist_abort(tool_dist *d)
{
    if (d->size > 1)
        kiln_comm_abort(d->comm, 1);
}
