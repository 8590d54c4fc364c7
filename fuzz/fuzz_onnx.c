/* kiln_onnx_load and kiln_onnx_info on one ONNX model; a model that loads
   and whose work is small is compiled and run on zero inputs of its
   declared shapes, so converters that build graphs the kernels cannot take
   show up too. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "kiln.h"

#define MAX_IO 16
/* Element operations allowed for one run: a few milliseconds, so that an
   input is slow only when the reader is. */
#define MAX_WORK ((int64_t)1 << 25)

static int64_t numel(const kiln_node *n)
{
    int64_t v = kiln_shape_numel(kiln_node_shape(n));
    return v > 0 ? v : 0;
}

/* Element operations of one node, bounded above: its inputs and output
   once, and for a contraction the inner length per output element. */
static int64_t node_work(const kiln_node *n)
{
    const char *op = kiln_node_op_name(n);
    int64_t w = numel(n), out = numel(n);
    for (int k = 0; k < kiln_node_num_inputs(n); k++)
        w += numel(kiln_node_input(n, k));
    if (!strcmp(op, "matmul") || !strcmp(op, "matmul_acc") ||
        !strncmp(op, "attention", 9)) {
        kiln_shape a = kiln_node_shape(kiln_node_input(n, 0));
        int64_t inner = 1;
        for (int k = a.ndim - 2; k < a.ndim; k++)
            if (k >= 0 && a.d[k] > inner)
                inner = a.d[k];
        w += out * inner;
    } else if (!strncmp(op, "conv", 4)) {
        const kiln_node *wt = kiln_node_input(n, 1);
        w += out * numel(wt);
    } else if (!strncmp(op, "resample2d", 10)) {
        /* a separable resampling matrix: each output reads up to a row
           and a column of its plane (an average pool or a resize) */
        kiln_shape a = kiln_node_shape(kiln_node_input(n, 0));
        if (a.ndim >= 2)
            w += out * (a.d[a.ndim - 1] + a.d[a.ndim - 2]);
    }
    return w;
}

/* The work of every node the outputs depend on, each counted once;
   stops past MAX_WORK. */
static int64_t graph_work(kiln_node *const *outs, int n_out, int n_nodes)
{
    unsigned char *seen = calloc((size_t)n_nodes + 1, 1);
    kiln_node **stack = malloc(((size_t)n_nodes + 1) * sizeof *stack);
    int64_t work = 0;
    int top = 0;
    if (!seen || !stack)
        abort();
    for (int k = 0; k < n_out; k++)
        stack[top++] = outs[k];
    while (top && work <= MAX_WORK) {
        kiln_node *n = stack[--top];
        int id = kiln_node_id(n);
        if (!n || id < 0 || id > n_nodes || seen[id])
            continue;
        seen[id] = 1;
        work += node_work(n);
        for (int k = 0; k < kiln_node_num_inputs(n); k++)
            if (top <= n_nodes)
                stack[top++] = kiln_node_input(n, k);
    }
    free(seen);
    free(stack);
    return work;
}

static void run_zero(kiln_graph *g, const kiln_onnx_model *m)
{
    int n_in = kiln_onnx_num_inputs(m), n_out = kiln_onnx_num_outputs(m);
    if (n_in > MAX_IO || n_out > MAX_IO || n_out < 1)
        return;
    kiln_node *ins[MAX_IO], *outs[MAX_IO];
    for (int k = 0; k < n_in; k++)
        ins[k] = kiln_onnx_input(m, k);
    for (int k = 0; k < n_out; k++)
        if (!(outs[k] = kiln_onnx_output(m, k)))
            return;
    if (graph_work(outs, n_out, kiln_graph_node_count(g)) > MAX_WORK)
        return;
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = s ? kiln_compile(s, g, outs, n_out, ins, n_in) : NULL;
    kiln_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    int ok = f != NULL;
    for (int k = 0; ok && k < n_in; k++)
        ok = (in[k] = kiln_tensor_new(kiln_node_dtype(ins[k]),
                                      kiln_node_shape(ins[k]))) != NULL;
    for (int k = 0; ok && k < n_out; k++)
        ok = (out[k] = kiln_function_new_output(f, k)) != NULL;
    if (ok)
        kiln_run(f, in, out);
    for (int k = 0; k < MAX_IO; k++) {
        kiln_tensor_free(in[k]);
        kiln_tensor_free(out[k]);
    }
    kiln_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    kiln_onnx_info(path, fuzz_null());
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    if (!g)
        abort();
    if (kiln_onnx_load(g, path, NULL, &m) == KILN_OK)
        run_zero(g, m);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    return 0;
}
