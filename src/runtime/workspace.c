/* The dynamic workspace: a bump arena per graph for the values of computed
   nodes, reserved ahead (Marian's reserveWorkspaceMB), grown with a log line
   or refused in strict mode; with checkpointing on, released values go to
   per-size free lists that later values of the same size reuse. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "runtime/dynamic.h"

#define WS_BINS 64

typedef struct ws_bin {
    size_t size;
    void *head; /* released blocks, linked through their first bytes */
} ws_bin;

static size_t ws_block_size(size_t bytes)
{
    return bytes ? (bytes + 63) / 64 * 64 : 64;
}

/* Forgets the free lists and counters when the graph was cleared since our
   last allocation (the arena's count no longer matches ours). */
static void ws_sync(kiln_graph *g)
{
    if (g->workspace.used_total == g->ws_seen)
        return;
    g->ws_bins = NULL;
    g->ws_live = g->ws_peak = 0;
    g->ws_seen = g->workspace.used_total;
}

static ws_bin *ws_find_bin(kiln_graph *g, size_t size, int create)
{
    ws_bin *bins = g->ws_bins;
    for (size_t i = 0, h = size / 64; i < WS_BINS; i++) {
        ws_bin *b = &bins[(h + i) % WS_BINS];
        if (b->size == size)
            return b;
        if (b->size == 0) {
            if (!create)
                return NULL;
            b->size = size;
            return b;
        }
    }
    return NULL; /* every bin taken by another size: the block is not reused */
}

static void ws_account(kiln_graph *g, size_t size)
{
    g->ws_live += size;
    if (g->ws_live > g->ws_peak)
        g->ws_peak = g->ws_live;
}

static void *ws_fail(kiln_run_ctx *r, const kiln_node *n, size_t need,
                     const char *why)
{
    char what[160] = "bookkeeping", b1[32], b2[32], b3[32];
    if (n)
        kiln_node_format(n, NULL, '\'', what, sizeof what);
    kiln_session_fail(
        r->s, KILN_ERR_MEMORY,
        "%s: workspace %s at %s: needs %s, %s of %s reserved in use", r->fn,
        why, what, kiln_logging_bytes(need, b1, sizeof b1),
        kiln_logging_bytes(r->g->workspace.used_total, b2, sizeof b2),
        kiln_logging_bytes(r->g->ws_reserved, b3, sizeof b3));
    return NULL;
}

void *kiln_ws_alloc(kiln_run_ctx *r, const kiln_node *n, size_t bytes)
{
    kiln_graph *g = r->g;
    ws_sync(g);
    size_t need = ws_block_size(bytes);
    ws_bin *bin = g->ws_bins ? ws_find_bin(g, need, 0) : NULL;
    if (bin && bin->head) {
        void *p = bin->head;
        bin->head = *(void **)p;
        memset(p, 0, bytes);
        ws_account(g, need);
        return p;
    }
    if (g->ws_strict && g->workspace.used_total + need > g->ws_reserved)
        return ws_fail(r, n, need, "exhausted (strict mode)");
    size_t before = g->workspace.reserved_total;
    void *p = kiln_arena_alloc(&g->workspace, bytes);
    if (!p)
        return ws_fail(r, n, need, "out of memory");
    g->ws_seen = g->workspace.used_total;
    if (g->workspace.reserved_total > before) {
        char b[32];
        kiln_logging_message(
            g->ws_reserved ? KILN_LOGGING_WARN : KILN_LOGGING_DEBUG, 0,
            "memory", "Extending reserved space to %s (device cpu0)",
            kiln_logging_bytes(g->workspace.reserved_total, b, sizeof b));
    }
    ws_account(g, need);
    return p;
}

void kiln_ws_release(kiln_graph *g, kiln_node *n)
{
    size_t size = ws_block_size((size_t)kiln_shape_numel(n->shape) *
                                kiln_dtype_size(n->dtype));
    if (!g->ws_bins) {
        g->ws_bins = kiln_arena_alloc(&g->workspace, WS_BINS * sizeof(ws_bin));
        g->ws_seen = g->workspace.used_total;
    }
    ws_bin *bin = g->ws_bins ? ws_find_bin(g, size, 1) : NULL;
    if (bin) {
        *(void **)n->value = bin->head;
        bin->head = n->value;
    }
    n->value = n->block = NULL;
    g->ckpt_released = 1;
    g->ws_live -= size < g->ws_live ? size : g->ws_live;
}

kiln_status kiln_graph_reserve_workspace_mb(kiln_graph *g, size_t mb)
{
    if (!g) {
        kiln_set_last_error("kiln_graph_reserve_workspace_mb: graph is NULL");
        return KILN_ERR_ARG;
    }
    if (mb == 0 || mb > ((size_t)1 << 40) >> 20) {
        kiln_set_last_error("kiln_graph_reserve_workspace_mb: %zu MB is not a "
                            "usable size",
                            mb);
        return KILN_ERR_ARG;
    }
    if (g->workspace.used_total != 0) {
        kiln_set_last_error(
            "kiln_graph_reserve_workspace_mb: the workspace holds "
            "values: reserve before kiln_feed or after "
            "kiln_graph_clear");
        return KILN_ERR_STATE;
    }
    size_t bytes = mb << 20;
    kiln_arena_free(&g->workspace);
    kiln_arena_init(&g->workspace, bytes);
    /* one untouched block, kept for the graph's values after the reset */
    if (!kiln_arena_alloc(&g->workspace, 1)) {
        kiln_arena_free(&g->workspace);
        kiln_arena_init(&g->workspace, 1 << 20);
        g->ws_reserved = 0;
        kiln_set_last_error(
            "kiln_graph_reserve_workspace_mb: cannot allocate %zu MB", mb);
        return KILN_ERR_MEMORY;
    }
    kiln_arena_reset(&g->workspace);
    g->ws_reserved = bytes;
    g->ws_seen = 0;
    g->ws_bins = NULL;
    g->ws_live = g->ws_peak = 0;
    char b[32];
    kiln_logging_message(KILN_LOGGING_INFO, 0, "memory",
                         "Reserving %s, device cpu0",
                         kiln_logging_bytes(bytes, b, sizeof b));
    return KILN_OK;
}

kiln_status kiln_graph_set_workspace_strict(kiln_graph *g, int on)
{
    if (!g) {
        kiln_set_last_error("kiln_graph_set_workspace_strict: graph is NULL");
        return KILN_ERR_ARG;
    }
    if (on && !g->ws_reserved) {
        kiln_set_last_error(
            "kiln_graph_set_workspace_strict: no reservation: call "
            "kiln_graph_reserve_workspace_mb first");
        return KILN_ERR_STATE;
    }
    g->ws_strict = on != 0;
    return KILN_OK;
}

kiln_status kiln_graph_workspace_stats(const kiln_graph *g,
                                       kiln_workspace_stats *st)
{
    if (!g || !st)
        return kiln_null_arg("kiln_graph_workspace_stats",
                             g ? "stats" : "graph");
    int cleared = g->workspace.used_total != g->ws_seen;
    st->reserved = g->workspace.reserved_total;
    st->used = g->workspace.used_total;
    st->live = cleared ? 0 : g->ws_live;
    st->peak = cleared ? 0 : g->ws_peak;
    return KILN_OK;
}
