/* Graph-to-graph passes and the pipeline that runs them.

   Every pass has one signature: it reads a compile unit (kiln_unit: a
   graph with its outputs and fed inputs) and builds a new unit in a fresh
   graph, since nodes are immutable.  The pipeline validates each result,
   prints it when asked, and frees the graph it replaced. */
#ifndef KILN_PASSES_PASSES_H
#define KILN_PASSES_PASSES_H

#include "graph/graph.h"

typedef struct kiln_unit {
    kiln_graph *g;
    kiln_node **outputs; /* n_out nodes of g (may repeat) */
    int n_out;
    kiln_node **inputs; /* n_in input nodes of g, bound per run */
    int n_in;
} kiln_unit;

/* An empty unit (a new graph, zeroed output and input arrays) in q;
   KILN_ERR_MEMORY (q empty) when out of memory. */
kiln_status kiln_unit_alloc(kiln_unit *q, int n_out, int n_in);
/* Frees the graph and the arrays of p and zeroes it. */
void kiln_unit_free(kiln_unit *p);

/* Computes node n into out from its inputs' values in[0..n_in-1]
   (contiguous, row-major) as a run would.  KILN_OK, or another status when
   n cannot be evaluated (a leaf, or input values its kernel refuses), out
   then unspecified.  Whoever runs the passes supplies it (the runtime runs
   the reference kernels), so that passes never call a kernel: constant
   folding evaluates through it. */
typedef kiln_status (*kiln_eval_fn)(const kiln_node *n, void *out,
                                    void *const *in);

/* Builds out (an empty graph with outputs/inputs arrays of in's sizes) from
   in, evaluating nodes (if at all) with eval, which may be NULL: then
   nothing is folded.  Errors go to out->g (kiln_graph_fail) or are
   returned. */
typedef kiln_status (*kiln_pass_fn)(const kiln_unit *in, kiln_unit *out,
                                    const kiln_compile_options *opt,
                                    kiln_eval_fn eval);

kiln_status kiln_pass_dce(const kiln_unit *in, kiln_unit *out,
                          const kiln_compile_options *opt, kiln_eval_fn eval);
kiln_status kiln_pass_cse(const kiln_unit *in, kiln_unit *out,
                          const kiln_compile_options *opt, kiln_eval_fn eval);
kiln_status kiln_pass_fold(const kiln_unit *in, kiln_unit *out,
                           const kiln_compile_options *opt, kiln_eval_fn eval);
kiln_status kiln_pass_simplify(const kiln_unit *in, kiln_unit *out,
                               const kiln_compile_options *opt,
                               kiln_eval_fn eval);
kiln_status kiln_pass_fuse(const kiln_unit *in, kiln_unit *out,
                           const kiln_compile_options *opt, kiln_eval_fn eval);
kiln_status kiln_pass_conv_fuse(const kiln_unit *in, kiln_unit *out,
                                const kiln_compile_options *opt,
                                kiln_eval_fn eval);
/* passes/bn_fold.c: evaluation only, and batch norm into its conv */
kiln_status kiln_pass_eval_mode(const kiln_unit *in, kiln_unit *out,
                                const kiln_compile_options *opt,
                                kiln_eval_fn eval);
kiln_status kiln_pass_bn_fold(const kiln_unit *in, kiln_unit *out,
                              const kiln_compile_options *opt,
                              kiln_eval_fn eval);
kiln_status kiln_pass_gemm_acc(const kiln_unit *in, kiln_unit *out,
                               const kiln_compile_options *opt,
                               kiln_eval_fn eval);

/* Runs the pipeline of opt over p, replacing p->g (and its arrays' nodes)
   by the final graph; eval as for kiln_pass_fn.  On error writes a message
   into err and leaves p valid (its graph is the last good one). */
kiln_status kiln_passes_run(kiln_unit *p, const kiln_compile_options *opt,
                            kiln_eval_fn eval, char *err, size_t err_len);
/* Checks opt (pass names, limits); KILN_ERR_ARG with a message in err. */
kiln_status kiln_passes_check_options(const kiln_compile_options *opt,
                                      char *err, size_t err_len);

/* Checks the invariants every pass must keep: node ids in order, each input
   in the graph and defined before its use, arities, dtypes and shapes equal
   to what the op infers from its inputs and attributes, inputs listed are
   input nodes, outputs in the graph.  KILN_ERR_STATE and a message naming
   the node otherwise. */
kiln_status kiln_unit_validate(const kiln_unit *p, char *err, size_t err_len);
/* kiln_graph_print with fused programs spelled out and the outputs listed. */
void kiln_unit_print(const kiln_unit *p, FILE *out);

/* ------------------------------------------------------------ symbolic sizes
 */

/* The symbolic size u was built at: that of its inputs' symbolic axes
   (kiln_input_sym), or -1 when none has any. */
int64_t kiln_unit_sym_size(const kiln_unit *u);
/* Builds out (allocated here) from u with every symbolic axis at size, the
   fills and counts that follow it re-derived, and no marks left; validates
   it.  KILN_ERR_SHAPE with a message in err naming the node that cannot be
   built at that size, numbered as ids[id] says (NULL: u's own ids). */
kiln_status kiln_unit_specialise(const kiln_unit *u, int64_t size,
                                 const int *ids, kiln_unit *out, char *err,
                                 size_t err_len);
/* Refuses (KILN_ERR_SHAPE, a message in err naming the node as
   kiln_unit_specialise does) a unit in which some node keeps the symbolic
   size fixed, so that it could not be specialised at another size. */
kiln_status kiln_unit_check_sym(const kiln_unit *u, const int *ids, char *err,
                                size_t err_len);

/* ------------------------------------------------------------ memory */

/* Where every computed node of a unit lives in one block of memory. */
typedef struct kiln_memory_plan {
    size_t *offset;   /* by node id: byte offset of a computed node's buffer */
    int *inplace;     /* by node id: the input node whose buffer it took over
                         (it writes over that input), or -1 */
    int *storage;     /* by node id: the variable node whose storage holds
                         it (an update written in place), or -1 */
    size_t *scratch;  /* by node id: byte offset of the scratch memory its
                         fast kernel needs (kiln_cpu_scratch_bytes), live
                         for its step only; (size_t)-1 for none */
    size_t peak;      /* bytes of the block */
    size_t unplanned; /* bytes with one buffer per computed node */
} kiln_memory_plan;

/* Plans p's buffers (reuse 0: one buffer each, in order).  Leaves are not
   planned.  KILN_ERR_MEMORY when out of memory. */
kiln_status kiln_plan_memory(const kiln_unit *p, int reuse,
                             kiln_memory_plan *mp);
void kiln_memory_plan_free(kiln_memory_plan *mp);

/* ------------------------------------------------------------ rewriting */

/* Walks in's nodes in order, building each one's replacement in out->g;
   map[id] is the replacement of in node id (NULL until built). */
typedef struct kiln_rewriter {
    const kiln_unit *in;
    kiln_unit *out;
    kiln_node **map;
    const kiln_compile_options *opt;
    kiln_eval_fn eval;
    void *state;
} kiln_rewriter;

/* Returns the node of out->g that replaces old, whose inputs' replacements
   are in[0..old->n_in-1] (NULL for an input the pass did not keep); NULL
   clones old onto in. */
typedef kiln_node *(*kiln_rewrite_fn)(kiln_rewriter *rw, const kiln_node *old,
                                      kiln_node **in);

/* Rewrites every node of in for which keep is NULL or keep[id] is set, in
   order, with fn (NULL: plain copy), then maps the outputs and inputs.
   fn finds opt, eval and state in its kiln_rewriter. */
kiln_status kiln_rewrite(const kiln_unit *in, kiln_unit *out,
                         const kiln_compile_options *opt, kiln_eval_fn eval,
                         const unsigned char *keep, kiln_rewrite_fn fn,
                         void *state);
/* Number of uses of each node of p (by node id, counting every input edge
   and every listed output); caller frees. */
int *kiln_unit_uses(const kiln_unit *p);
/* 1 when n is an f32 constant with every element equal to v (bitwise for
   zero: -0 and +0 differ). */
int kiln_is_constant_value(const kiln_node *n, float v);

/* passes/gelu_match.c: old's replacement, one gelu_tanh node, when old is
   the tanh gelu written out in primitives (as kiln_gelu builds it, or an
   ONNX export); else NULL. */
kiln_node *kiln_match_gelu_tanh(kiln_rewriter *rw, const kiln_node *old);
/* passes/attention_match.c: old's replacement, one fused attention op, when
   old is matmul(softmax(q k^T * scale + mask), v) written out in primitives
   with a constant mask (rw->state: the uses of each node of rw->in); else
   NULL. */
kiln_node *kiln_match_attention(kiln_rewriter *rw, const kiln_node *old);

#endif
