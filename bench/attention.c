/* Fused scaled dot-product attention (issue 12): forward and backward of
 * kiln_scaled_dot_product_attention on q, k, v [B,8,T,64] (dq, dk, dv
 * from an adjoint of the output), compiled.  bench/attention.py runs the
 * same in PyTorch as matmul + softmax + matmul.
 *
 *   attention step   B T THREADS causal|full
 *       RESULT <ms> ms: median time of one forward+backward, and
 *       GFLOPS <value> GFLOP/s of the products it needs (forward 4 B H T^2
 *       D, backward 8 B H T^2 D; half with causal masking), not counting
 *       the scores the backward recomputes
 *   attention memory B T THREADS causal|full
 *       RESULT <MiB> MiB: the peak RSS over two runs less the RSS before
 *       compiling (the inputs allocated): the memory the compiled function
 *       and its runs added,
 *       PEAK_RSS <MiB> MiB: the process's peak RSS,
 *       BUFFERS <bytes> bytes: the compiled function's planned buffers
 *       (outputs, intermediates and the kernels' scratch).
 *
 * KILN_BENCH_SECONDS sets the timed duration (default 1).  Built by
 * bench/CMakeLists.txt as <build>/bench/attention.
 */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kiln.h"
#include "timing.h"

enum { HEADS = 8, DIM = 64 };

/* The current resident set in MiB (/proc/self/statm). */
static double rss_mib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024);
}

/* Bytes of buffers of the compiled function, from its printed header. */
static size_t buffer_bytes(const kiln_function *f)
{
    char *text = NULL;
    size_t len = 0, bytes = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return 0;
    kiln_function_print(f, mem);
    fclose(mem);
    const char *p = strstr(text, "kernels, ");
    if (p)
        bytes = (size_t)strtoull(p + 9, NULL, 10);
    free(text);
    return bytes;
}

/* Times forward+backward, or measures memory ("memory"), of f. */
static void measure(const char *mode, kiln_function *f, kiln_tensor **x,
                    kiln_tensor **y, int64_t b, int64_t t, int causal,
                    double before)
{
    if (strcmp(mode, "step") == 0) {
        double sec = bench_time_fn(f, x, y, bench_seconds());
        double flops = 12.0 * (double)(b * HEADS * DIM) * (double)t * (double)t;
        printf("RESULT %.3f ms\n", sec * 1e3);
        printf("GFLOPS %.1f GFLOP/s\n", flops / (causal ? 2 : 1) / sec / 1e9);
        return;
    }
    for (int i = 0; i < 2; i++)
        if (kiln_run(f, x, y) != KILN_OK)
            bench_die("attention", "run", "failed");
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("RESULT %.1f MiB\n", ru.ru_maxrss / 1024.0 - before);
    printf("PEAK_RSS %.1f MiB\n", ru.ru_maxrss / 1024.0);
    printf("BUFFERS %zu bytes\n", buffer_bytes(f));
}

int main(int argc, char **argv)
{
    if (argc != 6 || (strcmp(argv[1], "step") && strcmp(argv[1], "memory"))) {
        fprintf(stderr,
                "usage: attention step|memory B T THREADS causal|full\n");
        return 2;
    }
    int64_t b = atoll(argv[2]), t = atoll(argv[3]);
    int causal = strcmp(argv[5], "causal") == 0;
    kiln_session_options o = {.threads = atoi(argv[4])};
    kiln_session *s = kiln_session_new(&o);
    kiln_graph *g = kiln_graph_new();
    kiln_shape sh = KILN_SHAPE(b, HEADS, t, DIM);
    kiln_node *in[4];
    for (int i = 0; i < 4; i++)
        in[i] = kiln_input(g, "in", KILN_F32, sh);
    kiln_attention_options ao = {.causal = causal};
    kiln_node *out[4] = {
        kiln_scaled_dot_product_attention(g, in[0], in[1], in[2], NULL, &ao)};
    if (kiln_grads(g, out[0], in[3], in, 3, out + 1) != KILN_OK)
        bench_die("attention", "graph", kiln_graph_error(g));
    kiln_tensor *x[4], *y[4];
    kiln_rng r;
    kiln_rng_seed(&r, 1);
    for (int i = 0; i < 4; i++) {
        x[i] = kiln_tensor_new(KILN_F32, sh);
        float *p = kiln_tensor_f32(x[i]);
        for (int64_t e = 0; e < kiln_tensor_numel(x[i]); e++)
            p[e] = (float)kiln_rng_uniform(&r) - 0.5f;
    }
    double before = rss_mib();
    kiln_function *f = kiln_compile(s, g, out, 4, in, 4);
    if (!f)
        bench_die("attention", "compile", kiln_session_error(s));
    for (int i = 0; i < 4; i++)
        y[i] = kiln_function_new_output(f, i);
    measure(argv[1], f, x, y, b, t, causal, before);
    for (int i = 0; i < 4; i++) {
        kiln_tensor_free(x[i]);
        kiln_tensor_free(y[i]);
    }
    kiln_function_free(f);
    kiln_graph_free(g);
    kiln_session_free(s);
    return 0;
}
