/* What the ONNX exporter's files share: the state of one export (the
   protobuf messages being built, in an arena freed at once), the value
   name of every Kiln node, and the helpers that add ONNX nodes,
   attributes and initializers. */
#ifndef KILN_ONNX_SAVE_H
#define KILN_ONNX_SAVE_H

#include "base/arena.h"
#include "graph/graph.h"
#include "onnx/onnx_internal.h"

/* How a needed Kiln node is written (save_match.c). */
typedef enum sv_kind {
    SV_UNSUPPORTED,
    SV_LEAF,          /* input, variable, constant, mode */
    SV_OP,            /* the node's own op, its inputs as operands */
    SV_ALIAS,         /* the value of input 0 (dropout, stop_gradient) */
    SV_SOFTMAX,       /* Kiln's decomposition of softmax, at its div */
    SV_LOG_SOFTMAX,   /* of log_softmax, at its last sub */
    SV_BATCH_NORM,    /* norm of running statistics (evaluation) */
    SV_INSTANCE_NORM, /* norm with one group per channel */
    SV_LAYER_NORM,    /* norm with one group over the dims from the axis */
    SV_GROUP_NORM,    /* norm with groups of channels: instance norm of
                         the input seen as [N, groups, rest] */
} sv_kind;

/* A node's kind and the Kiln nodes its ONNX form reads. */
typedef struct sv_match {
    sv_kind kind;
    int axis;                    /* softmax and log_softmax */
    const kiln_node *const *dep; /* operands of the ONNX form: own or */
    int n_dep;                   /* the node's inputs */
    const kiln_node *own[5];
} sv_match;

/* Classifies n; deps are the nodes its ONNX form needs (for an
   unsupported node, its inputs, so that every unsupported node upstream
   is listed too). */
void sv_match_node(const kiln_node *n, sv_match *m);

/* The state of one export. */
typedef struct sv_ctx {
    kiln_arena arena; /* every message, name and array below */
    const kiln_graph *g;
    kiln_session *s;
    const char *batch;   /* dim_param of symbolic dims */
    const char **name;   /* value name by node id (NULL: not yet) */
    unsigned char *need; /* by node id: 1 when the outputs read it */
    unsigned char *out;  /* by node id: 1 when it is a model output */
    sv_match *match;     /* by node id, for needed nodes */
    const char **used;   /* every value name taken, for uniqueness */
    int n_used, cap_used;
    Onnx__NodeProto **nodes;
    int n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    int n_inits, cap_inits;
    Onnx__ValueInfoProto **inputs;
    int n_inputs, cap_inputs;
    char msg[KILN_ERRMSG_MAX]; /* every problem, "; " between them */
    kiln_status st;            /* the first problem's */
    int n_problems, n_unlisted;
} sv_ctx;

/* Records a problem; the first one's status is the export's. */
void sv_problem(sv_ctx *c, kiln_status st, const char *fmt, ...)
    KILN_PRINTF(3, 4);
/* Records that n cannot be written, naming it ("%7 (one_hot 'name'):
   why"). */
void sv_node_problem(sv_ctx *c, const kiln_node *n, const char *fmt, ...)
    KILN_PRINTF(3, 4);

/* A copy of s in the arena (NULL when out of memory, recorded). */
char *sv_strdup(sv_ctx *c, const char *s);
/* Takes a value name: want itself when free, else want_1, want_2 ...;
   returns the name taken (arena). */
const char *sv_claim(sv_ctx *c, const char *want);
/* The value name of n, claimed on first use ("relu_7" for an unnamed
   node, its name for a named one). */
const char *sv_name(sv_ctx *c, const kiln_node *n);
/* A fresh value name for an intermediate result of n's ONNX form. */
const char *sv_temp(sv_ctx *c, const kiln_node *n, const char *what);

/* Appends an ONNX node op(in[0..n_in)) -> out; NULL when out of memory
   (recorded).  Attributes are added with the setters below. */
Onnx__NodeProto *sv_op(sv_ctx *c, const char *op, const char *const *in,
                       int n_in, const char *out);
/* The same with one or two operands. */
Onnx__NodeProto *sv_op1(sv_ctx *c, const char *op, const char *a,
                        const char *out);
Onnx__NodeProto *sv_op2(sv_ctx *c, const char *op, const char *a, const char *b,
                        const char *out);
void sv_attr_int(sv_ctx *c, Onnx__NodeProto *p, const char *name, int64_t v);
void sv_attr_float(sv_ctx *c, Onnx__NodeProto *p, const char *name, float v);
void sv_attr_ints(sv_ctx *c, Onnx__NodeProto *p, const char *name,
                  const int64_t *v, int n);

/* An initializer named want (claimed) holding numel values of dt (f32 or
   i32, little-endian in raw_data) shaped s, or int64 values (is_i64);
   returns its name, NULL when out of memory (recorded). */
const char *sv_init(sv_ctx *c, const char *want, int onnx_type, kiln_shape s,
                    const void *data);
/* A 1-D int64 initializer (shapes, axes, pads). */
const char *sv_ints(sv_ctx *c, const kiln_node *n, const char *what,
                    const int64_t *v, int count);

/* The ONNX element type of a Kiln dtype (FLOAT or INT32). */
int sv_onnx_type(kiln_dtype dt);
/* A graph input or output's ValueInfoProto: type and shape, symbolic
   dims as the dim_param c->batch. */
Onnx__ValueInfoProto *sv_value_info(sv_ctx *c, const char *name, kiln_dtype dt,
                                    kiln_shape s);

/* Writes n (its kind in c->match) as ONNX nodes whose last output is
   sv_name(c, n); problems are recorded (save_ops.c). */
void sv_emit(sv_ctx *c, const kiln_node *n);
/* Reshape, permute, broadcast, slice and pad (save_move.c). */
void sv_emit_move(sv_ctx *c, const kiln_node *n);
/* Convolutions, pools and normalisations (save_nn.c). */
void sv_emit_conv(sv_ctx *c, const kiln_node *n);
void sv_emit_pool(sv_ctx *c, const kiln_node *n);
void sv_emit_norm(sv_ctx *c, const kiln_node *n, const sv_match *m);
/* Leaves: an initializer from the session or the constant's data. */
void sv_emit_leaf(sv_ctx *c, const kiln_node *n);

#endif
