/* kiln_onnx_load: initializers and inputs first, then every node in the
   file's (topological) order through its converter, then the outputs.
   Problems are collected, not returned at the first: a model is refused
   with the list of everything Kiln cannot take in it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/model.h"

static ox_value *find_value(ox_ctx *c, const char *name)
{
    for (int k = c->n_vals - 1; k >= 0; k--)
        if (!strcmp(c->vals[k].name, name))
            return &c->vals[k];
    return NULL;
}

static ox_value *add_value(ox_ctx *c, const char *name, kiln_node *node,
                           int type, ox_host *known)
{
    if (c->n_vals == c->cap_vals) {
        int cap = c->cap_vals ? 2 * c->cap_vals : 64;
        ox_value *v = realloc(c->vals, (size_t)cap * sizeof *v);
        if (!v) {
            ox_model_problem(c, KILN_ERR_MEMORY, "out of memory");
            ox_host_free(known);
            free(known);
            return NULL;
        }
        c->vals = v;
        c->cap_vals = cap;
    }
    ox_value *v = &c->vals[c->n_vals++];
    *v = (ox_value){name ? name : "", node, type, known};
    return v;
}

/* Float values worth keeping on the host for converters (small tensors:
   scalars such as Clip's bounds or Pad's value). */
#define OX_KEEP_FLOATS 4096

static kiln_node *initializer_node(ox_ctx *c, const Onnx__TensorProto *t,
                                   const ox_host *h, char *err, size_t n)
{
    if (h->f && c->opt.trainable_initializers && h->type == OX_FLOAT) {
        char name[512];
        snprintf(name, sizeof name, "%s%s",
                 c->opt.variable_prefix ? c->opt.variable_prefix : "",
                 t->name ? t->name : "");
        return kiln_variable(c->g, name, KILN_F32, h->shape,
                             kiln_init_values(h->f));
    }
    if (!h->i)
        return h->numel ? kiln_constant(c->g, KILN_F32, h->shape, h->f)
                        : kiln_fill(c->g, h->shape, 0);
    int32_t *v;
    if (ox_host_i32(h, &v, err, n))
        return NULL;
    kiln_node *node = kiln_constant(c->g, KILN_I32, h->shape, v);
    free(v);
    return node;
}

static void add_initializer(ox_ctx *c, const Onnx__TensorProto *t)
{
    ox_host *h = calloc(1, sizeof *h);
    char err[KILN_ERRMSG_MAX];
    int unsupported;
    if (!h) {
        ox_model_problem(c, KILN_ERR_MEMORY, "out of memory");
        return;
    }
    if (ox_host_read(t, c->dir, h, err, sizeof err, &unsupported)) {
        ox_model_problem(c, unsupported ? KILN_ERR_UNSUPPORTED : KILN_ERR_IO,
                         "initializer '%s': %s", t->name ? t->name : "", err);
        free(h);
        /* Defined but failed: its readers are not reported again. */
        add_value(c, t->name, NULL, t->data_type, NULL);
        return;
    }
    /* Integers beyond i32 (Slice's INT64_MAX ends) are kept on the host
       only: converters reading them as known values take them, one
       reading the node reports them (ox_in). */
    kiln_node *node = initializer_node(c, t, h, err, sizeof err);
    if (h->f && h->numel > OX_KEEP_FLOATS) {
        ox_host_free(h);
        free(h);
        h = NULL;
    }
    add_value(c, t->name, node, t->data_type, h);
}

/* The caller's shape for an input replaces the file's where they agree
   (dims the file leaves named or unknown take the caller's; no symbolic
   axis then). */
static int given_shape(ox_ctx *c, const Onnx__ValueInfoProto *vi, kiln_shape *s,
                       kiln_shape want)
{
    const Onnx__TensorShapeProto *sh = vi->type->tensor_type->shape;
    int ok = !sh || want.ndim == s->ndim;
    for (int k = 0; ok && sh && k < s->ndim; k++)
        ok = sh->dim[k]->value_case !=
                 ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
             sh->dim[k]->dim_value == want.d[k];
    if (!ok) {
        char a[128], b[128];
        ox_model_problem(c, KILN_ERR_SHAPE,
                         "input '%s': given shape %s, the model says %s",
                         vi->name, kiln_shape_str(want, a, sizeof a),
                         kiln_shape_str(*s, b, sizeof b));
        return -1;
    }
    *s = want;
    return 0;
}

/* Kiln's shape of a declared input; named or unknown dims get the chosen
   size, and a named first dim is symbolic. */
static int input_shape(ox_ctx *c, const Onnx__ValueInfoProto *vi, kiln_shape *s,
                       unsigned *sym, int *type)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !tp->tensor_type) {
        ox_model_problem(c, KILN_ERR_UNSUPPORTED,
                         "input '%s': only tensor inputs are supported",
                         vi->name);
        return -1;
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    const Onnx__TensorShapeProto *sh = tt->shape;
    *type = tt->has_elem_type ? tt->elem_type : 0;
    if (!ox_type_supported(*type)) {
        char b[32];
        ox_model_problem(c, KILN_ERR_UNSUPPORTED,
                         "input '%s': unsupported type %s", vi->name,
                         ox_type_name(*type, b, sizeof b));
        return -1;
    }
    *sym = 0;
    memset(s, 0, sizeof *s);
    if (sh && sh->n_dim > KILN_MAX_DIMS) {
        ox_model_problem(c, KILN_ERR_UNSUPPORTED,
                         "input '%s': more than %d dims", vi->name,
                         KILN_MAX_DIMS);
        return -1;
    }
    s->ndim = sh ? (int)sh->n_dim : 0;
    int64_t named = c->opt.named_dim_size > 0 ? c->opt.named_dim_size : 1;
    for (int k = 0; k < s->ndim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
        int has = d->value_case ==
                  ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        s->d[k] = has ? d->dim_value : named;
        if (!has && k == 0)
            *sym = KILN_AXIS(0);
    }
    if (c->n_inputs < c->opt.n_input_shapes && c->opt.input_shapes &&
        given_shape(c, vi, s, c->opt.input_shapes[c->n_inputs]))
        return -1;
    if (c->n_inputs < c->opt.n_input_shapes && c->opt.input_shapes)
        *sym = 0;
    if (kiln_shape_numel(*s) < 0) {
        ox_model_problem(c, KILN_ERR_IO, "input '%s': bad dims", vi->name);
        return -1;
    }
    return 0;
}

static int is_initializer(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t k = 0; k < gp->n_initializer; k++)
        if (gp->initializer[k]->name && !strcmp(gp->initializer[k]->name, name))
            return 1;
    return 0;
}

static void add_input(ox_ctx *c, kiln_onnx_model *m,
                      const Onnx__ValueInfoProto *vi)
{
    kiln_shape s;
    unsigned sym;
    int type = 0;
    int bad = input_shape(c, vi, &s, &sym, &type);
    c->n_inputs++;
    if (bad) {
        /* Defined but failed: its readers are not reported again. */
        add_value(c, vi->name, NULL, type, NULL);
        return;
    }
    kiln_node *x =
        sym ? kiln_input_sym(c->g, vi->name, ox_kiln_dtype(type), s, sym)
            : kiln_input(c->g, vi->name, ox_kiln_dtype(type), s);
    add_value(c, vi->name, x, type,
              ox_known_input(c, vi->name, c->n_inputs - 1, s, type));
    ox_model_add_io(m, 0, vi->name, x, type);
}

/* Every attribute of n must be one its converter reads. */
static int check_attrs(ox_ctx *c, const ox_node *n, const ox_op *op)
{
    int bad = 0;
    for (size_t k = 0; k < n->p->n_attribute; k++) {
        const char *name = n->p->attribute[k]->name;
        size_t len = name ? strlen(name) : 0;
        const char *a = op->attrs;
        int found = 0;
        while (len && a && *a) {
            const char *end = strchr(a, ',');
            size_t alen = end ? (size_t)(end - a) : strlen(a);
            if (alen == len && !strncmp(a, name, len))
                found = 1;
            a = end ? end + 1 : NULL;
        }
        if (!found) {
            ox_problem(c, n, KILN_ERR_UNSUPPORTED, "unsupported attribute '%s'",
                       name ? name : "");
            bad = 1;
        }
    }
    return bad ? -1 : 0;
}

/* Resolves n's inputs; 1 when all are there and built, 0 when one comes
   from a failed node, -1 when one is undefined (recorded). */
static int bind_inputs(ox_ctx *c, ox_node *n)
{
    int built = 1;
    if (n->p->n_input > OX_MAX_IO || n->p->n_output > OX_MAX_IO) {
        ox_problem(c, n, KILN_ERR_UNSUPPORTED, "more than %d inputs or outputs",
                   OX_MAX_IO);
        return -1;
    }
    n->n_in = (int)n->p->n_input;
    n->n_out = (int)n->p->n_output;
    for (int k = 0; k < n->n_in; k++) {
        const char *name = n->p->input[k];
        n->in[k] = name && *name ? find_value(c, name) : NULL;
        if (name && *name && !n->in[k]) {
            ox_problem(c, n, KILN_ERR_IO, "input '%s' is not defined", name);
            return -1;
        }
        if (n->in[k] && !n->in[k]->node && !n->in[k]->known)
            built = 0;
    }
    return built;
}

static const char *op_domain(const Onnx__NodeProto *p)
{
    return p->domain && *p->domain && strcmp(p->domain, "ai.onnx") ? p->domain
                                                                   : NULL;
}

static void convert_node(ox_ctx *c, const Onnx__NodeProto *p)
{
    ox_node n;
    memset(&n, 0, sizeof n);
    n.p = p;
    const ox_op *op = op_domain(p) ? NULL : ox_find_op(p->op_type);
    if (op_domain(p) && !strcmp(op_domain(p), "ai.onnx.preview.training")) {
        char full[128]; /* the training ops' table names carry the domain */
        snprintf(full, sizeof full, "%s.%s", op_domain(p),
                 p->op_type ? p->op_type : "");
        op = ox_find_op(full);
    }
    int bound = bind_inputs(c, &n);
    if (!op) {
        ox_problem(c, &n, KILN_ERR_UNSUPPORTED, "unsupported op %s%s%s",
                   op_domain(p) ? op_domain(p) : "", op_domain(p) ? "." : "",
                   p->op_type ? p->op_type : "");
    } else if (check_attrs(c, &n, op) == 0 && bound == 1 && c->building) {
        int before = c->n_problems;
        op->fn(c, &n);
        /* A failed graph stops the building even when the converter gave
           up with a problem of its own (read, maybe, from the poisoned
           result): every later node would be built on poisoned values. */
        if (kiln_graph_status(c->g) != KILN_OK) {
            ox_problem(c, &n, kiln_graph_status(c->g), "%s",
                       kiln_graph_error(c->g));
            c->building = 0;
        } else if (c->n_problems == before && !n.out[0] && n.n_out)
            ox_problem(c, &n, KILN_ERR_UNSUPPORTED, "not converted");
    }
    /* Known values of an output without a name (or past the node's
       count: converters set output 0 whatever it is) have no reader. */
    for (int k = 0; k < OX_MAX_IO; k++)
        if (k < n.n_out && p->output[k] && *p->output[k])
            add_value(c, p->output[k], n.out[k], n.out_type[k], n.out_known[k]);
        else {
            ox_host_free(n.out_known[k]);
            free(n.out_known[k]);
        }
}

ox_value *ox_bind(ox_ctx *c, const char *name, kiln_node *node, int type,
                  ox_host *known)
{
    return add_value(c, name, node, type, known);
}

ox_value *ox_lookup(ox_ctx *c, const char *name)
{
    return name ? find_value(c, name) : NULL;
}

void ox_scope_pop(ox_ctx *c, int mark)
{
    while (c->n_vals > mark) {
        ox_value *v = &c->vals[--c->n_vals];
        ox_host_free(v->known);
        free(v->known);
    }
}

void ox_convert_body(ox_ctx *c, const Onnx__GraphProto *gp)
{
    for (size_t k = 0; k < gp->n_initializer; k++)
        add_initializer(c, gp->initializer[k]);
    for (size_t k = 0; k < gp->n_node; k++)
        convert_node(c, gp->node[k]);
}

static void read_opset(ox_ctx *c, const Onnx__ModelProto *mp)
{
    for (size_t k = 0; k < mp->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[k];
        if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx"))
            c->opset = o->version;
    }
    if (c->opset > 17)
        ox_model_problem(c, KILN_ERR_UNSUPPORTED,
                         "opset %lld is newer than the 17 Kiln knows",
                         (long long)c->opset);
}

static void add_outputs(ox_ctx *c, kiln_onnx_model *m,
                        const Onnx__GraphProto *gp)
{
    for (size_t k = 0; k < gp->n_output; k++) {
        const char *name = gp->output[k]->name ? gp->output[k]->name : "";
        ox_value *v = find_value(c, name);
        if (!v)
            ox_model_problem(c, KILN_ERR_IO, "output '%s' is not defined",
                             name);
        else
            ox_model_add_io(m, 1, name, v->node, v->type);
    }
}

static void import_graph(ox_ctx *c, kiln_onnx_model *m,
                         const Onnx__ModelProto *mp)
{
    const Onnx__GraphProto *gp = mp->graph;
    read_opset(c, mp);
    for (size_t k = 0; k < gp->n_initializer; k++)
        add_initializer(c, gp->initializer[k]);
    for (size_t k = 0; k < gp->n_input; k++)
        if (gp->input[k]->name && !is_initializer(gp, gp->input[k]->name))
            add_input(c, m, gp->input[k]);
    if (kiln_graph_status(c->g) != KILN_OK) {
        ox_model_problem(c, kiln_graph_status(c->g), "%s",
                         kiln_graph_error(c->g));
        c->building = 0;
    }
    for (size_t k = 0; k < gp->n_node; k++)
        convert_node(c, gp->node[k]);
    add_outputs(c, m, gp);
}

static void ctx_free(ox_ctx *c)
{
    for (int k = 0; k < c->n_vals; k++) {
        ox_host_free(c->vals[k].known);
        free(c->vals[k].known);
    }
    free(c->vals);
    free(c->msg);
}

kiln_status kiln_onnx_load(kiln_graph *g, const char *path,
                           const kiln_onnx_options *opt,
                           kiln_onnx_model **model)
{
    if (!model)
        return kiln_null_arg("kiln_onnx_load", "model");
    *model = NULL;
    if (!g || !path)
        return kiln_null_arg("kiln_onnx_load", g ? "path" : "graph");
    kiln_onnx_model *m = ox_model_new();
    if (!m)
        return kiln_set_last_error("kiln_onnx_load: out of memory"),
               KILN_ERR_MEMORY;
    *model = m;
    Onnx__ModelProto *mp = ox_read_model(path);
    if (!mp)
        return ox_model_fail(m, KILN_ERR_IO, kiln_last_error());
    ox_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.building = kiln_graph_status(g) == KILN_OK;
    if (opt)
        c.opt = *opt;
    char *dir = ox_dirname(path);
    c.dir = dir;
    if (!dir)
        ox_model_problem(&c, KILN_ERR_MEMORY, "out of memory");
    else
        import_graph(&c, m, mp);
    m->opset = c.opset;
    kiln_status st = c.st;
    if (st != KILN_OK)
        ox_model_fail(m, st, c.msg ? c.msg : "out of memory");
    ctx_free(&c);
    free(dir);
    onnx__model_proto__free_unpacked(mp, NULL);
    return st;
}
