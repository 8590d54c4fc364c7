/* Programs (popxl.Ir + Session): a main graph with named host streams and
   in-place updates, compiled into a session and run with host buffers
   bound to the streams. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/modules.h"
#include "runtime/runtime.h"

struct kiln_stream {
    kiln_program *p;
    char *name;
    kiln_dtype dtype;
    kiln_shape shape;
    int h2d;
    kiln_node *node; /* h2d: the loaded input; d2h: the stored value */
};

struct kiln_program {
    kiln_graph *g;
    kiln_stream **streams;
    int n_streams, cap_streams;
    kiln_node **updates;
    int n_updates, cap_updates;
    kiln_session *s; /* compiled into; NULL once freed */
    int session_freed;
    kiln_function *f;
    kiln_stream **in_streams, **out_streams; /* compiled order */
    int n_in, n_out;
    char err[KILN_ERRMSG_MAX];
};

static kiln_status program_fail(kiln_program *p, kiln_status st,
                                const char *fmt, ...) KILN_PRINTF(3, 4);

static kiln_status program_fail(kiln_program *p, kiln_status st,
                                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    return st;
}

kiln_program *kiln_program_new(void)
{
    kiln_program *p = calloc(1, sizeof *p);
    if (p && !(p->g = kiln_graph_new())) {
        free(p);
        return NULL;
    }
    return p;
}

static void program_forget_session(void *holder)
{
    kiln_program *p = holder;
    p->s = NULL;
    p->session_freed = 1;
}

static void free_compiled(kiln_program *p)
{
    kiln_function_free(p->f);
    p->f = NULL;
    free(p->in_streams);
    free(p->out_streams);
    p->in_streams = p->out_streams = NULL;
}

void kiln_program_free(kiln_program *p)
{
    if (!p)
        return;
    free_compiled(p);
    kiln_session_detach(p->s, p);
    for (int i = 0; i < p->n_streams; i++) {
        free(p->streams[i]->name);
        free(p->streams[i]);
    }
    free(p->streams);
    free(p->updates);
    kiln_graph_free(p->g);
    free(p);
}

kiln_graph *kiln_program_graph(kiln_program *p)
{
    return p ? p->g : NULL;
}

static kiln_stream *new_stream(kiln_program *p, const char *fn,
                               const char *name, kiln_dtype dt,
                               kiln_shape shape, int h2d)
{
    if (!p)
        return NULL;
    if (p->g->status != KILN_OK)
        return NULL;
    char b[96];
    if (!name || !*name || !kiln_dtype_supported(dt) ||
        !kiln_shape_valid(shape)) {
        kiln_graph_fail(
            p->g, KILN_ERR_ARG, "%s: bad name, dtype %s or shape %s", fn,
            kiln_dtype_name(dt), kiln_shape_str(shape, b, sizeof b));
        return NULL;
    }
    for (int i = 0; i < p->n_streams; i++)
        if (!strcmp(p->streams[i]->name, name)) {
            kiln_graph_fail(p->g, KILN_ERR_ARG,
                            "%s: a stream '%s' exists already", fn, name);
            return NULL;
        }
    kiln_stream *s = calloc(1, sizeof *s);
    char *nm = malloc(strlen(name) + 1);
    if (p->n_streams == p->cap_streams) {
        int cap = p->cap_streams ? 2 * p->cap_streams : 8;
        kiln_stream **a = realloc(p->streams, (size_t)cap * sizeof *a);
        if (a) {
            p->streams = a;
            p->cap_streams = cap;
        }
    }
    if (!s || !nm || p->n_streams == p->cap_streams) {
        free(s);
        free(nm);
        kiln_graph_fail(p->g, KILN_ERR_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    strcpy(nm, name);
    *s = (kiln_stream){p, nm, dt, shape, h2d, NULL};
    p->streams[p->n_streams++] = s;
    return s;
}

kiln_stream *kiln_h2d_stream(kiln_program *p, const char *name, kiln_dtype dt,
                             kiln_shape shape)
{
    return new_stream(p, "kiln_h2d_stream", name, dt, shape, 1);
}

kiln_stream *kiln_d2h_stream(kiln_program *p, const char *name, kiln_dtype dt,
                             kiln_shape shape)
{
    return new_stream(p, "kiln_d2h_stream", name, dt, shape, 0);
}

static int check_stream(kiln_program *p, const char *fn, kiln_stream *s,
                        int h2d)
{
    if (p->g->status != KILN_OK)
        return 0;
    if (!s || s->p != p || s->h2d != h2d) {
        kiln_graph_fail(p->g, KILN_ERR_ARG,
                        "%s: not a %s stream of this program", fn,
                        h2d ? "host-to-device" : "device-to-host");
        return 0;
    }
    return 1;
}

kiln_node *kiln_host_load(kiln_program *p, kiln_stream *s, const char *name)
{
    if (!p)
        return NULL;
    if (!check_stream(p, "kiln_host_load", s, 1))
        return &p->g->poison;
    if (!s->node)
        s->node = kiln_input(p->g, name ? name : s->name, s->dtype, s->shape);
    return s->node;
}

kiln_status kiln_host_store(kiln_program *p, kiln_stream *s, kiln_node *x)
{
    const char *fn = "kiln_host_store";
    if (!p)
        return kiln_null_arg(fn, "program");
    if (!check_stream(p, fn, s, 0) || !kiln_graph_check(p->g, fn, x))
        return p->g->status;
    char b1[96], b2[96];
    if (s->node)
        kiln_graph_fail(p->g, KILN_ERR_ARG, "%s: stream '%s' is stored already",
                        fn, s->name);
    else if (x->dtype != s->dtype || !kiln_shape_equal(x->shape, s->shape))
        kiln_graph_fail(
            p->g, KILN_ERR_SHAPE, "%s: stream '%s' is %s%s, value is %s%s", fn,
            s->name, kiln_dtype_name(s->dtype),
            kiln_shape_str(s->shape, b1, sizeof b1), kiln_dtype_name(x->dtype),
            kiln_shape_str(x->shape, b2, sizeof b2));
    else
        s->node = x;
    return p->g->status;
}

kiln_node *kiln_scaled_add_inplace(kiln_program *p, kiln_node *x, kiln_node *y,
                                   float a, float b)
{
    const char *fn = "kiln_scaled_add_inplace";
    if (!p)
        return NULL;
    kiln_graph *g = p->g;
    if (!kiln_graph_check(g, fn, x) || !kiln_graph_check(g, fn, y))
        return &g->poison;
    if (x->op != KILN_OP_VARIABLE)
        return kiln_graph_fail(g, KILN_ERR_ARG,
                               "%s: %%%d is a %s, not a variable", fn, x->id,
                               kiln_op_table[x->op].name);
    kiln_node *ax = a == 1.0f ? x : kiln_scale(g, x, a);
    kiln_node *u = kiln_assign(g, x, kiln_add(g, ax, kiln_scale(g, y, b)));
    if (u->op != KILN_OP_ERROR &&
        !kiln_push_node(&p->updates, &p->n_updates, &p->cap_updates, u))
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory", fn);
    return u;
}

kiln_status kiln_program_compile(kiln_program *p, kiln_session *s)
{
    if (!p)
        return kiln_null_arg("kiln_program_compile", "program");
    p->err[0] = 0;
    if (!s)
        return program_fail(p, KILN_ERR_ARG,
                            "kiln_program_compile: session is NULL");
    if (p->g->status != KILN_OK)
        return p->g->status;
    free_compiled(p);
    if (p->s != s) {
        if (kiln_session_attach(s, p, program_forget_session,
                                "kiln_program_compile") != KILN_OK)
            return program_fail(p, KILN_ERR_MEMORY, "%s",
                                kiln_session_error(s));
        kiln_session_detach(p->s, p);
        p->s = s;
    }
    p->session_freed = 0;
    p->n_in = p->n_out = 0;
    size_t n = (size_t)p->n_streams + 1;
    kiln_node **ins = calloc(n, sizeof *ins);
    kiln_node **outs = calloc(n + (size_t)p->n_updates, sizeof *outs);
    p->in_streams = calloc(n, sizeof *p->in_streams);
    p->out_streams = calloc(n, sizeof *p->out_streams);
    kiln_status st = KILN_OK;
    if (!ins || !outs || !p->in_streams || !p->out_streams) {
        st = program_fail(p, KILN_ERR_MEMORY,
                          "kiln_program_compile: out of memory");
        goto done;
    }
    for (int i = 0; i < p->n_streams; i++) {
        kiln_stream *sm = p->streams[i];
        if (sm->node && sm->h2d) {
            p->in_streams[p->n_in] = sm;
            ins[p->n_in++] = sm->node;
        } else if (sm->node) {
            p->out_streams[p->n_out] = sm;
            outs[p->n_out++] = sm->node;
        }
    }
    if (p->n_updates)
        memcpy(outs + p->n_out, p->updates,
               (size_t)p->n_updates * sizeof *outs);
    if (p->n_out + p->n_updates == 0)
        st = program_fail(
            p, KILN_ERR_ARG,
            "kiln_program_compile: nothing to run (no host_store and no "
            "update)");
    else if (!(p->f = kiln_compile(s, p->g, outs, p->n_out + p->n_updates, ins,
                                   p->n_in)))
        st = program_fail(p, KILN_ERR_ARG, "%s", kiln_session_error(s));
    else
        kiln_function_set_owner(p->f, &p->f);
done:
    free(ins);
    free(outs);
    return st;
}

kiln_status kiln_program_run(kiln_program *p, const kiln_stream_data *data,
                             int n)
{
    const char *fn = "kiln_program_run";
    if (!p)
        return kiln_null_arg(fn, "program");
    p->err[0] = 0;
    if (!p->f && p->session_freed)
        return program_fail(p, KILN_ERR_STATE,
                            "%s: the program's session was freed: compile it "
                            "into another one",
                            fn);
    if (!p->f)
        return program_fail(p, KILN_ERR_STATE, "%s: compile the program first",
                            fn);
    if (n < 0 || (n && !data))
        return program_fail(p, KILN_ERR_ARG, "%s: data is NULL", fn);
    int n_outs = p->n_out + p->n_updates;
    kiln_tensor **in = calloc((size_t)p->n_in + 1, sizeof *in);
    kiln_tensor **out = calloc((size_t)n_outs + 1, sizeof *out);
    kiln_status st = KILN_OK;
    if (!in || !out)
        st = program_fail(p, KILN_ERR_MEMORY, "%s: out of memory", fn);
    for (int k = 0; k < n && st == KILN_OK; k++) {
        kiln_tensor **slot = NULL;
        for (int i = 0; i < p->n_in && !slot; i++)
            if (p->in_streams[i] == data[k].stream)
                slot = &in[i];
        for (int i = 0; i < p->n_out && !slot; i++)
            if (p->out_streams[i] == data[k].stream)
                slot = &out[i];
        if (!slot)
            st = program_fail(
                p, KILN_ERR_ARG,
                "%s: data %d names a stream this program does not use", fn, k);
        for (int j = 0; j < k && st == KILN_OK; j++)
            if (data[j].stream == data[k].stream)
                st = program_fail(p, KILN_ERR_ARG,
                                  "%s: stream '%s' is bound twice (data %d "
                                  "and %d)",
                                  fn, data[k].stream->name, j, k);
        if (st == KILN_OK)
            *slot = data[k].tensor;
    }
    for (int i = 0; i < p->n_in && st == KILN_OK; i++)
        if (!in[i])
            st = program_fail(p, KILN_ERR_ARG, "%s: stream '%s' is not bound",
                              fn, p->in_streams[i]->name);
    if (st == KILN_OK && (st = kiln_run(p->f, in, out)) != KILN_OK)
        program_fail(p, st, "%s", kiln_session_error(p->s));
    free(in);
    free(out);
    return st;
}

const char *kiln_program_error(const kiln_program *p)
{
    if (!p)
        return "program is NULL";
    return p->g->status != KILN_OK ? p->g->err : p->err;
}
