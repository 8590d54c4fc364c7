/* The import's bookkeeping: the list of problems, attribute getters with
   type checks, and the helpers converters share. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static void append(ox_ctx *c, const char *line)
{
    size_t len = strlen(line);
    if (c->msg_len + len + 2 > c->msg_cap) {
        size_t cap = (c->msg_cap ? c->msg_cap * 2 : 1024) + len;
        char *m = realloc(c->msg, cap);
        if (!m)
            return; /* the status still says it failed */
        c->msg = m;
        c->msg_cap = cap;
    }
    if (c->msg_len)
        c->msg[c->msg_len++] = '\n';
    memcpy(c->msg + c->msg_len, line, len + 1);
    c->msg_len += len;
}

static void vproblem(ox_ctx *c, const ox_node *n, kiln_status st,
                     const char *fmt, va_list ap)
{
    char what[KILN_ERRMSG_MAX], line[KILN_ERRMSG_MAX + 256];
    vsnprintf(what, sizeof what, fmt, ap);
    if (n)
        snprintf(line, sizeof line, "node '%s' (%s): %s",
                 n->p->name ? n->p->name : "",
                 n->p->op_type ? n->p->op_type : "", what);
    else
        snprintf(line, sizeof line, "%s", what);
    append(c, line);
    if (c->st == KILN_OK)
        c->st = st;
    c->n_problems++;
}

void ox_problem(ox_ctx *c, const ox_node *n, kiln_status st, const char *fmt,
                ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(c, n, st, fmt, ap);
    va_end(ap);
}

void ox_model_problem(ox_ctx *c, kiln_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(c, NULL, st, fmt, ap);
    va_end(ap);
}

const Onnx__AttributeProto *ox_attr(const ox_node *n, const char *name)
{
    for (size_t k = 0; k < n->p->n_attribute; k++)
        if (n->p->attribute[k]->name && !strcmp(n->p->attribute[k]->name, name))
            return n->p->attribute[k];
    return NULL;
}

/* The attribute if present with type want; NULL when absent; *bad set when
   present with another type (recorded). */
static const Onnx__AttributeProto *typed(ox_ctx *c, const ox_node *n,
                                         const char *name, int want, int *bad)
{
    const Onnx__AttributeProto *a = ox_attr(n, name);
    *bad = 0;
    if (a && (!a->has_type || (int)a->type != want)) {
        ox_problem(c, n, KILN_ERR_IO, "attribute '%s' has the wrong type",
                   name);
        *bad = 1;
        return NULL;
    }
    return a;
}

int ox_attr_int(ox_ctx *c, const ox_node *n, const char *name, int64_t def,
                int64_t *out)
{
    int bad;
    const Onnx__AttributeProto *a =
        typed(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, &bad);
    *out = a ? a->i : def;
    return bad ? -1 : 0;
}

int ox_attr_float(ox_ctx *c, const ox_node *n, const char *name, float def,
                  float *out)
{
    int bad;
    const Onnx__AttributeProto *a =
        typed(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, &bad);
    *out = a ? a->f : def;
    return bad ? -1 : 0;
}

int ox_attr_ints(ox_ctx *c, const ox_node *n, const char *name,
                 const int64_t **out, int64_t *count)
{
    int bad;
    const Onnx__AttributeProto *a =
        typed(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, &bad);
    *out = a ? a->ints : NULL;
    *count = a ? (int64_t)a->n_ints : 0;
    return bad ? -1 : 0;
}

int ox_attr_string(ox_ctx *c, const ox_node *n, const char *name,
                   const char *def, char *buf, size_t size)
{
    int bad;
    const Onnx__AttributeProto *a =
        typed(c, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, &bad);
    if (!a) {
        snprintf(buf, size, "%s", def);
        return bad ? -1 : 0;
    }
    size_t len = a->s.len < size - 1 ? a->s.len : size - 1;
    if (len)
        memcpy(buf, a->s.data, len);
    buf[len] = 0;
    return 0;
}

const ox_host *ox_known_ints(ox_ctx *c, const ox_node *n, int i)
{
    const ox_value *v = i < n->n_in ? n->in[i] : NULL;
    if (v && v->known && (v->known->i || v->known->numel == 0))
        return v->known;
    ox_problem(c, n, KILN_ERR_UNSUPPORTED,
               "input %d ('%s') must be a constant integer tensor", i,
               v ? v->name : "");
    return NULL;
}

int ox_in_type(const ox_node *n, int i)
{
    return i < n->n_in && n->in[i] ? n->in[i]->type : 0;
}

kiln_node *ox_in(ox_ctx *c, const ox_node *n, int i)
{
    const ox_value *v = i < n->n_in ? n->in[i] : NULL;
    if (v && !v->node && v->known)
        ox_problem(c, n, KILN_ERR_UNSUPPORTED,
                   "input %d ('%s') holds integers outside Kiln's i32 range", i,
                   v->name);
    return v ? v->node : NULL;
}

kiln_node *ox_f32(ox_ctx *c, const ox_node *n, int i)
{
    kiln_node *x = ox_in(c, n, i);
    if (!x || kiln_node_dtype(x) == KILN_F32)
        return x;
    return kiln_cast(c->g, x, KILN_F32);
}

void ox_out(ox_ctx *c, ox_node *n, kiln_node *y, int type)
{
    if (y && ox_kiln_dtype(type) != kiln_node_dtype(y))
        y = kiln_cast(c->g, y, ox_kiln_dtype(type));
    n->out[0] = y;
    n->out_type[0] = type;
}

int ox_axis(ox_ctx *c, const ox_node *n, int64_t axis, int ndim)
{
    if (axis < -ndim || axis >= (ndim ? ndim : 1)) {
        ox_problem(c, n, KILN_ERR_ARG, "axis %lld out of range for rank %d",
                   (long long)axis, ndim);
        return -1;
    }
    return (int)(axis < 0 ? axis + ndim : axis);
}

kiln_node *ox_fill(kiln_graph *g, kiln_shape s, float v)
{
    return kiln_broadcast_to(g, kiln_scalar(g, v), s);
}

kiln_node *ox_arith_indices(ox_ctx *c, const ox_node *n, int64_t first,
                            int64_t step, int64_t count)
{
    kiln_graph *g = c->g;
    int64_t cols = 1;
    while (count > 4096 && cols * cols < count)
        cols *= 2;
    int64_t rows = (count + cols - 1) / cols; /* count itself when small */
    int32_t *v = malloc((size_t)(rows + cols) * sizeof *v + 1);
    if (!v)
        return ox_problem(c, n, KILN_ERR_MEMORY, "out of memory"), NULL;
    /* rows start at r cols < count: in range; the tail past count wraps
       in i32 and is cut */
    for (int64_t r = 0; r < rows; r++)
        v[r] = (int32_t)(first + r * cols * step);
    for (int64_t q = 0; q < cols; q++)
        v[rows + q] = (int32_t)(q * step);
    kiln_node *y;
    if (cols == 1)
        y = kiln_constant(g, KILN_I32, KILN_SHAPE(count), v);
    else {
        y = kiln_int_add(
            g, kiln_constant(g, KILN_I32, KILN_SHAPE(rows, 1), v),
            kiln_constant(g, KILN_I32, KILN_SHAPE(1, cols), v + rows));
        int64_t start = 0;
        y = kiln_slice(g, kiln_reshape(g, y, KILN_SHAPE(rows * cols)), &start,
                       &count);
    }
    free(v);
    return y;
}
