/* Gradient subgraphs built once per graph generation: kiln_backward asks
   here for the adjoints of a loss, so a second call -- from the same
   session, another one, or another thread -- reuses the nodes the first
   built instead of growing the graph with a copy each time. */
#include "grad/grad.h"

#include <stdlib.h>
#include <string.h>

/* The index of g's memo for loss and wrt, or -1.  Under g's lock. */
static int memo_find(const kiln_graph *g, const kiln_node *loss,
                     kiln_node *const *wrt, int n_wrt)
{
    for (int i = 0; i < g->n_memo; i++) {
        const kiln_grad_memo *m = &g->memo[i];
        if (m->loss == loss->id && m->n_wrt == n_wrt &&
            (!n_wrt || !memcmp(m->wrt, wrt, (size_t)n_wrt * sizeof *wrt)))
            return i;
    }
    return -1;
}

/* Room for one more memo and arena copies of its arrays in *m; 0 when out
   of memory.  Under g's write lock. */
static int memo_alloc(kiln_graph *g, const kiln_node *loss, int n_wrt,
                      kiln_grad_memo *m)
{
    if (g->n_memo == g->cap_memo) {
        int cap = g->cap_memo ? 2 * g->cap_memo : 4;
        kiln_grad_memo *grown = realloc(g->memo, (size_t)cap * sizeof *grown);
        if (!grown)
            return 0;
        g->memo = grown;
        g->cap_memo = cap;
    }
    size_t n_adj = (size_t)loss->id + 1;
    m->wrt = kiln_arena_alloc(&g->arena, ((size_t)n_wrt + 1) * sizeof *m->wrt);
    m->adj = kiln_arena_alloc(&g->arena, n_adj * sizeof *m->adj);
    return m->wrt && m->adj; /* the arena's memory is zeroed */
}

/* Builds the adjoints and records them as g's last memo; g's status.
   Under g's write lock. */
static kiln_status memo_build(kiln_graph *g, kiln_node *loss,
                              kiln_node *const *wrt, int n_wrt)
{
    kiln_grad_memo m = {.loss = loss->id, .n_wrt = n_wrt, .first = g->n_nodes};
    if (!memo_alloc(g, loss, n_wrt, &m)) {
        kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_backward: out of memory");
        return g->status;
    }
    if (n_wrt)
        memcpy(m.wrt, wrt, (size_t)n_wrt * sizeof *wrt);
    if (kiln_build_adjoints(g, loss, NULL, m.wrt, n_wrt, m.adj) == KILN_OK)
        g->memo[g->n_memo++] = m;
    return g->status;
}

kiln_status kiln_grad_memo_get(kiln_graph *g, kiln_node *loss,
                               kiln_node *const *wrt, int n_wrt,
                               kiln_grad_memo *out)
{
    /* the usual case, built already: only read the graph */
    kiln_graph_read_lock(g);
    int at = memo_find(g, loss, wrt, n_wrt);
    if (at >= 0)
        *out = g->memo[at];
    kiln_graph_unlock(g);
    if (at >= 0)
        return KILN_OK;
    /* another thread may have built it between the two locks */
    kiln_graph_write_lock(g);
    kiln_status st = KILN_OK;
    if ((at = memo_find(g, loss, wrt, n_wrt)) < 0 &&
        (st = memo_build(g, loss, wrt, n_wrt)) == KILN_OK)
        at = g->n_memo - 1;
    if (st == KILN_OK)
        *out = g->memo[at];
    kiln_graph_unlock(g);
    return st;
}
