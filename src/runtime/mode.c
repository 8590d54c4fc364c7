/* A session's training flag and random key: what the graph's mode and
   rng_key leaves take at every run, so that one graph (and one compiled
   function) serves training and evaluation and draws fresh, reproducible
   random bits at each run. */
#include <limits.h>
#include <string.h>

#include "runtime/dynamic.h"

kiln_status kiln_session_set_training(kiln_session *s, int on)
{
    if (!s)
        return kiln_null_arg("kiln_session_set_training", "session");
    s->training = on != 0;
    return KILN_OK;
}

int kiln_session_training(const kiln_session *s)
{
    return s ? s->training : -1;
}

kiln_status kiln_session_set_seed(kiln_session *s, uint64_t seed)
{
    if (!s)
        return kiln_null_arg("kiln_session_set_seed", "session");
    s->rng_seed = seed;
    s->rng_step = 0;
    return KILN_OK;
}

uint64_t kiln_session_rng_step(const kiln_session *s)
{
    return s ? s->rng_step : 0;
}

void kiln_session_next_key(kiln_session *s, int32_t key[4])
{
    uint64_t words[2] = {s->rng_seed, s->rng_step++};
    for (int i = 0; i < 2; i++) {
        key[2 * i] = (int32_t)(uint32_t)words[i];
        key[2 * i + 1] = (int32_t)(uint32_t)(words[i] >> 32);
    }
}

void kiln_run_bind(kiln_session *s, const kiln_graph *g, kiln_run_state *rs)
{
    int from = INT_MAX;
    if (rs->mode != s->training) {
        rs->mode = s->training;
        if (rs->mode_at)
            from = rs->mode_at - 1;
    }
    if (rs->rekey && rs->n_computed < g->n_nodes) {
        rs->rekey = 0;
        kiln_session_next_key(s, rs->key);
        if (rs->key_at && rs->key_at - 1 < from)
            from = rs->key_at - 1;
    }
    if (from < rs->n_computed)
        kiln_run_invalidate(rs, g, from);
}

kiln_status kiln_run_bound_leaf(kiln_run_ctx *r, const kiln_node *n)
{
    kiln_run_state *rs = r->rs;
    int is_mode = n->op == KILN_OP_MODE;
    size_t bytes = is_mode ? sizeof rs->mode : sizeof rs->key;
    void *v = rs->e[n->id].block;
    if (!v && !(v = rs->e[n->id].block = kiln_ws_alloc(r, n, bytes)))
        return KILN_ERR_MEMORY;
    memcpy(v, is_mode ? (void *)&rs->mode : (void *)rs->key, bytes);
    rs->e[n->id].value = v;
    int *at = is_mode ? &rs->mode_at : &rs->key_at;
    if (!*at || n->id + 1 < *at)
        *at = n->id + 1;
    return KILN_OK;
}
