/* Elementwise fusion: a chain or tree (or small DAG) of elementwise ops of
   one shape becomes one FUSED node running a program (graph/fused_program.h) in
   a single loop, so its intermediate values never go to memory.

   Groups grow backwards from a root: walking the nodes in reverse order, an
   elementwise node joins the group of its consumers when all of them are in
   that one group, it has the group's shape (so nothing is recomputed under
   broadcasting), it is not an output or marked for debugging, and the
   program stays within the instruction and input limits.  Anything else
   that feeds a group is loaded as an input (through a broadcast, which the
   load does by itself), scalar constants as immediates.

   Reductions: a sum or reduce_max (axes of one run) roots a group whose
   shape is its input's; the program then reduces its result, so
   sum(relu(a + b)) reads a and b once and writes only the sums.

   Recomputation: a cheap elementwise node (add, mul, relu, a comparison...)
   whose consumers sit in several groups (up to MAX_LAND), or in nodes so
   duplicated, is computed inside each of those groups instead of being
   written out once and read back by each: z = x + b feeding both relu(z)
   and the backward pass's gt(z, 0) costs one add per group and no buffer.
   Nodes have one output, so recomputing is the way to fuse such a value
   into all of its consumers; it never changes a result, since every group
   evaluates the same expression. */
#include <stdlib.h>
#include <string.h>

#include "graph/fused_program.h"
#include "passes/passes.h"

enum { MAX_LAND = 4 }; /* groups one duplicated node may be computed in */

typedef struct fusion {
    const kiln_graph *g;
    int *group;   /* root id of a node's group, -1 when in none */
    int *size;    /* by root: members */
    int *edges;   /* by root: input edges from outside (upper bound of loads) */
    int *land;    /* by node: the MAX_LAND groups a duplicated node is in */
    int *n_land;  /* by node: how many (0: not duplicated) */
    int *cons_at; /* consumers of node id: cons[cons_at[id] .. cons_at[id+1]) */
    int *cons;
    unsigned char *is_output;
} fusion;

static int fusible(const kiln_node *n)
{
    return kiln_fused_op_ok(n->op) && n->dtype == KILN_F32 &&
           !kiln_node_pinned(n);
}

/* A sum or max that can reduce the result of a program. */
static int reduce_root(const kiln_node *n)
{
    return (n->op == KILN_OP_SUM || n->op == KILN_OP_RMAX) &&
           n->dtype == KILN_F32 && n->in[0]->dtype == KILN_F32 &&
           !kiln_node_pinned(n) &&
           kiln_fused_reduce_ok(n->in[0]->shape, n->at.axes);
}

/* Worth recomputing in every consumer's group: about one instruction. */
static int cheap(kiln_op op)
{
    switch (op) {
    case KILN_OP_NEG:
    case KILN_OP_ABS:
    case KILN_OP_SIGN:
    case KILN_OP_RELU:
    case KILN_OP_ADD:
    case KILN_OP_SUB:
    case KILN_OP_MUL:
    case KILN_OP_MAX:
    case KILN_OP_MIN:
    case KILN_OP_LT:
    case KILN_OP_LE:
    case KILN_OP_GT:
    case KILN_OP_GE:
    case KILN_OP_EQ:
    case KILN_OP_SELECT:
        return 1;
    default:
        return 0;
    }
}

/* The shape a group's program runs over. */
static kiln_shape group_shape(const fusion *f, int root)
{
    const kiln_node *r = f->g->nodes[root];
    return reduce_root(r) ? r->in[0]->shape : r->shape;
}

static int build_consumers(fusion *f)
{
    const kiln_graph *g = f->g;
    int n = g->n_nodes, n_edges = 0;
    f->cons_at = calloc((size_t)n + 2, sizeof *f->cons_at);
    for (int id = 0; id < n; id++)
        n_edges += g->nodes[id]->n_in;
    f->cons = calloc((size_t)n_edges + 1, sizeof *f->cons);
    if (!f->cons_at || !f->cons)
        return 0;
    for (int id = 0; id < n; id++)
        for (int k = 0; k < g->nodes[id]->n_in; k++)
            f->cons_at[g->nodes[id]->in[k]->id + 2]++;
    for (int id = 0; id < n; id++)
        f->cons_at[id + 2] += f->cons_at[id + 1];
    for (int id = 0; id < n; id++)
        for (int k = 0; k < g->nodes[id]->n_in; k++)
            f->cons[f->cons_at[g->nodes[id]->in[k]->id + 1]++] = id;
    return 1;
}

/* The group every consumer of n is in, or -1. */
static int consumers_group(const fusion *f, int id)
{
    int grp = -1;
    for (int c = f->cons_at[id]; c < f->cons_at[id + 1]; c++) {
        int cg = f->group[f->cons[c]];
        if (cg < 0 || (grp >= 0 && cg != grp))
            return -1;
        grp = cg;
    }
    return grp;
}

/* Edges of group grp once n, which takes `uses` of its input edges, joins
   it; -1 when n cannot join (shape or program limits). */
static int edges_with(const fusion *f, const kiln_node *n, int grp, int uses)
{
    int edges = f->edges[grp] - uses + n->n_in;
    if (!kiln_shape_equal(n->shape, group_shape(f, grp)) ||
        edges > KILN_FUSED_MAX_INPUTS ||
        f->size[grp] + 1 + edges > KILN_FUSED_MAX_INSTRS)
        return -1;
    return edges;
}

/* Makes node id a duplicate computed in every group its consumers are in
   (directly or as duplicates); 0 when that is not possible. */
static int duplicate(fusion *f, int id)
{
    const kiln_node *n = f->g->nodes[id];
    int land[MAX_LAND], n_land = 0, edges[MAX_LAND];
    for (int c = f->cons_at[id]; c < f->cons_at[id + 1]; c++) {
        int cid = f->cons[c], one = f->group[cid];
        const int *from = f->group[cid] >= 0 ? &one : f->land + cid * MAX_LAND;
        int count = f->group[cid] >= 0 ? 1 : f->n_land[cid];
        if (!count)
            return 0; /* a consumer outside every program */
        for (int i = 0; i < count; i++) {
            int k = 0;
            while (k < n_land && land[k] != from[i])
                k++;
            if (k == n_land) {
                if (n_land == MAX_LAND)
                    return 0;
                land[n_land++] = from[i];
            }
        }
    }
    if (!n_land)
        return 0;
    /* each group reads n through at least one edge, replaced by n's own */
    for (int k = 0; k < n_land; k++)
        if ((edges[k] = edges_with(f, n, land[k], 1)) < 0)
            return 0;
    for (int k = 0; k < n_land; k++) {
        f->size[land[k]]++;
        f->edges[land[k]] = edges[k];
        f->land[id * MAX_LAND + k] = land[k];
    }
    f->n_land[id] = n_land;
    return 1;
}

static void form_groups(fusion *f)
{
    const kiln_graph *g = f->g;
    for (int id = g->n_nodes - 1; id >= 0; id--) {
        const kiln_node *n = g->nodes[id];
        f->group[id] = -1;
        f->n_land[id] = 0;
        if (reduce_root(n)) {
            f->group[id] = id;
            f->size[id] = 1;
            f->edges[id] = 1;
            continue;
        }
        if (!fusible(n))
            continue;
        if (!f->is_output[id]) {
            int uses = f->cons_at[id + 1] - f->cons_at[id];
            int grp = consumers_group(f, id);
            int edges = grp >= 0 ? edges_with(f, n, grp, uses) : -1;
            if (edges >= 0) {
                f->group[id] = grp;
                f->size[grp]++;
                f->edges[grp] = edges;
                continue;
            }
            if (cheap(n->op) && duplicate(f, id))
                continue;
        }
        f->group[id] = id;
        f->size[id] = 1;
        f->edges[id] = n->n_in;
    }
}

/* Program under construction for one group. */
typedef struct builder {
    const fusion *f;
    kiln_rewriter *rw;
    int root;
    int imm_ok; /* scalar constants as immediates (else loaded) */
    kiln_fused_program prog;
    int *value; /* by old node id: instruction index + 1 */
    kiln_node *ext[KILN_FUSED_MAX_INPUTS];
    int n_ext;
} builder;

static int emit(builder *b, kiln_fused_instr ins)
{
    if (b->prog.n >= KILN_FUSED_MAX_INSTRS)
        return -1;
    b->prog.ins[b->prog.n] = ins;
    return b->prog.n++;
}

/* Instruction index of old node x's value inside the group's program. */
static int value_of(builder *b, const kiln_node *x)
{
    const fusion *f = b->f;
    if (b->value[x->id])
        return b->value[x->id] - 1;
    /* a load broadcasts by itself, so a broadcast feeding the group is
       read through (it stays for other users, if any) */
    if (x->op == KILN_OP_BROADCAST && !kiln_node_pinned(x) &&
        f->group[x->id] < 0) {
        int v = value_of(b, x->in[0]);
        if (v >= 0)
            b->value[x->id] = v + 1;
        return v;
    }
    kiln_fused_instr ins;
    memset(&ins, 0, sizeof ins);
    int v;
    if (f->group[x->id] == b->root || f->n_land[x->id]) {
        ins.op = x->op;
        for (int k = 0; k < x->n_in; k++)
            if ((ins.arg[k] = value_of(b, x->in[k])) < 0)
                return -1;
        v = emit(b, ins);
    } else if (b->imm_ok && x->op == KILN_OP_CONSTANT && x->dtype == KILN_F32 &&
               kiln_shape_numel(x->shape) == 1) {
        ins.op = KILN_FUSED_IMM;
        ins.imm = *(const float *)x->at.data;
        v = emit(b, ins);
    } else {
        if (b->n_ext >= KILN_FUSED_MAX_INPUTS)
            return -1;
        b->ext[b->n_ext] = b->rw->map[x->id];
        ins.op = KILN_FUSED_LOAD;
        ins.arg[0] = b->n_ext++;
        v = emit(b, ins);
    }
    if (v >= 0)
        b->value[x->id] = v + 1;
    return v;
}

/* Builds the program of root old into b (a reduction reduces its input's
   value); -1 past the program limits. */
static int build_program(builder *b, const kiln_node *old, int imm_ok)
{
    memset(&b->prog, 0, sizeof b->prog);
    memset(b->value, 0, ((size_t)b->f->g->n_nodes + 1) * sizeof *b->value);
    b->n_ext = 0;
    b->imm_ok = imm_ok;
    if (!reduce_root(old))
        return value_of(b, old);
    b->prog.reduce = old->op;
    b->prog.axes = old->at.axes;
    b->prog.keepdims = old->at.keepdims;
    b->prog.domain = old->in[0]->shape;
    return value_of(b, old->in[0]);
}

static kiln_node *fuse_group(kiln_rewriter *rw, const kiln_node *old,
                             kiln_node **in)
{
    fusion *f = rw->state;
    (void)in;
    if (f->group[old->id] != old->id || f->size[old->id] < 2)
        return NULL;
    kiln_graph *g = rw->out->g;
    builder *b = calloc(1, sizeof *b);
    int *value = calloc((size_t)f->g->n_nodes + 1, sizeof *value);
    kiln_node *r = NULL;
    if (!b || !value) {
        r = kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        goto done;
    }
    b->f = f;
    b->rw = rw;
    b->root = old->id;
    b->value = value;
    /* a node needs an input: a program of immediates alone loads them */
    int v = build_program(b, old, 1);
    if (v >= 0 && !b->n_ext)
        v = build_program(b, old, 0);
    if (v < 0 || !b->n_ext) {
        r = kiln_graph_fail(g, KILN_ERR_STATE,
                            "fuse: group of %%%d exceeds the program limits",
                            old->id);
        goto done;
    }
    kiln_fused_program *p = kiln_graph_alloc(g, sizeof *p);
    if (!p) {
        r = kiln_graph_fail(g, KILN_ERR_MEMORY, "kiln_compile: out of memory");
        goto done;
    }
    *p = b->prog;
    r = kiln_node_make(g, KILN_OP_FUSED, KILN_F32, old->shape, b->ext,
                       b->n_ext);
    if (r->op == KILN_OP_FUSED) {
        r->at.data = p;
        r->name = kiln_graph_strdup(g, old->name);
    }
done:
    free(b);
    free(value);
    return r;
}

kiln_status kiln_pass_fuse(const kiln_unit *in, kiln_unit *out,
                           const kiln_compile_options *opt, kiln_eval_fn eval)
{
    int n = in->g->n_nodes;
    fusion f = {in->g, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    f.group = calloc((size_t)n + 1, sizeof *f.group);
    f.size = calloc((size_t)n + 1, sizeof *f.size);
    f.edges = calloc((size_t)n + 1, sizeof *f.edges);
    f.land = calloc(((size_t)n + 1) * MAX_LAND, sizeof *f.land);
    f.n_land = calloc((size_t)n + 1, sizeof *f.n_land);
    f.is_output = calloc((size_t)n + 1, 1);
    unsigned char *keep = calloc((size_t)n + 1, 1);
    kiln_status st = KILN_ERR_MEMORY;
    if (f.group && f.size && f.edges && f.land && f.n_land && f.is_output &&
        keep && build_consumers(&f)) {
        for (int i = 0; i < in->n_out; i++)
            f.is_output[in->outputs[i]->id] = 1;
        form_groups(&f);
        /* members other than roots, and duplicates, live only inside
           their fused nodes */
        for (int id = 0; id < n; id++)
            keep[id] = !f.n_land[id] && (f.group[id] < 0 || f.group[id] == id ||
                                         f.size[f.group[id]] < 2);
        st = kiln_rewrite(in, out, opt, eval, keep, fuse_group, &f);
    }
    free(f.group);
    free(f.size);
    free(f.edges);
    free(f.land);
    free(f.n_land);
    free(f.cons_at);
    free(f.cons);
    free(f.is_output);
    free(keep);
    return st;
}
