/* Kiln: graphs and their leaves (inputs, constants, variables).
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_GRAPH_H
#define KILN_GRAPH_H

#include "kiln/core.h"

KILN_DECLS_BEGIN

/* ---------------------------------------------- graphs */

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
/* Frees the graph and every node in it; sessions that ran it reclaim their
   run state of it when they next run a new graph.  NULL is a no-op. */
void kiln_graph_free(kiln_graph *g);
/* Drops every node (one arena reset) and clears the error; every session's
   values of the graph are dropped, its variables and settings for the graph
   kept.  A node pointer kept from before the clear is
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

/* ---------------------------------------------- leaves */

/* Input fed on every run (nGraph Parameter, placeholder). */
kiln_node *kiln_input(kiln_graph *g, const char *name, kiln_dtype dt,
                      kiln_shape shape);
/* Input whose axes in sym_axes (KILN_AXIS bits) have a symbolic size, such as
   the batch: the graph is built and runs dynamically at the sizes in shape,
   and a compiled function accepts any size >= 0 for them (the same one for
   every symbolic axis of every input).  Nodes derived from it carry the
   axes in their shape's sym (docs/guide.md, "Symbolic dimensions"). */
kiln_node *kiln_input_sym(kiln_graph *g, const char *name, kiln_dtype dt,
                          kiln_shape shape, unsigned sym_axes);
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

KILN_DECLS_END
#endif /* KILN_GRAPH_H */
