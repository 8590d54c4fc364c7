/* The IR: graphs own nodes in an arena; nodes are immutable once built. */
#ifndef KILN_GRAPH_GRAPH_H
#define KILN_GRAPH_GRAPH_H

#include "base/arena.h"
#include "base/error.h"
#include "base/shape.h"
#include "kiln.h"

typedef enum kiln_op {
#define X(op, name, arity, kind) KILN_OP_##op,
#include "graph/ops.def"
#undef X
    KILN_OP_COUNT
} kiln_op;

typedef enum kiln_op_kind {
    KILN_KIND_LEAF,
    KILN_KIND_UNARY,
    KILN_KIND_BINARY,
    KILN_KIND_TERNARY,
    KILN_KIND_REDUCE,
    KILN_KIND_MOVE,
    KILN_KIND_CONTRACT,
    KILN_KIND_CONVERT,
    KILN_KIND_STATE,
    KILN_KIND_FUSED, /* elementwise program built by the fusion pass */
} kiln_op_kind;

typedef struct kiln_op_info {
    const char *name;
    int arity;
    kiln_op_kind kind;
} kiln_op_info;

extern const kiln_op_info kiln_op_table[KILN_OP_COUNT];

/* A constant that counts elements over symbolic axes (a mean's 1 / N): its
   value is sign / count (recip) or sign * count, count = base * size^k for
   the symbolic size; k = 0 for every other constant.  A compiled function
   re-derives it for each size (kiln_count_value). */
typedef struct kiln_count {
    int64_t base;
    int k, recip;
    float sign;
} kiln_count;

/* Op attributes; each op uses the fields its row needs. */
typedef struct kiln_attrs {
    unsigned axes;             /* reductions: reduced axes; broadcast: new */
    int keepdims;              /* reductions */
    int axis;                  /* argmax, concat */
    int perm[KILN_MAX_DIMS];   /* permute */
    int64_t lo[KILN_MAX_DIMS]; /* slice start, pad before */
    float value;               /* pad value */
    int trans_a, trans_b;      /* matmul */
    int depth;                 /* one_hot */
    int strict;                /* one_hot: a label outside [0, depth) is a
                                  run-time error (losses), not a zero row */
    kiln_init init;            /* variable */
    int trainable;             /* variable */
    const void *data;          /* constant (arena copy); fused: program */
    kiln_count count;          /* constant */
} kiln_attrs;

struct kiln_node {
    int id;
    unsigned gen; /* the graph's generation when built (kiln_graph_clear) */
    kiln_op op;
    kiln_dtype dtype;
    kiln_shape shape;
    int n_in;
    kiln_node **in;
    kiln_graph *graph;
    const char *name;
    kiln_attrs at;
    /* marks the user sets while building (kiln_debug, kiln_checkpoint):
       part of the model, read by every session and compiler, never
       written by a run */
    const char *debug_msg;
    int debug;
    int checkpoint;
};

struct kiln_graph {
    uint64_t id;      /* unique in the process, never reused */
    kiln_arena arena; /* nodes, their inputs and attribute data */
    /* The arena of the previous generation, kept until the next clear, so
       a node pointer kept across one kiln_graph_clear still reads as stale
       instead of aliasing the new node built at its address. */
    kiln_arena old_arena;
    unsigned gen;      /* bumped by kiln_graph_clear */
    kiln_node **nodes; /* in creation order: a topological order */
    int n_nodes, cap_nodes;
    kiln_status status;
    char err[KILN_ERRMSG_MAX];
    kiln_node **vars; /* variable nodes, one per name */
    int n_vars, cap_vars;
    kiln_node poison; /* returned by builders once the graph failed */
};

/* 1 while the graph with this id has not been freed: sessions drop the run
   state they keep for a graph once it is gone. */
int kiln_graph_alive(uint64_t id);

/* Records the first error (later ones are ignored) and returns the poison
   node, so builders can `return graph_fail(...)`. */
kiln_node *kiln_graph_fail(kiln_graph *g, kiln_status st, const char *fmt, ...)
    KILN_PRINTF(3, 4);
/* 1 when x is usable in g; otherwise records why (naming fn) and returns 0.
   A graph that already failed returns 0 silently. */
int kiln_graph_check(kiln_graph *g, const char *fn, kiln_node *x);
/* 1 when n was built before the last kiln_graph_clear of its graph (its
   memory is then the previous generation's, kept for this check) or is not
   one of its nodes.  Not for the poison node. */
int kiln_node_stale(const kiln_node *n);
/* 1 when n is a usable node to mark or rename: 0 for NULL or poisoned n,
   and for a stale n, which also records an error naming fn. */
int kiln_node_live(kiln_node *n, const char *fn);
/* 1 when x is f32; otherwise records a dtype error naming fn. */
int kiln_graph_check_f32(kiln_graph *g, const char *fn, kiln_node *x);
/* Two assignments of one variable in one run would race (the last applied
   wins, the other update is lost): 1 when two of the assignments among
   nodes [first, n_nodes) of g -- those live[id] marks, when live is not
   NULL -- write the same variable, which *var is set to; 0 when none; -1
   when out of memory. */
int kiln_graph_find_double_assign(const kiln_graph *g, int first,
                                  const unsigned char *live,
                                  const kiln_node **var);
/* Appends a node with the given inputs; the caller fills attrs after. */
kiln_node *kiln_node_make(kiln_graph *g, kiln_op op, kiln_dtype dt,
                          kiln_shape shape, kiln_node *const *in, int n_in);
void *kiln_graph_alloc(kiln_graph *g, size_t bytes);
/* Writes n as an IR line, "%7 = add(%3, %6) f32[128,600] "name"", into buf
   (always terminated, cut at size); op replaces the op's name when not
   NULL, quote is the character around the name. */
void kiln_node_format(const kiln_node *n, const char *op, char quote, char *buf,
                      size_t size);
const char *kiln_graph_strdup(kiln_graph *g, const char *s);

/* Builders used by composites and gradient rules (no public checks). */
kiln_node *kiln_unary_op(kiln_graph *g, kiln_op op, kiln_node *x);
kiln_node *kiln_binary_op(kiln_graph *g, kiln_op op, kiln_node *a,
                          kiln_node *b);
kiln_node *kiln_reduce_op(kiln_graph *g, kiln_op op, kiln_node *x,
                          unsigned axes, int keepdims, const char *fn);
/* Sums x over broadcast axes so it has shape s (gradient of a broadcast). */
kiln_node *kiln_reduce_to_shape(kiln_graph *g, kiln_node *x, kiln_shape s);
/* A constant of shape s filled with v. */
kiln_node *kiln_zeros_like(kiln_graph *g, kiln_node *x);

/* Symbolic sizes (graph/sym.c).  Sets n->shape.sym to the axes that follow
   the symbolic size, from its inputs' and its attributes; a broadcast also
   keeps the axes its target shape marked.  Builders whose result shape is
   not a copy of an input's call it once the attributes are set. */
void kiln_node_derive_sym(kiln_node *n);
/* The scalar sign / count (recip) or sign * count, count being the number
   of elements of shape x over axes: a mean's factor, tagged so that a
   compiled function re-derives it when the axes are symbolic. */
kiln_node *kiln_count_scalar(kiln_graph *g, kiln_shape x, unsigned axes,
                             float sign, int recip);
/* The value of a count constant at the symbolic size (NaN for 1 / 0). */
float kiln_count_value(const kiln_count *c, int64_t size);

#endif
