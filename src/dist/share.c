/* Shared variables: a plain SGD step (W - lr * g, nothing else) on ranks
   that all run on one machine keeps one copy of each trained variable,
   in pages the ranks share, instead of one copy per rank.

   Each rank's step adds its own share of the update, lr * (rows/global)
   * its local gradient, straight into that copy: the update of a weight
   stays one GEMM accumulating into the weight (the gemm_acc pass), as in
   a single process, and no gradient is all-reduced at all.  The ranks
   take turns so that no two write the same values at once: an update
   runs in as many phases as there are ranks, a barrier before each, and
   in phase p rank r writes block (r + p) mod N of it (rows of an
   accumulating product; a kernel that cannot be cut runs whole on one
   rank per phase).  The first barrier also means every rank has done its
   reads of the variable for this step (its update is planned after them,
   in place), and the barrier after the last phase that every rank's share
   is in before anything reads it again.  The sum is the same as the one
   process's up to rounding: each rank's share is added to the variable
   in turn, one rounding at the variable's magnitude per rank and step
   where one process rounds once.  KILN_DIST_SHARED_WEIGHTS=exact
   (kiln_comm_set_shared_weights(c, 3)) rounds once too: where an update
   adds a change that does not read the variable (the gemm_acc product of
   a weight, var - lr g of a bias), the changes are summed apart, in a
   shared scratch as big as the variable (the first phase writes it, the
   middle ones add to it), and the last phase adds (scratch + its change)
   to the variable; the CNN then drifts from one process as with gradient
   buckets, ten times less than in turns, for 3-5% of the 2-rank MLP's
   speed (the scratch's traffic); other updates still add in turns.

   The pages: a variable's storage is pages of its own
   (kiln_big_alloc_pages); the first phased write of a step copies rank
   0's values into a POSIX shared-memory object, and every rank maps it
   over its variables' addresses (mremap), so that every pointer to them
   (compiled plans included) stays valid.  Where that fails on any rank,
   the variables stay private and each write is followed by an all-reduce
   of the change it made (state 2: the change itself, computed apart,
   where the update adds one as above; else new - old values): slower, the same
   values (what KILN_DIST_SHARED_WEIGHTS=private asks for, to compare). Anything
   that would update the variables otherwise (a step that all-reduces
   gradients, kiln_backward's run-time form, detaching the communicator)
   first makes them private again, values kept. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/big_alloc.h"
#include "dist/dist.h"

static void free_set(dist_share_set *st)
{
    for (int i = 0; i < st->n; i++)
        free(st->names[i]);
    free(st->names);
    free(st->shared);
}

int dist_build_local(void *ctx, kiln_graph *g, kiln_node *const *vars,
                     kiln_node **grads, int n)
{
    kiln_comm *c = ctx;
    if (!c->share_weights || !c->shm || !c->on_node || c->size < 2 ||
        c->zero1 || c->broken)
        return 0;
    for (int i = 0; i < n; i++)
        if (grads[i]->dtype != KILN_F32 || vars[i]->dtype != KILN_F32)
            return 0;
    if (dist_room((void **)&c->sets, &c->cap_sets, c->n_sets,
                  sizeof *c->sets) ||
        dist_reserve_refs(c, 1) != 0) {
        kiln_graph_fail(g, KILN_ERR_MEMORY,
                        "kiln_optimizer_build_step: out of memory");
        return -1;
    }
    dist_share_set *st = &c->sets[c->n_sets];
    *st = (dist_share_set){calloc((size_t)n + 1, sizeof *st->names),
                           calloc((size_t)n + 1, 1), 0, 0};
    for (int i = 0; st->names && i < n; i++)
        if ((st->names[st->n] = strdup(vars[i]->name)))
            st->n++;
    if (!st->names || !st->shared || st->n < n) {
        free_set(st);
        kiln_graph_fail(g, KILN_ERR_MEMORY,
                        "kiln_optimizer_build_step: out of memory");
        return -1;
    }
    /* the marker: a node of its own, whose value every run sets to this
       rank's weight (rows / global rows) */
    int before = g->n_nodes;
    kiln_node *w = kiln_stop_gradient(g, kiln_scalar(g, (float)c->weight));
    if (w->op == KILN_OP_ERROR || w->id < before || w->hook) {
        free_set(st); /* failed, or an existing node: not ours to mark */
        return w->op == KILN_OP_ERROR ? -1 : 0;
    }
    w->hook = dist_new_key(c, (dist_ref){-2, c->n_sets++});
    for (int i = 0; i < n; i++)
        grads[i] = kiln_mul(g, grads[i], w);
    return 1;
}

void dist_share_mark(kiln_comm *c, int set, float *data)
{
    c->cur_set = set;
    *data = (float)c->weight;
}

static const dist_share_set *current(const kiln_comm *c)
{
    return c->cur_set >= 0 && c->cur_set < c->n_sets ? &c->sets[c->cur_set]
                                                     : NULL;
}

/* The index of name in st, or -1. */
static int in_set(const dist_share_set *st, const char *name)
{
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->names[i], name) == 0)
            return i;
    return -1;
}

/* Writes bytes of data at off of fd; 0 when all are written. */
static int write_all(int fd, const char *data, size_t bytes, off_t off)
{
    while (bytes) {
        ssize_t w = pwrite(fd, data, bytes, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        data += w;
        bytes -= (size_t)w;
        off += w;
    }
    return 0;
}

/* Maps pages at off of fd over data (the same address); 0 on success,
   data untouched otherwise. */
static int map_over(void *data, size_t pages, int fd, off_t off)
{
    void *q = mmap(NULL, pages, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
    if (q == MAP_FAILED)
        return -1;
    if (mremap(q, pages, pages, MREMAP_MAYMOVE | MREMAP_FIXED, data) ==
        MAP_FAILED) {
        munmap(q, pages);
        return -1;
    }
    return 0;
}

/* Makes a shared variable's pages private again, values kept, and
   unmaps its scratch. */
static int unshare(const dist_shared_var *sv)
{
    void *q = mmap(NULL, sv->pages, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED)
        return -1;
    memcpy(q, sv->data, sv->pages);
    if (mremap(q, sv->pages, sv->pages, MREMAP_MAYMOVE | MREMAP_FIXED,
               sv->data) == MAP_FAILED) {
        munmap(q, sv->pages);
        return -1;
    }
    if (sv->scratch)
        munmap(sv->scratch, sv->pages);
    return 0;
}

void dist_unshare_all(kiln_comm *c)
{
    int kept = 0;
    for (int i = 0; i < c->n_shared; i++) {
        dist_shared_var *sv = &c->shared[i];
        if (!c->s) { /* the variables went with their session */
            if (sv->scratch)
                munmap(sv->scratch, sv->pages);
        } else if (unshare(sv) != 0) {
            c->shared[kept++] = *sv; /* out of memory: stays */
        }
    }
    c->n_shared = kept;
    for (int i = 0; i < c->n_sets; i++)
        if (c->sets[i].state == 1)
            c->sets[i].state = kept ? 1 : 0;
}

/* The variables of st in the session that are pages of their own (the
   others stay private: small ones, a bias), their pages and the total;
   -1 when one is missing. */
static int collect(kiln_comm *c, dist_share_set *st, dist_shared_var *out,
                   size_t *total)
{
    *total = 0;
    long ps = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < st->n; i++) {
        kiln_var *v = c->s ? kiln_session_find(c->s, st->names[i]) : NULL;
        if (!v || v->dtype != KILN_F32 || !v->data)
            return -1;
        size_t bytes = (size_t)kiln_shape_numel(v->shape) * sizeof(float);
        size_t pages = kiln_page_round(bytes);
        st->shared[i] = v->own_pages && pages && ps > 0 &&
                        (uintptr_t)v->data % (uintptr_t)ps == 0 &&
                        *total <= SIZE_MAX - pages;
        out[i] = (dist_shared_var){v->data, st->shared[i] ? pages : 0, NULL};
        *total += out[i].pages;
    }
    return 0;
}

/* Removes the objects of share() named after a process that no longer
   exists: a rank 0 killed between creating one and unlinking it leaves a
   copy of the variables in /dev/shm (memory) until the machine restarts.
   (A process of another PID namespace sharing /dev/shm may look gone:
   its ranks then keep private copies, in the moment between its
   shm_open and shm_unlink.) */
static void remove_stale(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    char name[320];
    while (d && (e = readdir(d))) {
        long pid;
        int k, set, end = 0;
        if (sscanf(e->d_name, "kiln-%ld-%d-%d%n", &pid, &k, &set, &end) == 3 &&
            !e->d_name[end] && pid > 0 && pid <= INT_MAX &&
            kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            snprintf(name, sizeof name, "/%s", e->d_name);
            shm_unlink(name);
        }
    }
    if (d)
        closedir(d);
}

/* Shares st's variables (collective); its state then 1, or 2 when any
   rank could not. */
static void share(kiln_comm *c, dist_share_set *st)
{
    char name[64], msg[KILN_ERRMSG_MAX];
    if (c->share_weights == 2) { /* KILN_DIST_SHARED_WEIGHTS=private */
        st->state = 2;
        return;
    }
    dist_shared_var *vs = calloc((size_t)st->n + 1, sizeof *vs);
    size_t total = 0;
    int ok = vs && collect(c, st, vs, &total) == 0 &&
             total <= (size_t)1 << 46 &&
             dist_room((void **)&c->shared, &c->cap_shared,
                       c->n_shared + st->n - 1, sizeof *c->shared) == 0;
    int fd = -1;
    snprintf(name, sizeof name, "/kiln-%ld-%d-%d", (long)getpid(),
             c->key_base / DIST_KEYS, c->cur_set);
    int exact = c->share_weights == 3, copies = exact ? 2 : 1;
    if (ok && c->rank == 0) {
        /* the variables, then (exact) their scratches, any values */
        remove_stale();
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        /* this process's name: left by a killed one of the same PID */
        if (fd < 0 && errno == EEXIST && shm_unlink(name) == 0)
            fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        ok = fd >= 0 && ftruncate(fd, (off_t)(copies * total)) == 0;
        size_t off = 0;
        /* every page written now: a full /dev/shm fails here, not with a
           SIGBUS at a later store */
        for (int i = 0; ok && i < copies * st->n; i++) {
            const dist_shared_var *v = &vs[i % st->n];
            ok = write_all(fd, v->data, v->pages, (off_t)off) == 0;
            off += v->pages;
        }
        ok = ok && total > 0;
    }
    snprintf(msg, sizeof msg, "%s", name);
    /* rank 0's object name, with every rank's verdict */
    int low = dist_agree(c, ok, msg, (int)sizeof msg);
    if (low == -1 && c->rank == 0)
        snprintf(msg, sizeof msg, "%s", name);
    if (low == -1 && dist_bcast(c, msg, (int)sizeof msg, MPI_CHAR, 0) != 0)
        low = -2;
    int mapped = 0;
    if (low == -1) {
        if (c->rank != 0)
            fd = shm_open(msg, O_RDWR, 0600);
        ok = fd >= 0;
        size_t off = 0;
        while (ok && mapped < st->n) {
            dist_shared_var *v = &vs[mapped];
            if (v->pages) {
                void *q = exact ? mmap(NULL, v->pages, PROT_READ | PROT_WRITE,
                                       MAP_SHARED, fd, (off_t)(total + off))
                                : NULL;
                ok = q != MAP_FAILED;
                if (ok && map_over(v->data, v->pages, fd, (off_t)off) != 0) {
                    if (q)
                        munmap(q, v->pages);
                    ok = 0;
                }
                v->scratch = ok ? q : NULL;
            }
            off += v->pages;
            mapped += ok;
        }
        low = dist_agree(c, ok, msg, (int)sizeof msg);
    }
    if (c->rank == 0 && fd >= 0)
        shm_unlink(name);
    if (fd >= 0)
        close(fd);
    for (int i = 0; i < mapped && vs; i++)
        if (vs[i].pages)
            c->shared[c->n_shared++] = vs[i];
    if (low != -1)
        dist_unshare_all(c); /* the ones mapped, back to private */
    st->state = low == -1 ? 1 : 2;
    free(vs);
}

int dist_phases(void *ctx, kiln_var *var)
{
    kiln_comm *c = ctx;
    dist_share_set *st = (dist_share_set *)current(c);
    int at = st ? in_set(st, var->name) : -1;
    if (at < 0)
        return 0;
    if (c->broken) {
        kiln_session_fail(c->s, KILN_ERR_IO,
                          "kiln_run: the communicator broke (a collective "
                          "timed out): no more shared updates");
        return -1;
    }
    if (st->state == 0)
        share(c, st);
    if (c->phase_comm == MPI_COMM_NULL &&
        MPI_Comm_dup(c->comm, &c->phase_comm) != MPI_SUCCESS) {
        c->phase_comm = MPI_COMM_NULL;
        kiln_session_fail(c->s, KILN_ERR_IO,
                          "kiln_run: MPI_Comm_dup for the shared updates");
        return -1;
    }
    c->write_private = !(st->state == 1 && st->shared[at]);
    c->write_delta = 0;
    if (!c->write_private)
        return c->size;
    /* private: the write's change is all-reduced after it (sum_into) */
    size_t bytes = (size_t)kiln_shape_numel(var->shape) * sizeof(float);
    if (bytes > c->saved_bytes) {
        float *p = realloc(c->saved, bytes);
        if (!p) {
            kiln_session_fail(c->s, KILN_ERR_MEMORY, "kiln_run: out of memory");
            return -1;
        }
        c->saved = p;
        c->saved_bytes = bytes;
    }
    return 1;
}

int dist_sum_into(void *ctx, kiln_var *var, int p, int can, float **acc)
{
    kiln_comm *c = ctx;
    if (c->write_private) {
        /* the change computed apart, or the values before the write */
        size_t bytes = (size_t)kiln_shape_numel(var->shape) * sizeof(float);
        if (!can)
            memcpy(c->saved, var->data, bytes);
        c->write_delta = can;
        *acc = c->saved;
        return can;
    }
    for (int i = 0; can && i < c->n_shared; i++)
        if (c->shared[i].data == var->data && c->shared[i].scratch) {
            *acc = c->shared[i].scratch;
            return p == 0 ? 1 : p == c->size - 1 ? 3 : 2;
        }
    return 0;
}

static int failed(kiln_comm *c, int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    dist_mpi_error(rc, msg, sizeof msg);
    if (c->s)
        kiln_session_fail(c->s, KILN_ERR_IO, "shared update: %s: %s", what,
                          msg);
    dist_fail(c, KILN_ERR_IO, "shared update: %s: %s", what, msg);
    return -1;
}

static int barrier(kiln_comm *c)
{
    MPI_Request req;
    double t0 = MPI_Wtime();
    int rc;
    if (!(c->timeout > 0) && !c->broken)
        rc = MPI_Barrier(c->phase_comm);
    else if ((rc = MPI_Ibarrier(c->phase_comm, &req)) == MPI_SUCCESS)
        rc = dist_complete(c, &req);
    c->stats.wait_seconds += MPI_Wtime() - t0;
    return rc == MPI_SUCCESS ? 0 : failed(c, rc, "barrier");
}

int dist_phase(void *ctx, int p)
{
    kiln_comm *c = ctx;
    if (c->write_private)
        return 0;
    if (barrier(c) != 0)
        return -1;
    return (c->rank + p) % c->size;
}

kiln_status dist_phase_end(void *ctx, kiln_var *var)
{
    kiln_comm *c = ctx;
    if (!var) { /* the run's end: every rank's last phase is over */
        int open = c->phases_open;
        c->phases_open = 0;
        return !open || barrier(c) == 0 ? KILN_OK : KILN_ERR_IO;
    }
    if (!c->write_private) {
        /* nothing reads var again in this run (its update is in place,
           after every read): the next write's first barrier, or the
           run's end, closes this one */
        c->phases_open = 1;
        return KILN_OK;
    }
    int64_t n = kiln_shape_numel(var->shape);
    if (n > 0x7fffffff)
        return kiln_session_fail(c->s, KILN_ERR_ARG,
                                 "shared update: '%s' has more than 2^31-1 "
                                 "values",
                                 var->name);
    float *d = var->data;
    if (c->write_delta) { /* the change is in saved, var untouched */
        int rc = dist_allreduce(c, MPI_IN_PLACE, c->saved, (int)n, MPI_FLOAT,
                                MPI_SUM);
        if (rc != MPI_SUCCESS) {
            failed(c, rc, "all-reduce of the changes");
            return KILN_ERR_IO;
        }
        for (int64_t i = 0; i < n; i++)
            d[i] += c->saved[i];
    } else {
        const float *old = c->saved;
        for (int64_t i = 0; i < n; i++)
            d[i] -= old[i]; /* this rank's change, summed in place */
        int rc = dist_allreduce(c, MPI_IN_PLACE, d, (int)n, MPI_FLOAT, MPI_SUM);
        if (rc != MPI_SUCCESS) {
            memcpy(d, old, (size_t)n * sizeof(float)); /* as before */
            failed(c, rc, "all-reduce of the changes");
            return KILN_ERR_IO;
        }
        for (int64_t i = 0; i < n; i++)
            d[i] += old[i];
    }
    c->stats.allreduces++;
    c->stats.bytes += n * (int64_t)sizeof(float);
    return KILN_OK;
}

void dist_share_free(kiln_comm *c)
{
    dist_unshare_all(c);
    for (int i = 0; i < c->n_sets; i++)
        free_set(&c->sets[i]);
    free(c->sets);
    free(c->shared);
    free(c->saved);
    int done = 0;
    MPI_Finalized(&done);
    if (c->phase_comm != MPI_COMM_NULL && !done && !c->broken)
        MPI_Comm_free(&c->phase_comm);
}
