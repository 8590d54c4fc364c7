/* Internals of dynamic execution shared by dynamic.c (forward, backward),
   run_state.c (what a session keeps per graph), workspace.c (the values'
   memory) and checkpointing.c (release and recompute). */
#ifndef KILN_RUNTIME_DYNAMIC_H
#define KILN_RUNTIME_DYNAMIC_H

#include "runtime/runtime.h"

/* What a session keeps of one graph it runs dynamically: the values and
   gradients of its nodes, indexed by node id, the workspace they live in,
   and the modes set for the graph.  The graph itself is never written by a
   run, so several sessions can run one graph, each with its own state. */
typedef struct kiln_run_entry {
    void *value;        /* computed value, fed input or variable storage */
    void *block;        /* workspace block of a computed value, kept while its
                           value is stale so recomputing it reuses the block */
    kiln_node *grad;    /* adjoint node after kiln_backward */
    unsigned char keep; /* kept by backward itself with checkpointing on:
                           the loss, gradients of variables and debug nodes */
} kiln_run_entry;

struct kiln_run_state {
    uint64_t graph_id; /* the graph's id (ids are never reused) */
    unsigned gen;      /* the graph's generation the values belong to */
    int cap;           /* length of the per-node arrays */
    int used; /* entries [0, used) may be set this generation: the largest
                 node count sized for, so a reset clears only those */
    /* per node, one entry together so a node's state is one cache line
       (the dynamic path's per-node overhead) */
    kiln_run_entry *e;
    int n_computed; /* nodes [0, n_computed) have values */
    const kiln_node *backward_loss;
    int ckpt_released; /* checkpointing released values since the clear */
    kiln_arena workspace;
    size_t ws_reserved;      /* bytes reserved by the user, 0 = none */
    size_t ws_live, ws_peak; /* bytes in use now / at most since the clear */
    void *ws_bins;           /* released values by size, for reuse */
    int ws_strict;           /* exceeding ws_reserved is an error */
    int checkpointing;       /* release unmarked activations, recompute them */
    int check_finite;        /* stop at the first NaN or infinity */
    /* scratch memory of the kernels (kiln_cpu_scratch_bytes), shared by
       every node: the largest any needed so far, in the workspace */
    void *scratch;
    size_t scratch_bytes;
    /* what the graph's mode and rng_key leaves hold (runtime/mode.c): set
       from the session by kiln_forward, a new key after each kiln_feed or
       clear (rekey); mode_at / key_at: 1 + the first such leaf computed,
       0 when none is */
    int32_t mode;
    int32_t key[4];
    int rekey;
    int mode_at, key_at;
};

/* s's run state of g, its values dropped if g was cleared since; NULL when
   s never ran g. */
kiln_run_state *kiln_run_find(kiln_session *s, const kiln_graph *g);
/* The same, created when missing, with room for every node of g; NULL with
   the session's error (naming fn) when out of memory. */
kiln_run_state *kiln_run_get(kiln_session *s, const kiln_graph *g,
                             const char *fn);
/* For the setters of a session's modes for g: *rs as kiln_run_get gives it;
   KILN_ERR_ARG for a NULL s (kiln_last_error) or g (the session's error),
   KILN_ERR_MEMORY. */
kiln_status kiln_run_settings(kiln_session *s, const kiln_graph *g,
                              const char *fn, kiln_run_state **rs);
/* The values of nodes [from, n_nodes) go stale: fed inputs keep theirs,
   the others are recomputed by the next kiln_forward, into the same
   blocks. */
void kiln_run_invalidate(kiln_run_state *rs, const kiln_graph *g, int from);

/* 1 when n is a node s can run or read (not NULL, poisoned or stale);
   otherwise 0 with the session's error naming fn. */
int kiln_dynamic_node_ok(kiln_session *s, const kiln_node *n, const char *fn);
/* 1 when s trains variable node v: trainable both as built and in s. */
int kiln_dynamic_trains(kiln_session *s, const kiln_node *v);

/* One forward_from call: what runs it and the checkpointing bookkeeping. */
typedef struct kiln_run_ctx {
    kiln_session *s;
    kiln_graph *g;
    kiln_run_state *rs;
    const char *fn; /* public function named in messages */
    int grad_first; /* first gradient node (backward), or n_nodes */
    /* checkpointing (NULL when off), each sized for the node count */
    int *last_use; /* id of the last node consuming each node, -1 for none */
    int *stack, *next, *order; /* recompute: DFS stack, its input cursor and
                                  the post-order of the recomputed nodes */
    int *mark, stamp;
    int n_order; /* nodes recomputed for the node being computed */
} kiln_run_ctx;

/* A value of bytes for node n (NULL for bookkeeping) from the workspace:
   a released block of the same size when there is one, else a bump
   allocation, which may grow the workspace (logged) or, in strict mode,
   fails.  NULL with the session's error (KILN_ERR_MEMORY) naming n. */
void *kiln_ws_alloc(kiln_run_ctx *r, const kiln_node *n, size_t bytes);
/* The kernels' scratch memory, grown in the workspace to at least bytes
   for node n; NULL with the session's error as kiln_ws_alloc. */
void *kiln_ws_scratch(kiln_run_ctx *r, const kiln_node *n, size_t bytes);
/* Gives n's value back to the workspace for reuse (checkpointing). */
void kiln_ws_release(kiln_run_state *rs, const kiln_node *n);
/* Forgets the free lists and counters (the values were dropped). */
void kiln_ws_reset(kiln_run_state *rs);
/* Before kiln_forward computes: takes the session's training flag, and a
   fresh random key when rs->rekey is set and there is something to
   compute, recomputing what was computed from the old ones. */
void kiln_run_bind(kiln_session *s, const kiln_graph *g, kiln_run_state *rs);
/* Computes a mode or rng_key leaf n: rs's value, in n's block. */
kiln_status kiln_run_bound_leaf(kiln_run_ctx *r, const kiln_node *n);

/* Computes n from its inputs' values (which must be present). */
kiln_status kiln_run_compute(kiln_run_ctx *r, kiln_node *n);

/* Checkpointing: prepares r (last uses over every node of g so far). */
kiln_status kiln_ckpt_prepare(kiln_run_ctx *r);
/* Recomputes the released inputs of n (and what they need). */
kiln_status kiln_ckpt_restore_inputs(kiln_run_ctx *r, kiln_node *n);
/* After n ran: releases the values nothing later needs. */
void kiln_ckpt_release_after(kiln_run_ctx *r, kiln_node *n);
/* Recomputes n itself when it was released; KILN_OK when it has a value. */
kiln_status kiln_ckpt_restore(kiln_run_ctx *r, kiln_node *n);
/* 1 when n had a value in rs that checkpointing released. */
int kiln_ckpt_released(const kiln_run_state *rs, const kiln_node *n);

#endif
