/* ZeRO stage 1: the optimiser state sharded across the ranks.  The
   trained variables, laid end to end in the optimiser's order, are cut
   into one contiguous range per rank; each rank keeps the optimiser state
   of its range only and updates only that range (from the gradients
   averaged by the all-reduce as without ZeRO), then one all-gather gives
   every rank every updated value.  Each value is updated by the same
   operations on the same operands as without sharding. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

/* Where rank's range of total values starts: ranges differ by at most one
   value when total is not a multiple of size. */
static int64_t range_start(int64_t total, int rank, int size)
{
    return total * rank / size;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

int dist_shard(void *ctx, kiln_graph *g, kiln_node *const *vars, int n,
               int64_t *lo, int64_t *hi)
{
    kiln_comm *c = ctx;
    if (!c->zero1)
        return 0;
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += kiln_shape_numel(vars[i]->shape);
    if (total < c->size || total > INT_MAX) {
        kiln_graph_fail(g, KILN_ERR_ARG,
                        "ZeRO-1: %lld trained values over %d ranks: needs at "
                        "least one value per rank and at most %d values",
                        (long long)total, c->size, INT_MAX);
        return -1;
    }
    int64_t a = range_start(total, c->rank, c->size),
            b = range_start(total, c->rank + 1, c->size), at = 0;
    for (int i = 0; i < n; i++) {
        int64_t numel = kiln_shape_numel(vars[i]->shape);
        lo[i] = clamp(a - at, 0, numel);
        hi[i] = clamp(b - at, 0, numel);
        at += numel;
    }
    return 1;
}

const dist_state *dist_find_state(const kiln_comm *c, const char *name)
{
    for (int i = 0; i < c->n_states; i++)
        if (strcmp(c->states[i].name, name) == 0)
            return &c->states[i];
    return NULL;
}

/* A record lost to a failed allocation only leaves that slot out of
   gathered checkpoints, whose shapes then no longer match: the load and
   the start-up check name it. */
void dist_shard_state(void *ctx, const char *name, const kiln_node *var,
                      int64_t lo, int64_t hi)
{
    kiln_comm *c = ctx;
    dist_state *s = (dist_state *)dist_find_state(c, name);
    if (!s) {
        if (dist_room((void **)&c->states, &c->cap_states, c->n_states,
                      sizeof *c->states) != 0)
            return;
        char *copy = malloc(strlen(name) + 1);
        if (!copy)
            return;
        s = &c->states[c->n_states++];
        s->name = strcpy(copy, name);
    }
    s->shape = var->shape;
    s->lo = lo;
    s->hi = hi;
}

/* The gather of total values, numbered by its hook key: one per size. */
static int gather_key(kiln_comm *c, int64_t total)
{
    for (int k = 0; k < c->n_refs; k++)
        if (c->refs[k].plan == -1 && c->gathers[c->refs[k].slot] == total)
            return c->key_base + k + 1;
    if (dist_room((void **)&c->gathers, &c->cap_gathers, c->n_gathers,
                  sizeof *c->gathers) != 0 ||
        dist_reserve_refs(c, 1) != 0)
        return 0;
    c->gathers[c->n_gathers] = total;
    return dist_new_key(c, (dist_ref){-1, c->n_gathers++});
}

kiln_node *dist_gather_node(void *ctx, kiln_graph *g, kiln_node *flat,
                            int64_t lo, int64_t total)
{
    kiln_comm *c = ctx;
    int64_t hi = total - lo - kiln_shape_numel(flat->shape);
    /* the other ranks' values are written over the zeros */
    kiln_node *all = kiln_pad(g, flat, &lo, &hi, 0.0f);
    if (all->op == KILN_OP_ERROR)
        return all;
    int key = gather_key(c, total);
    if (!key)
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "ZeRO-1: out of memory");
    all->hook = key;
    return all;
}

kiln_status dist_gather(kiln_comm *c, int64_t total, float *data)
{
    if (!c->counts) {
        c->counts = malloc(2 * (size_t)c->size * sizeof *c->counts);
        if (!c->counts)
            return dist_fail(c, KILN_ERR_MEMORY, "ZeRO-1: out of memory");
        c->displs = c->counts + c->size;
    }
    for (int r = 0; r < c->size; r++) {
        c->displs[r] = (int)range_start(total, r, c->size);
        c->counts[r] = (int)(range_start(total, r + 1, c->size) - c->displs[r]);
    }
    double t0 = MPI_Wtime();
    int rc = dist_allgatherv(c, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data,
                             c->counts, c->displs, MPI_FLOAT);
    c->stats.gather_seconds += MPI_Wtime() - t0;
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        dist_mpi_error(rc, msg, sizeof msg);
        if (c->s)
            kiln_session_fail(c->s, KILN_ERR_IO,
                              "ZeRO-1: all-gather of the updated variables: "
                              "%s",
                              msg);
        return dist_fail(c, KILN_ERR_IO,
                         "ZeRO-1: all-gather of the updated variables: %s",
                         msg);
    }
    c->stats.gathers++;
    c->stats.gathered_bytes += total * (int64_t)sizeof(float);
    return KILN_OK;
}

void dist_zero_forget(kiln_comm *c)
{
    for (int i = 0; i < c->n_states; i++)
        free(c->states[i].name);
    c->n_states = 0;
}

void dist_zero_free(kiln_comm *c)
{
    dist_zero_forget(c);
    free(c->states);
    free(c->gathers);
    free(c->counts);
}

kiln_status kiln_comm_set_zero1(kiln_comm *c, int on)
{
    if (!c)
        return kiln_null_arg("kiln_comm_set_zero1", "communicator");
    c->err[0] = 0;
    c->zero1 = on != 0;
    return KILN_OK;
}

int kiln_comm_zero1(const kiln_comm *c)
{
    return c ? c->zero1 : 0;
}
