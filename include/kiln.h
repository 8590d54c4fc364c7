/* Kiln: a C11 library for deep learning.
 *
 * Build tensor graphs, differentiate them into more graph, compile and run
 * them on the CPU.  Every exported name starts with kiln_ or KILN_.
 *
 * Error model: graph builders never abort.  The first error is recorded in
 * the graph (kiln_graph_error) and later builders return a poisoned node, so
 * a chain of calls can be checked once at the end.  Functions that can fail
 * return a kiln_status; the message is on the object they were given
 * (kiln_graph_error, kiln_session_error) or, for functions with neither
 * or when that object is itself NULL, in kiln_last_error() ("kiln_feed:
 * session is NULL").  A builder given a NULL graph returns NULL and says so
 * in kiln_last_error() ("kiln_add: graph is NULL").
 *
 * Threads: a graph, a session and what belongs to them (its functions,
 * optimisers, programs, computations) are used by one thread at a time.
 * Separate sessions on separate graphs may run in separate threads at once:
 * each gives bitwise the values it gives run alone, since every run splits
 * its work by its own session's thread count, never by timing.  The
 * process-wide setters kiln_set_num_threads and kiln_set_flush_denormals
 * are safe to call at any time and only give the defaults of sessions made
 * afterwards.  The log level and callback (kiln_set_log_level,
 * kiln_set_log_callback) are the only other global state: set them before
 * starting threads; the callback is called on the thread that logs, so it
 * must be thread-safe when sessions run in several threads.
 * kiln_last_error() is per thread.  OpenBLAS is set to one thread: Kiln
 * threads its matrix products itself.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden symbols: what this header declares is
   all that libkiln.so exports. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---------------------------------------------------------------- basics */

#define KILN_MAX_DIMS 8
/* Largest element count of any shape (2^40); counting zero dimensions as 1,
   the product of a shape's dimensions never exceeds it, so no element count,
   stride or byte size can overflow. */
#define KILN_MAX_NUMEL ((int64_t)1 << 40)

typedef enum kiln_status {
    KILN_OK = 0,
    KILN_ERR_ARG,    /* bad argument: NULL, wrong shape, wrong dtype */
    KILN_ERR_SHAPE,  /* shapes do not agree */
    KILN_ERR_DTYPE,  /* dtypes do not agree or are unsupported */
    KILN_ERR_STATE,  /* call made in the wrong state (e.g. grad before backward)
                      */
    KILN_ERR_MEMORY, /* out of memory or workspace */
    KILN_ERR_IO,     /* file missing, unreadable, truncated or corrupt */
    KILN_ERR_NOTFOUND, /* a name that does not exist */
    KILN_ERR_NUMERIC,  /* NaN or infinity found, gradient check failed */
} kiln_status;

typedef enum kiln_dtype {
    KILN_F32 = 0,
    KILN_I32 = 1,
    KILN_F16 = 2,  /* reserved */
    KILN_BF16 = 3, /* reserved */
    KILN_F64 = 4,  /* reserved */
    KILN_U8 = 5,   /* reserved */
} kiln_dtype;

/* A tensor shape: ndim dimensions (0 for a scalar), each >= 0. */
typedef struct kiln_shape {
    int ndim;
    int64_t d[KILN_MAX_DIMS];
} kiln_shape;

/* KILN_SHAPE(128, 784) builds a kiln_shape; KILN_SCALAR is the 0-d shape. */
#define KILN_SHAPE(...)                                                        \
    ((kiln_shape){                                                             \
        .ndim = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),     \
        .d = {__VA_ARGS__}})
#define KILN_SCALAR ((kiln_shape){.ndim = 0, .d = {0}})

/* Axis sets are bit masks: KILN_AXIS(0) | KILN_AXIS(2). */
#define KILN_AXIS(i) (1u << (i))
#define KILN_ALL_AXES 0xFFu

/* Name of a status code, e.g. "shape error". Never NULL. */
const char *kiln_status_str(kiln_status st);
/* Bytes per element of a dtype (0 for an unknown dtype). */
size_t kiln_dtype_size(kiln_dtype dt);
/* Name of a dtype: "f32", "i32", ... ("?" for an unknown dtype). */
const char *kiln_dtype_name(kiln_dtype dt);
/* Number of elements of a shape (1 for a scalar); -1 for an invalid shape
   (ndim outside [0, KILN_MAX_DIMS], a negative dimension, or a product of
   dimensions above KILN_MAX_NUMEL). */
int64_t kiln_shape_numel(kiln_shape s);
/* Writes "[128,784]" into buf (always terminated); returns buf. */
char *kiln_shape_str(kiln_shape s, char *buf, size_t n);
/* Message of the last error raised by a function with no object to hold it
   (tensor constructors, file readers).  Thread-local; never NULL. */
const char *kiln_last_error(void);

/* ---------------------------------------------------------------- tensors */

/* A host tensor: dtype, shape, contiguous row-major data, owned or wrapping
   caller memory. */
typedef struct kiln_tensor kiln_tensor;

/* New zero-filled tensor owning its data; NULL (kiln_last_error) on a bad
   shape, dtype or out of memory. */
kiln_tensor *kiln_tensor_new(kiln_dtype dt, kiln_shape shape);
/* Tensor wrapping caller memory (not freed by kiln_tensor_free); NULL on bad
   arguments. */
kiln_tensor *kiln_tensor_wrap(kiln_dtype dt, kiln_shape shape, void *data);
/* New owned f32 tensor copied from values (numel(shape) floats). */
kiln_tensor *kiln_tensor_from_f32(kiln_shape shape, const float *values);
/* Frees the tensor (and its data when owned).  NULL is a no-op. */
void kiln_tensor_free(kiln_tensor *t);
kiln_dtype kiln_tensor_dtype(const kiln_tensor *t);
kiln_shape kiln_tensor_shape(const kiln_tensor *t);
int64_t kiln_tensor_numel(const kiln_tensor *t);
/* Pointer to the data (NULL for a NULL tensor). */
void *kiln_tensor_data(const kiln_tensor *t);
/* Typed data pointers: NULL when t is NULL or of another dtype. */
float *kiln_tensor_f32(const kiln_tensor *t);
int32_t *kiln_tensor_i32(const kiln_tensor *t);

/* ---------------------------------------------------------------- RNG */

/* A small seeded generator (PCG32); the same seed gives the same stream on
   every machine. */
typedef struct kiln_rng {
    uint64_t state, inc;
} kiln_rng;

/* Seeds r (a NULL r is ignored). */
void kiln_rng_seed(kiln_rng *r, uint64_t seed);
/* Next 32 random bits (0 for a NULL r). */
uint32_t kiln_rng_u32(kiln_rng *r);
/* Uniform in [0, 1). */
double kiln_rng_uniform(kiln_rng *r);
/* Standard normal (Box-Muller). */
double kiln_rng_normal(kiln_rng *r);

/* ---------------------------------------------------------------- graphs */

typedef struct kiln_graph kiln_graph;
typedef struct kiln_node kiln_node;
typedef struct kiln_session kiln_session;
typedef struct kiln_function kiln_function;

/* Variable initialisers. */
typedef enum kiln_init_kind {
    KILN_INIT_ZEROS,
    KILN_INIT_ONES,
    KILN_INIT_VALUE,          /* every element = a */
    KILN_INIT_VALUES,         /* copy of numel floats from values */
    KILN_INIT_UNIFORM,        /* uniform in [a, b) */
    KILN_INIT_NORMAL,         /* mean a, standard deviation b */
    KILN_INIT_GLOROT_UNIFORM, /* uniform(+-sqrt(6/(fan_in+fan_out))) */
} kiln_init_kind;

typedef struct kiln_init {
    kiln_init_kind kind;
    double a, b;
    const float *values;
} kiln_init;

#define kiln_init_zeros() ((kiln_init){KILN_INIT_ZEROS, 0, 0, NULL})
#define kiln_init_ones() ((kiln_init){KILN_INIT_ONES, 0, 0, NULL})
#define kiln_init_value(v) ((kiln_init){KILN_INIT_VALUE, (v), 0, NULL})
#define kiln_init_values(p) ((kiln_init){KILN_INIT_VALUES, 0, 0, (p)})
#define kiln_init_uniform(lo, hi)                                              \
    ((kiln_init){KILN_INIT_UNIFORM, (lo), (hi), NULL})
#define kiln_init_normal(mean, std)                                            \
    ((kiln_init){KILN_INIT_NORMAL, (mean), (std), NULL})
#define kiln_init_glorot_uniform()                                             \
    ((kiln_init){KILN_INIT_GLOROT_UNIFORM, 0, 0, NULL})

/* Fills data (numel elements of shape) from an initialiser, drawing from rng.
   Returns KILN_ERR_ARG (kiln_last_error) on a bad initialiser: an unknown
   kind, NULL values, a uniform range that is not finite with a <= b, a
   normal whose mean or deviation is not finite or whose deviation is < 0. */
kiln_status kiln_init_fill(kiln_init init, kiln_shape shape, float *data,
                           kiln_rng *rng);

/* New empty graph; NULL only when out of memory. */
kiln_graph *kiln_graph_new(void);
/* Frees the graph and every node in it.  NULL is a no-op. */
void kiln_graph_free(kiln_graph *g);
/* Drops every node (one arena reset) and clears the error; variables live in
   sessions and are kept.  A node pointer kept from before the clear is
   refused by builders (graph error "...: operand node %3 was built before
   kiln_graph_clear") and by the run-time functions, and reads as NULL;
   detection is certain for nodes of the build just cleared. */
void kiln_graph_clear(kiln_graph *g);
/* KILN_OK, or the first error recorded while building. */
kiln_status kiln_graph_status(const kiln_graph *g);
/* Message of the first error ("" when none). */
const char *kiln_graph_error(const kiln_graph *g);
/* Number of nodes built so far. */
int kiln_graph_node_count(const kiln_graph *g);
/* Writes the graph in Graphviz dot: one box per node labelled with op, id,
   shape and trainable flag.  KILN_ERR_ARG on NULL arguments. */
kiln_status kiln_graph_write_dot(const kiln_graph *g, FILE *out);
/* Prints the IR, one line per node: "%7 = add(%3, %6) f32[128,600]".
   KILN_ERR_ARG (kiln_last_error) on NULL arguments. */
kiln_status kiln_graph_print(const kiln_graph *g, FILE *out);

/* Node introspection.  A NULL node gives zeros / "". */
int kiln_node_id(const kiln_node *n);
const char *kiln_node_op_name(const kiln_node *n);
kiln_dtype kiln_node_dtype(const kiln_node *n);
kiln_shape kiln_node_shape(const kiln_node *n);
const char *kiln_node_name(const kiln_node *n);
/* Number of inputs and the i-th input (NULL when out of range). */
int kiln_node_num_inputs(const kiln_node *n);
kiln_node *kiln_node_input(const kiln_node *n, int i);
/* Gives the node a name (copied) shown by print and dot; returns n. */
kiln_node *kiln_node_set_name(kiln_node *n, const char *name);

/* ---------------------------------------------------------------- leaves */

/* Input fed on every run (nGraph Parameter, placeholder). */
kiln_node *kiln_input(kiln_graph *g, const char *name, kiln_dtype dt,
                      kiln_shape shape);
/* Scalar f32 constant. */
kiln_node *kiln_scalar(kiln_graph *g, float v);
/* Constant tensor with values copied from data (numel elements of dt). */
kiln_node *kiln_constant(kiln_graph *g, kiln_dtype dt, kiln_shape shape,
                         const void *data);
/* Constant tensor with every element equal to v. */
kiln_node *kiln_fill(kiln_graph *g, kiln_shape shape, float v);
/* Trainable variable kept in the session under name.  Nodes in any graph
   with the same name share one storage. */
kiln_node *kiln_variable(kiln_graph *g, const char *name, kiln_dtype dt,
                         kiln_shape shape, kiln_init init);
/* Marks a variable trainable or not (default trainable); returns v. */
kiln_node *kiln_node_set_trainable(kiln_node *v, int trainable);
int kiln_node_trainable(const kiln_node *v);

/* ---------------------------------------------------------------- elementwise
 */

/* Unary elementwise ops on f32. */
kiln_node *kiln_neg(kiln_graph *g, kiln_node *x);
kiln_node *kiln_abs(kiln_graph *g, kiln_node *x);
kiln_node *kiln_sign(kiln_graph *g, kiln_node *x);
kiln_node *kiln_exp(kiln_graph *g, kiln_node *x);
kiln_node *kiln_log(kiln_graph *g, kiln_node *x);
kiln_node *kiln_sqrt(kiln_graph *g, kiln_node *x);
kiln_node *kiln_sin(kiln_graph *g, kiln_node *x);
kiln_node *kiln_cos(kiln_graph *g, kiln_node *x);
kiln_node *kiln_tanh(kiln_graph *g, kiln_node *x);
kiln_node *kiln_sigmoid(kiln_graph *g, kiln_node *x);
kiln_node *kiln_relu(kiln_graph *g, kiln_node *x);
kiln_node *kiln_erf(kiln_graph *g, kiln_node *x);
/* x * s for a float s (a constant scalar broadcast). */
kiln_node *kiln_scale(kiln_graph *g, kiln_node *x, float s);
/* gelu, tanh approximation: 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))). */
kiln_node *kiln_gelu(kiln_graph *g, kiln_node *x);
/* gelu, exact form: 0.5x(1+erf(x/sqrt 2)). */
kiln_node *kiln_gelu_erf(kiln_graph *g, kiln_node *x);

/* Binary elementwise ops with numpy broadcasting. */
kiln_node *kiln_add(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_sub(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_mul(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_div(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_pow(kiln_graph *g, kiln_node *a, kiln_node *b);
/* max / min (and relu) propagate NaN, and a tie splits the gradient evenly
   between a and b, as torch.maximum / torch.minimum. */
kiln_node *kiln_max(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_min(kiln_graph *g, kiln_node *a, kiln_node *b);
/* Comparisons give f32 1.0 where true, 0.0 where false; no gradient. */
kiln_node *kiln_lt(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_le(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_gt(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_ge(kiln_graph *g, kiln_node *a, kiln_node *b);
kiln_node *kiln_eq(kiln_graph *g, kiln_node *a, kiln_node *b);
/* where(cond != 0, a, b), all three broadcast together. */
kiln_node *kiln_select(kiln_graph *g, kiln_node *cond, kiln_node *a,
                       kiln_node *b);

/* ---------------------------------------------------------------- reductions
 */

/* Sum / max / mean over the axes in the mask; keepdims keeps them as size 1.
   KILN_ALL_AXES reduces everything. */
kiln_node *kiln_sum(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims);
kiln_node *kiln_reduce_max(kiln_graph *g, kiln_node *x, unsigned axes,
                           int keepdims);
kiln_node *kiln_mean(kiln_graph *g, kiln_node *x, unsigned axes, int keepdims);
/* Index of the largest element along axis, or of the first NaN (i32, axis
   removed); no gradient. */
kiln_node *kiln_argmax(kiln_graph *g, kiln_node *x, int axis);

/* ---------------------------------------------------------------- movement */

/* Same data, new shape (numel must match; one dimension may be -1). */
kiln_node *kiln_reshape(kiln_graph *g, kiln_node *x, kiln_shape shape);
/* Output axis i is input axis perm[i]; perm has ndim entries. */
kiln_node *kiln_permute(kiln_graph *g, kiln_node *x, const int *perm);
/* Swaps the last two axes. */
kiln_node *kiln_transpose(kiln_graph *g, kiln_node *x);
/* numpy broadcast of x to shape. */
kiln_node *kiln_broadcast_to(kiln_graph *g, kiln_node *x, kiln_shape shape);
/* nGraph Broadcast: the output has shape; the axes in new_axes are new and
   the remaining ones are x's, in order. */
kiln_node *kiln_broadcast(kiln_graph *g, kiln_node *x, kiln_shape shape,
                          unsigned new_axes);
/* x[start[i]:stop[i]] on every axis (negative values count from the end). */
kiln_node *kiln_slice(kiln_graph *g, kiln_node *x, const int64_t *start,
                      const int64_t *stop);
/* Concatenation of n nodes along axis. */
kiln_node *kiln_concat(kiln_graph *g, kiln_node *const *xs, int n, int axis);
/* Pads lo[i] before and hi[i] after every axis with value. */
kiln_node *kiln_pad(kiln_graph *g, kiln_node *x, const int64_t *lo,
                    const int64_t *hi, float value);

/* ---------------------------------------------------------------- contraction
 */

/* Matrix product of the last two axes, leading (batch) axes broadcast;
   trans_a/trans_b transpose an operand's last two axes. 1-D operands are not
   accepted: reshape them. */
kiln_node *kiln_matmul(kiln_graph *g, kiln_node *a, kiln_node *b, int trans_a,
                       int trans_b);
/* nGraph Dot: contracts the last n axes of a with the first n of b. */
kiln_node *kiln_dot(kiln_graph *g, kiln_node *a, kiln_node *b, int n);

/* ---------------------------------------------------------------- conversion
 */

/* i32 labels -> f32 one-hot with a new last axis of size depth; no gradient.
   Labels outside [0, depth) give a zero row. */
kiln_node *kiln_one_hot(kiln_graph *g, kiln_node *labels, int depth);
/* Converts between f32 and i32 (truncation toward zero). */
kiln_node *kiln_cast(kiln_graph *g, kiln_node *x, kiln_dtype dt);
/* Identity in the forward pass; blocks gradients. */
kiln_node *kiln_stop_gradient(kiln_graph *g, kiln_node *x);

/* ---------------------------------------------------------------- composites
 */

/* Numerically stable softmax / log-softmax along axis (negative counts from
   the end); f32 only, a bad axis poisons the graph. */
kiln_node *kiln_softmax(kiln_graph *g, kiln_node *x, int axis);
kiln_node *kiln_log_softmax(kiln_graph *g, kiln_node *x, int axis);
/* x W + b, with b broadcast over rows. */
kiln_node *kiln_affine(kiln_graph *g, kiln_node *x, kiln_node *w, kiln_node *b);
/* nGraph's clipped cross-entropy: -Sum(Log(Maximum(p, exp(log_min))) *
   onehot) / n, with n an f32 scalar node (e.g. the batch size as an input);
   any other n poisons the graph. */
kiln_node *kiln_cross_entropy(kiln_graph *g, kiln_node *probs,
                              kiln_node *onehot, kiln_node *n, float log_min);
/* Mean over the batch of -log softmax(logits)[label]; labels i32 [N],
   logits f32 [N, C].  NaN for N = 0.  A label outside [0, C) is a run-time
   error (KILN_ERR_ARG from kiln_run / kiln_forward / kiln_backward). */
kiln_node *kiln_softmax_cross_entropy(kiln_graph *g, kiln_node *logits,
                                      kiln_node *labels);
/* How a loss combines its per-sample terms. */
typedef enum kiln_reduction {
    KILN_REDUCE_MEAN,
    KILN_REDUCE_SUM
} kiln_reduction;
/* kiln_softmax_cross_entropy with a choice of mean or sum over the batch. */
kiln_node *kiln_softmax_cross_entropy_reduce(kiln_graph *g, kiln_node *logits,
                                             kiln_node *labels,
                                             kiln_reduction reduction);
/* PopXL's nll_loss_with_softmax_grad: from probabilities probs [N, C] (a
   softmax output) and i32 labels [N], *loss = mean(-log probs[label]) and
   *dlogits = (probs - onehot(labels)) / N, the loss's gradient with respect
   to the logits behind the softmax.  A label outside [0, C) is a run-time
   error.  KILN_OK or the graph's error (both outputs poisoned). */
kiln_status kiln_nll_loss_with_softmax_grad(kiln_graph *g, kiln_node *probs,
                                            kiln_node *labels, kiln_node **loss,
                                            kiln_node **dlogits);
/* Mean of -(y log p + (1-y) log(1-p)), p clipped to [eps, 1-eps]. */
kiln_node *kiln_binary_cross_entropy(kiln_graph *g, kiln_node *p, kiln_node *y);

/* ---------------------------------------------------------------- state ops */

/* After a run, the variable takes value (computed before any assignment of
   the same run).  The node's own value is the new value. */
kiln_node *kiln_assign(kiln_graph *g, kiln_node *variable, kiln_node *value);
/* Groups nodes so that compiling the group runs them all (ngraph doall). */
kiln_node *kiln_doall(kiln_graph *g, kiln_node *const *xs, int n);

/* ---------------------------------------------------------------- autodiff */

/* dy/dx for a scalar y, as a new node of x's shape.  A zero node when y does
   not depend on x. */
kiln_node *kiln_grad(kiln_graph *g, kiln_node *y, kiln_node *x);
/* Gradients of y (seeded with delta, of y's shape; NULL delta means 1 for a
   scalar y) with respect to n nodes xs, written to out[0..n-1]; the
   gradients share intermediate nodes.  KILN_OK or the graph's error. */
kiln_status kiln_grads(kiln_graph *g, kiln_node *y, kiln_node *delta,
                       kiln_node *const *xs, int n, kiln_node **out);
/* nGraph backprop_node(x, delta): the adjoint of x with y seeded by delta. */
kiln_node *kiln_backprop_node(kiln_graph *g, kiln_node *y, kiln_node *delta,
                              kiln_node *x);

/* ---------------------------------------------------------------- sessions */

typedef struct kiln_session_options {
    uint64_t seed; /* initialiser RNG seed (default 42 when options NULL) */
    int threads;   /* kernel threads of the session's runs, the caller
                      included; 0 = the process default (kiln_set_num_threads,
                      else one per core); above 256 means 256 */
} kiln_session_options;

/* New session; NULL options gives defaults.  It keeps the thread count and
   denormal mode it was made with.  NULL (kiln_last_error) when out of
   memory or threads is negative. */
kiln_session *kiln_session_new(const kiln_session_options *opt);
/* Threads the session's runs split kernels over (0 for NULL). */
int kiln_session_threads(const kiln_session *s);
/* Frees the session, its variables and its functions.  Graphs run with it
   drop their values (kiln_node_value_f32 gives NULL); computations,
   programs and optimisers on it then fail with KILN_ERR_STATE, so each may
   be freed before or after it.  NULL is a no-op. */
void kiln_session_free(kiln_session *s);
/* Message of the last error of the session ("" when none). */
const char *kiln_session_error(const kiln_session *s);
/* The session's initialiser RNG (so a checkpoint can save and restore it). */
kiln_rng *kiln_session_rng(kiln_session *s);

/* Sets the default thread count of sessions made from now on (n <= 0: one
   per core; at most 256); running and existing sessions keep theirs.
   Matrix products run on Kiln's threads (OpenBLAS is set to one thread).
   Returns the new default. */
int kiln_set_num_threads(int n);
/* Sets whether sessions made from now on flush denormal results and inputs
   to zero while kernels run (1, the default: they are rounding noise in
   training and cost 100x in time) or keep IEEE behaviour (0); -1 only
   reads.  Returns the default in force. */
int kiln_set_flush_denormals(int on);

/* Number of variables and the i-th one's description. */
int kiln_session_num_variables(const kiln_session *s);
typedef struct kiln_param_info {
    const char *name;
    kiln_dtype dtype;
    kiln_shape shape;
    int trainable;
    void *data; /* the live storage */
} kiln_param_info;
/* KILN_ERR_ARG (kiln_last_error) for NULL arguments or i outside
   [0, kiln_session_num_variables). */
kiln_status kiln_session_variable_info(const kiln_session *s, int i,
                                       kiln_param_info *info);
/* Copies the variable's value into out (same dtype and shape) /
   sets it from t.  KILN_ERR_NOTFOUND, KILN_ERR_SHAPE, KILN_ERR_DTYPE. */
kiln_status kiln_variable_read(kiln_session *s, const char *name,
                               kiln_tensor *out);
kiln_status kiln_variable_write(kiln_session *s, const char *name,
                                const kiln_tensor *t);
/* Creates (initialised) a variable in the session if it does not exist;
   checks dtype and shape when it does. */
kiln_status kiln_session_declare(kiln_session *s, const char *name,
                                 kiln_dtype dt, kiln_shape shape,
                                 kiln_init init, int trainable);

/* ---------------------------------------------------------------- compiled */

/* Compiles outputs (n_out nodes) of g, fed by inputs (n_in input nodes),
   through every pass of kiln_compile_defaults() (see compiler passes).
   Variables are created in s on first use.  NULL on error
   (kiln_session_error; a failed graph's error is copied there), among them
   KILN_ERR_ARG when two assignments of one variable would run in one call
   (e.g. two optimiser steps): "variable 'W' is assigned twice ...". */
kiln_function *kiln_compile(kiln_session *s, kiln_graph *g,
                            kiln_node *const *outputs, int n_out,
                            kiln_node *const *inputs, int n_in);
/* Runs f: in[i] feeds the i-th input, out[i] receives the i-th output (must
   already have its dtype and shape; NULL skips it).  Checks every shape and
   dtype first and changes nothing on error: KILN_ERR_ARG, KILN_ERR_SHAPE or
   KILN_ERR_DTYPE (kiln_session_error; kiln_last_error for a NULL f).
   With the environment variable KILN_PROFILE=1 every kernel call is
   timed and a per-op summary is printed at exit. */
kiln_status kiln_run(kiln_function *f, kiln_tensor *const *in,
                     kiln_tensor *const *out);
/* New tensor shaped like the i-th output of f (NULL when out of range). */
kiln_tensor *kiln_function_new_output(const kiln_function *f, int i);
/* Prints the compiled schedule: buffers and one line per kernel call.
   KILN_ERR_ARG (kiln_last_error) on NULL arguments. */
kiln_status kiln_function_print(const kiln_function *f, FILE *out);
/* Frees a function (also freed with its session).  NULL is a no-op. */
void kiln_function_free(kiln_function *f);

/* ---------------------------------------------------------------- compiler
 * passes */

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
       "dce,cse,simplify,fold,cse,simplify,gemm_acc,fuse,dce". */
    const char *pipeline;
    /* Non-NULL: prints the IR (kiln_graph_print format, fused programs
       spelled out) before the first pass and after each one.  The
       environment variable KILN_DUMP=passes does the same on stderr. */
    FILE *dump;
    /* The gemm_acc pass (see above); default 1.  Last, so that older
       positional initialisers keep their meaning. */
    int gemm_acc;
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
/* Bytes of the function's buffer block (the memory plan's peak); 0 for
   NULL. */
size_t kiln_function_memory(const kiln_function *f);
/* Bytes the computed values would take with one buffer each (planning
   off); 0 for NULL. */
size_t kiln_function_memory_unplanned(const kiln_function *f);
/* Number of kernel calls one run makes (in-place copies that do nothing
   are not counted); -1 for NULL. */
int kiln_function_num_kernels(const kiln_function *f);

/* ---------------------------------------------------------------- dynamic */

/* A graph's values belong to the session it last ran with: kiln_feed or
   kiln_forward with another session drops them (fed inputs are kept) and
   computes with that session's variables from then on; kiln_backward,
   kiln_node_value, kiln_node_grad, kiln_sgd_step and kiln_optimizer_update
   with another session fail with KILN_ERR_STATE. */

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
/* Builds and computes the gradients of loss (scalar) for every trainable
   variable in g and every node loss depends on.  KILN_ERR_STATE before
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
/* Pointer to the f32 value / gradient of a computed node (NULL otherwise:
   not computed, stale after kiln_feed, built before kiln_graph_clear, or its
   session was freed), valid until the graph is cleared. */
const float *kiln_node_value_f32(const kiln_node *n);
const float *kiln_node_grad_f32(const kiln_node *n);
/* Plain SGD on every trainable variable of g after kiln_backward:
   v -= lr * grad.  KILN_ERR_STATE without gradients, or with gradients an
   input fed since made stale. */
kiln_status kiln_sgd_step(kiln_session *s, kiln_graph *g, float lr);

/* ---------------------------------------------------------------- optimisers
 */

/* Optimisers follow torch.optim's update rules.  All their state (momentum
   buffers, Adam moments, Adagrad sums, accumulated gradients, the step
   counter and bias corrections) lives in the session as non-trainable f32
   variables, so saving a session's variables saves the optimiser too:
     "<var>.momentum" "<var>.adagrad_sum" "<var>.adam_m" "<var>.adam_v"
     "<var>.accum" "optim.step" "optim.micro" "optim.bias1" "optim.bias2"
   ("optim" is options.name; a different name also prefixes the per-variable
   slots: "<var>.<name>.adam_m"); the step counter is exact up to 2^24
   steps.  The run-time form (kiln_optimizer_update) and the graph form
   (kiln_optimizer_build_step) build the same update nodes, so they give
   identical trajectories when the graph form is compiled with the gemm_acc
   pass off; with it on (the default) a weight update whose gradient is a
   matmul read nowhere else (SGD) runs as one accumulating GEMM and differs
   from the run-time form by float rounding. */
typedef enum kiln_optim_kind {
    KILN_SGD,     /* momentum, Nesterov, L2 weight decay (no dampening) */
    KILN_ADAGRAD, /* lr_decay, initial_accumulator, L2 weight decay */
    KILN_ADAM,    /* L2 weight decay added to the gradient */
    KILN_ADAMW,   /* decoupled weight decay: p *= 1 - lr * weight_decay */
} kiln_optim_kind;

/* Learning-rate schedules, as functions of e = number of steps already
   applied (torch's last_epoch), with a base lr:
     constant  lr
     step      lr * gamma^floor(e / step_size)          (StepLR)
     cosine    min_lr + (lr - min_lr)(1 + cos(pi min(e, T) / T)) / 2,
               T = total_steps (CosineAnnealingLR, held at min_lr after T)
   warmup_steps W > 0 puts a linear warm-up first: lr * (e + 1) / W while
   e < W, then the schedule of e - W (torch LinearLR(1/W, total_iters=W-1)
   followed by the schedule in a SequentialLR). */
typedef enum kiln_schedule_kind {
    KILN_LR_CONSTANT,
    KILN_LR_STEP,
    KILN_LR_COSINE,
} kiln_schedule_kind;

typedef struct kiln_optim_options {
    kiln_optim_kind kind;
    float lr;                  /* base learning rate, >= 0 */
    float momentum;            /* SGD, >= 0 */
    int nesterov;              /* SGD, needs momentum > 0 */
    float weight_decay;        /* >= 0 */
    float beta1, beta2;        /* Adam/AdamW, in [0, 1) */
    float eps;                 /* Adam/AdamW/Adagrad, >= 0 */
    float lr_decay;            /* Adagrad: lr / (1 + (t - 1) lr_decay), >= 0 */
    float initial_accumulator; /* Adagrad: initial sum of squares, >= 0 */
    kiln_schedule_kind schedule;
    int step_size;    /* KILN_LR_STEP, >= 1 */
    float gamma;      /* KILN_LR_STEP, > 0 */
    int total_steps;  /* KILN_LR_COSINE, >= 1 */
    float min_lr;     /* KILN_LR_COSINE, >= 0 */
    int warmup_steps; /* 0 = none */
    float clip_norm;  /* > 0: scale the gradients so that their global L2
                         norm is at most clip_norm (clip_grad_norm_); 0 off */
    int accumulate;   /* k > 1: sum the gradients of k calls and apply
                         their mean on the k-th; 0 or 1 = every call */
    const char *name; /* prefix of the state variables; NULL = "optim" */
} kiln_optim_options;

/* torch's defaults for kind: lr 1e-3 (Adagrad 1e-2), Adam/AdamW betas
   0.9/0.999 and eps 1e-8, Adagrad eps 1e-10, AdamW weight_decay 1e-2,
   everything else 0 / off and a constant schedule. */
kiln_optim_options kiln_optim_defaults(kiln_optim_kind kind);

typedef struct kiln_optimizer kiln_optimizer;

/* New optimiser on s (options copied; the global state variables are
   declared in s, existing ones kept so a restored session resumes).  NULL
   with kiln_session_error (and kiln_last_error) on bad options, and when a
   live optimiser of another kind on s has the same name (they would share
   "<name>.step"): give one of them another options.name.  Optimisers of one
   kind and name share all their state. */
kiln_optimizer *kiln_optimizer_new(kiln_session *s,
                                   const kiln_optim_options *o);
/* Frees the optimiser; its state stays in the session.  NULL is a no-op. */
void kiln_optimizer_free(kiln_optimizer *o);
/* Run-time form (Marian's opt->update(graph)): after kiln_backward on g,
   updates every trainable variable of g that has a gradient, by adding the
   update nodes to g and computing them.  KILN_ERR_STATE when g has no
   backward pass (or one with another session, or stale gradients) or the
   optimiser's session was freed (kiln_last_error); other errors as
   kiln_forward (kiln_session_error). */
kiln_status kiln_optimizer_update(kiln_optimizer *o, kiln_graph *g);
/* Graph form (ngraph's assign): adds to g the gradients of the scalar loss
   for every trainable variable it depends on and the assignments of their
   update and of the optimiser state; returns a doall node to compile as an
   output next to loss, so that each run is one training step.  A poisoned
   node with the graph's error on bad arguments. */
kiln_node *kiln_optimizer_build_step(kiln_optimizer *o, kiln_graph *g,
                                     kiln_node *loss);
/* Learning rate of the next step, from the schedule and the step count
   (computed in double; the update computes the same in f32).  0 for NULL or
   when the session was freed. */
float kiln_optimizer_lr(const kiln_optimizer *o);
/* Number of steps applied so far (read from the session); -1 for NULL or
   when the session was freed. */
int64_t kiln_optimizer_step_count(const kiln_optimizer *o);

/* ---------------------------------------------------------------- marian */

/* Logging.  Lines look like Marian's:
     [2026-11-21 15:10:51] [memory] Reserving 256 MB, device cpu0
   Warnings and errors carry "[warn] " / "[error] " after the time.  The
   level and the callback are process-wide; set them before starting
   threads (see the thread notes at the top of this header). */
typedef enum kiln_log_level {
    KILN_LOG_DEBUG,
    KILN_LOG_INFO, /* the default */
    KILN_LOG_WARN,
    KILN_LOG_ERROR,
    KILN_LOG_OFF,
} kiln_log_level;
/* Receives each formatted line (no trailing newline; debug output may hold
   several lines). */
typedef void (*kiln_log_fn)(kiln_log_level level, const char *line, void *user);
/* Messages below level are dropped.  An unknown level is ignored. */
void kiln_set_log_level(kiln_log_level level);
kiln_log_level kiln_get_log_level(void);
/* Sends every line to fn (NULL restores the default: stderr). */
void kiln_set_log_callback(kiln_log_fn fn, void *user);
/* Logs a printf-style message under a category ("memory", "training"; NULL
   for none).  A NULL fmt is ignored. */
void kiln_log_printf(kiln_log_level level, const char *category,
                     const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Workspace: the memory dynamic forward and backward take their values
   from, by bump allocation, all released at once by kiln_graph_clear.
   Variables and optimiser state live in the session, outside it. */

/* Preallocates mb MiB of workspace for g (Marian's reserveWorkspaceMB) and
   logs "[memory] Reserving ...".  Growth beyond it is logged as a warning,
   or refused in strict mode.  KILN_ERR_ARG for mb 0, KILN_ERR_STATE when
   the workspace holds values (call after kiln_graph_new or kiln_graph_clear,
   before kiln_feed) and KILN_ERR_MEMORY when it cannot be allocated, with
   kiln_last_error. */
kiln_status kiln_graph_reserve_workspace_mb(kiln_graph *g, size_t mb);
/* Strict mode (on != 0): a value that does not fit in the reservation makes
   kiln_feed / kiln_forward / kiln_backward fail with KILN_ERR_MEMORY and a
   message naming the node, instead of growing the workspace.  KILN_ERR_STATE
   (kiln_last_error) when turning it on without a reservation. */
kiln_status kiln_graph_set_workspace_strict(kiln_graph *g, int on);

typedef struct kiln_workspace_stats {
    size_t reserved; /* bytes held by the workspace (reservation + growth) */
    size_t used;     /* bytes handed out since the last clear: its footprint */
    size_t live;     /* bytes of values alive now (checkpointing releases) */
    size_t peak;     /* most live bytes at once since the last clear */
} kiln_workspace_stats;
/* Fills st.  KILN_ERR_ARG for NULL arguments. */
kiln_status kiln_graph_workspace_stats(const kiln_graph *g,
                                       kiln_workspace_stats *st);

/* Gradient checkpointing.  Marks n (a node of any kind) as a checkpoint:
   with checkpointing on, its value is kept through backward.  Returns n; a
   NULL or poisoned n is returned as is. */
kiln_node *kiln_checkpoint(kiln_node *n);
/* 1 when n is marked. */
int kiln_node_is_checkpoint(const kiln_node *n);
/* Turns checkpointing on for g (kept across kiln_graph_clear): forward
   releases every value once its last consumer has run, except leaves,
   marked nodes and nodes nothing consumes (outputs); backward recomputes a
   released value, and the segment behind it back to the nearest kept
   values, when a gradient needs it, and releases it again after its last
   use.  Gradients are bit-identical to a run without checkpointing.  After
   backward only leaves, marked nodes, the loss, outputs and the gradients of
   variables and of kiln_debug nodes keep values: kiln_node_value on a
   released node is KILN_ERR_STATE.  Turned off, later passes still
   recompute values it released when they need them.  KILN_ERR_ARG for a
   NULL graph. */
kiln_status kiln_graph_set_checkpointing(kiln_graph *g, int on);

/* Check-finite mode (on != 0): kiln_forward and kiln_backward stop at the
   first node whose value (forward) or gradient (backward) holds a NaN or an
   infinity and return KILN_ERR_NUMERIC; the session's error names the node,
   its op, shape and name, the node it is the gradient of, and its inputs
   with their ranges.  KILN_ERR_ARG for a NULL graph. */
kiln_status kiln_graph_set_check_finite(kiln_graph *g, int on);

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

/* Kiln's .bin format (what kiln_session_save writes for a ".bin" path):
   a 64-byte header (magic "KILNBIN\0", version, tensor count, table and
   data sizes, CRC32s), a table of entries (name, dtype, shape, offset,
   size, CRC32 of the data), then the data, little-endian, every tensor
   starting at a 64-byte aligned file offset so the file can be
   memory-mapped.  Writing is atomic as kiln_npz_write.  KILN_ERR_ARG,
   KILN_ERR_DTYPE or KILN_ERR_IO with kiln_last_error. */
typedef struct kiln_tensor_list kiln_tensor_list;
kiln_status kiln_bin_write(const char *path, const kiln_tensor_list *l);
/* Reads a .bin file, checking everything (magic, version, sizes against
   the file's, names, dtypes, shapes, alignment, every CRC) before returning
   it.  NULL (kiln_last_error) on a missing, truncated or corrupt file. */
kiln_tensor_list *kiln_bin_read(const char *path);

/* ---------------------------------------------------------------- debugging */

/* Marks n (Marian's debug(node, msg)): forward prints its value and
   backward its gradient, in Marian's layout:
     [2026-11-21 15:10:51] Debug: Parameter x op=variable
     [2026-11-21 15:10:51] shape=1x1 size=1 type=float32 device=cpu0 ptr=...
   bytes=64 min: 2.00000000 max: 2.00000000 l2-norm: 2.00000000
     [[   2.00000000 ]]
   ("Debug Grad:" for the gradient; dimensions longer than 6 are elided
   with "...").  The lines go to the log (callback or stderr) whatever the
   log level, or to the debug stream when one is set.  Returns n (a NULL or
   poisoned n as is). */
kiln_node *kiln_debug(kiln_node *n, const char *msg);
/* Prints a tensor in the same layout, without timestamps, to out; limit 0
   omits the values.  NULL t or out prints nothing. */
void kiln_tensor_print(const kiln_tensor *t, const char *msg, int limit,
                       FILE *out);
/* Where debug output goes instead of the log (NULL = the log). */
void kiln_set_debug_stream(FILE *out);

/* ---------------------------------------------------------------- checking */

typedef struct kiln_gradcheck_result {
    double max_abs_err;  /* largest |autodiff - numeric| */
    double max_rel_err;  /* largest |a-n| / max(1, |a|, |n|)... see docs */
    int worst_node;      /* index into wrt of the worst element */
    int64_t worst_index; /* element index within that node */
} kiln_gradcheck_result;

/* Compares autodiff gradients of the scalar loss with respect to the n_wrt
   variables or inputs in wrt against central finite differences with step
   eps (double accumulation).  Inputs in feeds (n_feed pairs) are fed by
   value.  KILN_OK when every element satisfies |a-n| <= tol*(1+|n|), else
   KILN_ERR_NUMERIC with the worst element in res.  KILN_ERR_ARG
   (kiln_session_error) for bad arguments (eps or tol not finite and > 0, a
   loss not of g, a wrt that is not an f32 variable or input of g) and
   KILN_ERR_SHAPE for a loss that is not an f32 scalar, both checked before
   g is touched. */
kiln_status kiln_gradcheck(kiln_session *s, kiln_graph *g, kiln_node *loss,
                           kiln_node *const *wrt, int n_wrt,
                           kiln_node *const *feed_nodes,
                           kiln_tensor *const *feeds, int n_feed, double eps,
                           double tol, kiln_gradcheck_result *res);

/* ---------------------------------------------------------------- named axes
 */

/* The Nervana-graph front end: tensors whose dimensions are named axes.
   Each kiln_ax is a node of g plus one axis per dimension; the builders
   below lower onto the ordinary ops (permute, reshape, broadcast, matmul),
   so everything compiles and differentiates as usual.  Errors are recorded
   in g like every other builder and give a poisoned kiln_ax. */

#define KILN_AXIS_NAME_MAX 32

/* An axis: a name, a length, a batch flag and a dual position.  Two axes
   are the same axis when their names and dual positions are equal (their
   lengths must then agree).  A value type: copy it freely. */
typedef struct kiln_axis {
    char name[KILN_AXIS_NAME_MAX];
    int64_t length;
    int batch; /* held out of default reductions */
    int dual;  /* position in the dual family: 0 as made, -1 for axis - 1 */
} kiln_axis;

/* An ordered list of axes; KILN_AXES(a, b) builds one, KILN_NO_AXES is the
   empty list of a scalar. */
typedef struct kiln_axes {
    int n;
    kiln_axis a[KILN_MAX_DIMS];
} kiln_axes;
#define KILN_AXES(...)                                                         \
    ((kiln_axes){                                                              \
        .n = (int)(sizeof((kiln_axis[]){__VA_ARGS__}) / sizeof(kiln_axis)),    \
        .a = {__VA_ARGS__}})
#define KILN_NO_AXES ((kiln_axes){.n = 0})

/* ng.make_axis(length, name, batch).  A NULL, empty or too long name or a
   negative length gives an invalid axis (length -1) that builders reject. */
kiln_axis kiln_axis_make(const char *name, int64_t length, int batch);
/* axis + offset: the member of a's dual family offset positions away
   (kiln_axis_dual(C, -1) is ng's ax.C - 1); an invalid axis when the
   position overflows an int. */
kiln_axis kiln_axis_dual(kiln_axis a, int offset);
/* 1 when a and b are the same axis (same name and dual position). */
int kiln_axis_same(kiln_axis a, kiln_axis b);

/* A tensor with axes, owned by its graph. */
typedef struct kiln_ax kiln_ax;

/* ng.placeholder(axes): an input fed with a tensor shaped by the axes'
   lengths, in order. */
kiln_ax *kiln_ax_placeholder(kiln_graph *g, const char *name, kiln_axes axes);
/* ng.variable(axes, initial_value).named(name): a session variable. */
kiln_ax *kiln_ax_variable(kiln_graph *g, const char *name, kiln_axes axes,
                          kiln_init init);
/* ng.constant(v): a scalar constant (no axes). */
kiln_ax *kiln_ax_scalar(kiln_graph *g, float v);
/* Gives axes to an existing node of g (one per dimension, lengths must
   match its shape). */
kiln_ax *kiln_ax_wrap(kiln_graph *g, kiln_node *n, kiln_axes axes);
/* .named(name): names the node (shown by print); returns t. */
kiln_ax *kiln_ax_named(kiln_ax *t, const char *name);
/* The node and axes of t (NULL / no axes for NULL). */
kiln_node *kiln_ax_node(const kiln_ax *t);
kiln_axes kiln_ax_axes(const kiln_ax *t);
/* Writes "(C:4, N:128*)" into buf (always terminated; * marks batch axes,
   -1 +1 dual positions); returns buf. */
char *kiln_axes_str(kiln_axes axes, char *buf, size_t n);

/* Element-wise ops align operands by axis identity, not position: the result
   has a's axes then b's axes that a lacks, and each operand is broadcast
   over the axes it lacks. */
kiln_ax *kiln_ax_add(kiln_graph *g, kiln_ax *a, kiln_ax *b);
kiln_ax *kiln_ax_sub(kiln_graph *g, kiln_ax *a, kiln_ax *b);
kiln_ax *kiln_ax_mul(kiln_graph *g, kiln_ax *a, kiln_ax *b);
kiln_ax *kiln_ax_div(kiln_graph *g, kiln_ax *a, kiln_ax *b);
/* Unary ops keep the axes; kiln_ax_apply applies any unary builder
   (kiln_tanh, kiln_relu, ...). */
kiln_ax *kiln_ax_apply(kiln_graph *g,
                       kiln_node *(*op)(kiln_graph *, kiln_node *), kiln_ax *x);
kiln_ax *kiln_ax_neg(kiln_graph *g, kiln_ax *x);
kiln_ax *kiln_ax_exp(kiln_graph *g, kiln_ax *x);
kiln_ax *kiln_ax_log(kiln_graph *g, kiln_ax *x);
kiln_ax *kiln_ax_sigmoid(kiln_graph *g, kiln_ax *x);
/* ng.dot: contracts every axis of a with the axis of b of the same dual
   family one position higher (W's C-1 with X's C), whatever their order in
   memory; axes in both operands become batch dimensions of the product.  The
   result has the shared axes, then a's free axes, then b's.  No pair to
   contract is an error (kiln_ax_mul multiplies without contracting). */
kiln_ax *kiln_ax_dot(kiln_graph *g, kiln_ax *a, kiln_ax *b);
/* ng.sum / ng.mean: out_axes NULL keeps the batch axes and reduces the rest;
   otherwise exactly *out_axes remain (each must be an axis of x), in that
   order. */
kiln_ax *kiln_ax_sum(kiln_graph *g, kiln_ax *x, const kiln_axes *out_axes);
kiln_ax *kiln_ax_mean(kiln_graph *g, kiln_ax *x, const kiln_axes *out_axes);
/* ng.batch_size / ng.tensor_size: scalar constants, the product of the
   lengths of x's batch axes (1 when none) / of all its axes. */
kiln_ax *kiln_ax_batch_size(kiln_graph *g, kiln_ax *x);
kiln_ax *kiln_ax_tensor_size(kiln_graph *g, kiln_ax *x);
/* ng.cross_entropy_binary: sum over out_axes (as kiln_ax_sum) of
   -(y log y_hat + (1 - y) log(1 - y_hat)); when y_hat is a sigmoid the logs
   are taken from its logits, so the loss stays finite when it saturates. */
kiln_ax *kiln_ax_cross_entropy_binary(kiln_graph *g, kiln_ax *y_hat, kiln_ax *y,
                                      const kiln_axes *out_axes);
/* ng.deriv(L, v): dL/dv for a scalar L, with v's axes. */
kiln_ax *kiln_ax_deriv(kiln_graph *g, kiln_ax *loss, kiln_ax *v);
/* ng.assign(v, value): value (same set of axes, any order) becomes v's value
   at the end of the run. */
kiln_ax *kiln_ax_assign(kiln_graph *g, kiln_ax *v, kiln_ax *value);
/* ng.doall: one result that runs every op in xs. */
kiln_ax *kiln_ax_doall(kiln_graph *g, kiln_ax *const *xs, int n);
/* L.variables(): the variables (built with kiln_ax_variable) that x depends
   on, in order of first use, written to out[0..max-1].  Returns how many
   there are (may exceed max); 0 for NULL or poisoned x. */
int kiln_ax_variables(const kiln_ax *x, kiln_ax **out, int max);

/* A computation (transformer.computation(results, placeholders)): compiled
   on its first call in session s, so several computations on one session
   share their variables.  g must live until the first call. */
typedef struct kiln_computation kiln_computation;
/* NULL (kiln_last_error) on NULL arguments; graph errors surface at the
   first call. */
kiln_computation *kiln_computation_new(kiln_session *s, kiln_graph *g,
                                       kiln_ax *const *results, int n_results,
                                       kiln_ax *const *placeholders, int n_ph);
/* Frees the computation and its compiled function; computation and session
   may be freed in either order.  NULL is a no-op. */
void kiln_computation_free(kiln_computation *c);
/* Calls c: in[i] feeds placeholder i (shaped by its axes).  Results are then
   read with kiln_computation_result.  Errors in kiln_session_error;
   KILN_ERR_STATE (kiln_last_error) once the session was freed. */
kiln_status kiln_computation_call(kiln_computation *c, kiln_tensor *const *in);
/* The i-th result of the last call, owned by c (NULL before the first
   successful call or out of range). */
const kiln_tensor *kiln_computation_result(const kiln_computation *c, int i);
/* The first element of the i-th result as a float (NAN when unavailable). */
float kiln_computation_scalar(const kiln_computation *c, int i);
/* Prints the compiled program (compiling it if needed): placeholders and
   results with their axes, then the buffers and the kernel sequence.
   KILN_ERR_STATE (kiln_last_error) once the session was freed. */
kiln_status kiln_computation_print(kiln_computation *c, FILE *out);

/* ---------------------------------------------------------------- modules */

/* The PopXL front end: subgraphs with their own graph inputs, built by
   modules, called from a parent graph (inlined, with call info), and
   differentiated on their own; programs with host streams and in-place
   updates.  Errors are recorded in the graph being built (the subgraph's
   or the parent's); calls return poisoned nodes once it failed. */

/* A graph with inputs and outputs, callable from other graphs. */
typedef struct kiln_subgraph kiln_subgraph;
/* The record of one call: the called subgraph, the parent tensors bound to
   its inputs and the parent tensors of its outputs; owned by the parent
   graph. */
typedef struct kiln_call_info kiln_call_info;
/* What autodiff returns (PopXL's GradGraphInfo): the gradient subgraph and
   how to connect it to a forward call. */
typedef struct kiln_grad_info kiln_grad_info;

/* inputs_dict entry: subgraph input -> parent tensor. */
typedef struct kiln_binding {
    kiln_node *input;
    kiln_node *value;
} kiln_binding;

/* A module's build function (popxl.Module.build): given the subgraph and
   its first graph inputs (made like create_graph's example inputs), adds
   ops, more graph inputs (kiln_subgraph_input) and outputs. */
typedef void (*kiln_module_build_fn)(kiln_subgraph *sg, void *module,
                                     kiln_node *const *inputs, int n);

/* New empty subgraph; NULL only when out of memory. */
kiln_subgraph *kiln_subgraph_new(const char *name);
/* Frees the subgraph (calls already made stay in their parents).  NULL is a
   no-op. */
void kiln_subgraph_free(kiln_subgraph *sg);
/* The graph ops are added to (for the kiln_* builders). */
kiln_graph *kiln_subgraph_graph(kiln_subgraph *sg);
/* popxl.graph_input: a new input of the subgraph, bound at each call. */
kiln_node *kiln_subgraph_input(kiln_subgraph *sg, const char *name,
                               kiln_dtype dt, kiln_shape shape);
/* Marks y as the next output of the subgraph; returns y. */
kiln_node *kiln_subgraph_output(kiln_subgraph *sg, kiln_node *y);
int kiln_subgraph_num_inputs(const kiln_subgraph *sg);
int kiln_subgraph_num_outputs(const kiln_subgraph *sg);
/* The i-th graph input / output (NULL when out of range). */
kiln_node *kiln_subgraph_input_at(const kiln_subgraph *sg, int i);
kiln_node *kiln_subgraph_output_at(const kiln_subgraph *sg, int i);
/* ir.create_graph(module, examples...): a subgraph whose first inputs have
   the dtypes and shapes of the n example nodes, built by build(module).
   Build errors are in kiln_graph_error(kiln_subgraph_graph(sg)). */
kiln_subgraph *kiln_module_create_graph(kiln_module_build_fn build,
                                        void *module,
                                        kiln_node *const *examples, int n);

/* ops.call_with_info: inlines sg into parent.  args bind the first n_args
   graph inputs in order, dict the others; every input must be bound once,
   to a parent node of the same dtype and shape; sg's own graph cannot be
   the parent.  NULL only when parent is NULL; on error the parent's error
   is set and the outputs are poisoned. */
kiln_call_info *kiln_call_with_info(kiln_graph *parent, kiln_subgraph *sg,
                                    kiln_node *const *args, int n_args,
                                    const kiln_binding *dict, int n_dict);
/* ops.call: as kiln_call_with_info, writing the subgraph's outputs to
   outs[0..num_outputs-1].  KILN_OK or the parent graph's error. */
kiln_status kiln_call(kiln_graph *parent, kiln_subgraph *sg,
                      kiln_node *const *args, int n_args,
                      const kiln_binding *dict, int n_dict, kiln_node **outs);
/* The i-th output of the call in the parent (poisoned when out of range). */
kiln_node *kiln_call_info_output(const kiln_call_info *ci, int i);
/* The parent tensor bound to a graph input of the called subgraph (NULL
   when input is not one). */
kiln_node *kiln_call_info_parent_input(const kiln_call_info *ci,
                                       const kiln_node *input);
/* The called subgraph (called_graph). */
kiln_subgraph *kiln_call_info_graph(const kiln_call_info *ci);

/* transforms.autodiff(graph, grads_required): a gradient subgraph whose
   inputs are one gradient per output of fwd, then the forward activations
   it needs; its outputs are the gradients of the required graph inputs, in
   order (grads_required NULL: every f32 input).  NULL only when out of
   memory; errors (a required node that is not a graph input of fwd, none
   required) in kiln_graph_error(kiln_subgraph_graph(graph)). */
kiln_grad_info *kiln_autodiff(kiln_subgraph *fwd,
                              kiln_node *const *grads_required, int n_req);
/* Frees the info and its gradient subgraph.  NULL is a no-op. */
void kiln_grad_info_free(kiln_grad_info *gi);
/* The gradient subgraph. */
kiln_subgraph *kiln_grad_info_graph(const kiln_grad_info *gi);
/* inputs_dict(fwd_call_info): bindings of the gradient graph's activation
   inputs to the parent tensors of the forward call; writes up to max to out
   and returns how many there are (-1 when fwd_ci is not a call of the
   forward subgraph). */
int kiln_grad_info_inputs_dict(const kiln_grad_info *gi,
                               const kiln_call_info *fwd_ci, kiln_binding *out,
                               int max);
/* fwd_parent_ins_to_grad_parent_outs(fwd_ci, grad_ci)[x]: the gradient, in
   the parent, of the parent tensor x bound to a forward input.  Poisoned
   node with the parent's error when x was not bound to an input whose
   gradient was required. */
kiln_node *kiln_grad_info_parent_grad(const kiln_grad_info *gi,
                                      const kiln_call_info *fwd_ci,
                                      const kiln_call_info *grad_ci,
                                      kiln_node *x);

/* A program (popxl.Ir): a main graph, host-to-device and device-to-host
   streams, and in-place variable updates, compiled into a session and run
   with host buffers bound to its streams. */
typedef struct kiln_program kiln_program;
typedef struct kiln_stream kiln_stream;
/* Binds a host tensor to a stream for one run. */
typedef struct kiln_stream_data {
    kiln_stream *stream;
    kiln_tensor *tensor;
} kiln_stream_data;

/* New empty program; NULL only when out of memory. */
kiln_program *kiln_program_new(void);
/* Frees the program and its compiled function; program and session may be
   freed in either order.  NULL is a no-op. */
void kiln_program_free(kiln_program *p);
/* The main graph. */
kiln_graph *kiln_program_graph(kiln_program *p);
/* popxl.h2d_stream / d2h_stream: a named stream of dt and shape (NULL with
   the graph's error on a bad dtype or shape). */
kiln_stream *kiln_h2d_stream(kiln_program *p, const char *name, kiln_dtype dt,
                             kiln_shape shape);
kiln_stream *kiln_d2h_stream(kiln_program *p, const char *name, kiln_dtype dt,
                             kiln_shape shape);
/* ops.host_load: the tensor read from an h2d stream on each run. */
kiln_node *kiln_host_load(kiln_program *p, kiln_stream *s, const char *name);
/* ops.host_store: x is written to the d2h stream's buffer on each run.
   KILN_OK or the graph's error (shape or dtype differ from the stream's). */
kiln_status kiln_host_store(kiln_program *p, kiln_stream *s, kiln_node *x);
/* ops.scaled_add_(x, y, a, b): the variable x becomes a x + b y.  Updates
   take effect at the end of the run, after every value of the run has been
   computed (so reads in the same run see the old value); two updates of one
   variable make kiln_program_compile fail.  Returns the node of the new
   value. */
kiln_node *kiln_scaled_add_inplace(kiln_program *p, kiln_node *x, kiln_node *y,
                                   float a, float b);
/* Compiles the program into s (creating its variables there).  KILN_OK or
   the error (kiln_program_error). */
kiln_status kiln_program_compile(kiln_program *p, kiln_session *s);
/* session.run(inputs): binds every h2d stream (required) and any d2h
   stream (optional) to a tensor of its dtype and shape and runs once.
   KILN_ERR_ARG for a stream bound twice ("stream 'x' is bound twice");
   KILN_ERR_STATE before kiln_program_compile or after its session was
   freed (compile it again into another). */
kiln_status kiln_program_run(kiln_program *p, const kiln_stream_data *data,
                             int n);
/* The graph's error, else the last compile or run error ("" when none). */
const char *kiln_program_error(const kiln_program *p);

/* ---------------------------------------------------------------- data */

/* A labelled data set, validated once on load: images f32 [count,
   rows * cols], labels i32 [count], each in [0, classes), count >= 1.  The
   struct owns its tensors and the file names (used in messages). */
typedef struct kiln_dataset {
    kiln_tensor *images, *labels;
    int64_t count, rows, cols;
    int classes;
    char *images_path, *labels_path;
} kiln_dataset;
/* Loads IDX images ([count, rows, cols] or [count, features]) multiplied by
   scale and IDX labels, plain or .gz.  KILN_ERR_IO (kiln_last_error naming
   the file and the offending index or value) on a missing or bad file,
   counts that differ, no images, or a label outside [0, classes);
   KILN_ERR_ARG on bad arguments.  On error *d is empty. */
kiln_status kiln_dataset_load(kiln_dataset *d, const char *images_path,
                              const char *labels_path, int classes,
                              float scale);
/* The MNIST-format split of dir (train = 1: train-*, 0: t10k-*), plain or
   .gz, 10 classes; errors as kiln_dataset_load. */
kiln_status kiln_mnist_dataset(kiln_dataset *d, const char *dir, int train,
                               float scale);
/* KILN_OK when test can be used with a model trained on train (same image
   size and classes), else KILN_ERR_SHAPE (kiln_last_error names both). */
kiln_status kiln_dataset_match(const kiln_dataset *train,
                               const kiln_dataset *test);
/* Frees the tensors and names and empties *d; NULL is a no-op. */
void kiln_dataset_free(kiln_dataset *d);

/* kiln_mnist_dataset handing back just the tensors: images f32
   [N, rows*cols] multiplied by scale, labels i32 [N].  Errors as
   kiln_mnist_dataset. */
kiln_status kiln_mnist_load(const char *dir, int train, float scale,
                            kiln_tensor **images, kiln_tensor **labels);

/* Mini-batches over rows of x (and y): seeded shuffling, optional drop of
   the last partial batch. */
typedef struct kiln_batcher kiln_batcher;
/* x and y (may be NULL) share their first dimension; they must outlive the
   batcher.  NULL (kiln_last_error) on bad arguments. */
kiln_batcher *kiln_batcher_new(const kiln_tensor *x, const kiln_tensor *y,
                               int batch, int shuffle, int drop_last,
                               uint64_t seed);
void kiln_batcher_free(kiln_batcher *b);
/* Copies the next batch into xb and yb (shaped [batch, ...]); returns the
   number of rows copied, 0 at the end of the epoch (then starts a new,
   reshuffled epoch), -1 on a shape mismatch (kiln_last_error). */
int kiln_batcher_next(kiln_batcher *b, kiln_tensor *xb, kiln_tensor *yb);
/* Batches per epoch. */
int64_t kiln_batcher_num_batches(const kiln_batcher *b);
/* The shuffling RNG, for checkpoints. */
kiln_rng *kiln_batcher_rng(kiln_batcher *b);

/* ngraph-python's gendata.MixtureGenerator: n_classes Gaussian mixtures in
   dims dimensions; class c has an affine map A_c and offset b_c drawn
   uniform in (-1, 1); a sample is A_c N(0, 0.3^2 I) + b_c with c drawn from
   the priors pvals. */
typedef struct kiln_mixture kiln_mixture;
/* NULL (kiln_last_error) on bad arguments. */
kiln_mixture *kiln_mixture_new(const double *pvals, int n_classes, int dims,
                               uint64_t seed);
void kiln_mixture_free(kiln_mixture *m);
/* Draws n samples: x [n, dims] row-major and labels y [n]. */
kiln_status kiln_mixture_batch(kiln_mixture *m, int n, float *x, int32_t *y);
/* The mean of class c (its offset b_c), dims floats; NULL when out of
   range. */
const float *kiln_mixture_mean(const kiln_mixture *m, int c);

/* A terminal progress bar (plain lines when out is not a terminal).  The
   three calls ignore a NULL p; any done and total are drawn safely. */
typedef struct kiln_progress {
    FILE *out;
    const char *label;
    int64_t total, done;
    double start, last_draw;
    int tty;
} kiln_progress;
void kiln_progress_begin(kiln_progress *p, FILE *out, const char *label,
                         int64_t total);
/* Advances to done steps; shows the running loss, samples/s and ETA. */
void kiln_progress_update(kiln_progress *p, int64_t done, double loss,
                          double samples_per_step);
void kiln_progress_end(kiln_progress *p, const char *summary);

/* Monotonic seconds. */
double kiln_now(void);

/* ---------------------------------------------------------------- checkpoints
 */

/* Saves every session variable (and the session RNG as "__rng__") to path:
   .safetensors or Kiln's .bin by extension, .npz otherwise.  Atomic.
   KILN_ERR_IO with the session's error. */
kiln_status kiln_session_save(kiln_session *s, const char *path);
/* Loads variables saved by kiln_session_save or numpy.  Every tensor is
   checked against an existing variable of the same name (dtype and shape)
   before any is written; unknown names create new variables.  On any error
   nothing changes. */
kiln_status kiln_session_load(kiln_session *s, const char *path);

/* ---------------------------------------------------------------- files */

/* An ordered list of (name, tensor) pairs, as stored in .npz and
   .safetensors files.  The list owns its tensors (a wrapped tensor's memory
   stays the caller's). */
typedef struct kiln_tensor_list kiln_tensor_list;

/* New empty list; NULL (kiln_last_error) when out of memory. */
kiln_tensor_list *kiln_tensor_list_new(void);
/* Frees the list and every tensor in it.  NULL is a no-op. */
void kiln_tensor_list_free(kiln_tensor_list *l);
/* Number of entries (0 for NULL). */
int kiln_tensor_list_count(const kiln_tensor_list *l);
/* Name / tensor of the i-th entry, in insertion order (NULL when out of
   range).  The tensor stays owned by the list. */
const char *kiln_tensor_list_name(const kiln_tensor_list *l, int i);
kiln_tensor *kiln_tensor_list_get(const kiln_tensor_list *l, int i);
/* The tensor named name, or NULL when there is none. */
kiln_tensor *kiln_tensor_list_find(const kiln_tensor_list *l, const char *name);
/* Appends t under a copy of name and takes ownership of t.  KILN_ERR_ARG
   (kiln_last_error) for a NULL or empty argument, a duplicate name or a
   tensor already added to a list (this or another); on error the caller
   keeps t. */
kiln_status kiln_tensor_list_add(kiln_tensor_list *l, const char *name,
                                 kiln_tensor *t);

/* Writes the list as a numpy .npz archive (one "<name>.npy" member per
   tensor, f32 as '<f4', i32 as '<i4'), deflated when compress is non-zero.
   Atomic: a temporary file is renamed over path, so on any error an existing
   file at path is untouched; a symlink at path stays and its target gets
   the new content, and stale temporaries of path are removed.  KILN_ERR_ARG, KILN_ERR_DTYPE or KILN_ERR_IO
   with kiln_last_error. */
kiln_status kiln_npz_write(const char *path, const kiln_tensor_list *l,
                           int compress);
/* Reads a .npz archive (np.savez or np.savez_compressed).  '<f4' and '<f8'
   load as f32; '<i4', '<i8' (range-checked), '|u1' and '|b1' as i32.  NULL
   (kiln_last_error) on a missing, truncated or corrupt file or an
   unsupported array (Fortran order, big-endian, other dtypes). */
kiln_tensor_list *kiln_npz_read(const char *path);

/* Writes the list as .safetensors (F32 / I32 tensors), atomically as
   kiln_npz_write. */
kiln_status kiln_safetensors_write(const char *path, const kiln_tensor_list *l);
/* Reads a .safetensors file in data order, skipping __metadata__.  F32 and
   F64 load as f32; I32, I64 (range-checked) and U8 as i32.  NULL
   (kiln_last_error) on a bad header, out-of-range offsets or sizes that do
   not match the shapes. */
kiln_tensor_list *kiln_safetensors_read(const char *path);

/* Reads an IDX file (MNIST), plain or gzip-compressed: unsigned-byte data
   of 1 to 4 dimensions, converted to as (KILN_F32, values 0..255, or
   KILN_I32).  NULL (kiln_last_error) on a bad magic, a file shorter or
   longer than its header says, or an unsupported element type. */
kiln_tensor *kiln_idx_read(const char *path, kiln_dtype as);

/* Prints one line per tensor of a .npz, .safetensors or Kiln .bin file
   (detected from its first bytes): "W0  f32  [784,600]", with "(stored <f8)"
   when the file's type differs.  Reads headers only (a .bin is read whole
   to check its checksum).  KILN_ERR_IO (kiln_last_error) as the readers. */
kiln_status kiln_file_info(const char *path, FILE *out);
/* Reads a .npz, .safetensors or .bin file, whichever its first bytes say it
   is.  NULL (kiln_last_error) as the readers. */
kiln_tensor_list *kiln_file_read(const char *path);
/* Writes l as .safetensors or .bin when path ends so, otherwise as an
   uncompressed .npz; atomic like the writers.  Errors as the writers. */
kiln_status kiln_file_write(const char *path, const kiln_tensor_list *l);
/* Checks, writing nothing, that a file could be saved at path (as the
   writers do: through symlinks to their target): its directory exists and
   is writable and path is not a directory.  KILN_ERR_IO (kiln_last_error)
   otherwise, KILN_ERR_ARG for NULL.  Lets a program fail before long work. */
kiln_status kiln_file_check_writable(const char *path);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* KILN_H */
