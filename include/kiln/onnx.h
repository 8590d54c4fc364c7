/* Kiln: ONNX import and export (src/onnx/, built on protobuf-c).
   Part of the public API: include "kiln.h", which includes every part.
   Always declared; a library built without protobuf-c (CMake option
   KILN_ONNX off or the packages missing) returns KILN_ERR_UNSUPPORTED from
   every function here that can fail. */
#ifndef KILN_ONNX_H
#define KILN_ONNX_H

#include "kiln/graph.h"

KILN_DECLS_BEGIN

/* An imported model: the graph's input and output nodes by ONNX name, and
   what the file says about itself.  Owned by the caller (kiln_onnx_free);
   its nodes belong to the graph it was loaded into. */
typedef struct kiln_onnx_model kiln_onnx_model;

typedef struct kiln_onnx_options {
    /* Initializers become trainable f32 variables of this name (prefixed by
       variable_prefix when not NULL) instead of constants; their values are
       the variables' initial values.  Integer initializers stay constants. */
    int trainable_initializers;
    const char *variable_prefix;
    /* The size given to dimensions the model names ("batch", "N") or
       leaves unknown, while building (0 means 1).  Those dimensions of an
       input become symbolic (kiln_input_sym) when they are its first. */
    int64_t named_dim_size;
    /* When not NULL, the shapes of the first n_input_shapes graph inputs
       in the file's order (initializers excluded), replacing the file's
       dims; a dim the file fixes must agree (KILN_ERR_SHAPE otherwise). */
    const kiln_shape *input_shapes;
    int n_input_shapes;
    /* When not NULL, the values the first n_input_values graph inputs will
       be fed (NULL entries: not known), shaped as the inputs and i32 for
       integer inputs, f32 otherwise (KILN_ERR_SHAPE / DTYPE otherwise).
       Ops that need such values while building (Reshape's shape, Resize's
       scales, Trilu's k, ...) take them from here; the inputs stay inputs
       and running them with other values is undefined. */
    const kiln_tensor *const *input_values;
    int n_input_values;
} kiln_onnx_options;

/* Loads the ONNX model at path into g: inputs become kiln_input nodes,
   initializers constants (or variables, see the options), each node Kiln
   ops; tensors stored as external data are read from files in the model's
   folder (a location that leaves the folder is refused).  NULL opt means
   the defaults.  On success *model holds the model (KILN_OK).  Otherwise:
   KILN_ERR_IO for an unreadable or malformed file, KILN_ERR_UNSUPPORTED
   when a node's op, attribute value or dtype has no Kiln mapping (every
   such node is listed, by name and op, before anything is built to run),
   KILN_ERR_ARG / SHAPE / DTYPE when the graph does not check.  *model is
   then a model holding only the message (kiln_onnx_error; free it), or
   NULL when even that could not be made (kiln_last_error). */
kiln_status kiln_onnx_load(kiln_graph *g, const char *path,
                           const kiln_onnx_options *opt,
                           kiln_onnx_model **model);
/* Frees the model (not its graph or nodes).  NULL is a no-op. */
void kiln_onnx_free(kiln_onnx_model *m);
/* The load's status and message: every problem found, one a line ("" after
   a success; "model is NULL" for NULL). */
kiln_status kiln_onnx_status(const kiln_onnx_model *m);
const char *kiln_onnx_error(const kiln_onnx_model *m);

/* The graph's inputs (initializers excluded) and outputs, in the file's
   order: count, ONNX name and node (NULL / 0 when out of range or the load
   failed). */
int kiln_onnx_num_inputs(const kiln_onnx_model *m);
int kiln_onnx_num_outputs(const kiln_onnx_model *m);
const char *kiln_onnx_input_name(const kiln_onnx_model *m, int i);
const char *kiln_onnx_output_name(const kiln_onnx_model *m, int i);
kiln_node *kiln_onnx_input(const kiln_onnx_model *m, int i);
kiln_node *kiln_onnx_output(const kiln_onnx_model *m, int i);
/* The ONNX element type (TensorProto.DataType: 1 float, 7 int64, 9 bool,
   ...) the model gives the i-th input / output; Kiln holds floats as f32,
   bools as f32 0/1 and integers as i32. */
int kiln_onnx_input_type(const kiln_onnx_model *m, int i);
int kiln_onnx_output_type(const kiln_onnx_model *m, int i);
/* The default-domain opset the model imports (0 when none). */
int64_t kiln_onnx_opset(const kiln_onnx_model *m);

/* Reads a serialized TensorProto (the .pb files of ONNX's test data) into a
   new tensor: floats, doubles, float16, bfloat16 and bools as f32,
   integers as i32; *onnx_type
   (when not NULL) gets its ONNX element type.  NULL with kiln_last_error
   for an unreadable, malformed or unsupported tensor or an integer that
   does not fit i32. */
kiln_tensor *kiln_onnx_tensor_read(const char *path, int *onnx_type);

/* Prints what an ONNX file holds, without building anything: IR version,
   opsets, producer, inputs and outputs with types and shapes (named dims by
   name), a histogram of node ops and the number of parameters in the
   initializers.  KILN_ERR_IO (kiln_last_error) for an unreadable or
   malformed file, KILN_ERR_ARG for NULL arguments. */
kiln_status kiln_onnx_info(const char *path, FILE *out);

/* What kiln_onnx_save names; zeros (or NULL options) give the defaults. */
typedef struct kiln_onnx_save_options {
    /* n_out names of the graph outputs; NULL: each output node's name,
       else "output" (one output) or "output_K". */
    const char *const *output_names;
    /* The dim_param written for symbolic dims; NULL: "batch". */
    const char *batch_name;
    /* The GraphProto's name; NULL: "kiln". */
    const char *graph_name;
} kiln_onnx_save_options;

/* Writes the inference graph computing outputs (n_out nodes of g) to path
   as an ONNX model (IR version 8, opset 17, producer "kiln"): the input
   nodes they read become graph inputs, by name, with their shapes (a
   symbolic dim as the dim_param batch_name); variables become
   initializers holding their values in s (or, when s does not hold one,
   the value a zeros, ones, value or values initialiser gives); constants
   initializers.  Batch norm uses its running statistics and dropout is
   the identity: the model evaluates.  The file is replaced atomically.
   Errors (kiln_last_error, nothing written, an existing file untouched):
   KILN_ERR_ARG for NULL or foreign arguments or output names taken
   twice, a failed graph's status,
   KILN_ERR_UNSUPPORTED listing every node without an ONNX form (by id,
   op and name), KILN_ERR_IO when path cannot be written. */
kiln_status kiln_onnx_save(kiln_graph *g, kiln_session *s,
                           kiln_node *const *outputs, int n_out,
                           const kiln_onnx_save_options *opt, const char *path);

KILN_DECLS_END
#endif /* KILN_ONNX_H */
