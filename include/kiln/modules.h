/* Kiln front end: modules, subgraphs and programs (PopXL).
   Part of the public API: include "kiln.h", which includes every part. */
#ifndef KILN_MODULES_H
#define KILN_MODULES_H

#include "kiln/execution.h"

KILN_DECLS_BEGIN

/* ---------------------------------------------- modules */

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
   the graph's error on a bad dtype or shape).  Axes marked in shape.sym are
   symbolic (kiln_input_sym): a run feeds them at any size. */
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
/* The graph's error (sticky), else the message of the program's last
   kiln_program_compile or kiln_program_run: "" when it succeeded. */
const char *kiln_program_error(const kiln_program *p);

KILN_DECLS_END
#endif /* KILN_MODULES_H */
