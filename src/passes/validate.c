/* The invariants a compile unit keeps through every pass, and its printout. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "passes/passes.h"

static kiln_status bad(char *err, size_t len, const kiln_node *n,
                       const char *fmt, ...) KILN_PRINTF(4, 5);

static kiln_status bad(char *err, size_t len, const kiln_node *n,
                       const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        snprintf(err, len, "%%%d = %s: %s", n->id, kiln_op_table[n->op].name,
                 msg);
    else
        snprintf(err, len, "%s", msg);
    return KILN_ERR_STATE;
}

static kiln_status validate_node(const kiln_graph *g, const kiln_node *n,
                                 int id, char *err, size_t len)
{
    char b1[96], b2[96];
    if (n->id != id || n->graph != g)
        return bad(err, len, n, "node %d has id %d or belongs to another graph",
                   id, n->id);
    if (n->op >= KILN_OP_COUNT || n->op == KILN_OP_ERROR)
        return bad(err, len, n, "invalid op");
    int ar = kiln_op_table[n->op].arity;
    if ((ar >= 0 && n->n_in != ar) || (ar < 0 && n->n_in < 1))
        return bad(err, len, n, "%d inputs, the op takes %d", n->n_in, ar);
    for (int k = 0; k < n->n_in; k++) {
        const kiln_node *x = n->in[k];
        if (!x || x->graph != g || x->id < 0 || x->id >= id ||
            g->nodes[x->id] != x)
            return bad(err, len, n, "input %d is not defined before its use",
                       k);
    }
    if (!kiln_shape_valid(n->shape) || !kiln_dtype_supported(n->dtype))
        return bad(err, len, n, "invalid shape or dtype");
    kiln_shape s;
    kiln_dtype dt;
    char why[256];
    if (kiln_op_table[n->op].infer(n, &s, &dt, why, sizeof why) != KILN_OK)
        return bad(err, len, n, "%s", why);
    if (!kiln_shape_equal(s, n->shape))
        return bad(err, len, n, "shape %s, its inputs give %s",
                   kiln_shape_str(n->shape, b1, sizeof b1),
                   kiln_shape_str(s, b2, sizeof b2));
    if (dt != n->dtype)
        return bad(err, len, n, "dtype %s, its inputs give %s",
                   kiln_dtype_name(n->dtype), kiln_dtype_name(dt));
    return KILN_OK;
}

kiln_status kiln_unit_validate(const kiln_unit *p, char *err, size_t len)
{
    const kiln_graph *g = p->g;
    if (g->status != KILN_OK)
        return bad(err, len, NULL, "%s", g->err);
    for (int id = 0; id < g->n_nodes; id++) {
        kiln_status st = validate_node(g, g->nodes[id], id, err, len);
        if (st != KILN_OK)
            return st;
    }
    for (int i = 0; i < p->n_out; i++) {
        const kiln_node *n = p->outputs[i];
        if (!n || n->graph != g || g->nodes[n->id] != n)
            return bad(err, len, NULL, "output %d is not a node of the graph",
                       i);
    }
    for (int i = 0; i < p->n_in; i++) {
        const kiln_node *n = p->inputs[i];
        if (!n || n->graph != g || g->nodes[n->id] != n ||
            n->op != KILN_OP_INPUT)
            return bad(err, len, NULL,
                       "input %d is not an input node of the graph", i);
    }
    return KILN_OK;
}

void kiln_unit_print(const kiln_unit *p, FILE *out)
{
    char line[2048];
    const kiln_graph *g = p->g;
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_node_format(g->nodes[i], NULL, '"', line, sizeof line);
        fprintf(out, "%s\n", line);
    }
    fprintf(out, "outputs:");
    for (int i = 0; i < p->n_out; i++)
        fprintf(out, " %%%d", p->outputs[i]->id);
    fputc('\n', out);
}
