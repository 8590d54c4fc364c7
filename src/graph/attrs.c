/* Op attributes by the descriptor's KILN_ATTR_* mask: equality and hash
   (CSE), text (the IR line of a node, for every printout), copying
   (cloning), and the aliasing rule (the memory planner and the
   compiler). */
#include <stdio.h>
#include <string.h>

#include "graph/fused_program.h"
#include "graph/graph.h"

static int has(const kiln_node *n, unsigned attr)
{
    return (kiln_op_table[n->op].attrs & attr) != 0;
}

/* PERM and LO hold one entry per input dim. */
static int in_dims(const kiln_node *n)
{
    return n->n_in ? n->in[0]->shape.ndim : 0;
}

size_t kiln_attrs_data_bytes(const kiln_node *n)
{
    if (has(n, KILN_ATTR_DATA))
        return (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype);
    if (has(n, KILN_ATTR_PROGRAM))
        return sizeof(kiln_fused_program);
    return 0;
}

int kiln_attrs_equal(const kiln_node *a, const kiln_node *b)
{
    const kiln_attrs *x = &a->at, *y = &b->at;
    size_t nd = (size_t)in_dims(a);
    if (a->op != b->op)
        return 0;
    return (!has(a, KILN_ATTR_AXES) || x->axes == y->axes) &&
           (!has(a, KILN_ATTR_KEEPDIMS) || x->keepdims == y->keepdims) &&
           (!has(a, KILN_ATTR_AXIS) || x->axis == y->axis) &&
           (!has(a, KILN_ATTR_PERM) ||
            !memcmp(x->perm, y->perm, nd * sizeof *x->perm)) &&
           (!has(a, KILN_ATTR_LO) ||
            !memcmp(x->lo, y->lo, nd * sizeof *x->lo)) &&
           (!has(a, KILN_ATTR_VALUE) ||
            !memcmp(&x->value, &y->value, sizeof x->value)) &&
           (!has(a, KILN_ATTR_TRANS) ||
            (x->trans_a == y->trans_a && x->trans_b == y->trans_b)) &&
           (!has(a, KILN_ATTR_DEPTH) ||
            (x->depth == y->depth && x->strict == y->strict)) &&
           (!has(a, KILN_ATTR_DATA) ||
            !memcmp(x->data, y->data, kiln_attrs_data_bytes(a))) &&
           (!has(a, KILN_ATTR_WINDOW) ||
            !memcmp(&x->win, &y->win, sizeof x->win)) &&
           (!has(a, KILN_ATTR_NORM) ||
            !memcmp(&x->norm, &y->norm, sizeof x->norm)) &&
           (!has(a, KILN_ATTR_RANDOM) ||
            !memcmp(&x->random, &y->random, sizeof x->random)) &&
           (!has(a, KILN_ATTR_PROGRAM) ||
            kiln_fused_program_equal(x->data, y->data)) &&
           (!has(a, KILN_ATTR_CAUSAL) || x->causal == y->causal) &&
           !has(a, KILN_ATTR_VARIABLE); /* each variable is its own value */
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t kiln_attrs_hash(const kiln_node *n, uint64_t h)
{
    const kiln_attrs *x = &n->at;
    /* depth and strict apart: 2 * depth overflows for a depth near
       INT_MAX */
    int v[7] = {has(n, KILN_ATTR_AXES) ? (int)x->axes : 0,
                has(n, KILN_ATTR_KEEPDIMS) ? x->keepdims : 0,
                has(n, KILN_ATTR_AXIS) ? x->axis : 0,
                has(n, KILN_ATTR_TRANS) ? 2 * x->trans_a + x->trans_b : 0,
                has(n, KILN_ATTR_DEPTH) ? x->depth : 0,
                has(n, KILN_ATTR_DEPTH) ? x->strict : 0,
                has(n, KILN_ATTR_CAUSAL) ? x->causal : 0};
    h = hash_bytes(h, v, sizeof v);
    size_t nd = (size_t)in_dims(n);
    if (has(n, KILN_ATTR_PERM))
        h = hash_bytes(h, x->perm, nd * sizeof *x->perm);
    if (has(n, KILN_ATTR_LO))
        h = hash_bytes(h, x->lo, nd * sizeof *x->lo);
    if (has(n, KILN_ATTR_VALUE))
        h = hash_bytes(h, &x->value, sizeof x->value);
    if (has(n, KILN_ATTR_DATA))
        h = hash_bytes(h, x->data, kiln_attrs_data_bytes(n));
    if (has(n, KILN_ATTR_WINDOW))
        h = hash_bytes(h, &x->win, sizeof x->win);
    if (has(n, KILN_ATTR_NORM))
        h = hash_bytes(h, &x->norm, sizeof x->norm);
    if (has(n, KILN_ATTR_RANDOM))
        h = hash_bytes(h, &x->random, sizeof x->random);
    if (has(n, KILN_ATTR_PROGRAM)) {
        const kiln_fused_program *p = x->data;
        h = hash_bytes(h, p->ins, (size_t)p->n * sizeof *p->ins);
        h = hash_bytes(h, &p->reduce, sizeof p->reduce);
        h = hash_bytes(h, &p->axes, sizeof p->axes);
    }
    return h;
}

int kiln_attrs_copy(kiln_graph *g, kiln_node *c, const kiln_node *old)
{
    c->at = old->at;
    size_t bytes = kiln_attrs_data_bytes(old);
    if (!bytes)
        return 1;
    void *d = kiln_graph_alloc(g, bytes);
    if (!d)
        return 0;
    memcpy(d, old->at.data, bytes);
    c->at.data = d;
    return 1;
}

/* The list "[a,b,c]" of nd entries of v, each as long long. */
#define PUT_LIST(put, v, nd)                                                   \
    do {                                                                       \
        for (int i_ = 0; i_ < (nd); i_++)                                      \
            put("%s%lld", i_ ? "," : "[", (long long)(v)[i_]);                 \
        put("%s", (nd) ? "]" : "[]");                                          \
    } while (0)

/* Appends to buf[size] at k, counting what did not fit. */
#define PUT(...)                                                               \
    do {                                                                       \
        int w = snprintf(buf + k, k < size ? size - k : 0, __VA_ARGS__);       \
        k += w > 0 ? (size_t)w : 0;                                            \
    } while (0)

/* " kernel=[..] stride=[..] ..." : the fields that are not their
   defaults. */
static size_t window_format(const kiln_window *win, char *buf, size_t size)
{
    size_t k = 0;
    int nd = win->nd;
    if (win->kernel[0]) {
        PUT(" kernel=");
        PUT_LIST(PUT, win->kernel, nd);
    }
    if (win->stride[0]) { /* resample2d's maps other than avg have none */
        PUT(" stride=");
        PUT_LIST(PUT, win->stride, nd);
    }
    PUT(" pad=");
    PUT_LIST(PUT, win->pad_lo, nd);
    PUT_LIST(PUT, win->pad_hi, nd);
    if (win->dilation[0]) {
        PUT(" dilation=");
        PUT_LIST(PUT, win->dilation, nd);
    }
    if (!win->mode && (win->out_pad[0] || win->out_pad[1] || win->out_pad[2])) {
        PUT(" out_pad=");
        PUT_LIST(PUT, win->out_pad, nd);
    }
    if (win->groups > 1)
        PUT(" groups=%d", win->groups);
    if (win->flags & KILN_WINDOW_CEIL)
        PUT(" ceil");
    if (win->flags & KILN_WINDOW_COUNT_PAD)
        PUT(" count_pad");
    if (win->flags & KILN_WINDOW_ALIGN_CORNERS)
        PUT(" align_corners");
    if (win->flags & KILN_WINDOW_RELU)
        PUT(" relu");
    if (win->mode)
        PUT(" mode=%s", kiln_resample_mode_name(win->mode));
    if (win->mode && (win->inv_scale[0] || win->inv_scale[1]))
        for (int i = 0; i < nd; i++)
            PUT("%s%g%s", i ? "," : " inv_scale=[", win->inv_scale[i],
                i == nd - 1 ? "]" : "");
    return k;
}

size_t kiln_attrs_format(const kiln_node *n, char *buf, size_t size)
{
    const kiln_attrs *x = &n->at;
    size_t k = 0;
    if (size)
        buf[0] = 0;
    if (has(n, KILN_ATTR_AXES))
        PUT(" axes=0x%x%s", x->axes, x->keepdims ? " keepdims" : "");
    if (has(n, KILN_ATTR_AXIS))
        PUT(" axis=%d", x->axis);
    if (has(n, KILN_ATTR_PERM)) {
        PUT(" perm=");
        PUT_LIST(PUT, x->perm, in_dims(n));
    }
    if (has(n, KILN_ATTR_LO)) {
        PUT(" lo=");
        PUT_LIST(PUT, x->lo, in_dims(n));
    }
    if (has(n, KILN_ATTR_VALUE))
        PUT(" value=%g", x->value);
    if (has(n, KILN_ATTR_TRANS) && (x->trans_a || x->trans_b))
        PUT(" trans_a=%d trans_b=%d", x->trans_a, x->trans_b);
    if (has(n, KILN_ATTR_DEPTH))
        PUT(" depth=%d%s", x->depth, x->strict ? " strict" : "");
    if (has(n, KILN_ATTR_CAUSAL) && x->causal)
        PUT(" causal");
    if (has(n, KILN_ATTR_WINDOW))
        k += window_format(&x->win, buf + k, k < size ? size - k : 0);
    if (has(n, KILN_ATTR_NORM))
        PUT(" axis=%d groups=%d eps=%g", x->norm.axis, x->norm.groups,
            (double)x->norm.eps);
    if (has(n, KILN_ATTR_RANDOM))
        PUT(" p=%g stream=%d%s", (double)x->random.p, x->random.stream,
            x->random.per_channel ? " per_channel" : "");
    return k;
}

void kiln_node_format(const kiln_node *n, const char *op, char quote, char *buf,
                      size_t size)
{
    char sh[96], prog[1024];
    size_t k = 0;
    if (!op && n->op == KILN_OP_FUSED)
        PUT("%%%d = fused[%s](", n->id,
            kiln_fused_format(n, prog, sizeof prog));
    else
        PUT("%%%d = %s(", n->id, op ? op : kiln_op_table[n->op].name);
    for (int i = 0; i < n->n_in; i++)
        PUT("%s%%%d", i ? ", " : "", n->in[i]->id);
    PUT(") %s%s", kiln_dtype_name(n->dtype),
        kiln_shape_str(n->shape, sh, sizeof sh));
    k += kiln_attrs_format(n, buf + k, k < size ? size - k : 0);
    if (n->name && quote)
        PUT(" %c%s%c", quote, n->name, quote);
}

#undef PUT

kiln_alias kiln_node_alias(const kiln_node *n)
{
    kiln_alias a = {0, 0, 0, 0};
    switch (kiln_op_table[n->op].alias) {
    case KILN_ALIAS_NONE:
        break;
    case KILN_ALIAS_PROGRAM:
        if (kiln_fused_is_reduction(n))
            break;
        /* fall through */
    case KILN_ALIAS_MAP:
        a = (kiln_alias){0, n->n_in, 0, 1};
        break;
    case KILN_ALIAS_COPY: /* of its last input: an assign's value */
        a = (kiln_alias){n->n_in - 1, 1, 1, 0};
        break;
    case KILN_ALIAS_CONVERT:
        a = (kiln_alias){0, 1, n->dtype == n->in[0]->dtype, 0};
        break;
    case KILN_ALIAS_ACCUMULATE:
        a = (kiln_alias){0, 1, 0, 0};
        for (int k = 1; k < n->n_in; k++)
            if (n->in[k] == n->in[0])
                a.count = 0;
        break;
    }
    return a;
}
