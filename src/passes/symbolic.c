/* Symbolic sizes in compile units: a unit built at one size of its inputs'
   symbolic axes (the batch) is specialised to another by substituting that
   size wherever a node's shape marks it (graph/sym.c), re-deriving the
   constants that follow it (fills, a mean's 1 / N), and validating the
   result, which then goes through the pass pipeline like any unit. */
#include <stdio.h>
#include <string.h>

#include "graph/clone.h"
#include "passes/passes.h"

int64_t kiln_unit_sym_size(const kiln_unit *u)
{
    for (int i = 0; i < u->n_in; i++) {
        kiln_shape s = u->inputs[i]->shape;
        if (s.sym)
            return s.d[__builtin_ctz(s.sym)];
    }
    return -1;
}

static kiln_shape at_size(kiln_shape s, int64_t size)
{
    for (int i = 0; i < s.ndim; i++)
        if (s.sym >> i & 1u)
            s.d[i] = size;
    s.sym = 0;
    return s;
}

/* Nodes that have no value when the symbolic axes are empty, as their
   builders refuse an empty axis (docs/ops.md, "Zero-size dimensions"): a
   max or argmax over one, and the sum of a loss over no rows (its count
   multiplies a mean that is then NaN). */
static const char *empty_refusal(const kiln_node *n)
{
    if ((n->op == KILN_OP_RMAX || n->op == KILN_OP_ARGMAX) &&
        (n->in[0]->shape.sym & n->at.axes))
        return "reduces a symbolic axis, which has no elements";
    if (n->op == KILN_OP_CONSTANT && n->at.count.k && !n->at.count.recip)
        return "counts rows of a loss summed over a symbolic axis, which has "
               "none";
    return NULL;
}

/* A constant that follows the size: a fill (all its elements equal) at the
   new shape, or a count re-derived. */
static kiln_node *constant_at(kiln_graph *g, const kiln_node *old, kiln_shape s,
                              int64_t size)
{
    if (old->at.count.k)
        return kiln_scalar(g, kiln_count_value(&old->at.count, size));
    float v = kiln_shape_numel(old->shape) ? *(const float *)old->at.data : 0;
    return kiln_fill(g, s, v);
}

/* A specialisation under way: the size, and the node that failed. */
typedef struct resize {
    int64_t size;
    int bad; /* node id of the unit, or -1 */
} resize;

static kiln_node *specialise_node(kiln_rewriter *rw, const kiln_node *old,
                                  kiln_node **in)
{
    resize *r = rw->state;
    kiln_graph *g = rw->out->g;
    kiln_shape s = at_size(old->shape, r->size);
    char b[96];
    const char *why =
                   kiln_shape_size(s, kiln_dtype_size(old->dtype), NULL, NULL),
               *empty = r->size == 0 ? empty_refusal(old) : NULL;
    if (why || empty) {
        r->bad = old->id;
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "%s%s%s",
                               why ? kiln_shape_str(s, b, sizeof b) : "",
                               why ? ": " : "", why ? why : empty);
    }
    if (old->op == KILN_OP_CONSTANT && (old->shape.sym || old->at.count.k))
        return constant_at(g, old, s, r->size);
    kiln_node *c = kiln_node_clone(g, old, in);
    if (c->op != KILN_OP_ERROR)
        c->shape = s; /* c is not used yet: setting its sizes builds it */
    return c;
}

/* Specialises u at size into out; on failure *bad is the node of u that
   failed (-1 when none is to blame) and why says why. */
static kiln_status specialise(const kiln_unit *u, int64_t size, kiln_unit *out,
                              int *bad, char *why, size_t len)
{
    resize r = {size, -1};
    char msg[KILN_ERRMSG_MAX];
    *bad = -1;
    if (kiln_unit_alloc(out, u->n_out, u->n_in) != KILN_OK) {
        snprintf(why, len, "out of memory");
        return KILN_ERR_MEMORY;
    }
    kiln_status st =
        kiln_rewrite(u, out, NULL, NULL, NULL, specialise_node, &r);
    if (st != KILN_OK) {
        *bad = r.bad;
        snprintf(why, len, "%s", out->g->err);
    } else if ((st = kiln_unit_validate(out, msg, sizeof msg)) != KILN_OK) {
        /* "%12 = add: why": the nodes keep u's ids */
        const char *rest = strstr(msg, ": ");
        if (sscanf(msg, "%%%d =", bad) != 1 || *bad >= u->g->n_nodes || !rest)
            *bad = -1;
        snprintf(why, len, "%s", *bad >= 0 ? rest + 2 : msg);
    }
    if (st != KILN_OK)
        kiln_unit_free(out);
    return st == KILN_OK ? KILN_OK : KILN_ERR_SHAPE;
}

/* "%12 = add "name" of [128,10] and [128,10]" for node id of u, numbered
   as ids says (NULL: as in u). */
static void describe(const kiln_unit *u, const int *ids, int id, char *buf,
                     size_t len)
{
    if (id < 0) {
        snprintf(buf, len, "the graph");
        return;
    }
    const kiln_node *n = u->g->nodes[id];
    char b[96];
    int w = snprintf(buf, len, "%%%d = %s%s%s%s", ids ? ids[id] : id,
                     kiln_op_table[n->op].name, n->name ? " \"" : "",
                     n->name ? n->name : "", n->name ? "\"" : "");
    for (int k = 0; k < n->n_in && w > 0 && (size_t)w < len; k++)
        w += snprintf(buf + w, len - (size_t)w, "%s%s", k ? " and " : " of ",
                      kiln_shape_str(n->in[k]->shape, b, sizeof b));
}

kiln_status kiln_unit_specialise(const kiln_unit *u, int64_t size,
                                 const int *ids, kiln_unit *out, char *err,
                                 size_t len)
{
    char why[KILN_ERRMSG_MAX], what[256];
    int bad;
    if (specialise(u, size, out, &bad, why, sizeof why) == KILN_OK)
        return KILN_OK;
    describe(u, ids, bad, what, sizeof what);
    snprintf(err, len, "%s: %s", what, why);
    return KILN_ERR_SHAPE;
}

kiln_status kiln_unit_check_sym(const kiln_unit *u, const int *ids, char *err,
                                size_t len)
{
    int64_t size = kiln_unit_sym_size(u);
    if (size < 0)
        return KILN_OK;
    const kiln_node *first = NULL;
    for (int i = 0; i < u->n_in; i++) {
        kiln_shape s = u->inputs[i]->shape;
        if (!s.sym)
            continue;
        if (!first)
            first = u->inputs[i];
        if (s.d[__builtin_ctz(s.sym)] != size) {
            snprintf(err, len,
                     "inputs '%s' and '%s' were built at different "
                     "symbolic sizes (%lld and %lld)",
                     kiln_node_name(first), kiln_node_name(u->inputs[i]),
                     (long long)size, (long long)s.d[__builtin_ctz(s.sym)]);
            return KILN_ERR_SHAPE;
        }
    }
    /* Any size but the one built at shows a node that keeps it fixed. */
    kiln_unit probe;
    char why[KILN_ERRMSG_MAX], what[256];
    int bad;
    if (specialise(u, size + 1, &probe, &bad, why, sizeof why) == KILN_OK) {
        kiln_unit_free(&probe);
        return KILN_OK;
    }
    describe(u, ids, bad, what, sizeof what);
    snprintf(err, len,
             "%s does not follow the symbolic size of the inputs (built at "
             "%lld; at %lld: %s)",
             what, (long long)size, (long long)size + 1, why);
    return KILN_ERR_SHAPE;
}
