/* Internals of dynamic execution shared by dynamic.c (forward, backward, the
   workspace) and checkpointing.c (release and recompute). */
#ifndef KILN_RUNTIME_DYNAMIC_H
#define KILN_RUNTIME_DYNAMIC_H

#include "runtime/runtime.h"

/* node->checkpoint bits: marked by the user / kept by backward itself (the
   loss, the gradients of variables and of debug nodes). */
#define KILN_KEEP_USER 1
#define KILN_KEEP_INTERNAL 2

/* One forward_from call: what runs it and the checkpointing bookkeeping. */
typedef struct kiln_run_ctx {
    kiln_session *s;
    kiln_graph *g;
    const char *fn; /* public function named in messages */
    int grad_first; /* first gradient node (backward), or n_nodes */
    /* checkpointing (NULL when off), each sized for the node count */
    int *last_use; /* id of the last node consuming each node, -1 for none */
    int *stack, *next, *order; /* recompute: DFS stack, its input cursor and
                                  the post-order of the recomputed nodes */
    int *mark, stamp;
    int n_order; /* nodes recomputed for the node being computed */
} kiln_run_ctx;

/* A value of bytes for node n (NULL for bookkeeping) from g's workspace:
   a released block of the same size when there is one, else a bump
   allocation, which may grow the workspace (logged) or, in strict mode,
   fails.  NULL with the session's error (KILN_ERR_MEMORY) naming n. */
void *kiln_ws_alloc(kiln_run_ctx *r, const kiln_node *n, size_t bytes);
/* Gives n's value back to the workspace for reuse (checkpointing). */
void kiln_ws_release(kiln_graph *g, kiln_node *n);
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
/* 1 when n had a value that checkpointing released. */
int kiln_ckpt_released(const kiln_node *n);

#endif
