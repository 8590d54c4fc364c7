/* Kiln's side of the ONNX Runtime rows of bench/run: the same ONNX file
 * as bench/ort_bench.js, loaded with kiln_onnx_load at the given input
 * shape, compiled for inference and run; prints
 *     RESULT <median us per call> us
 *
 *     onnx_infer MODEL.onnx DIMS THREADS     (DIMS e.g. 128,784)
 *
 * The input is bench/ort_bench.js's, value for value (so that the outputs
 * can be compared): a 31-bit linear congruential sequence, mapped to
 * [-0.5, 0.5) for a float input and to token ids in [0, 64) for an
 * integer one.  KILN_BENCH_OUTPUT=PATH writes the output there as raw
 * little-endian f32 (bench/run compares it with ONNX Runtime's).  The
 * timing is bench/timing.h's (KILN_BENCH_SECONDS, KILN_BENCH_CLOCK=cpu). */
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

/* The sequence of bench/ort_bench.js's input(). */
static void fill_input(kiln_tensor *in)
{
    uint32_t seed = 1;
    int64_t n = kiln_tensor_numel(in);
    int integer = kiln_tensor_dtype(in) == KILN_I32;
    for (int64_t e = 0; e < n; e++) {
        seed = (seed * 1103515245u + 12345u) & 0x7fffffffu;
        double u = (double)seed / 2147483648.0;
        if (integer)
            kiln_tensor_i32(in)[e] = (int32_t)(u * 64);
        else
            kiln_tensor_f32(in)[e] = (float)(u - 0.5);
    }
}

static void write_output(const kiln_tensor *out, const char *path)
{
    FILE *fp = fopen(path, "wb");
    int64_t n = kiln_tensor_numel(out);
    if (!fp || fwrite(kiln_tensor_f32(out), sizeof(float), (size_t)n, fp) !=
                   (size_t)n || fclose(fp))
        bench_die(prog, path, "cannot write the output");
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
    kiln_tensor *in = kiln_tensor_new(kiln_node_dtype(x), shape);
    kiln_tensor *out = kiln_function_new_output(f, 0);
    if (!in || !out || kiln_tensor_dtype(out) != KILN_F32)
        bench_die(prog, argv[1], "want a float output");
    fill_input(in);
    printf("RESULT %.3f us\n",
           1e6 * bench_time_fn(f, &in, &out, bench_seconds()));
    const char *dump = getenv("KILN_BENCH_OUTPUT");
    if (dump)
        write_output(out, dump);
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
