/* Sessions, compiled functions and dynamic execution. */
#ifndef KILN_RUNTIME_RUNTIME_H
#define KILN_RUNTIME_RUNTIME_H

#include "base/tensor.h"
#include "cpu/threads.h"
#include "graph/graph.h"

typedef struct kiln_var {
    char *name;
    kiln_dtype dtype;
    kiln_shape shape;
    void *data; /* 64-byte aligned */
    int trainable;
    /* data is pages of its own (kiln_big_alloc_pages: variables of
       KILN_VAR_PAGES_MIN bytes or more), which src/dist/ may share */
    int own_pages;
} kiln_var;

enum { KILN_VAR_PAGES_MIN = 1 << 12 };

/* Called by kiln_session_free for an object that keeps a pointer to the
   session (see kiln_session_attach). */
typedef void (*kiln_session_forget_fn)(void *holder);

/* What a session keeps of a graph it runs dynamically (runtime/dynamic.h). */
typedef struct kiln_run_state kiln_run_state;

typedef struct kiln_session_holder {
    void *holder;
    kiln_session_forget_fn forget;
} kiln_session_holder;

/* Gradient synchronisation across processes, registered on a session by a
   later layer (src/dist/, data-parallel training) so that nothing below it
   depends on the transport.  Every callback gets ctx; those returning a
   status have recorded the session's error on failure.
     build           the optimiser's graph form (kiln_optimizer_build_step):
                     may replace grads[i] (of vars[i]) by hooked nodes
                     (kiln_node.hook) whose value is the synchronised one
     computed        a run computed a hooked node into data
     needed          a compiled run is about to read a hooked node: data
                     must hold the synchronised value on return
     storage         where hooked node hook's value (bytes) may be kept
                     during the next compiled run: memory of the sync's,
                     valid until the sync is unregistered, or NULL (the
                     run's own buffer); may be NULL itself
     progress        after every kernel of a compiled or dynamic run that
                     has a hook, to let transfers in flight advance
     backward_begin  kiln_backward is about to compute grads (of vars)
     node_done       kiln_backward computed node n into data
     before_update   kiln_optimizer_update is about to read grads, whose
                     values are values[i]: they must be synchronised in
                     place on return
   Optimiser state sharding (ZeRO stage 1); shard NULL or returning 0
   leaves every update whole:
     shard           1 when this process updates only part of vars: the
                     flat range [lo[i], hi[i]) of each vars[i] (together
                     one contiguous range of the variables laid end to
                     end, never empty); 0 when it updates all; -1 with g's
                     error recorded
     shard_state     the state variable name (absent when lo == hi) holds
                     [lo, hi) of the flattened optimiser slot of var
     gather          a node of total values whose value is flat (this
                     process's range, at lo) completed by every other
                     process's range: a hooked node, gathered when
                     computed, in compiled and dynamic runs alike
   Shared variables (processes of one machine updating one copy); NULL
   build_local leaves every step to build:
     build_local     the optimiser's graph form of a plain SGD step (the
                     update W - lr * g, nothing else): 1 when it took
                     the step (replacing grads[i] by this process's
                     share of the sum, and the variables' storage to be
                     shared), 0 to leave it to build; -1 with g's error
     phases          a compiled run is about to write var in place: the
                     number of phases the write runs in (0: none, run
                     as usual), -1 with the session's error
     phase           the block (of as many as phases) this process
                     writes in phase p, after waiting for every process
                     to reach it; -1 with the session's error
     sum_into        the write of var in phase p (can: its kernel adds a
                     change d to var, d not reading var, as var - lr g
                     does): where d goes (0: into var, in place, as
                     always when !can; 1: into *acc, var's shape,
                     replacing it; 2: added to *acc; 3: var += (*acc +
                     d)); -1 with the session's error
     phase_end       the write of var is over here; with var NULL (at
                     the end of every run), returns once every
                     process's writes are over */
typedef struct kiln_grad_sync {
    void *ctx;
    void (*build)(void *ctx, kiln_graph *g, kiln_node *const *vars,
                  kiln_node **grads, int n);
    kiln_status (*computed)(void *ctx, int hook, void *data);
    kiln_status (*needed)(void *ctx, int hook, void *data);
    void *(*storage)(void *ctx, int hook, size_t bytes);
    void (*progress)(void *ctx);
    void (*backward_begin)(void *ctx, kiln_node *const *grads, int n);
    void (*node_done)(void *ctx, const kiln_node *n, void *data);
    kiln_status (*before_update)(void *ctx, kiln_node *const *grads,
                                 void *const *values, int n);
    int (*shard)(void *ctx, kiln_graph *g, kiln_node *const *vars, int n,
                 int64_t *lo, int64_t *hi);
    void (*shard_state)(void *ctx, const char *name, const kiln_node *var,
                        int64_t lo, int64_t hi);
    kiln_node *(*gather)(void *ctx, kiln_graph *g, kiln_node *flat, int64_t lo,
                         int64_t total);
    int (*build_local)(void *ctx, kiln_graph *g, kiln_node *const *vars,
                       kiln_node **grads, int n);
    int (*phases)(void *ctx, kiln_var *var);
    int (*phase)(void *ctx, int p);
    int (*sum_into)(void *ctx, kiln_var *var, int p, int can, float **acc);
    kiln_status (*phase_end)(void *ctx, kiln_var *var);
} kiln_grad_sync;

struct kiln_session {
    uint64_t id; /* unique in the process, never reused */
    kiln_var *vars;
    int n_vars, cap_vars;
    kiln_rng rng;
    uint64_t seed;      /* the initialiser seed it was made with */
    kiln_exec_ctx exec; /* how its runs execute kernels (runtime/exec.c) */
    /* bound to the graph's mode and rng_key leaves at every run
       (runtime/mode.c): 1 training, 0 evaluation; the random ops' seed and
       the step the next run draws at */
    int training;
    uint64_t rng_seed, rng_step;
    int profile_to_stderr; /* profiling from KILN_PROFILE: print when freed */
    char err[KILN_ERRMSG_MAX];
    kiln_function **funcs;
    int n_funcs, cap_funcs;
    kiln_session_holder *holders;
    int n_holders, cap_holders;
    struct kiln_var_index *index; /* names of vars, see kiln_session_find */
    kiln_run_state **runs;        /* one per graph run dynamically */
    int n_runs, cap_runs;
    const kiln_grad_sync *sync; /* NULL: gradients stay local */
};

/* Records that holder keeps a pointer to s: kiln_session_free calls
   forget(holder) before freeing anything else, so the two may be freed in
   either order.  KILN_ERR_MEMORY with the session's error (naming fn) when
   out of memory; attaching a holder twice keeps one entry. */
kiln_status kiln_session_attach(kiln_session *s, void *holder,
                                kiln_session_forget_fn forget, const char *fn);
/* Undoes kiln_session_attach (the holder is freed or moves to another
   session).  NULL s, or a holder not attached, is a no-op. */
void kiln_session_detach(kiln_session *s, void *holder);
/* The holders attached with forget, one per call: *cursor starts at 0;
   NULL after the last. */
void *kiln_session_next_holder(const kiln_session *s,
                               kiln_session_forget_fn forget, int *cursor);

/* Sets up s->exec (and s->seed) from opt and the process defaults;
   KILN_ERR_ARG or KILN_ERR_MEMORY with kiln_last_error. */
kiln_status kiln_session_exec_init(kiln_session *s,
                                   const kiln_session_options *opt);
/* Frees the profile, printing it first when it came from KILN_PROFILE. */
void kiln_session_exec_free(kiln_session *s);

/* Starts a public call on s that can record an error on it: clears the
   session's message, so that a success leaves "" (the rule in kiln.h), and
   returns KILN_OK; KILN_ERR_ARG with kiln_last_error ("fn: session is
   NULL") for a NULL s. */
kiln_status kiln_session_begin(kiln_session *s, const char *fn);
/* Records the session's error message and returns st. */
kiln_status kiln_session_fail(kiln_session *s, kiln_status st, const char *fmt,
                              ...) KILN_PRINTF(3, 4);
kiln_var *kiln_session_find(const kiln_session *s, const char *name);
/* Room for extra more variables without reallocating; KILN_ERR_MEMORY
   (nothing changed) when out of memory.  Sets no message. */
kiln_status kiln_session_reserve(kiln_session *s, int extra);
/* Fills v with a copy of name and zeroed, 64-byte aligned storage, not yet
   in any session; KILN_ERR_MEMORY (v untouched) when out of memory. */
kiln_status kiln_var_alloc(kiln_var *v, const char *name, kiln_dtype dt,
                           kiln_shape shape, int trainable);
/* Frees what kiln_var_alloc gave v. */
void kiln_var_release(kiln_var *v);
/* The session variable behind a variable node, created and initialised on
   first use; NULL with the session's error on a dtype or shape clash. */
kiln_var *kiln_session_bind(kiln_session *s, const kiln_node *v);

/* Records where an owner (a computation, a program) keeps f, so that
   freeing f -- by the owner or with the session -- sets *owner to NULL and
   the two may be freed in either order. */
void kiln_function_set_owner(kiln_function *f, kiln_function **owner);

/* The key a run's rng_key leaves take: s's random seed and step (low and
   high words), then advances the step, so each run draws afresh. */
void kiln_session_next_key(kiln_session *s, int32_t key[4]);

/* Frees every run state of s (kiln_session_free). */
void kiln_run_free_all(kiln_session *s);
/* Dynamic graphs: after kiln_backward of g with s, the variables the
   gradients are for (trainable both as nodes and in s) whose gradient has a
   value, and their gradient nodes, into vars and grads (each room for
   g->n_vars); returns their count.  -1 with the session's error naming fn
   when s holds no gradients of g, or holds stale ones (an input was fed
   since). */
int kiln_dynamic_trained(kiln_session *s, kiln_graph *g, const char *fn,
                         kiln_node **vars, kiln_node **grads);

/* Prints a debug summary of a node's value (what = "value"/"gradient") to
   out, or to the log when out is NULL. */
void kiln_debug_print(FILE *out, const kiln_node *n, const void *data,
                      const char *what);

#endif
