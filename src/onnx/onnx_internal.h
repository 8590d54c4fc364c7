/* What the ONNX importer's files share: the parsed file, host tensors read
   from TensorProtos, the table of values by name and the op converters. */
#ifndef KILN_ONNX_INTERNAL_H
#define KILN_ONNX_INTERNAL_H

#include "base/error.h"
#include "onnx.pb-c.h"

/* TensorProto.DataType values used by name. */
enum {
    OX_FLOAT = 1,
    OX_UINT8 = 2,
    OX_INT8 = 3,
    OX_UINT16 = 4,
    OX_INT16 = 5,
    OX_INT32 = 6,
    OX_INT64 = 7,
    OX_STRING = 8,
    OX_BOOL = 9,
    OX_FLOAT16 = 10,
    OX_DOUBLE = 11,
    OX_UINT32 = 12,
    OX_UINT64 = 13,
    OX_BFLOAT16 = 16,
};

/* Largest model file read (protobuf's own limit is 2 GiB). */
#define OX_MAX_FILE ((int64_t)2 << 30)

/* The deepest nesting of a model's messages ox_read_model takes:
   protobuf-c unpacks nested messages by recursion. */
#define OX_MAX_NESTING 256
/* How deep the ModelProto in buf (n bytes) nests its messages along the
   paths where onnx.proto's messages contain themselves (graphs in
   attributes, types in types), at most limit + 1 (the walk stops there);
   -1 when the wire format is malformed on the way (wire_depth.c). */
int ox_wire_depth(const uint8_t *buf, size_t n, int limit);
/* Reads and unpacks the model at path (protobuf-c checks the wire format).
   NULL with kiln_last_error on failure. */
Onnx__ModelProto *ox_read_model(const char *path);
/* Unpacks a TensorProto file (the conformance data's input_0.pb ...). */
Onnx__TensorProto *ox_read_tensor_file(const char *path);
/* "float", "int64", ... ("type 42" for an unknown one; buf holds it). */
const char *ox_type_name(int type, char *buf, size_t n);
/* 1 when Kiln holds values of this ONNX type (as f32 or i32). */
int ox_type_supported(int type);
/* The Kiln dtype of a supported ONNX type: f32 for floats and bools, i32
   for integers. */
kiln_dtype ox_kiln_dtype(int type);
/* float16 and bfloat16, held in f32 (half.c): the value of a half /
   bfloat16 bit pattern (exact); 1 for the float types (float, double,
   float16, bfloat16). */
float ox_half_value(uint16_t h);
float ox_bfloat16_value(uint16_t h);
int ox_type_is_float(int type);

/* A tensor's values on the host: floats (and bools, as 0/1) in f, integers
   widened to int64 in i; exactly one is set (both NULL when numel is 0). */
typedef struct ox_host {
    int type;
    kiln_shape shape;
    int64_t numel;
    float *f;
    int64_t *i;
} ox_host;

/* Fills h from t, checking its dims (at most KILN_MAX_DIMS, each >= 0, the
   element count bounded) against the size of its data, which comes from
   raw_data, the typed fields or, with dir (the model's folder) set, an
   external file inside dir.  -1 with a message in err (n bytes) on a
   malformed or unsupported tensor; ret_unsupported then says which. */
int ox_host_read(const Onnx__TensorProto *t, const char *dir, ox_host *h,
                 char *err, size_t n, int *unsupported);
void ox_host_free(ox_host *h);
/* The i32 copy of h's integers; -1 (message in err) when one does not fit. */
int ox_host_i32(const ox_host *h, int32_t **out, char *err, size_t n);

/* A named value of the graph being imported. */
typedef struct ox_value {
    const char *name; /* points into the model proto */
    kiln_node *node;  /* NULL when its producer failed */
    int type;         /* ONNX element type */
    ox_host *known;   /* host values when known while loading */
} ox_value;

/* The state of one import. */
typedef struct ox_ctx {
    kiln_graph *g;
    const char *dir;
    kiln_onnx_options opt;
    int64_t opset;
    ox_value *vals;
    int n_vals, cap_vals;
    int n_inputs; /* graph inputs seen so far */
    char *msg;    /* every problem, one a line */
    size_t msg_len, msg_cap;
    kiln_status st; /* the first problem's */
    int n_problems;
    int building;   /* 0 once the graph failed: later nodes are only checked */
    int depth;      /* subgraphs being converted, one inside the other */
    int64_t bodies; /* nodes of subgraphs converted so far (unrolled) */
} ox_ctx;

/* One node being converted: its inputs (NULL for an empty optional name or
   past the node's count) and where its outputs go. */
#define OX_MAX_IO 16
typedef struct ox_node {
    const Onnx__NodeProto *p;
    ox_value *in[OX_MAX_IO];
    int n_in;
    kiln_node *out[OX_MAX_IO];
    int out_type[OX_MAX_IO];
    ox_host *out_known[OX_MAX_IO];
    int n_out;
} ox_node;

/* Records a problem of the current node ("node 'n' (Op): ..."). */
void ox_problem(ox_ctx *c, const ox_node *n, kiln_status st, const char *fmt,
                ...) KILN_PRINTF(4, 5);
/* Records a problem of the model as a whole. */
void ox_model_problem(ox_ctx *c, kiln_status st, const char *fmt, ...)
    KILN_PRINTF(3, 4);

/* Attributes: each getter returns 0 and *out = def when the attribute is
   absent, 0 with its value when present with the right type, -1 (and a
   recorded problem) on a wrong type. */
const Onnx__AttributeProto *ox_attr(const ox_node *n, const char *name);
int ox_attr_int(ox_ctx *c, const ox_node *n, const char *name, int64_t def,
                int64_t *out);
int ox_attr_float(ox_ctx *c, const ox_node *n, const char *name, float def,
                  float *out);
/* *out points into the proto; *count 0 when absent. */
int ox_attr_ints(ox_ctx *c, const ox_node *n, const char *name,
                 const int64_t **out, int64_t *count);
/* A string attribute copied into buf (n bytes; def when absent). */
int ox_attr_string(ox_ctx *c, const ox_node *n, const char *name,
                   const char *def, char *buf, size_t size);

/* count integers of the ints attribute name into out (def for each when
   absent), each at least 0 (def 0) or 1 (def nonzero) and in int range; -1
   (recorded) otherwise. */
int ox_ints_attr(ox_ctx *c, const ox_node *n, const char *name, int count,
                 int64_t def, int64_t *out);

/* The integers of input i, known at load time (an initializer, a Constant
   or folded shape arithmetic); NULL with a recorded problem otherwise. */
const ox_host *ox_known_ints(ox_ctx *c, const ox_node *n, int i);
/* The ONNX type of input i (0 when missing). */
int ox_in_type(const ox_node *n, int i);
/* Input i's node; NULL when missing, or (recorded) when it is an integer
   tensor known only on the host because its values do not fit i32. */
kiln_node *ox_in(ox_ctx *c, const ox_node *n, int i);
/* Input i as an f32 node (integers cast; NULL when missing). */
kiln_node *ox_f32(ox_ctx *c, const ox_node *n, int i);
/* Sets output 0 of n: node and ONNX type; a float result of an integer op
   is cast back to i32. */
void ox_out(ox_ctx *c, ox_node *n, kiln_node *y, int type);
/* A new host tensor of numel int64 values shaped shape (known values). */
ox_host *ox_host_ints(kiln_shape shape, const int64_t *v);
/* A copy of h (NULL for NULL or out of memory). */
ox_host *ox_host_dup(const ox_host *h);
/* Sets n's known output 0 when n is integer arithmetic (Add, Sub, Mul,
   Div, Max, Min, Sum, Neg, Abs) whose inputs are all known integers, so
   that shapes computed from shapes stay known while loading. */
void ox_fold_ints(ox_node *n);
/* The same for float Add, Sub, Mul, Div, Ceil, Floor, Relu, Neg and Abs of
   known floats, computed in float (fold_floats.c). */
void ox_fold_floats(ox_node *n);
/* Sets n's known output 0 when n casts known values to type to: to
   floats or bools from anything, to integers from floats (truncated). */
void ox_fold_cast(ox_node *n, int to);
/* Normalises axis (negative counts from the end) into [0, ndim); -1 and a
   recorded problem when out of range. */
int ox_axis(ox_ctx *c, const ox_node *n, int64_t axis, int ndim);

/* Indices known only when running may count from the end: i < 0 reads
   i + dim (in f32, exact for any dim Kiln can index). */
kiln_node *ox_wrap_indices(ox_ctx *c, kiln_node *idx, int64_t dim);

/* v everywhere in shape s, broadcast from a scalar while running: unlike
   kiln_fill, nothing of s's size is allocated while loading (where s
   comes from a file's declared sizes). */
kiln_node *ox_fill(kiln_graph *g, kiln_shape s, float v);

/* The most values of a constant an op computes while loading from a few
   scalars (Range, the window functions): a tiny file must not ask for
   gigabytes. */
#define OX_MAX_COMPUTED ((int64_t)1 << 24)

/* first + i step for i in [0, count) as an i32 vector (the caller
   bounds the values to i32): tables of about sqrt(count) entries made
   while loading, their broadcast sum formed while running, so a position
   table as long as a declared dim costs little while loading.  NULL
   (recorded) when out of memory. */
kiln_node *ox_arith_indices(ox_ctx *c, const ox_node *n, int64_t first,
                            int64_t step, int64_t count);

/* x reversed along axis (a gather of known indices); NULL (recorded for
   n) when out of memory or the axis is past i32 positions. */
kiln_node *ox_flip(ox_ctx *c, const ox_node *n, kiln_node *x, int axis);

/* x as f32 rounded to type to when that is float16 or bfloat16 (x itself
   otherwise), as Cast does; the gradient passes straight through (half.c). */
kiln_node *ox_round_to(ox_ctx *c, kiln_node *x, int to);

/* Slice's output when some step is not 1 (slice_steps.c): arg holds the
   starts, ends and axes (NULL: 0, 1, ...), cnt of each; -1 recorded. */
int ox_slice_steps(ox_ctx *c, ox_node *n, const int64_t *const arg[3],
                   const int64_t *steps, int64_t cnt);
/* ScatterND's reduction 'mul' of flat ([rows, rest...]) by u ([count,
   rest...]) at the rows row (scatter_mul.c); NULL with a recorded
   problem. */
kiln_node *ox_scatter_mul(ox_ctx *c, const ox_node *n, kiln_node *flat,
                          kiln_node *u, const int32_t *row, int64_t count);

/* The host copy of the values kiln_onnx_options.input_values gives the
   k-th graph input (name, of Kiln shape s and ONNX type), NULL when none
   is given (or floats too many to keep) or, with a recorded problem, when
   they do not match the input. */
ox_host *ox_known_input(ox_ctx *c, const char *name, int k, kiln_shape s,
                        int type);

/* The converters, one per op type; each returns 0, or -1 after recording
   why.  attrs lists the attributes the converter reads (comma-separated);
   any other attribute is reported as unsupported. */
typedef int (*ox_convert_fn)(ox_ctx *c, ox_node *n);
typedef struct ox_op {
    const char *name;
    ox_convert_fn fn;
    const char *attrs;
} ox_op;
/* The op of this type, NULL when unsupported. */
const ox_op *ox_find_op(const char *type);
extern const ox_op ox_math_ops[], ox_shape_ops[], ox_tensor_ops[], ox_nn_ops[];
/* Added by issue 13's second round: losses, ops_more.c's, Resize and
   ops_extra.c's and ops_misc.c's. */
extern const ox_op ox_loss_ops[], ox_more_ops[], ox_resize_ops[],
    ox_extra_ops[], ox_misc_ops[], ox_nd_ops[];
/* RNN, GRU and LSTM, unrolled (ops_rnn.c). */
extern const ox_op ox_rnn_ops[];
/* HardSwish, Celu, MeanVarianceNormalization, LRN (ops_act.c). */
extern const ox_op ox_act_ops[];
/* Einsum (ops_einsum.c). */
extern const ox_op ox_einsum_ops[];
/* GridSample (ops_grid.c). */
extern const ox_op ox_grid_ops[];
/* Sets n's output 1, MaxPool's Indices, for x (1-D or 2-D) pooled into y
   (pool_indices.c); -1 with a recorded problem. */
int ox_pool_indices(ox_ctx *c, ox_node *n, kiln_node *x, kiln_node *y);
/* Scopes of subgraphs (load.c): values are a stack searched from the
   top, so a subgraph's names shadow the outer graph's while it is
   converted and vanish with ox_scope_pop(c, mark), mark being c->n_vals
   before.  ox_bind adds a value (taking known); ox_lookup finds one;
   ox_convert_body converts a subgraph's initializers and nodes. */
ox_value *ox_bind(ox_ctx *c, const char *name, kiln_node *node, int type,
                  ox_host *known);
ox_value *ox_lookup(ox_ctx *c, const char *name);
void ox_scope_pop(ox_ctx *c, int mark);
void ox_convert_body(ox_ctx *c, const Onnx__GraphProto *gp);
/* Conv's 1-D or 2-D convolution of x by wt (+ bias, may be NULL) with n's
   attributes (ops_nn.c); NULL (recorded) on bad attributes. */
kiln_node *ox_conv_build(ox_ctx *c, const ox_node *n, kiln_node *x,
                         kiln_node *wt, kiln_node *bias);
/* QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
   QLinearMatMul, ConvInteger, QLinearConv (ops_quant.c). */
extern const ox_op ox_quant_ops[];
/* Gradient, Adagrad, Momentum, Adam of ai.onnx.preview.training, their
   names prefixed by the domain (ops_train.c). */
extern const ox_op ox_train_ops[];
/* DFT and STFT by twiddle products (ops_dft.c). */
extern const ox_op ox_dft_ops[];
/* If, Loop and Scan, unrolled (ops_control.c). */
extern const ox_op ox_control_ops[];
/* Det (ops_det.c), MelWeightMatrix (ops_mel.c), RoiAlign (ops_roi.c). */
extern const ox_op ox_det_ops[], ox_mel_ops[], ox_roi_ops[];
/* ReverseSequence and MaxUnpool (ops_reorder.c). */
extern const ox_op ox_reorder_ops[];
/* Conv (group given) and MaxPool / AveragePool (max set) of a 5-D x from
   Kiln's 2-D ops (ops_conv3d.c); -1 with a recorded problem. */
int ox_conv3d(ox_ctx *c, ox_node *n, int64_t group);
int ox_pool3d(ox_ctx *c, ox_node *n, int max);
/* Most input depths times kernel depths a 3-D ConvTranspose places (its
   table of output depths is made while loading). */
#define OX_MAX_DEPTH_TAPS ((int64_t)1 << 24)
/* ConvTranspose of a 5-D x by wt [C, O/group, kd, kh, kw] with strides
   and dilations, without padding: [N, O, full...] (ops_conv3d.c, from
   Kiln's conv_transpose2d); NULL with a recorded problem. */
kiln_node *ox_conv_transpose3d(ox_ctx *c, const ox_node *n, kiln_node *x,
                               kiln_node *wt, int group, const int64_t *stride,
                               const int64_t *dil, const int64_t *full);
/* Pad's modes "reflect" and "edge" of x by ONNX's pads (begins, then
   ends), on its last two dims only; NULL (recorded) otherwise. */
kiln_node *ox_pad_mode(ox_ctx *c, const ox_node *n, kiln_node *x,
                       const int64_t *pads, const char *mode);
/* Input i of a binary op with a as its other operand, as f32; before
   opset 7, with broadcast=1 and an axis, reshaped to a's rank aligned at
   axis (ONNX's old broadcast). */
kiln_node *ox_legacy_broadcast(ox_ctx *c, const ox_node *n, kiln_node *a,
                               int i);

#endif
