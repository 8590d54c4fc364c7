/* The gradient sync a communicator registers on its session
   (kiln_grad_sync, runtime/runtime.h): hooked copies of the gradients in
   the optimiser's graph form, and the gradients of kiln_backward in the
   run-time form, averaged bucket by bucket across the ranks. */
#include <stdlib.h>

#include "dist/dist.h"

/* Indices of grads by ascending node id: the order backward computes
   them, so that buckets fill (and start) in that order. */
static int *by_id(kiln_node *const *grads, int n)
{
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    for (int i = 0; order && i < n; i++) {
        int j = i;
        for (; j > 0 && grads[order[j - 1]]->id > grads[i]->id; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    return order;
}

/* A plan over grads in backward's order; order[k] is the index in grads
   of slot k.  NULL when out of memory. */
static dist_plan *plan_for(const kiln_comm *c, kiln_node *const *grads, int n,
                           int **order)
{
    int64_t *numel = malloc(((size_t)n + 1) * sizeof *numel);
    dist_plan *p = NULL;
    if (numel && (*order = by_id(grads, n))) {
        for (int k = 0; k < n; k++)
            numel[k] = kiln_shape_numel(grads[(*order)[k]]->shape);
        p = dist_plan_new(c, numel, n);
    }
    free(numel);
    return p;
}

int dist_reserve_refs(kiln_comm *c, int n)
{
    if (n >= DIST_KEYS - c->n_refs)
        return -1;
    if (c->n_refs + n > c->cap_refs) {
        int cap = 2 * (c->n_refs + n);
        dist_ref *rs = realloc(c->refs, (size_t)cap * sizeof *rs);
        if (!rs)
            return -1;
        c->refs = rs;
        c->cap_refs = cap;
    }
    return 0;
}

int dist_new_key(kiln_comm *c, dist_ref r)
{
    c->refs[c->n_refs] = r;
    return c->key_base + ++c->n_refs;
}

const dist_ref *dist_find_ref(kiln_comm *c, int hook)
{
    int64_t i = (int64_t)hook - c->key_base - 1;
    if (i >= 0 && i < c->n_refs)
        return &c->refs[i];
    if (c->s)
        kiln_session_fail(c->s, KILN_ERR_STATE,
                          "kiln_run: the training step was built with another "
                          "communicator than the one attached now: build and "
                          "compile it again");
    return NULL;
}

static int add_plan(kiln_comm *c, dist_plan *p, int n)
{
    if (c->n_plans == c->cap_plans) {
        int cap = c->cap_plans ? 2 * c->cap_plans : 4;
        dist_plan **ps = realloc(c->plans, (size_t)cap * sizeof *ps);
        if (!ps)
            return -1;
        c->plans = ps;
        c->cap_plans = cap;
    }
    if (dist_reserve_refs(c, n) != 0)
        return -1;
    c->plans[c->n_plans++] = p;
    return 0;
}

/* Graph form: each gradient becomes a hooked copy whose value, when the
   optimiser reads it, is the average over the ranks. */
static void build(void *ctx, kiln_graph *g, kiln_node *const *vars,
                  kiln_node **grads, int n)
{
    kiln_comm *c = ctx;
    int *order = NULL;
    (void)vars;
    for (int i = 0; i < n; i++)
        if (grads[i]->dtype != KILN_F32) {
            kiln_graph_fail(g, KILN_ERR_DTYPE,
                            "kiln_optimizer_build_step: data-parallel "
                            "training averages f32 gradients only");
            return;
        }
    dist_plan *p = plan_for(c, grads, n, &order);
    if (!p || add_plan(c, p, n) != 0) {
        dist_plan_free(p);
        free(order);
        kiln_graph_fail(g, KILN_ERR_MEMORY,
                        "kiln_optimizer_build_step: out of memory");
        return;
    }
    p->graph_weighted = 1;
    kiln_node *mean = kiln_scalar(g, (float)(1.0 / c->size));
    for (int k = 0; k < n; k++) {
        kiln_node *m = kiln_stop_gradient(g, grads[order[k]]);
        if (m->op == KILN_OP_ERROR)
            break;
        m->hook = dist_new_key(c, (dist_ref){c->n_plans - 1, k});
        /* the mean taken where the optimiser reads the sum: no pass of
           its own */
        grads[order[k]] = kiln_mul(g, m, mean);
    }
    free(order);
}

/* Makes the shared variables private again before an update that
   writes every rank's copy (each rank's would otherwise reach every
   rank); KILN_ERR_MEMORY, the session's error naming fn, when one stays
   shared. */
static kiln_status make_private(kiln_comm *c, const char *fn)
{
    if (c->n_shared)
        dist_unshare_all(c);
    if (c->n_shared)
        return kiln_session_fail(c->s, KILN_ERR_MEMORY,
                                 "%s: out of memory making the shared "
                                 "variables private again",
                                 fn);
    return KILN_OK;
}

static kiln_status computed(void *ctx, int hook, void *data)
{
    kiln_comm *c = ctx;
    const dist_ref *r = dist_find_ref(c, hook);
    if (!r)
        return KILN_ERR_STATE;
    if (r->plan == -2) {
        dist_share_mark(c, r->slot, data);
        return KILN_OK;
    }
    /* a step that all-reduces gradients updates every copy itself */
    c->cur_set = -1;
    if (make_private(c, "kiln_run") != KILN_OK)
        return KILN_ERR_MEMORY;
    if (r->plan < 0)
        return dist_gather(c, c->gathers[r->slot], data);
    return dist_pack(c, c->plans[r->plan], r->slot, data);
}

static kiln_status needed(void *ctx, int hook, void *data)
{
    kiln_comm *c = ctx;
    const dist_ref *r = dist_find_ref(c, hook);
    if (!r)
        return KILN_ERR_STATE;
    /* a gather is complete once computed; a share marker has no sum */
    return r->plan < 0 ? KILN_OK
                       : dist_deliver(c, c->plans[r->plan], r->slot, data);
}

/* A gradient is kept in its bucket: backward writes it there, the
   all-reduce works in place and the optimiser reads the sum there. */
static void *storage(void *ctx, int hook, size_t bytes)
{
    kiln_comm *c = ctx;
    const dist_ref *r = dist_find_ref(c, hook);
    if (r && r->plan != -2 && c->n_shared)
        dist_unshare_all(c);
    if (!r || r->plan < 0)
        return NULL;
    dist_plan *p = c->plans[r->plan];
    /* the first run of the step moves its buckets into shared memory:
       every rank runs it, so every rank gets here */
    if (!p->shm_tried && c->shm && c->on_node && c->size > 1 && !c->broken) {
        dist_plan_settle(c, p);
        p->shm_tried = 1;
        dist_shm_setup(c, p);
    }
    return (size_t)p->slots[r->slot].numel * sizeof(float) == bytes
               ? dist_slot_data(p, r->slot)
               : NULL;
}

static void progress(void *ctx)
{
    dist_progress(ctx);
}

/* 1 when the dynamic plan is over exactly grads (same nodes, same
   generation). */
static int dyn_matches(const dist_plan *p, kiln_node *const *grads, int n)
{
    if (!p || p->n_slots != n)
        return 0;
    for (int k = 0; k < n; k++) {
        const dist_slot *s = &p->slots[k];
        int found = 0;
        for (int i = 0; i < n && !found; i++)
            found = grads[i] == s->grad && grads[i]->id == s->grad_id &&
                    grads[i]->gen == s->grad_gen;
        if (!found)
            return 0;
    }
    return 1;
}

/* The dynamic plan for grads, kept from the last backward when it
   matches; NULL when out of memory. */
static dist_plan *dyn_plan(kiln_comm *c, kiln_node *const *grads, int n)
{
    if (dyn_matches(c->dyn, grads, n))
        return c->dyn;
    dist_plan_settle(c, c->dyn);
    if (c->dyn)
        c->dyn->leak = c->broken;
    dist_plan_free(c->dyn);
    int *order = NULL;
    c->dyn = plan_for(c, grads, n, &order);
    for (int k = 0; c->dyn && k < n; k++) {
        dist_slot *s = &c->dyn->slots[k];
        s->grad = grads[order[k]];
        s->grad_id = s->grad->id;
        s->grad_gen = s->grad->gen;
    }
    free(order);
    return c->dyn;
}

static void backward_begin(void *ctx, kiln_node *const *grads, int n)
{
    kiln_comm *c = ctx;
    /* the run-time form's update writes every copy itself */
    c->cur_set = -1;
    if (c->n_shared)
        dist_unshare_all(c);
    dyn_plan(ctx, grads, n);
}

static void node_done(void *ctx, const kiln_node *n, void *data)
{
    kiln_comm *c = ctx;
    dist_plan *p = c->dyn;
    for (int k = 0; p && k < p->n_slots; k++)
        if (p->slots[k].grad == n && n->id == p->slots[k].grad_id) {
            /* a failure is recorded and found again by before_update */
            dist_pack(c, p, k, data);
            return;
        }
}

static kiln_status before_update(void *ctx, kiln_node *const *grads,
                                 void *const *values, int n)
{
    kiln_comm *c = ctx;
    if (make_private(c, "kiln_optimizer_update") != KILN_OK)
        return KILN_ERR_MEMORY;
    dist_plan *p = dyn_plan(c, grads, n);
    if (!p)
        return kiln_session_fail(c->s, KILN_ERR_MEMORY,
                                 "kiln_optimizer_update: out of memory");
    kiln_status st = KILN_OK;
    for (int k = 0; k < n && st == KILN_OK; k++) {
        int i = 0;
        while (grads[i] != p->slots[k].grad)
            i++;
        if (!p->slots[k].packed && !p->buckets[p->slots[k].bucket].started)
            st = dist_pack(c, p, k, values[i]);
        if (st == KILN_OK)
            st = dist_deliver(c, p, k, values[i]);
    }
    return st;
}

void dist_sync_init(kiln_comm *c)
{
    c->sync = (kiln_grad_sync){c,
                               build,
                               computed,
                               needed,
                               storage,
                               progress,
                               backward_begin,
                               node_done,
                               before_update,
                               dist_shard,
                               dist_shard_state,
                               dist_gather_node,
                               dist_build_local,
                               dist_phases,
                               dist_phase,
                               dist_sum_into,
                               dist_phase_end};
}
