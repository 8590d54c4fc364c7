/* The dynamic workspace: a bump arena per run state (a session's runs of
   one graph) for the values of computed nodes, reserved ahead (Marian's
   reserveWorkspaceMB), grown with a log line or refused in strict mode; with
   checkpointing on, released values go to per-size free lists that later values
   of the same size reuse. */
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

void kiln_ws_reset(kiln_run_state *rs)
{
    rs->ws_bins = NULL; /* they were in the workspace */
    rs->ws_live = rs->ws_peak = 0;
    rs->scratch = NULL;
    rs->scratch_bytes = 0;
}

static ws_bin *ws_find_bin(kiln_run_state *rs, size_t size, int create)
{
    ws_bin *bins = rs->ws_bins;
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

static void ws_account(kiln_run_state *rs, size_t size)
{
    rs->ws_live += size;
    if (rs->ws_live > rs->ws_peak)
        rs->ws_peak = rs->ws_live;
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
        kiln_logging_bytes(r->rs->workspace.used_total, b2, sizeof b2),
        kiln_logging_bytes(r->rs->ws_reserved, b3, sizeof b3));
    return NULL;
}

void *kiln_ws_alloc(kiln_run_ctx *r, const kiln_node *n, size_t bytes)
{
    kiln_run_state *rs = r->rs;
    size_t need = ws_block_size(bytes);
    ws_bin *bin = rs->ws_bins ? ws_find_bin(rs, need, 0) : NULL;
    if (bin && bin->head) {
        void *p = bin->head;
        bin->head = *(void **)p;
        memset(p, 0, bytes);
        ws_account(rs, need);
        return p;
    }
    if (rs->ws_strict && rs->workspace.used_total + need > rs->ws_reserved)
        return ws_fail(r, n, need, "exhausted (strict mode)");
    size_t before = rs->workspace.reserved_total;
    void *p = kiln_arena_alloc(&rs->workspace, bytes);
    if (!p)
        return ws_fail(r, n, need, "out of memory");
    if (rs->workspace.reserved_total > before) {
        char b[32];
        kiln_logging_message(
            rs->ws_reserved ? KILN_LOGGING_WARN : KILN_LOGGING_DEBUG, 0,
            "memory", "Extending reserved space to %s (device cpu0)",
            kiln_logging_bytes(rs->workspace.reserved_total, b, sizeof b));
    }
    ws_account(rs, need);
    return p;
}

/* A larger scratch replaces the old one, which stays in the workspace
   until the graph is cleared: the sizes only grow, so that waste is at
   most the largest scratch. */
void *kiln_ws_scratch(kiln_run_ctx *r, const kiln_node *n, size_t bytes)
{
    kiln_run_state *rs = r->rs;
    if (bytes > rs->scratch_bytes) {
        void *p = kiln_ws_alloc(r, n, bytes);
        if (!p)
            return NULL;
        rs->scratch = p;
        rs->scratch_bytes = bytes;
    }
    return rs->scratch;
}

void kiln_ws_release(kiln_run_state *rs, const kiln_node *n)
{
    size_t size = ws_block_size((size_t)kiln_shape_numel(n->shape) *
                                kiln_dtype_size(n->dtype));
    if (!rs->ws_bins)
        rs->ws_bins =
            kiln_arena_alloc(&rs->workspace, WS_BINS * sizeof(ws_bin));
    ws_bin *bin = rs->ws_bins ? ws_find_bin(rs, size, 1) : NULL;
    void *value = rs->e[n->id].value;
    if (bin) {
        *(void **)value = bin->head;
        bin->head = value;
    }
    rs->e[n->id].value = rs->e[n->id].block = NULL;
    rs->ckpt_released = 1;
    rs->ws_live -= size < rs->ws_live ? size : rs->ws_live;
}

kiln_status kiln_session_reserve_workspace_mb(kiln_session *s, kiln_graph *g,
                                              size_t mb)
{
    const char *fn = "kiln_session_reserve_workspace_mb";
    kiln_run_state *rs = NULL;
    kiln_status st = kiln_run_settings(s, g, fn, &rs);
    if (st != KILN_OK)
        return st;
    if (mb == 0 || mb > ((size_t)1 << 40) >> 20)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "%s: %zu MB is not a usable size", fn, mb);
    if (rs->workspace.used_total != 0)
        return kiln_session_fail(
            s, KILN_ERR_STATE,
            "%s: the workspace holds values: reserve before kiln_feed or "
            "after kiln_graph_clear",
            fn);
    size_t bytes = mb << 20;
    kiln_arena_free(&rs->workspace);
    kiln_arena_init(&rs->workspace, bytes);
    /* one untouched block, kept for the graph's values after the reset */
    if (!kiln_arena_alloc(&rs->workspace, 1)) {
        kiln_arena_free(&rs->workspace);
        kiln_arena_init(&rs->workspace, 1 << 20);
        rs->ws_reserved = 0;
        return kiln_session_fail(s, KILN_ERR_MEMORY,
                                 "%s: cannot allocate %zu MB", fn, mb);
    }
    kiln_arena_reset(&rs->workspace);
    rs->ws_reserved = bytes;
    kiln_ws_reset(rs);
    char b[32];
    kiln_logging_message(KILN_LOGGING_INFO, 0, "memory",
                         "Reserving %s, device cpu0",
                         kiln_logging_bytes(bytes, b, sizeof b));
    return KILN_OK;
}

kiln_status kiln_session_set_workspace_strict(kiln_session *s, kiln_graph *g,
                                              int on)
{
    kiln_run_state *rs = NULL;
    kiln_status st =
        kiln_run_settings(s, g, "kiln_session_set_workspace_strict", &rs);
    if (st == KILN_OK && on && !rs->ws_reserved)
        st = kiln_session_fail(s, KILN_ERR_STATE,
                               "kiln_session_set_workspace_strict: no "
                               "reservation: call "
                               "kiln_session_reserve_workspace_mb first");
    if (st == KILN_OK)
        rs->ws_strict = on != 0;
    return st;
}

kiln_status kiln_session_workspace_stats(kiln_session *s, const kiln_graph *g,
                                         kiln_workspace_stats *st)
{
    const char *fn = "kiln_session_workspace_stats";
    if (s && !st)
        return kiln_session_fail(s, KILN_ERR_ARG, "%s: stats is NULL", fn);
    kiln_run_state *rs = NULL;
    kiln_status status = kiln_run_settings(s, g, fn, &rs);
    if (status != KILN_OK)
        return status;
    st->reserved = rs->workspace.reserved_total;
    st->used = rs->workspace.used_total;
    st->live = rs->ws_live;
    st->peak = rs->ws_peak;
    return KILN_OK;
}
