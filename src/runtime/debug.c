/* Marian-style debug output: for a node marked with kiln_debug, its value
   after forward and its gradient after backward, as two timestamped lines
   and the values:
     [2026-11-21 15:10:51] Debug: Parameter x op=variable
     [2026-11-21 15:10:51] shape=1x1 size=1 type=float32 device=cpu0 ptr=...
   bytes=64 min: 2.00000000 max: 2.00000000 l2-norm: 2.00000000
     [[   2.00000000 ]]
   Dimensions longer than 2 EDGE show their first and last EDGE entries
   around "...". */
#include <math.h>
#include <string.h>

#include "base/log.h"
#include "runtime/runtime.h"

#define EDGE 3

/* A growing text buffer on the stack first. */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *s)
{
    size_t k = strlen(s);
    if (t->n + k + 1 > t->cap)
        k = t->cap - t->n - 1;
    memcpy(t->p + t->n, s, k);
    t->n += k;
    t->p[t->n] = 0;
}

static void put_value(text *t, kiln_dtype dt, const void *data, int64_t i)
{
    char b[48];
    if (dt == KILN_F32)
        snprintf(b, sizeof b, " %12.8f", ((const float *)data)[i]);
    else
        snprintf(b, sizeof b, " %12d", ((const int32_t *)data)[i]);
    put(t, b);
}

/* Nested brackets like numpy, one row per line. */
static void put_dims(text *t, kiln_dtype dt, const void *data, kiln_shape s,
                     int axis, int64_t offset, int64_t stride)
{
    int64_t len = s.d[axis], inner = stride / (len ? len : 1);
    put(t, "[");
    for (int64_t i = 0; i < len; i++) {
        if (len > 2 * EDGE && i == EDGE) {
            put(t, axis == s.ndim - 1 ? " ..." : "...\n");
            i = len - EDGE - 1;
            continue;
        }
        if (axis == s.ndim - 1) {
            put_value(t, dt, data, offset + i);
        } else {
            if (i > 0)
                for (int k = 0; k <= axis; k++)
                    put(t, " ");
            put_dims(t, dt, data, s, axis + 1, offset + i * inner, inner);
            if (i + 1 < len)
                put(t, "\n");
        }
    }
    put(t, axis == s.ndim - 1 ? " ]" : "]");
}

/* To out when given, else as a log line (timestamped, always delivered:
   the user asked for it). */
static void emit(FILE *out, const char *line)
{
    if (out) {
        fputs(line, out);
        fputc('\n', out);
    } else {
        kiln_logging_message(KILN_LOGGING_INFO, 1, NULL, "%s", line);
    }
}

/* The head line, the summary line with the values, and a blank line. */
static void summary(FILE *out, const char *head, const char *op, kiln_dtype dt,
                    kiln_shape shape, const void *data, int limit)
{
    char buf[8192], line[512], dims[128] = "";
    text t = {buf, 0, sizeof buf};
    buf[0] = 0;
    int64_t n = kiln_shape_numel(shape);
    double mn = INFINITY, mx = -INFINITY, l2 = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = dt == KILN_F32 ? ((const float *)data)[i]
                                  : ((const int32_t *)data)[i];
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        l2 += v * v;
    }
    for (int i = 0; i < shape.ndim; i++) {
        size_t k = strlen(dims);
        snprintf(dims + k, sizeof dims - k, "%s%lld", i ? "x" : "",
                 (long long)shape.d[i]);
    }
    size_t bytes = (size_t)n * kiln_dtype_size(dt);
    snprintf(line, sizeof line, "%s%s%s", head, op ? " op=" : "", op ? op : "");
    emit(out, line);
    snprintf(line, sizeof line,
             "shape=%s size=%lld type=%s device=cpu0 ptr=%llu bytes=%zu\n"
             "min: %.8f max: %.8f l2-norm: %.8f\n",
             shape.ndim ? dims : "scalar", (long long)n,
             dt == KILN_F32 ? "float32" : "int32",
             (unsigned long long)(uintptr_t)data,
             bytes ? (bytes + 63) / 64 * 64 : 0, n ? mn : 0.0, n ? mx : 0.0,
             sqrt(l2));
    put(&t, line);
    if (limit == 0)
        ;
    else if (shape.ndim == 0)
        put_value(&t, dt, data, 0);
    else if (n > 0)
        put_dims(&t, dt, data, shape, 0, 0, n);
    else
        put(&t, "[]");
    put(&t, "\n");
    emit(out, buf);
}

void kiln_tensor_print(const kiln_tensor *t, const char *msg, int limit,
                       FILE *out)
{
    if (!t || !out)
        return;
    char head[256];
    snprintf(head, sizeof head, "Debug: %s", msg ? msg : "");
    summary(out, head, NULL, t->dtype, t->shape, t->data, limit);
}

void kiln_debug_print(FILE *out, const kiln_node *n, const void *data,
                      const char *what)
{
    char head[KILN_ERRMSG_MAX];
    snprintf(head, sizeof head, "%s %s",
             strcmp(what, "gradient") == 0 ? "Debug Grad:" : "Debug:",
             n->debug_msg && *n->debug_msg ? n->debug_msg : kiln_node_name(n));
    summary(out, head, kiln_op_table[n->op].name, n->dtype, n->shape, data, -1);
}
