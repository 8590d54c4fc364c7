/* The exporter's message building: problems, value names, ONNX nodes with
   their attributes, initializers and value infos, all in the export's
   arena. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/save.h"

static void vproblem(sv_ctx *c, kiln_status st, const char *fmt, va_list ap)
{
    char line[KILN_ERRMSG_MAX];
    vsnprintf(line, sizeof line, fmt, ap);
    if (c->st == KILN_OK)
        c->st = st;
    size_t len = strlen(c->msg), add = strlen(line);
    /* Room is kept for the count of the problems that do not fit. */
    if (!c->n_unlisted && len + add + 2 < sizeof c->msg - 32) {
        snprintf(c->msg + len, sizeof c->msg - len, "%s%s", len ? "; " : "",
                 line);
    } else
        c->n_unlisted++;
    c->n_problems++;
}

void sv_problem(sv_ctx *c, kiln_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(c, st, fmt, ap);
    va_end(ap);
}

void sv_node_problem(sv_ctx *c, const kiln_node *n, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    sv_problem(c, KILN_ERR_UNSUPPORTED, "%%%d (%s%s%s%s): %s", n->id,
               kiln_op_table[n->op].name, n->name ? " '" : "",
               n->name ? n->name : "", n->name ? "'" : "", why);
}

static void *alloc(sv_ctx *c, size_t bytes)
{
    void *p = kiln_arena_alloc(&c->arena, bytes);
    if (!p)
        sv_problem(c, KILN_ERR_MEMORY, "out of memory");
    return p;
}

char *sv_strdup(sv_ctx *c, const char *s)
{
    size_t len = strlen(s) + 1;
    char *d = alloc(c, len);
    if (d)
        memcpy(d, s, len);
    return d;
}

/* Grows a pointer array (*items, count *n, capacity *cap) by one slot;
   the slot, or NULL when out of memory (recorded). */
static void **grow(sv_ctx *c, void ***items, int *n, int *cap)
{
    if (*n == *cap) {
        int more = *cap ? 2 * *cap : 32;
        void **p = realloc(*items, (size_t)more * sizeof *p);
        if (!p) {
            sv_problem(c, KILN_ERR_MEMORY, "out of memory");
            return NULL;
        }
        *items = p;
        *cap = more;
    }
    return &(*items)[(*n)++];
}

static int taken(const sv_ctx *c, const char *name)
{
    for (int k = 0; k < c->n_used; k++)
        if (!strcmp(c->used[k], name))
            return 1;
    return 0;
}

const char *sv_claim(sv_ctx *c, const char *want)
{
    char buf[600];
    snprintf(buf, sizeof buf, "%s", want);
    for (int k = 1; taken(c, buf); k++)
        snprintf(buf, sizeof buf, "%.500s_%d", want, k);
    char *name = sv_strdup(c, buf);
    void **slot =
        (void **)grow(c, (void ***)&c->used, &c->n_used, &c->cap_used);
    if (!name || !slot)
        return NULL;
    *slot = name;
    return name;
}

const char *sv_name(sv_ctx *c, const kiln_node *n)
{
    if (!c->name[n->id]) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s_%d", kiln_op_table[n->op].name, n->id);
        c->name[n->id] = sv_claim(c, n->name ? n->name : buf);
    }
    return c->name[n->id];
}

const char *sv_temp(sv_ctx *c, const kiln_node *n, const char *what)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s_%d", what, n->id);
    return sv_claim(c, buf);
}

Onnx__NodeProto *sv_op(sv_ctx *c, const char *op, const char *const *in,
                       int n_in, const char *out)
{
    Onnx__NodeProto *p = alloc(c, sizeof *p);
    char **ins = alloc(c, (size_t)(n_in ? n_in : 1) * sizeof *ins);
    char **outs = alloc(c, sizeof *outs);
    /* Room for every attribute an op here sets. */
    Onnx__AttributeProto **attrs = alloc(c, 8 * sizeof *attrs);
    void **slot = grow(c, (void ***)&c->nodes, &c->n_nodes, &c->cap_nodes);
    if (!p || !ins || !outs || !attrs || !slot || !out)
        return NULL;
    onnx__node_proto__init(p);
    for (int k = 0; k < n_in; k++)
        ins[k] = (char *)(in[k] ? in[k] : "");
    outs[0] = (char *)out;
    p->input = ins;
    p->n_input = (size_t)n_in;
    p->output = outs;
    p->n_output = 1;
    p->name = (char *)out;
    p->op_type = (char *)op;
    p->attribute = attrs;
    *slot = p;
    return p;
}

Onnx__NodeProto *sv_op1(sv_ctx *c, const char *op, const char *a,
                        const char *out)
{
    return sv_op(c, op, &a, 1, out);
}

Onnx__NodeProto *sv_op2(sv_ctx *c, const char *op, const char *a, const char *b,
                        const char *out)
{
    const char *in[2] = {a, b};
    return sv_op(c, op, in, 2, out);
}

static Onnx__AttributeProto *attr(sv_ctx *c, Onnx__NodeProto *p,
                                  const char *name,
                                  Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = p ? alloc(c, sizeof *a) : NULL;
    if (!a)
        return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = type;
    p->attribute[p->n_attribute++] = a;
    return a;
}

void sv_attr_int(sv_ctx *c, Onnx__NodeProto *p, const char *name, int64_t v)
{
    Onnx__AttributeProto *a =
        attr(c, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a)
        a->has_i = 1, a->i = v;
}

void sv_attr_float(sv_ctx *c, Onnx__NodeProto *p, const char *name, float v)
{
    Onnx__AttributeProto *a =
        attr(c, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a)
        a->has_f = 1, a->f = v;
}

void sv_attr_ints(sv_ctx *c, Onnx__NodeProto *p, const char *name,
                  const int64_t *v, int n)
{
    Onnx__AttributeProto *a =
        attr(c, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *copy = a ? alloc(c, (size_t)(n ? n : 1) * sizeof *copy) : NULL;
    if (!copy)
        return;
    memcpy(copy, v, (size_t)n * sizeof *copy);
    a->ints = copy;
    a->n_ints = (size_t)n;
}

int sv_onnx_type(kiln_dtype dt)
{
    return dt == KILN_I32 ? OX_INT32 : OX_FLOAT;
}

/* v's bytes in little-endian order at out (width 4 or 8). */
static void put_le(unsigned char *out, uint64_t v, int width)
{
    for (int b = 0; b < width; b++)
        out[b] = (unsigned char)(v >> (8 * b));
}

/* The values as raw_data: f32 and i32 as 4 bytes, int64 as 8. */
static int raw_bytes(sv_ctx *c, Onnx__TensorProto *t, int type, int64_t numel,
                     const void *data)
{
    int width = type == OX_INT64 ? 8 : 4;
    unsigned char *raw = alloc(c, (size_t)(numel * width));
    if (!raw)
        return -1;
    for (int64_t k = 0; k < numel; k++) {
        uint32_t u;
        if (width == 8)
            put_le(raw + 8 * k, (uint64_t)((const int64_t *)data)[k], 8);
        else {
            memcpy(&u, (const unsigned char *)data + 4 * k, 4);
            put_le(raw + 4 * k, u, 4);
        }
    }
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)(numel * width);
    t->raw_data.data = raw;
    return 0;
}

const char *sv_init(sv_ctx *c, const char *want, int onnx_type, kiln_shape s,
                    const void *data)
{
    Onnx__TensorProto *t = alloc(c, sizeof *t);
    int64_t *dims = alloc(c, KILN_MAX_DIMS * sizeof *dims);
    const char *name = sv_claim(c, want);
    void **slot = grow(c, (void ***)&c->inits, &c->n_inits, &c->cap_inits);
    if (!t || !dims || !name || !slot)
        return NULL;
    onnx__tensor_proto__init(t);
    for (int k = 0; k < s.ndim; k++)
        dims[k] = s.d[k];
    t->dims = dims;
    t->n_dims = (size_t)s.ndim;
    t->has_data_type = 1;
    t->data_type = onnx_type;
    t->name = (char *)name;
    *slot = t;
    return raw_bytes(c, t, onnx_type, kiln_shape_numel(s), data) ? NULL : name;
}

const char *sv_ints(sv_ctx *c, const kiln_node *n, const char *what,
                    const int64_t *v, int count)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s_%d", what, n->id);
    return sv_init(c, buf, OX_INT64, KILN_SHAPE(count), v);
}

Onnx__ValueInfoProto *sv_value_info(sv_ctx *c, const char *name, kiln_dtype dt,
                                    kiln_shape s)
{
    Onnx__ValueInfoProto *vi = alloc(c, sizeof *vi);
    Onnx__TypeProto *tp = alloc(c, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = alloc(c, sizeof *tt);
    Onnx__TensorShapeProto *sh = alloc(c, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dims =
        alloc(c, (size_t)(s.ndim + 1) * sizeof *dims);
    if (!vi || !tp || !tt || !sh || !dims)
        return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int k = 0; k < s.ndim; k++) {
        Onnx__TensorShapeProto__Dimension *d = alloc(c, sizeof *d);
        if (!d)
            return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        if (s.sym >> k & 1u) {
            d->value_case =
                ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = (char *)c->batch;
        } else {
            d->value_case =
                ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = s.d[k];
        }
        dims[k] = d;
    }
    sh->dim = dims;
    sh->n_dim = (size_t)s.ndim;
    tt->has_elem_type = 1;
    tt->elem_type = sv_onnx_type(dt);
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}
