/* Kiln: sessions, compiled functions, the compiler, dynamic runs.
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_EXECUTION_H
#define KILN_EXECUTION_H

#include "kiln/graph.h"

KILN_DECLS_BEGIN

/* ---------------------------------------------- sessions */

/* A session's execution context: how its runs execute kernels.  Each
   session has its own, so sessions on different threads never change each
   other's settings, results or speed.  The process-wide setters below
   (kiln_set_num_threads ...) and the environment (KILN_REFERENCE,
   KILN_PROFILE) only give the defaults of sessions made afterwards. */
typedef struct kiln_session_options {
    uint64_t seed; /* initialiser RNG seed (default 42 when options NULL) */
    int threads;   /* kernel threads of the session's runs, the caller
                      included; 0 = the process default (kiln_set_num_threads,
                      else one per core); above 256 means 256 */
    /* The three switches: 1 on, -1 off, 0 the process default. */
    int reference_kernels; /* run the reference kernels (plain loops that
                              define each op) instead of the fast ones;
                              default kiln_set_reference_kernels */
    int flush_denormals;   /* default kiln_set_flush_denormals (on) */
    int profile;           /* time every kernel call (see
                              kiln_session_print_profile); default on when
                              the environment sets KILN_PROFILE=1, and such
                              a session prints its table to stderr when
                              freed */
    FILE *debug_stream;    /* where kiln_debug output of the session's runs
                              goes; NULL: kiln_set_debug_stream's, else the
                              log */
} kiln_session_options;

/* New session; NULL options gives defaults.  NULL (kiln_last_error) when
   out of memory or an option is out of range (threads negative, a switch
   not -1, 0 or 1). */
kiln_session *kiln_session_new(const kiln_session_options *opt);
/* Threads the session's runs split kernels over (0 for NULL). */
int kiln_session_threads(const kiln_session *s);
/* Frees the session, its variables, its functions and its run state of
   every graph it ran (their values and gradients); computations,
   programs and optimisers on it then fail with KILN_ERR_STATE, so each may
   be freed before or after it.  NULL is a no-op. */
void kiln_session_free(kiln_session *s);
/* Message of the session's last failed call: "" when the last call on the
   session that can fail succeeded (the error model in kiln.h). */
const char *kiln_session_error(const kiln_session *s);
/* The session's initialiser RNG (so a checkpoint can save and restore it). */
kiln_rng *kiln_session_rng(kiln_session *s);

/* The session's settings in force: the seed it was made with, its thread
   count, 1 or -1 for each switch and its debug stream (NULL: the log).
   KILN_ERR_ARG (kiln_last_error) for NULL arguments. */
kiln_status kiln_session_get_options(const kiln_session *s,
                                     kiln_session_options *opt);
/* Change one setting of the session's later runs (n as the threads option;
   on 1 or 0).  KILN_ERR_ARG for a negative n (the session's error) or a
   NULL s (kiln_last_error); profiling on gives KILN_ERR_MEMORY when its
   table cannot be allocated.  Turning profiling off drops the table. */
kiln_status kiln_session_set_threads(kiln_session *s, int n);
kiln_status kiln_session_set_reference_kernels(kiln_session *s, int on);
kiln_status kiln_session_set_flush_denormals(kiln_session *s, int on);
kiln_status kiln_session_set_profiling(kiln_session *s, int on);
kiln_status kiln_session_set_debug_stream(kiln_session *s, FILE *out);
/* Training or evaluation mode of the session's later runs (compiled and
   dynamic): 1 training (the default, as a new PyTorch module), 0
   evaluation.  Batch norm normalises with batch statistics and updates its
   running ones in training, uses the running ones in evaluation; dropout
   is the identity in evaluation.  The graph's kiln_mode leaves take the
   flag at every run, so one graph and one compiled function serve both.
   KILN_ERR_ARG (kiln_last_error) for a NULL s. */
kiln_status kiln_session_set_training(kiln_session *s, int on);
/* 1 in training, 0 in evaluation, -1 for a NULL s. */
int kiln_session_training(const kiln_session *s);
/* Seeds the random ops (dropout) of the session's later runs and restarts
   their step at 0: every run (kiln_run, or kiln_forward after kiln_feed or
   a new graph) draws at the next step, and the same seed and step give the
   same bits whatever the thread count, so two sessions seeded alike draw
   alike.  The default seed is the session's options seed.  KILN_ERR_ARG
   (kiln_last_error) for a NULL s. */
kiln_status kiln_session_set_seed(kiln_session *s, uint64_t seed);
/* The step the next run draws at (0 for a NULL s). */
uint64_t kiln_session_rng_step(const kiln_session *s);
/* Prints the session's kernel profile to out: one row per kernel (node,
   op and shape) with its total time, share, calls and time per call, most
   time first.  KILN_ERR_STATE when profiling is off, KILN_ERR_ARG
   (kiln_last_error) for NULL arguments. */
kiln_status kiln_session_print_profile(kiln_session *s, FILE *out);
/* Kernel calls the session's profile holds; -1 when profiling is off or s
   is NULL. */
long kiln_session_profile_calls(const kiln_session *s);

/* Process-wide defaults of sessions made from now on; running and existing
   sessions keep theirs.  Sets the thread count (n <= 0: one per core; at
   most 256).  Matrix products run on Kiln's threads (OpenBLAS is set to one
   thread).  Returns the new default. */
int kiln_set_num_threads(int n);
/* Sets whether sessions flush denormal results and inputs to zero while
   kernels run (1, the default: they are rounding noise in training and cost
   100x in time) or keep IEEE behaviour (0); -1 only reads.  Returns the
   default in force. */
int kiln_set_flush_denormals(int on);
/* Sets whether sessions run the reference kernels (1) or the fast ones (0,
   the default unless the environment sets KILN_REFERENCE=1); -1 only reads.
   Returns the default in force. */
int kiln_set_reference_kernels(int on);
/* Sets where sessions send kiln_debug output (NULL: the log). */
void kiln_set_debug_stream(FILE *out);

/* Number of variables and the i-th one's description. */
int kiln_session_num_variables(const kiln_session *s);
typedef struct kiln_param_info {
    const char *name;
    kiln_dtype dtype;
    kiln_shape shape;
    int trainable;
    void *data; /* the live storage */
} kiln_param_info;
/* KILN_ERR_ARG for NULL arguments (kiln_last_error) or i outside
   [0, kiln_session_num_variables) (the session's error). */
kiln_status kiln_session_variable_info(const kiln_session *s, int i,
                                       kiln_param_info *info);
/* Copies the variable's value into out (same dtype and shape) /
   sets it from t.  KILN_ERR_NOTFOUND, KILN_ERR_SHAPE, KILN_ERR_DTYPE. */
kiln_status kiln_variable_read(kiln_session *s, const char *name,
                               kiln_tensor *out);
kiln_status kiln_variable_write(kiln_session *s, const char *name,
                                const kiln_tensor *t);
/* Creates (initialised) a variable in the session if it does not exist;
   checks dtype and shape when it does.  An i32 variable takes zeros, ones
   or a KILN_INIT_VALUE truncated toward zero (KILN_ERR_ARG for one that is
   not finite or outside the i32 range). */
kiln_status kiln_session_declare(kiln_session *s, const char *name,
                                 kiln_dtype dt, kiln_shape shape,
                                 kiln_init init, int trainable);

/* ---------------------------------------------- variables */

/* Parameters (Marian's params()): kiln_session_num_variables and
   kiln_session_variable_info iterate them. */
/* Index of the variable called name, or -1 (also for NULL arguments). */
int kiln_session_find_variable(const kiln_session *s, const char *name);
/* Marks the variable name trainable or frozen.  In the dynamic path a
   variable is trained when both the session and its node say so (the node
   default is trainable; kiln_node_set_trainable(v, 0) also freezes it in the
   session).  KILN_ERR_NOTFOUND or KILN_ERR_ARG with the session's error. */
kiln_status kiln_session_set_trainable(kiln_session *s, const char *name,
                                       int trainable);
/* Prints one line per variable: "W1  f32  [4,5]  trainable  20 values",
   then the total.  KILN_ERR_ARG for NULL arguments. */
kiln_status kiln_session_print_variables(const kiln_session *s, FILE *out);

/* ---------------------------------------------- compiled functions */

/* Compiles outputs (n_out nodes) of g, fed by inputs (n_in input nodes),
   through every pass of kiln_compile_defaults() (see compiler passes).
   Variables are created in s on first use.  NULL on error
   (kiln_session_error; a failed graph's error is copied there), among them
   KILN_ERR_ARG when two assignments of one variable would run in one call
   (e.g. two optimiser steps): "variable 'W' is assigned twice ...", and
   KILN_ERR_SHAPE for a graph with symbolic axes in which a node keeps the
   size fixed ("%2 = add of [128,10] and [128,10] does not follow the
   symbolic size of the inputs ..."; docs/guide.md, "Symbolic
   dimensions"). */
kiln_function *kiln_compile(kiln_session *s, kiln_graph *g,
                            kiln_node *const *outputs, int n_out,
                            kiln_node *const *inputs, int n_in);
/* Runs f: in[i] feeds the i-th input, out[i] receives the i-th output (must
   already have its dtype and shape; NULL skips it).  Checks every shape and
   dtype first and changes nothing on error: KILN_ERR_ARG, KILN_ERR_SHAPE or
   KILN_ERR_DTYPE (kiln_session_error; kiln_last_error for a NULL f).
   Symbolic axes (kiln_input_sym) may have any size >= 0, the same in every
   input (KILN_ERR_SHAPE naming the two inputs otherwise); the outputs then
   have that size.  The first run at a size plans it (KILN_ERR_SHAPE naming
   the node when the graph has no value there, e.g. a max over an empty
   batch); the last 8 sizes stay planned, and runs at them allocate
   nothing.
   A profiling session times every kernel call (kiln_session_print_profile). */
kiln_status kiln_run(kiln_function *f, kiln_tensor *const *in,
                     kiln_tensor *const *out);
/* New tensor shaped like the i-th output of f at the size of its symbolic
   axes it ran at last (at first, the one its graph was built at); NULL
   when out of range. */
kiln_tensor *kiln_function_new_output(const kiln_function *f, int i);
/* Prints the compiled schedule (at the size it ran at last): buffers and
   one line per kernel call.
   KILN_ERR_ARG (kiln_last_error) on NULL arguments. */
kiln_status kiln_function_print(const kiln_function *f, FILE *out);
/* Frees a function (also freed with its session).  NULL, or a function
   already freed either way, is a no-op; the other calls taking a function
   refuse a freed one (kiln_run and kiln_function_print with
   KILN_ERR_STATE, kiln_last_error). */
void kiln_function_free(kiln_function *f);

/* ---------------------------------------------- compiler */

/* What kiln_compile_ex does between cloning the graph and scheduling it.
   Each pass is switched by its flag (1 on, 0 off) and runs where the
   pipeline names it; the graph is validated after every pass.  Passes never
   change results beyond float rounding, except as finite_math says.
     dce       drop nodes no output, assign or listed input needs
     cse       merge nodes with the same op, inputs and attributes, and
               constants with the same value
     fold      evaluate nodes whose inputs are all constants (reference
               kernels) when the result has at most fold_max_elements
     simplify  x*1, 1*x, x/1, x+0, x-0 -> x (x+0 turns a -0 into -0 where
               the addition gives +0); neg(neg x), permute chains, reshape
               chains, identity reshape/permute/stop_gradient; a transpose
               feeding matmul becomes its trans flag; sum(broadcast(x))
               over exactly the broadcast axes -> x * count
     gemm_acc  v - s*(a b), v + s*(a b) (either side of the add or the
               mul), v - a b and v + a b -> "matmul_acc": one GEMM with
               beta = 1 and alpha = -s, s, -1 or 1, when the 2-D matmul (and
               the mul) have no other reader and are not outputs, v has the
               product's shape and s is an f32 value of one element.  With
               plan_memory, an SGD update W - lr*(x^T dy) then accumulates
               straight into W's storage (no gradient buffer; with momentum
               the buffer's update goes into the buffer).  Must run before
               fuse, which takes the add or sub into its programs.  The
               product is no longer rounded on its own before the add.
     fuse      chains and trees of elementwise ops of one shape (inputs may
               broadcast) -> one "fused" kernel running a small program; a
               sum or reduce_max absorbs its single-consumer producers and
               reduces while the program runs; cheap elementwise values read
               only by fused kernels are recomputed inside each instead of
               stored
   plan_memory: buffers reuse the memory of dead ones (offsets 64-byte
   aligned, largest first) and elementwise ops (and matmul_acc, over its v
   when v is not also a, b or s) write over an input at its last use;
   outputs, inputs, constants and assigned values are never overwritten,
   and a variable only by the value assigned to it when nothing reads the
   variable afterwards and it is not an output.  0 gives every computed
   node its own buffer. */
typedef struct kiln_compile_options {
    int dce, cse, fold, simplify, fuse;
    int plan_memory;
    /* 1: assume no value is inf or NaN, which also allows x - x -> 0
       (NaN - NaN and inf - inf are NaN).  Default 0. */
    int finite_math;
    int64_t fold_max_elements; /* default 65536; >= 0 */
    /* Comma-separated pass names in order, e.g. "dce,simplify,fuse"; a
       pass may appear several times.  NULL: the default
       "eval_mode,dce,cse,simplify,fold,cse,simplify,bn_fold,conv_fuse,
       gemm_acc,fuse,dce". */
    const char *pipeline;
    /* Non-NULL: prints the IR (kiln_graph_print format, fused programs
       spelled out) before the first pass and after each one.  The
       environment variable KILN_DUMP=passes does the same on stderr. */
    FILE *dump;
    /* The gemm_acc pass (see above); default 1.  Last, so that older
       positional initialisers keep their meaning. */
    int gemm_acc;
    /* The conv_fuse pass: relu(conv(...)) runs as one conv kernel with
       the relu applied to its output (also when relu's gradient tests the
       conv's output); default 1. */
    int conv_fuse;
    /* 1: the function is for evaluation only (the eval_mode pass): the
       mode is 0 at every run whatever the session's (batch norm uses its
       running statistics and leaves them, dropout is the identity), which
       lets bn_fold fire.  Default 0. */
    int inference;
    /* The bn_fold pass: in an inference function, batch norm after a conv
       whose value nothing else reads is folded into the conv's weights
       and bias (one conv node); default 1. */
    int bn_fold;
} kiln_compile_options;

/* Every pass and planning on, finite_math off, the default pipeline. */
kiln_compile_options kiln_compile_defaults(void);
/* kiln_compile with options (NULL = defaults).  NULL on error with
   kiln_session_error: bad options (an unknown pass name, a negative
   fold_max_elements) give KILN_ERR_ARG, a pass that breaks the graph names
   the pass and the broken node. */
kiln_function *kiln_compile_ex(kiln_session *s, kiln_graph *g,
                               kiln_node *const *outputs, int n_out,
                               kiln_node *const *inputs, int n_in,
                               const kiln_compile_options *opt);
/* Bytes of the function's buffer block (the memory plan's peak) at the
   size it ran at last; 0 for NULL. */
size_t kiln_function_memory(const kiln_function *f);
/* Bytes the computed values would take with one buffer each (planning
   off); 0 for NULL. */
size_t kiln_function_memory_unplanned(const kiln_function *f);
/* Number of kernel calls one run makes (in-place copies that do nothing
   are not counted); -1 for NULL. */
int kiln_function_num_kernels(const kiln_function *f);

/* ---------------------------------------------- dynamic runs */

/* A graph is pure IR: running it writes nothing into it.  Each session
   keeps its own run state of every graph it runs -- fed inputs, values,
   gradients, the workspace and the modes below -- so several sessions can
   run one graph, one after the other or each in its own thread, with
   independent results, each with its own variables.  Calls that read
   results take the session whose results they read.  kiln_feed,
   kiln_forward, kiln_backward and the mode setters below may be called on
   one graph from several threads, each with its own session: kiln_backward
   builds the gradient nodes of a loss once per graph generation, under a
   lock of the graph that those calls hold for reading, and every later
   call reuses them.  Building any other node (a builder,
   kiln_optimizer_update) is not a run: no other thread may run or build
   the graph meanwhile. */

/* Sets the value of an input node for dynamic execution (copied).  Feeding
   an input again marks every node built after it as not computed: until the
   next kiln_forward recomputes them (assignments among them included) with
   the new value, their values and gradients are unavailable.  KILN_ERR_ARG
   (NULL, not an input, stale), KILN_ERR_SHAPE or KILN_ERR_DTYPE with the
   session's error (kiln_last_error for a NULL s). */
kiln_status kiln_feed(kiln_session *s, kiln_node *input, const kiln_tensor *t);
/* Computes every node of g built so far (and not yet computed), then
   applies the assignments among them; KILN_ERR_ARG when two of them assign
   the same variable. */
kiln_status kiln_forward(kiln_session *s, kiln_graph *g);
/* Computes the gradients of loss (scalar) for every variable of g the
   session trains and every node loss depends on.  Their nodes are built
   on the first call for this loss and set of trained variables in the
   graph's generation and reused by later calls from any session, so
   repeated backward does not grow the graph.  KILN_ERR_STATE before
   kiln_forward, KILN_ERR_SHAPE for a loss that is not an f32 scalar,
   KILN_ERR_ARG for NULL or foreign nodes (kiln_session_error;
   kiln_last_error for a NULL s). */
kiln_status kiln_backward(kiln_session *s, kiln_graph *g, kiln_node *loss);
/* forward then backward. */
kiln_status kiln_backprop(kiln_session *s, kiln_graph *g, kiln_node *loss);
/* Copies a computed node's value / gradient into a new tensor; NULL with the
   session's error when not yet computed. */
kiln_tensor *kiln_node_value(kiln_session *s, kiln_node *n);
kiln_tensor *kiln_node_grad(kiln_session *s, kiln_node *n);
/* Pointer to the f32 value / gradient of a node computed by s (NULL
   otherwise: NULL arguments, not computed by s, stale after kiln_feed,
   built before kiln_graph_clear), valid until the graph is cleared or s is
   freed. */
const float *kiln_node_value_f32(kiln_session *s, const kiln_node *n);
const float *kiln_node_grad_f32(kiln_session *s, const kiln_node *n);
/* Plain SGD on every trainable variable of g after kiln_backward:
   v -= lr * grad.  KILN_ERR_STATE without gradients, or with gradients an
   input fed since made stale; KILN_ERR_ARG for a NaN or infinite lr
   (nothing changes). */
kiln_status kiln_sgd_step(kiln_session *s, kiln_graph *g, float lr);

/* ---------------------------------------------- workspace and checkpointing */

/* Workspace: the memory a session's dynamic forward and backward of one
   graph take their values from, by bump allocation, all released at once
   by kiln_graph_clear.  Variables and optimiser state live in the session,
   outside it.  The settings below are the session's for that graph (kept
   across kiln_graph_clear); errors are the session's (kiln_last_error for
   a NULL s), KILN_ERR_ARG for NULL arguments. */

/* Preallocates mb MiB of workspace for s's runs of g (Marian's
   reserveWorkspaceMB) and logs "[memory] Reserving ...".  Growth beyond it
   is logged as a warning, or refused in strict mode.  KILN_ERR_ARG for mb
   0, KILN_ERR_STATE when the workspace holds values (call before s feeds
   or runs g, or after kiln_graph_clear) and KILN_ERR_MEMORY when it cannot
   be allocated. */
kiln_status kiln_session_reserve_workspace_mb(kiln_session *s, kiln_graph *g,
                                              size_t mb);
/* Strict mode (on != 0): a value that does not fit in the reservation makes
   kiln_feed / kiln_forward / kiln_backward fail with KILN_ERR_MEMORY and a
   message naming the node, instead of growing the workspace.  KILN_ERR_STATE
   when turning it on without a reservation. */
kiln_status kiln_session_set_workspace_strict(kiln_session *s, kiln_graph *g,
                                              int on);

typedef struct kiln_workspace_stats {
    size_t reserved; /* bytes held by the workspace (reservation + growth) */
    size_t used;     /* bytes handed out since the last clear: its footprint */
    size_t live;     /* bytes of values alive now (checkpointing releases) */
    size_t peak;     /* most live bytes at once since the last clear */
} kiln_workspace_stats;
/* Fills st for s's runs of g (zeros when s never ran g). */
kiln_status kiln_session_workspace_stats(kiln_session *s, const kiln_graph *g,
                                         kiln_workspace_stats *st);

/* Gradient checkpointing.  Marks n (a node of any kind) as a checkpoint:
   with checkpointing on, its value is kept through backward.  The mark is
   part of the model, like its name: every session running the graph sees
   it.  Returns n; a NULL or poisoned n is returned as is. */
kiln_node *kiln_checkpoint(kiln_node *n);
/* 1 when n is marked. */
int kiln_node_is_checkpoint(const kiln_node *n);
/* Turns checkpointing on for s's runs of g: forward
   releases every value once its last consumer has run, except leaves,
   marked nodes and nodes nothing consumes (outputs); backward recomputes a
   released value, and the segment behind it back to the nearest kept
   values, when a gradient needs it, and releases it again after its last
   use.  Gradients are bit-identical to a run without checkpointing.  After
   backward only leaves, marked nodes, the loss, outputs and the gradients of
   variables and of kiln_debug nodes keep values: kiln_node_value on a
   released node is KILN_ERR_STATE.  Turned off, later passes still
   recompute values it released when they need them. */
kiln_status kiln_session_set_checkpointing(kiln_session *s, kiln_graph *g,
                                           int on);

/* Check-finite mode (on != 0) for s's runs of g: kiln_forward and
   kiln_backward stop at the
   first node whose value (forward) or gradient (backward) holds a NaN or an
   infinity and return KILN_ERR_NUMERIC; the session's error names the node,
   its op, shape and name, the node it is the gradient of, and its inputs
   with their ranges. */
kiln_status kiln_session_set_check_finite(kiln_session *s, kiln_graph *g,
                                          int on);

/* ---------------------------------------------- debugging */

/* Marks n (Marian's debug(node, msg)): forward prints its value and
   backward its gradient, in Marian's layout:
     [2026-11-21 15:10:51] Debug: Parameter x op=variable
     [2026-11-21 15:10:51] shape=1x1 size=1 type=float32 device=cpu0 ptr=...
   bytes=64 min: 2.00000000 max: 2.00000000 l2-norm: 2.00000000
     [[   2.00000000 ]]
   ("Debug Grad:" for the gradient; dimensions longer than 6 are elided
   with "...").  Like kiln_checkpoint, the mark is part of the model: every
   session running the graph prints it, and compiled functions keep the
   node (no fusion through it).  The lines go to the log (callback or
   stderr) whatever the log level, or to the debug stream of the session
   that runs n when it has one.  Returns n (a NULL or poisoned n as is). */
kiln_node *kiln_debug(kiln_node *n, const char *msg);
/* Prints a tensor in the same layout, without timestamps, to out; limit 0
   omits the values.  NULL t or out prints nothing. */
void kiln_tensor_print(const kiln_tensor *t, const char *msg, int limit,
                       FILE *out);

KILN_DECLS_END
#endif /* KILN_EXECUTION_H */
