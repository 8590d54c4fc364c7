/* Marian-style debug output: a summary line and the values of a tensor. */
#include <math.h>

#include "runtime/runtime.h"

static FILE *debug_stream;

void kiln_set_debug_stream(FILE *out) { debug_stream = out; }

static void print_summary(FILE *out, const char *msg, kiln_dtype dt,
                          kiln_shape shape, const void *data, int limit,
                          const char *op)
{
    char b[96];
    int64_t n = kiln_shape_numel(shape);
    double mn = INFINITY, mx = -INFINITY, l2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = dt == KILN_F32 ? ((const float *)data)[i]
                                  : ((const int32_t *)data)[i];
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        l2 += v * v;
    }
    fprintf(out, "Debug: %s\n", msg ? msg : "");
    if (op)
        fprintf(out, "op=%s ", op);
    fprintf(out, "shape=%s size=%lld type=%s device=cpu0 bytes=%lld\n",
            kiln_shape_str(shape, b, sizeof b), (long long)n, kiln_dtype_name(dt),
            (long long)(n * (int64_t)kiln_dtype_size(dt)));
    fprintf(out, "min: %.8g max: %.8g l2-norm: %.8g\n", n ? mn : 0.0,
            n ? mx : 0.0, sqrt(l2));
    fputc('[', out);
    for (int64_t i = 0; i < n && i < limit; i++) {
        if (dt == KILN_F32)
            fprintf(out, "%s%.6g", i ? " " : "", ((const float *)data)[i]);
        else
            fprintf(out, "%s%d", i ? " " : "", ((const int32_t *)data)[i]);
    }
    fprintf(out, "%s]\n", n > limit ? " ..." : "");
}

void kiln_tensor_print(const kiln_tensor *t, const char *msg, int limit,
                       FILE *out)
{
    if (!t || !out)
        return;
    print_summary(out, msg, t->dtype, t->shape, t->data, limit, NULL);
}

void kiln_debug_print(const kiln_node *n, const void *data, const char *what)
{
    FILE *out = debug_stream ? debug_stream : stderr;
    char msg[KILN_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s (%s of %%%d)", n->debug_msg ? n->debug_msg : "",
             what, n->id);
    print_summary(out, msg, n->dtype, n->shape, data, 16, kiln_op_table[n->op].name);
}
