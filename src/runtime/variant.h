/* A compiled function at one size of its symbolic axes: its unit after the
   pass pipeline, the memory plan and the flat schedule of kernel calls over
   buffers in one block allocated when it is built, so that running it
   allocates nothing.  A function keeps one variant per size it ran at
   (runtime/function.c). */
#ifndef KILN_RUNTIME_VARIANT_H
#define KILN_RUNTIME_VARIANT_H

#include "cpu/prepared.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

typedef struct kiln_step {
    kiln_node *n;
    void *out;
    void **in;
    void *scratch; /* the kernel's scratch memory in the block, or NULL */
    kiln_cpu_prepared *prep; /* what its kernel keeps between runs, or NULL */
} kiln_step;

typedef struct kiln_assignment {
    void *dst;
    const void *src;
    size_t bytes;
} kiln_assignment;

/* A computed value that the session's gradient sync may keep in memory of
   its own (kiln_grad_sync.storage) during a run: a hooked node, or a
   buffer it takes over or a view of it; block is its buffer in the block,
   step its kernel call (-1: none). */
typedef struct kiln_external {
    int id, hook, step;
    void *block;
} kiln_external;

typedef struct kiln_variant {
    int64_t size;       /* the symbolic size, -1 for a function with none */
    unsigned long used; /* when it last ran: the cache drops the oldest */
    kiln_unit u;        /* the private graph after the passes */
    void **buf;         /* by node id of u.g */
    void *arena;        /* one block for every computed buffer */
    size_t arena_bytes; /* the memory plan's peak */
    size_t unplanned_bytes;
    int *inplace; /* by node id: input whose buffer it reuses, or -1 */
    int *storage; /* by node id: variable whose storage it is, or -1 */
    kiln_step *steps;
    int n_steps;
    kiln_assignment *assigns;
    int n_assigns;
    void **in_ptrs; /* step operand arrays */
    /* the values of the mode and rng_key leaves, set at every run from
       the session (runtime/mode.c) */
    int32_t mode;
    int32_t key[4];
    int hooked; /* some node has a hook: runs call the session's sync */
    int trains; /* some node assigns a trainable variable */
    kiln_external *ext;
    int n_ext;
} kiln_variant;

/* Moves every hooked node (kiln_node.hook) of g to just after its last
   input and renumbers the nodes, so that a gradient's synchronisation
   starts as soon as backward computed it rather than where the optimiser
   built it.  KILN_ERR_MEMORY (g unchanged) when out of memory. */
kiln_status kiln_schedule_hooks(kiln_graph *g);

/* 1 when node id of v runs no kernel: a copy planned over its own input. */
int kiln_variant_noop(const kiln_variant *v, int id);

/* Finds v's values that a gradient sync may keep (kiln_external): each
   hooked node with the buffers below it that hold its value and are read
   by nothing else, and the views of it.  KILN_ERR_MEMORY when out of
   memory. */
kiln_status kiln_hooks_find_storage(kiln_variant *v);
/* Points v's external values at the memory sync offers for them, for one
   run; kiln_hooks_unbind points them back at the block. */
void kiln_hooks_bind(kiln_variant *v, const kiln_grad_sync *sync);
void kiln_hooks_unbind(kiln_variant *v);

/* Runs the pipeline of opt over u (taken: freed on error) and plans it.
   NULL on error with the session's error, prefixed by what ("kiln_compile",
   "kiln_run: at symbolic size 7"). */
kiln_variant *kiln_variant_new(kiln_session *s, kiln_unit *u, int64_t size,
                               const kiln_compile_options *opt,
                               const char *what);
void kiln_variant_free(kiln_variant *v);
/* Runs v on in (shapes and dtypes checked by the caller) into out, its
   first n_out outputs (NULL entries skipped; the unit's outputs after them
   are the graph's effects, run for their assignments); refuses bad leaf values
   before any kernel runs, so the variables are untouched then (KILN_ERR_ARG,
   the session's error). */
kiln_status kiln_variant_run(kiln_session *s, kiln_variant *v,
                             kiln_tensor *const *in, kiln_tensor *const *out,
                             int n_out);
/* Shared writes (phased.c).  When v's step i writes in place over a
   variable the sync shares between processes (kiln_grad_sync's phases):
   runs it and the shared writes right after it in phases, and returns
   how many steps ran (their inputs bound, their sync after them left to
   the caller); 0 when step i is no such write (nothing ran); -1 with *rc
   (and the session's error) on failure. */
int kiln_variant_run_shared(kiln_session *s, const kiln_grad_sync *sync,
                            kiln_variant *v, int i, kiln_status *rc);
/* Refuses a run whose update of a shared variable is a copy after it (a
   write in turns needs the update in place): KILN_ERR_STATE with the
   session's error, else KILN_OK. */
kiln_status kiln_variant_check_shared(kiln_session *s, kiln_variant *v);

/* kiln_function_print's listing of v. */
void kiln_variant_print(const kiln_variant *v, FILE *out);

#endif
