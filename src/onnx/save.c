/* kiln_onnx_save: the nodes the outputs read are found walking back from
   them (creation order is topological), each is classified, named and
   written as ONNX nodes in creation order; every node without an ONNX
   form is listed before anything is written, and the file replaces the
   old one atomically, so a failed save leaves it as it was. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "onnx/save.h"

#define FN "kiln_onnx_save"

/* Marks every node the outputs read and classifies it. */
static void walk(sv_ctx *c, kiln_node *const *outs, int n_out)
{
    for (int k = 0; k < n_out; k++)
        c->need[outs[k]->id] = c->out[outs[k]->id] = 1;
    for (int id = c->g->n_nodes - 1; id >= 0; id--) {
        if (!c->need[id])
            continue;
        sv_match *m = &c->match[id];
        sv_match_node(c->g->nodes[id], m);
        for (int k = 0; k < m->n_dep; k++)
            c->need[m->dep[k]->id] = 1;
    }
}

/* Input names first (callers feed inputs by name), then the outputs':
   given ones must be free, others are made free.  An output node that is
   computed writes its result under the output's name; a leaf, or a node
   given twice, is copied to it by an Identity (done after the nodes). */
static int name_io(sv_ctx *c, kiln_node *const *outs, int n_out,
                   const char *const *given, const char **out_names)
{
    for (int id = 0; id < c->g->n_nodes; id++)
        if (c->need[id] && c->g->nodes[id]->op == KILN_OP_INPUT)
            sv_name(c, c->g->nodes[id]);
    for (int k = 0; k < n_out; k++) {
        char want[32];
        const kiln_node *n = outs[k];
        snprintf(want, sizeof want, n_out > 1 ? "output_%d" : "output", k);
        const char *name = given ? given[k] : n->name ? n->name : want;
        for (int j = 0; given && j < c->n_used; j++)
            if (!strcmp(c->used[j], name)) {
                sv_problem(c, KILN_ERR_ARG,
                           "output name '%s' is also an input's or another "
                           "output's",
                           name);
                return -1;
            }
        out_names[k] = sv_claim(c, name);
        if (!c->name[n->id] && c->match[n->id].kind != SV_LEAF)
            c->name[n->id] = out_names[k];
    }
    return 0;
}

/* Writes every needed node, then the Identity nodes of the outputs whose
   value has another name. */
static void emit_all(sv_ctx *c, kiln_node *const *outs, int n_out,
                     const char **out_names)
{
    for (int id = 0; id < c->g->n_nodes; id++)
        if (c->need[id])
            sv_emit(c, c->g->nodes[id]);
    for (int k = 0; k < n_out; k++) {
        const char *v = sv_name(c, outs[k]);
        if (v != out_names[k])
            sv_op1(c, "Identity", v, out_names[k]);
    }
}

static Onnx__ModelProto *model(sv_ctx *c, const char *graph_name,
                               kiln_node *const *outs, int n_out,
                               const char **out_names)
{
    Onnx__ModelProto *m = kiln_arena_alloc(&c->arena, sizeof *m);
    Onnx__GraphProto *gp = kiln_arena_alloc(&c->arena, sizeof *gp);
    Onnx__OperatorSetIdProto *op = kiln_arena_alloc(&c->arena, sizeof *op);
    Onnx__OperatorSetIdProto **ops = kiln_arena_alloc(&c->arena, sizeof *ops);
    Onnx__ValueInfoProto **vo =
        kiln_arena_alloc(&c->arena, (size_t)n_out * sizeof *vo);
    char *gname = sv_strdup(c, graph_name);
    if (!m || !gp || !op || !ops || !vo || !gname)
        return NULL;
    for (int k = 0; k < n_out; k++)
        if (!(vo[k] = sv_value_info(c, out_names[k], outs[k]->dtype,
                                    outs[k]->shape)))
            return NULL;
    onnx__model_proto__init(m);
    onnx__graph_proto__init(gp);
    onnx__operator_set_id_proto__init(op);
    op->domain = "";
    op->has_version = 1;
    op->version = 17;
    ops[0] = op;
    gp->name = gname;
    gp->node = c->nodes;
    gp->n_node = (size_t)c->n_nodes;
    gp->initializer = c->inits;
    gp->n_initializer = (size_t)c->n_inits;
    gp->input = c->inputs;
    gp->n_input = (size_t)c->n_inputs;
    gp->output = vo;
    gp->n_output = (size_t)n_out;
    m->has_ir_version = 1;
    m->ir_version = 8;
    m->opset_import = ops;
    m->n_opset_import = 1;
    m->producer_name = "kiln";
    m->producer_version = KILN_VERSION;
    m->graph = gp;
    return m;
}

/* protobuf-c's output, written straight to the file (no second copy of
   the weights in memory). */
typedef struct file_buffer {
    ProtobufCBuffer base;
    FILE *f;
    int err; /* errno of the first failed write */
} file_buffer;

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    file_buffer *fb = (file_buffer *)b;
    if (!fb->err && fwrite(data, 1, len, fb->f) != len)
        fb->err = errno ? errno : EIO;
}

static int write_model(const Onnx__ModelProto *m, const char *path, io_err *e)
{
    size_t size = protobuf_c_message_get_packed_size(&m->base);
    if ((int64_t)size > OX_MAX_FILE)
        return io_fail(e, "the model needs %zu bytes, over protobuf's 2 GiB",
                       size);
    io_atomic a;
    if (io_atomic_begin(&a, path, e))
        return -1;
    file_buffer fb = {{NULL}, fdopen(a.fd, "wb"), 0};
    fb.base.append = file_append;
    int rc = 0;
    if (!fb.f)
        rc = io_fail(e, "cannot write '%s': %s", a.tmp, strerror(errno));
    else {
        a.fd = -1; /* the FILE owns it now */
        errno = 0;
        size_t put = protobuf_c_message_pack_to_buffer(&m->base, &fb.base);
        if (fclose(fb.f) != 0 && !fb.err)
            fb.err = errno ? errno : EIO;
        if (fb.err || put != size)
            rc =
                io_fail(e, "write failed: %s", strerror(fb.err ? fb.err : EIO));
    }
    if (!rc)
        return io_atomic_commit(&a, e);
    io_atomic_abort(&a);
    return rc;
}

static int ctx_init(sv_ctx *c, kiln_graph *g, kiln_session *s,
                    const kiln_onnx_save_options *opt)
{
    memset(c, 0, sizeof *c);
    kiln_arena_init(&c->arena, 1 << 16);
    c->g = g;
    c->s = s;
    c->batch = opt && opt->batch_name ? opt->batch_name : "batch";
    size_t n = (size_t)g->n_nodes + 1;
    c->name = calloc(n, sizeof *c->name);
    c->need = calloc(n, 1);
    c->out = calloc(n, 1);
    c->match = calloc(n, sizeof *c->match);
    return c->name && c->need && c->out && c->match ? 0 : -1;
}

static void ctx_free(sv_ctx *c)
{
    free(c->name);
    free(c->need);
    free(c->out);
    free(c->match);
    free(c->used);
    free(c->nodes);
    free(c->inits);
    free(c->inputs);
    kiln_arena_free(&c->arena);
}

/* The export once the arguments are checked: KILN_OK, or the problems in
   c->msg / e. */
static kiln_status run_export(sv_ctx *c, kiln_node *const *outs, int n_out,
                              const kiln_onnx_save_options *opt,
                              const char *path, io_err *e)
{
    const char **out_names = calloc((size_t)n_out, sizeof *out_names);
    if (!out_names)
        return KILN_ERR_MEMORY;
    walk(c, outs, n_out);
    if (name_io(c, outs, n_out, opt ? opt->output_names : NULL, out_names) == 0)
        emit_all(c, outs, n_out, out_names);
    Onnx__ModelProto *m =
        c->st == KILN_OK
            ? model(c, opt && opt->graph_name ? opt->graph_name : "kiln", outs,
                    n_out, out_names)
            : NULL;
    free(out_names);
    if (c->st != KILN_OK || !m)
        return c->st != KILN_OK ? c->st : KILN_ERR_MEMORY;
    if (write_model(m, path, e))
        return e->status;
    return KILN_OK;
}

/* The arguments' problems, before anything is looked at. */
static kiln_status check_args(kiln_graph *g, kiln_node *const *outs, int n_out,
                              const kiln_onnx_save_options *opt,
                              const char *path)
{
    if (!g || !outs || !path)
        return kiln_null_arg(FN, !g ? "graph" : !outs ? "outputs" : "path");
    if (n_out < 1)
        return kiln_set_last_error(FN ": %d outputs (at least 1)", n_out),
               KILN_ERR_ARG;
    if (g->status != KILN_OK)
        return kiln_set_last_error(FN ": the graph failed: %s", g->err),
               g->status;
    for (int k = 0; k < n_out; k++) {
        const kiln_node *n = outs[k];
        const char *why = !n                   ? "is NULL"
                          : n->graph != g      ? "belongs to another graph"
                          : kiln_node_stale(n) ? "was built before a clear"
                          : !opt || !opt->output_names ? NULL
                          : !opt->output_names[k] || !*opt->output_names[k]
                              ? "has a NULL or empty name"
                              : NULL;
        if (why)
            return kiln_set_last_error(FN ": output %d %s", k, why),
                   KILN_ERR_ARG;
    }
    return KILN_OK;
}

kiln_status kiln_onnx_save(kiln_graph *g, kiln_session *s,
                           kiln_node *const *outputs, int n_out,
                           const kiln_onnx_save_options *opt, const char *path)
{
    kiln_status st = check_args(g, outputs, n_out, opt, path);
    if (st != KILN_OK)
        return st;
    sv_ctx c;
    io_err e = IO_ERR_INIT;
    kiln_graph_read_lock(g);
    st = ctx_init(&c, g, s, opt)
             ? KILN_ERR_MEMORY
             : run_export(&c, outputs, n_out, opt, path, &e);
    kiln_graph_unlock(g);
    char more[48] = "";
    if (c.n_unlisted)
        snprintf(more, sizeof more, " (and %d more)", c.n_unlisted);
    if (st != KILN_OK)
        kiln_set_last_error(FN ": %s: %s%s", path,
                            c.msg[0]   ? c.msg
                            : e.msg[0] ? e.msg
                                       : "out of memory",
                            more);
    ctx_free(&c);
    return st;
}
