/* Checkpoints of data-parallel training: rank 0 writes what one process
   training alone would write, so any number of ranks (or one process)
   can resume from it.  With ZeRO-1 the optimiser state is first gathered
   whole on rank 0, and a load gives each rank its own range of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "train/checkpoint.h"

static int is_sharded(void *ctx, const char *name)
{
    return dist_find_state(ctx, name) != NULL;
}

/* One sharded slot gathered whole into *out on rank 0 (NULL elsewhere). */
static int gather_state(kiln_comm *c, const dist_state *e, kiln_tensor **out)
{
    int count = (int)(e->hi - e->lo), rc;
    const kiln_var *v = count ? kiln_session_find(c->s, e->name) : NULL;
    int *counts =
        c->rank == 0 ? malloc(2 * (size_t)c->size * sizeof *counts) : NULL;
    kiln_tensor *t = c->rank == 0 ? kiln_tensor_new(KILN_F32, e->shape) : NULL;
    rc = dist_gather_root(c, &count, 1, MPI_INT, counts, 1, MPI_INT, 0);
    if (rc == MPI_SUCCESS && c->rank == 0) {
        int *displs = counts + c->size;
        for (int r = 0; r < c->size; r++)
            displs[r] = r ? displs[r - 1] + counts[r - 1] : 0;
    }
    /* a rank without the memory sends nothing: the gather still matches */
    if (rc == MPI_SUCCESS)
        rc = dist_gatherv_root(c, v ? v->data : NULL, v ? count : 0, MPI_FLOAT,
                               t ? t->data : NULL, counts,
                               counts ? counts + c->size : NULL, MPI_FLOAT, 0);
    free(counts);
    *out = t;
    return rc;
}

/* Every sharded slot, whole, on rank 0 (NULL elsewhere); the MPI error
   code. */
static int gather_states(kiln_comm *c, kiln_tensor_list **out)
{
    kiln_tensor_list *l = c->rank == 0 ? kiln_tensor_list_new() : NULL;
    int rc = MPI_SUCCESS, missing = 0;
    for (int i = 0; i < c->n_states && rc == MPI_SUCCESS; i++) {
        kiln_tensor *t = NULL;
        rc = gather_state(c, &c->states[i], &t);
        if (c->rank == 0 &&
            (!t || kiln_tensor_list_add(l, c->states[i].name, t) != KILN_OK)) {
            kiln_tensor_free(t);
            missing = 1;
        }
    }
    if (missing) {
        kiln_tensor_list_free(l);
        l = NULL;
    }
    *out = l;
    return rc;
}

/* Starts fn on c and s (c's session), whose ranks must agree on having
   timeouts (collective): KILN_OK, or the error. */
static kiln_status begin(kiln_comm *c, kiln_session *s, const char *fn)
{
    if (!c)
        return kiln_null_arg(fn, "communicator");
    c->err[0] = 0;
    if (!s || s != c->s)
        return dist_fail(c, KILN_ERR_ARG,
                         "%s: the session is not the communicator's", fn);
    kiln_status st = dist_same_timeouts(c, fn);
    return st == KILN_OK ? KILN_OK : kiln_session_fail(s, st, "%s", c->err);
}

kiln_status kiln_comm_save_session(kiln_comm *c, kiln_session *s,
                                   const char *path)
{
    const char *fn = "kiln_comm_save_session";
    kiln_status started = begin(c, s, fn);
    if (started != KILN_OK)
        return started;
    kiln_tensor_list *whole = NULL;
    int rc = gather_states(c, &whole);
    kiln_status st = KILN_OK;
    char msg[KILN_ERRMSG_MAX] = "";
    if (c->rank == 0) {
        st = rc != MPI_SUCCESS ? KILN_ERR_IO
             : !whole          ? KILN_ERR_MEMORY
                      : kiln_session_save_with(s, path, is_sharded, c, whole);
        snprintf(msg, sizeof msg, "%s",
                 st == KILN_OK       ? ""
                 : rc != MPI_SUCCESS ? "MPI_Gatherv failed"
                 : whole             ? kiln_session_error(s)
                                     : "out of memory");
    }
    kiln_tensor_list_free(whole);
    int code = (int)st;
    /* every rank returns rank 0's outcome */
    int rc2 = dist_bcast(c, &code, 1, MPI_INT, 0);
    if (rc2 == MPI_SUCCESS)
        rc2 = dist_bcast(c, msg, (int)sizeof msg, MPI_CHAR, 0);
    if (rc2 != MPI_SUCCESS) {
        char why[MPI_MAX_ERROR_STRING + 200];
        return dist_fail(c, KILN_ERR_IO, "%s: MPI_Bcast: %s", fn,
                         dist_mpi_error(rc2, why, (int)sizeof why));
    }
    if (code != KILN_OK)
        return dist_fail(c, (kiln_status)code, "%s: %s", fn, msg);
    return KILN_OK;
}

/* This rank's range of a sharded slot read whole; NULL (c's error) when
   the shapes differ or out of memory.  An empty range gives a NULL with no
   error. */
static kiln_tensor *shard_of(kiln_comm *c, const dist_state *e,
                             const kiln_tensor *t, const char *path)
{
    char b1[96], b2[96];
    if (t->dtype != KILN_F32 || !kiln_shape_equal(t->shape, e->shape)) {
        dist_fail(c, KILN_ERR_SHAPE,
                  "kiln_comm_load_session: %s: '%s' is %s%s in the file but "
                  "%s%s in the model",
                  path, e->name, kiln_dtype_name(t->dtype),
                  kiln_shape_str(t->shape, b1, sizeof b1), "f32",
                  kiln_shape_str(e->shape, b2, sizeof b2));
        return NULL;
    }
    if (e->hi == e->lo)
        return NULL;
    kiln_tensor *r = kiln_tensor_new(KILN_F32, KILN_SHAPE(e->hi - e->lo));
    if (!r) {
        dist_fail(c, KILN_ERR_MEMORY, "kiln_comm_load_session: out of memory");
        return NULL;
    }
    memcpy(r->data, (const float *)t->data + e->lo,
           (size_t)(e->hi - e->lo) * sizeof(float));
    return r;
}

/* The tensors of the file as this rank's session holds them: views of
   the unsharded ones, copies of its ranges of the sharded ones. */
static kiln_tensor_list *as_held(kiln_comm *c, const kiln_tensor_list *l,
                                 const char *path)
{
    kiln_tensor_list *out = kiln_tensor_list_new();
    for (int i = 0; out && i < kiln_tensor_list_count(l); i++) {
        const char *name = kiln_tensor_list_name(l, i);
        kiln_tensor *t = kiln_tensor_list_get(l, i), *u;
        const dist_state *e = dist_find_state(c, name);
        u = e ? shard_of(c, e, t, path)
              : kiln_tensor_wrap(t->dtype, t->shape, t->data);
        if (c->err[0] || (!u && !e) ||
            (u && kiln_tensor_list_add(out, name, u) != KILN_OK)) {
            if (!c->err[0])
                dist_fail(c, KILN_ERR_MEMORY,
                          "kiln_comm_load_session: out of memory");
            kiln_tensor_free(u);
            kiln_tensor_list_free(out);
            return NULL;
        }
    }
    if (!out)
        dist_fail(c, KILN_ERR_MEMORY, "kiln_comm_load_session: out of memory");
    return out;
}

/* The file as this rank's session would hold it (views into *file, which
   the caller frees after it), checked against the session; NULL with the
   reason in msg. */
static kiln_tensor_list *read_checked(kiln_comm *c, kiln_session *s,
                                      const char *path, kiln_tensor_list **file,
                                      char *msg, int size)
{
    kiln_tensor_list *l = *file = path ? kiln_file_read(path) : NULL;
    if (!l) {
        snprintf(msg, (size_t)size, "%s",
                 path ? kiln_last_error() : "path is NULL");
        return NULL;
    }
    kiln_tensor_list *held = c->n_states ? as_held(c, l, path) : l;
    if (!held) {
        snprintf(msg, (size_t)size, "%s", c->err);
        return NULL;
    }
    if (kiln_session_check_list(s, held, path) != KILN_OK) {
        snprintf(msg, (size_t)size, "%s", kiln_session_error(s));
        if (held != l)
            kiln_tensor_list_free(held);
        return NULL;
    }
    return held;
}

/* Every rank reads and checks the file before any loads it, and all agree:
   a rank that cannot (a file missing or corrupt there) fails every rank
   with its reason, no variable changed, rather than leaving the others
   waiting for it in the next collective. */
kiln_status kiln_comm_load_session(kiln_comm *c, kiln_session *s,
                                   const char *path)
{
    const char *fn = "kiln_comm_load_session";
    kiln_status started = begin(c, s, fn);
    if (started != KILN_OK)
        return started;
    char msg[KILN_ERRMSG_MAX] = "";
    kiln_tensor_list *file = NULL, *held = read_checked(c, s, path, &file, msg,
                                                        (int)sizeof msg);
    kiln_status st = KILN_OK;
    int bad = dist_agree(c, held != NULL, msg, (int)sizeof msg);
    if (bad == -1 && (st = kiln_session_load_list(s, held, path)) != KILN_OK)
        snprintf(msg, sizeof msg, "%s", kiln_session_error(s));
    if (held != file)
        kiln_tensor_list_free(held);
    kiln_tensor_list_free(file);
    /* a load that failed after the checks (out of memory) fails all too */
    if (bad == -1)
        bad = dist_agree(c, st == KILN_OK, msg, (int)sizeof msg);
    if (bad == -1)
        return KILN_OK;
    if (bad == -2)
        return dist_fail(c, KILN_ERR_IO, "%s: MPI failed", fn);
    kiln_session_fail(s, KILN_ERR_IO, "%s: rank %d: %s", fn, bad, msg);
    return dist_fail(c, KILN_ERR_IO, "%s: rank %d: %s", fn, bad, msg);
}
