/* The run state of dynamic graphs: a session keeps one per graph it runs,
   found by the graph's id, holding everything a run produces.  A cleared
   graph (a new generation) makes the state drop its values on the next
   look-up; a freed graph's state is reclaimed when the session next
   creates one, so a loop that builds a graph per batch keeps one state.
   The modes a session sets for a graph live here too. */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/dynamic.h"

static void run_free(kiln_run_state *rs)
{
    kiln_arena_free(&rs->workspace);
    free(rs->e);
    free(rs);
}

void kiln_run_free_all(kiln_session *s)
{
    for (int i = 0; i < s->n_runs; i++)
        run_free(s->runs[i]);
    free(s->runs);
    s->runs = NULL;
    s->n_runs = s->cap_runs = 0;
}

/* Drops every value (the graph was cleared); the modes and the
   reservation stay. */
static void run_reset(kiln_run_state *rs, unsigned gen)
{
    size_t n = (size_t)rs->used;
    rs->used = 0;
    if (n) {
        memset(rs->e, 0, n * sizeof *rs->e);
    }
    rs->gen = gen;
    rs->n_computed = 0;
    rs->backward_loss = NULL;
    rs->ckpt_released = 0;
    rs->rekey = 1;
    rs->mode_at = rs->key_at = 0;
    kiln_arena_reset(&rs->workspace);
    kiln_ws_reset(rs);
}

kiln_run_state *kiln_run_find(kiln_session *s, const kiln_graph *g)
{
    for (int i = 0; i < s->n_runs; i++) {
        kiln_run_state *rs = s->runs[i];
        if (rs->graph_id != g->id)
            continue;
        if (rs->gen != g->gen)
            run_reset(rs, g->gen);
        return rs;
    }
    return NULL;
}

/* realloc of one per-node array to cap entries, the new ones zeroed. */
static int grow(void **p, int old, int cap, size_t size)
{
    char *q = realloc(*p, (size_t)cap * size);
    if (!q)
        return 0;
    memset(q + (size_t)old * size, 0, (size_t)(cap - old) * size);
    *p = q;
    return 1;
}

/* Room for every node of g in the per-node arrays. */
static int run_fit(kiln_run_state *rs, const kiln_graph *g)
{
    if (g->n_nodes > rs->used && g->n_nodes <= rs->cap)
        rs->used = g->n_nodes;
    if (g->n_nodes <= rs->cap)
        return 1;
    int cap = rs->cap ? rs->cap : 64;
    while (cap < g->n_nodes)
        cap = cap < INT_MAX / 2 ? 2 * cap : g->n_nodes;
    if (!grow((void **)&rs->e, rs->cap, cap, sizeof *rs->e))
        return 0;
    rs->cap = cap;
    rs->used = g->n_nodes;
    return 1;
}

/* Frees the states of graphs that are gone, then adds one for g. */
static kiln_run_state *run_add(kiln_session *s, const kiln_graph *g)
{
    int kept = 0;
    for (int i = 0; i < s->n_runs; i++) {
        if (kiln_graph_alive(s->runs[i]->graph_id))
            s->runs[kept++] = s->runs[i];
        else
            run_free(s->runs[i]);
    }
    s->n_runs = kept;
    if (s->n_runs == s->cap_runs) {
        int cap = s->cap_runs ? 2 * s->cap_runs : 4;
        kiln_run_state **runs = realloc(s->runs, (size_t)cap * sizeof *runs);
        if (!runs)
            return NULL;
        s->runs = runs;
        s->cap_runs = cap;
    }
    kiln_run_state *rs = calloc(1, sizeof *rs);
    if (!rs)
        return NULL;
    rs->graph_id = g->id;
    rs->gen = g->gen;
    rs->rekey = 1;
    kiln_arena_init(&rs->workspace, 1 << 20);
    s->runs[s->n_runs++] = rs;
    return rs;
}

kiln_run_state *kiln_run_get(kiln_session *s, const kiln_graph *g,
                             const char *fn)
{
    kiln_run_state *rs = kiln_run_find(s, g);
    if (!rs)
        rs = run_add(s, g);
    if (!rs || !run_fit(rs, g)) {
        kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    return rs;
}

kiln_status kiln_run_settings(kiln_session *s, const kiln_graph *g,
                              const char *fn, kiln_run_state **rs)
{
    if (kiln_session_begin(s, fn) != KILN_OK)
        return KILN_ERR_ARG;
    if (!g)
        return kiln_session_fail(s, KILN_ERR_ARG, "%s: graph is NULL", fn);
    kiln_graph_read_lock(g); /* sizing the state reads the node count */
    *rs = kiln_run_get(s, g, fn);
    kiln_graph_unlock(g);
    return *rs ? KILN_OK : KILN_ERR_MEMORY;
}

/* Sets the int mode at offset field of s's run state of g. */
static kiln_status set_mode(kiln_session *s, kiln_graph *g, const char *fn,
                            size_t field, int on)
{
    kiln_run_state *rs = NULL;
    kiln_status st = kiln_run_settings(s, g, fn, &rs);
    if (st == KILN_OK)
        *(int *)((char *)rs + field) = on != 0;
    return st;
}

kiln_status kiln_session_set_checkpointing(kiln_session *s, kiln_graph *g,
                                           int on)
{
    return set_mode(s, g, "kiln_session_set_checkpointing",
                    offsetof(kiln_run_state, checkpointing), on);
}

kiln_status kiln_session_set_check_finite(kiln_session *s, kiln_graph *g,
                                          int on)
{
    return set_mode(s, g, "kiln_session_set_check_finite",
                    offsetof(kiln_run_state, check_finite), on);
}

void kiln_run_invalidate(kiln_run_state *rs, const kiln_graph *g, int from)
{
    for (int id = from; id < g->n_nodes && id < rs->cap; id++)
        if (g->nodes[id]->op != KILN_OP_INPUT)
            rs->e[id].value = NULL;
    if (rs->n_computed > from)
        rs->n_computed = from;
}
