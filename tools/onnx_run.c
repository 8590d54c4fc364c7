/* kiln run model.onnx --input name=file ... --output out.npz: inference
   on an ONNX model from the command line.  Inputs are .npy files (np.save)
   or ONNX TensorProto .pb files; the model is built at their shapes and
   every output is written to one .npz under its ONNX name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "onnx_run.h"
#include "tool.h"

#define RUN_MAX_IO 64

typedef struct run_args {
    const char *model, *output;
    const char *names[RUN_MAX_IO];
    kiln_tensor *values[RUN_MAX_IO];
    int n;
    int threads;
} run_args;

static int ends_with(const char *s, const char *end)
{
    size_t a = strlen(s), b = strlen(end);
    return a >= b && !strcmp(s + a - b, end);
}

int onnx_path(const char *path)
{
    return ends_with(path, ".onnx");
}

int onnx_save_logits(kiln_graph *g, kiln_session *s, kiln_node *logits,
                     const char *path)
{
    const char *names[1] = {"logits"};
    kiln_onnx_save_options o = {.output_names = names};
    if (kiln_onnx_save(g, s, &logits, 1, &o, path) != KILN_OK)
        return kiln_tool_fail("%s", kiln_last_error());
    fprintf(stderr, "kiln: inference graph saved to %s\n", path);
    return 0;
}

static kiln_tensor *read_input(const char *path)
{
    return ends_with(path, ".pb") ? kiln_onnx_tensor_read(path, NULL)
                                  : kiln_npy_read(path);
}

static int parse_input(run_args *a, char *spec)
{
    char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return kiln_tool_fail("--input wants name=file, got '%s'", spec);
    if (a->n == RUN_MAX_IO)
        return kiln_tool_fail("more than %d inputs", RUN_MAX_IO);
    *eq = 0;
    a->names[a->n] = spec;
    a->values[a->n] = read_input(eq + 1);
    if (!a->values[a->n])
        return kiln_tool_fail("%s", kiln_last_error());
    a->n++;
    return 0;
}

static int parse_run_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 2; i < argc; i++) {
        const char *flag = argv[i];
        if (flag[0] != '-') {
            if (a->model)
                return kiln_tool_fail("run: one model only ('%s')", flag);
            a->model = flag;
            continue;
        }
        if (i + 1 >= argc)
            return kiln_tool_fail("%s needs a value", flag);
        char *v = argv[++i];
        if (!strcmp(flag, "--input")) {
            if (parse_input(a, v))
                return 1;
        } else if (!strcmp(flag, "--output"))
            a->output = v;
        else if (!strcmp(flag, "--threads")) {
            if (kiln_tool_parse_int(flag, v, 1, 1024, &a->threads))
                return 1;
        } else
            return kiln_tool_fail("run: unknown option '%s'", flag);
    }
    if (!a->model || !a->output)
        return kiln_tool_fail("run: a model and --output are required");
    return 0;
}

/* The tensors of the model's inputs in its order, from the named ones. */
static int order_inputs(const run_args *a, const kiln_onnx_model *m,
                        kiln_tensor **in, kiln_shape *shapes, int n_in)
{
    for (int k = 0; k < n_in; k++) {
        const char *name = kiln_onnx_input_name(m, k);
        in[k] = NULL;
        for (int i = 0; i < a->n; i++)
            if (!strcmp(a->names[i], name))
                in[k] = a->values[i];
        if (!in[k])
            return kiln_tool_fail("no --input for the model's input '%s'",
                                  name);
        shapes[k] = kiln_tensor_shape(in[k]);
    }
    return 0;
}

/* Runs the model and writes its outputs. */
static int run_model(const run_args *a, kiln_graph *g, kiln_session *s)
{
    kiln_onnx_model *m = NULL;
    if (kiln_onnx_load(g, a->model, NULL, &m) != KILN_OK) {
        int rc =
            kiln_tool_fail("%s", m ? kiln_onnx_error(m) : kiln_last_error());
        kiln_onnx_free(m);
        return rc;
    }
    int n_in = kiln_onnx_num_inputs(m), n_out = kiln_onnx_num_outputs(m);
    kiln_tensor *in[RUN_MAX_IO];
    kiln_shape shapes[RUN_MAX_IO];
    int rc = n_in > RUN_MAX_IO || n_out > RUN_MAX_IO
                 ? kiln_tool_fail("more than %d inputs or outputs", RUN_MAX_IO)
                 : order_inputs(a, m, in, shapes, n_in);
    kiln_onnx_free(m);
    if (rc)
        return rc;
    /* Built again at the inputs' shapes: dims the file leaves open take
       them. */
    kiln_graph_clear(g);
    kiln_onnx_options opt = {.input_shapes = shapes, .n_input_shapes = n_in};
    if (kiln_onnx_load(g, a->model, &opt, &m) != KILN_OK) {
        rc = kiln_tool_fail("%s", kiln_onnx_error(m));
        kiln_onnx_free(m);
        return rc;
    }
    kiln_node *ins[RUN_MAX_IO], *outs[RUN_MAX_IO];
    for (int k = 0; k < n_in; k++)
        ins[k] = kiln_onnx_input(m, k);
    for (int k = 0; k < n_out; k++)
        outs[k] = kiln_onnx_output(m, k);
    kiln_function *f = kiln_compile(s, g, outs, n_out, ins, n_in);
    kiln_tensor_list *l = kiln_tensor_list_new();
    kiln_tensor *out[RUN_MAX_IO];
    for (int k = 0; f && l && k < n_out; k++) {
        out[k] = kiln_function_new_output(f, k);
        if (kiln_tensor_list_add(l, kiln_onnx_output_name(m, k), out[k]))
            kiln_tensor_free(out[k]), rc = 1;
    }
    if (!f || !l)
        rc =
            kiln_tool_fail("%s", f ? kiln_last_error() : kiln_session_error(s));
    else if (!rc && kiln_run(f, in, out) != KILN_OK)
        rc = kiln_tool_fail("%s", kiln_session_error(s));
    else if (!rc && kiln_npz_write(a->output, l, 0) != KILN_OK)
        rc = kiln_tool_fail("%s", kiln_last_error());
    else if (rc)
        rc = kiln_tool_fail("%s", kiln_last_error());
    kiln_tensor_list_free(l);
    kiln_onnx_free(m);
    return rc;
}

int onnx_run_main(int argc, char **argv)
{
    run_args a;
    int rc = parse_run_args(argc, argv, &a);
    if (!rc) {
        kiln_session_options so = {0};
        so.threads = a.threads;
        kiln_graph *g = kiln_graph_new();
        kiln_session *s = kiln_session_new(&so);
        rc = run_model(&a, g, s);
        kiln_session_free(s);
        kiln_graph_free(g);
    }
    for (int i = 0; i < a.n; i++)
        kiln_tensor_free(a.values[i]);
    return rc;
}
