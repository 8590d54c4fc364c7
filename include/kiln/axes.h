/* Kiln front end: named axes (Nervana graph).
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_AXES_H
#define KILN_AXES_H

#include "kiln/execution.h"

KILN_DECLS_BEGIN

/* ---------------------------------------------- named axes */

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

KILN_DECLS_END
#endif /* KILN_AXES_H */
