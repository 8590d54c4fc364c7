/* The IR: graphs own nodes in an arena; nodes are immutable once built. */
#ifndef KILN_GRAPH_GRAPH_H
#define KILN_GRAPH_GRAPH_H

#include "base/arena.h"
#include "base/error.h"
#include "base/shape.h"
#include "kiln.h"

typedef enum kiln_op {
#define X(op, ...) KILN_OP_##op,
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

/* The attributes an op reads (kiln_attrs fields): CSE compares and hashes
   them, printing shows them, cloning copies them (graph/attrs.c). */
enum {
    KILN_ATTR_AXES = 1 << 0,
    KILN_ATTR_KEEPDIMS = 1 << 1,
    KILN_ATTR_AXIS = 1 << 2,
    KILN_ATTR_PERM = 1 << 3, /* one entry per input dim */
    KILN_ATTR_LO = 1 << 4,   /* one entry per input dim */
    KILN_ATTR_VALUE = 1 << 5,
    KILN_ATTR_TRANS = 1 << 6,     /* trans_a and trans_b */
    KILN_ATTR_DEPTH = 1 << 7,     /* depth and strict */
    KILN_ATTR_DATA = 1 << 8,      /* constant: the values, numel * dtype */
    KILN_ATTR_PROGRAM = 1 << 9,   /* fused: the kiln_fused_program */
    KILN_ATTR_VARIABLE = 1 << 10, /* init and trainable (never merged) */
    KILN_ATTR_WINDOW = 1 << 11,   /* convolution and pooling: kiln_window */
    KILN_ATTR_NORM = 1 << 12,     /* normalisation: kiln_norm_attr */
    KILN_ATTR_RANDOM = 1 << 13,   /* random ops: kiln_random_attr */
    KILN_ATTR_CAUSAL = 1 << 14    /* attention: causal */
};

/* A sliding window over the last nd (spatial) dims of an NC... tensor:
   convolution, its transpose and pooling read the fields they need (the
   others stay zero, so equality and hashing compare the whole struct). */
enum {
    KILN_WINDOW_CEIL = 1 << 0,      /* pooling: ceil mode */
    KILN_WINDOW_COUNT_PAD = 1 << 1, /* avg pooling: count_include_pad */
    KILN_WINDOW_RELU = 1 << 3,      /* conv: relu of the result, fused */
};
typedef struct kiln_window {
    int nd;          /* spatial dims, 1 to 3 */
    int kernel[3];   /* pooling: the window (convolution: the weight's) */
    int stride[3];   /* >= 1 */
    int dilation[3]; /* >= 1 */
    int pad_lo[3];   /* implicit padding before and after each dim */
    int pad_hi[3];
    union {
        int out_pad[3]; /* conv_transpose: output padding */
        /* resample2d (mode set): upsampling given a scale factor, 1 /
           factor per dim (0: in / out) */
        float inv_scale[3];
    };
    int groups; /* convolution: >= 1 */
    int flags;  /* KILN_WINDOW_* */
    int mode;   /* resample2d: its map (KILN_RESAMPLE_*); 0 for the others */
} kiln_window;

/* pooling group (graph/resample.h): how resample2d maps an output index
   of a dim onto the input's */
enum {
    KILN_WINDOW_ALIGN_CORNERS = 1 << 2, /* bilinear: align_corners */
};
typedef enum kiln_resample_mode {
    KILN_RESAMPLE_AVG = 1,  /* avg_pool2d */
    KILN_RESAMPLE_ADAPTIVE, /* adaptive_avg_pool2d */
    KILN_RESAMPLE_REFLECT,  /* pad, reflect mode */
    KILN_RESAMPLE_REPLICATE,
    KILN_RESAMPLE_NEAREST, /* upsample */
    KILN_RESAMPLE_BILINEAR,
} kiln_resample_mode;
/* "avg", "adaptive", ...: how IR printing names a mode. */
const char *kiln_resample_mode_name(int mode);
/* Normalisation ops see their input x as [N, C, S]: N the product of the
   dims before axis, C = d[axis], S the product of the dims after it.
   groups 0: statistics per channel over N and S (batch norm); groups G >= 1:
   per sample and group of C / G channels over those channels and S (group,
   instance and layer norm).  Affine parameters are per channel. */
typedef struct kiln_norm_attr {
    int axis;
    int groups;
    float eps; /* added to the variance */
} kiln_norm_attr;

/* Random ops draw element i's bits from the counter-based generator
   (base/philox.h) at (seed, step) of the run's key, this stream and i (the
   sample and channel index when per_channel: one draw per NC plane). */
typedef struct kiln_random_attr {
    float p;         /* dropout: the probability of zeroing */
    int stream;      /* the node's id when built: distinct draws per node */
    int per_channel; /* dropout2d */
} kiln_random_attr;

/* Whose memory an op's output may take (graph/attrs.c, kiln_node_alias). */
typedef enum kiln_alias_rule {
    KILN_ALIAS_NONE, /* a buffer of its own */
    /* element j of the output reads only element j of each input of its
       size: it may overwrite any of them, or a variable it updates */
    KILN_ALIAS_MAP,
    /* a copy of one input (assign: its value), in place a no-op */
    KILN_ALIAS_COPY,
    /* cast: converts input 0 element by element; a copy when the dtype
       stays */
    KILN_ALIAS_CONVERT,
    /* matmul_acc, index_add, scatter_add: read and write input 0 when it
       is no other operand */
    KILN_ALIAS_ACCUMULATE,
    /* fused: as MAP unless its program reduces */
    KILN_ALIAS_PROGRAM,
} kiln_alias_rule;

/* The shape and dtype op(n's inputs, n's attributes) gives, read from n's
   op, inputs and attributes (and n's own shape and dtype for ops whose
   result type is an attribute: leaves, reshape, broadcast, slice, pad,
   cast).  KILN_OK, or the error with why ("[2,3] and [4,3] do not
   broadcast") in why[len]. */
typedef kiln_status (*kiln_infer_fn)(const kiln_node *n, kiln_shape *s,
                                     kiln_dtype *dt, char *why, size_t len);

/* Whether an op has a gradient (ops.def, last column). */
typedef enum kiln_grad_kind {
    KILN_GRAD_RULE,    /* a rule in grad/rules.c */
    KILN_GRAD_NONE,    /* none, by definition (comparisons, argmax...) */
    KILN_GRAD_INTERNAL /* compiler-built after autodiff, or no op */
} kiln_grad_kind;

/* One op's descriptor: its row of ops.def. */
typedef struct kiln_op_info {
    const char *name;
    int arity;
    kiln_op_kind kind;
    kiln_infer_fn infer;
    unsigned attrs; /* KILN_ATTR_* the op reads */
    kiln_alias_rule alias;
    kiln_grad_kind grad;
} kiln_op_info;

extern const kiln_op_info kiln_op_table[KILN_OP_COUNT];

#define X(op, name, arity, kind, infer, ...)                                   \
    kiln_status kiln_infer_##infer(const kiln_node *n, kiln_shape *s,          \
                                   kiln_dtype *dt, char *why, size_t len);
#include "graph/ops.def"
#undef X

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
    unsigned axes; /* reductions: reduced axes; broadcast: new */
    int keepdims;  /* reductions */
    int axis;      /* argmax, concat */
    /* no op reads two of these (their KILN_ATTR_* bits): sharing storage
       keeps a node small, and every built node is zeroed */
    union {
        int perm[KILN_MAX_DIMS];   /* permute */
        int64_t lo[KILN_MAX_DIMS]; /* slice start, pad before */
        kiln_window win;           /* convolution, pooling */
        kiln_norm_attr norm;       /* normalisation */
        kiln_random_attr random;   /* random ops */
    };
    float value;          /* pad value */
    int trans_a, trans_b; /* matmul */
    int depth;            /* one_hot */
    int strict;           /* one_hot: a label outside [0, depth) is a
                             run-time error (losses), not a zero row */
    kiln_init init;       /* variable */
    int trainable;        /* variable */
    const void *data;     /* constant (arena copy); fused: program */
    kiln_count count;     /* constant */
    int causal;           /* attention: query i sees keys 0..i only */
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
    /* nonzero: a runtime hook key (data-parallel gradient sync, src/dist/):
       the session's kiln_grad_sync is told when the node is computed and
       before a consumer reads it; passes keep the node as they keep a
       debug node */
    int hook;
};

/* Elements of n's value.  Its shape passed kiln_shape_size when n was
   built, so the product needs no check again on every run. */
static inline int64_t kiln_node_numel(const kiln_node *n)
{
    int64_t numel = 1;
    for (int i = 0; i < n->shape.ndim; i++)
        numel *= n->shape.d[i];
    return numel;
}

/* 1 when passes must keep n as built (not merged, folded, fused or
   simplified away): marked for debugging or hooked. */
static inline int kiln_node_pinned(const kiln_node *n)
{
    return n->debug || n->hook;
}

/* The gradient subgraph kiln_backward built for one loss and one set of
   variables (grad/memo.c): IR, so every session differentiating the same
   loss for the same variables reuses it instead of building more. */
typedef struct kiln_grad_memo {
    int loss;        /* the loss node's id */
    int n_wrt;       /* variables differentiated, */
    kiln_node **wrt; /* by ascending id (graph arena) */
    kiln_node **adj; /* adjoints by node id, loss + 1 of them (arena) */
    int first;       /* id of the first node built for it */
} kiln_grad_memo;

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
    /* this generation's gradient subgraphs (kiln_graph_clear drops them) */
    kiln_grad_memo *memo;
    int n_memo, cap_memo;
    /* Assignments a builder attached to a node (batch norm's running
       statistics): kiln_compile runs effect[i] when trigger[i] is live; the
       dynamic path runs every node anyway. */
    kiln_node **effect_trigger, **effect;
    int n_effects, cap_effects;
    /* Sessions running the graph hold it for reading; building gradient
       nodes (grad/memo.c) holds it for writing.  Allocated apart so a run
       leaves the graph's own bytes as they were; opaque so that this
       header needs no POSIX feature macro. */
    struct kiln_graph_lock *lock;
};

/* Hold g's lock for reading (running it) or writing (building nodes
   while sessions may run it); kiln_graph_unlock releases either. */
void kiln_graph_read_lock(const kiln_graph *g);
void kiln_graph_write_lock(const kiln_graph *g);
void kiln_graph_unlock(const kiln_graph *g);

/* 1 while the graph with this id has not been freed: sessions drop the run
   state they keep for a graph once it is gone. */
int kiln_graph_alive(uint64_t id);

/* Adds a node like proto (its op, inputs and attributes; its shape and
   dtype where those are attributes) with the shape and dtype its op's rule
   gives; when the rule refuses, records "fn: why" (fn NULL: "kiln_<op>")
   and returns the poison node. */
kiln_node *kiln_node_build(kiln_graph *g, const char *fn,
                           const kiln_node *proto);
/* The matmul shape rule: op(a) op(b) of shapes a and b (op transposes the
   last two axes when ta / tb), batch axes broadcast; as kiln_infer_fn. */
kiln_status kiln_matmul_shape(kiln_shape a, kiln_shape b, int ta, int tb,
                              kiln_shape *out, char *why, size_t len);

/* Attaches assignment effect to trigger (both of g): compiling anything
   that needs trigger also runs effect.  0 (and g's error) when out of
   memory. */
int kiln_graph_add_effect(kiln_graph *g, kiln_node *trigger, kiln_node *effect);

/* Attributes by the op's KILN_ATTR_* mask (graph/attrs.c). */
int kiln_attrs_equal(const kiln_node *a, const kiln_node *b);
uint64_t kiln_attrs_hash(const kiln_node *n, uint64_t h);
/* Bytes of n's attribute data (constant values, fused program), 0: none. */
size_t kiln_attrs_data_bytes(const kiln_node *n);
/* c's attributes from old, data copied into g's arena; 0 when out of
   memory. */
int kiln_attrs_copy(kiln_graph *g, kiln_node *c, const kiln_node *old);
/* Writes the attributes as " axes=0x2 keepdims" (empty when none) into buf
   (always terminated); returns the length it needed. */
size_t kiln_attrs_format(const kiln_node *n, char *buf, size_t size);

/* Whose buffer n's output may take (its op's KILN_ALIAS_* rule applied to
   n): inputs [first, first + count), when one of them dies at n and has
   n's size; copy: n then has nothing to compute; map: element j of n reads
   element j of each input of its size only. */
typedef struct kiln_alias {
    int first, count;
    int copy, map;
} kiln_alias;
kiln_alias kiln_node_alias(const kiln_node *n);

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
/* kiln_node_make on a graph that has not failed, for a shape the caller
   has already checked (kiln_shape_size): the node build path, which
   checks once and names the builder. */
kiln_node *kiln_node_append(kiln_graph *g, kiln_op op, kiln_dtype dt,
                            const kiln_shape *shape, kiln_node *const *in,
                            int n_in);
void *kiln_graph_alloc(kiln_graph *g, size_t bytes);
/* Writes n as an IR line, "%7 = sum(%3) f32[128] axes=0x2 "name"", into
   buf (always terminated, cut at size): a fused node's program, the
   attributes its op reads; op replaces the op's name when not NULL, quote
   is the character around the name (0: the name is left out). */
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
/* KILN_ERR_ARG (kiln_last_error) for an initialiser an i32 variable cannot
   take: a KILN_INIT_VALUE that is not finite or outside the i32 range
   (kiln_variable and kiln_session_declare refuse it; it is truncated
   toward zero otherwise). */
kiln_status kiln_init_check_i32(kiln_init init);
/* A constant of shape s filled with v. */
kiln_node *kiln_zeros_like(kiln_graph *g, kiln_node *x);
/* A node of shape s with every element v, for composites and gradients
   whose fill takes an operand's shape: a filled constant (kiln_fill) of at
   most KILN_SPLAT_INLINE elements, a scalar broadcast to s above, so that
   building never allocates in proportion to a shape (a [2^40] zero
   gradient is one scalar; folding makes the small ones constants
   anyway). */
#define KILN_SPLAT_INLINE 65536
kiln_node *kiln_splat(kiln_graph *g, kiln_shape s, float v);

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
