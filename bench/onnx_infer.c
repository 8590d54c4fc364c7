/* Kiln's side of the ONNX Runtime rows of bench/run: the same ONNX file
 * as bench/ort_bench.js, loaded with kiln_onnx_load at the given input
 * shape, compiled for inference and run; prints
 *     RESULT <median us per call> us
 *
 *     onnx_infer MODEL.onnx DIMS THREADS     (DIMS e.g. 128,784)
 *
 * The input is uniform in [-0.5, 0.5); the timing is bench/timing.h's
 * (KILN_BENCH_SECONDS, KILN_BENCH_CLOCK=cpu). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "timing.h"

static const char *prog = "onnx_infer";

static kiln_shape parse_dims(const char *s)
{
    kiln_shape sh = {0};
    while (*s && sh.ndim < KILN_MAX_DIMS) {
        char *end;
        long long d = strtoll(s, &end, 10);
        if (end == s || d < 1 || (*end && *end != ','))
            bench_die(prog, "DIMS", "want positive sizes like 128,784");
        sh.d[sh.ndim++] = d;
        s = *end ? end + 1 : end;
    }
    if (*s || !sh.ndim)
        bench_die(prog, "DIMS", "want 1 to 8 sizes");
    return sh;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: onnx_infer MODEL.onnx DIMS THREADS\n");
        return 2;
    }
    kiln_shape shape = parse_dims(argv[2]);
    int threads = atoi(argv[3]);
    if (threads < 1)
        bench_die(prog, "THREADS", "must be positive");
    kiln_session_options so = {.threads = threads};
    kiln_session *s = kiln_session_new(&so);
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_options opt = {.input_shapes = &shape, .n_input_shapes = 1};
    kiln_onnx_model *m = NULL;
    if (!s || !g)
        bench_die(prog, "setup", kiln_last_error());
    if (kiln_onnx_load(g, argv[1], &opt, &m) != KILN_OK)
        bench_die(prog, argv[1], m ? kiln_onnx_error(m) : kiln_last_error());
    if (kiln_onnx_num_inputs(m) != 1 || kiln_onnx_num_outputs(m) != 1)
        bench_die(prog, argv[1], "want one input and one output");
    kiln_node *x = kiln_onnx_input(m, 0), *y = kiln_onnx_output(m, 0);
    kiln_compile_options co = kiln_compile_defaults();
    co.inference = 1;
    kiln_function *f = kiln_compile_ex(s, g, &y, 1, &x, 1, &co);
    if (!f)
        bench_die(prog, "compile", kiln_session_error(s));
    kiln_tensor *in = kiln_tensor_new(KILN_F32, shape);
    kiln_tensor *out = kiln_function_new_output(f, 0);
    kiln_rng r;
    kiln_rng_seed(&r, 1);
    float *p = kiln_tensor_f32(in);
    for (int64_t e = 0; e < kiln_tensor_numel(in); e++)
        p[e] = (float)kiln_rng_uniform(&r) - 0.5f;
    printf("RESULT %.3f us\n",
           1e6 * bench_time_fn(f, &in, &out, bench_seconds()));
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
