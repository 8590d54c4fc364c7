#include "graph/graph.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* grad is expanded before it is pasted (elementwise rows give it as a
   macro) */
#define GRAD_KIND(grad) KILN_GRAD_##grad
const kiln_op_info kiln_op_table[KILN_OP_COUNT] = {
#define X(op, nm, ar, kd, infer, attrs, alias, grad)                           \
    [KILN_OP_##op] = {nm,                                                      \
                      ar,                                                      \
                      KILN_KIND_##kd,                                          \
                      kiln_infer_##infer,                                      \
                      attrs,                                                   \
                      KILN_ALIAS_##alias,                                      \
                      GRAD_KIND(grad)},
#include "graph/ops.def"
#undef X
};
#undef GRAD_KIND

struct kiln_graph_lock {
    pthread_rwlock_t rw;
};

static void poison_init(kiln_graph *g)
{
    memset(&g->poison, 0, sizeof g->poison);
    g->poison.id = -1;
    g->poison.op = KILN_OP_ERROR;
    g->poison.graph = g;
    g->poison.gen = g->gen;
}

/* The ids of the graphs not yet freed, ascending (ids only grow).  The IR
   keeps no pointer to the sessions that ran a graph; they ask here instead
   whether the graph behind a run state is gone. */
static struct {
    pthread_mutex_t lock;
    uint64_t last; /* the id given last; 0 is never a graph's */
    uint64_t *ids;
    size_t n, cap;
} live = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int live_add(kiln_graph *g)
{
    int ok = 1;
    pthread_mutex_lock(&live.lock);
    if (live.n == live.cap) {
        size_t cap = live.cap ? 2 * live.cap : 16;
        uint64_t *ids = realloc(live.ids, cap * sizeof *ids);
        if (ids) {
            live.ids = ids;
            live.cap = cap;
        }
        ok = ids != NULL;
    }
    if (ok)
        live.ids[live.n++] = g->id = ++live.last;
    pthread_mutex_unlock(&live.lock);
    return ok;
}

/* Index of id in live.ids, or live.n; call with the lock held. */
static size_t live_find(uint64_t id)
{
    size_t lo = 0, hi = live.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (live.ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < live.n && live.ids[lo] == id ? lo : live.n;
}

static void live_remove(uint64_t id)
{
    pthread_mutex_lock(&live.lock);
    size_t i = live_find(id);
    if (i < live.n) {
        memmove(live.ids + i, live.ids + i + 1,
                (live.n - i - 1) * sizeof *live.ids);
        live.n--;
    }
    if (live.n == 0) { /* nothing left for a leak checker to report */
        free(live.ids);
        live.ids = NULL;
        live.cap = 0;
    }
    pthread_mutex_unlock(&live.lock);
}

int kiln_graph_alive(uint64_t id)
{
    pthread_mutex_lock(&live.lock);
    int found = live_find(id) < live.n;
    pthread_mutex_unlock(&live.lock);
    return found;
}

kiln_graph *kiln_graph_new(void)
{
    kiln_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    if (!(g->lock = malloc(sizeof *g->lock)) ||
        pthread_rwlock_init(&g->lock->rw, NULL) != 0) {
        free(g->lock);
        free(g);
        return NULL;
    }
    if (!live_add(g)) {
        pthread_rwlock_destroy(&g->lock->rw);
        free(g->lock);
        free(g);
        return NULL;
    }
    kiln_arena_init(&g->arena, 256 * 1024);
    kiln_arena_init(&g->old_arena, 256 * 1024);
    poison_init(g);
    return g;
}

void kiln_graph_free(kiln_graph *g)
{
    if (!g)
        return;
    live_remove(g->id);
    kiln_arena_free(&g->arena);
    kiln_arena_free(&g->old_arena);
    free(g->nodes);
    free(g->vars);
    free(g->memo);
    free(g->effect_trigger);
    free(g->effect);
    pthread_rwlock_destroy(&g->lock->rw);
    free(g->lock);
    free(g);
}

/* The lock calls can only fail on misuse (EDEADLK: relocking from the
   thread that holds it for writing; EAGAIN: billions of readers), which
   Kiln's own calls never do. */
void kiln_graph_read_lock(const kiln_graph *g)
{
    (void)pthread_rwlock_rdlock(&g->lock->rw);
}

void kiln_graph_write_lock(const kiln_graph *g)
{
    (void)pthread_rwlock_wrlock(&g->lock->rw);
}

void kiln_graph_unlock(const kiln_graph *g)
{
    (void)pthread_rwlock_unlock(&g->lock->rw);
}

void kiln_graph_clear(kiln_graph *g)
{
    if (!g)
        return;
    /* the nodes just dropped stay readable (as stale) for one generation;
       sessions see the new generation and drop their values */
    kiln_arena kept = g->arena;
    g->arena = g->old_arena;
    g->old_arena = kept;
    kiln_arena_reset(&g->arena);
    g->gen++;
    g->n_nodes = 0;
    g->n_vars = 0;
    g->n_memo = 0; /* their nodes and arrays went with the arena */
    g->n_effects = 0;
    g->status = KILN_OK;
    g->err[0] = 0;
    poison_init(g);
}

kiln_status kiln_graph_status(const kiln_graph *g)
{
    return g ? g->status : KILN_ERR_ARG;
}

const char *kiln_graph_error(const kiln_graph *g)
{
    return g ? g->err : "graph is NULL";
}

int kiln_graph_node_count(const kiln_graph *g)
{
    return g ? g->n_nodes : 0;
}

kiln_node *kiln_graph_fail(kiln_graph *g, kiln_status st, const char *fmt, ...)
{
    if (g->status == KILN_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->err, sizeof g->err, fmt, ap);
        va_end(ap);
        g->status = st;
    }
    return &g->poison;
}

int kiln_graph_check(kiln_graph *g, const char *fn, kiln_node *x)
{
    if (g->status != KILN_OK)
        return 0;
    if (!x) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: operand is NULL", fn);
        return 0;
    }
    if (x->graph != g) {
        kiln_graph_fail(g, KILN_ERR_ARG,
                        "%s: operand %%%d belongs to another graph", fn, x->id);
        return 0;
    }
    if (x->op == KILN_OP_ERROR) {
        kiln_graph_fail(g, KILN_ERR_ARG, "%s: operand is a poisoned node", fn);
        return 0;
    }
    if (kiln_node_stale(x)) {
        kiln_graph_fail(g, KILN_ERR_ARG,
                        "%s: operand node %%%d was built before "
                        "kiln_graph_clear (node pointers do not survive a "
                        "clear)",
                        fn, x->id);
        return 0;
    }
    return 1;
}

int kiln_node_stale(const kiln_node *n)
{
    const kiln_graph *g = n->graph;
    /* a pointer into memory reused by something else than a node of this
       build fails the second test */
    return n->gen != g->gen || n->id < 0 || n->id >= g->n_nodes ||
           g->nodes[n->id] != n;
}

int kiln_node_live(kiln_node *n, const char *fn)
{
    if (!n || n->op == KILN_OP_ERROR)
        return 0;
    if (!kiln_node_stale(n))
        return 1;
    kiln_graph_fail(n->graph, KILN_ERR_ARG,
                    "%s: node %%%d was built before kiln_graph_clear", fn,
                    n->id);
    return 0;
}

void *kiln_graph_alloc(kiln_graph *g, size_t bytes)
{
    return kiln_arena_alloc(&g->arena, bytes);
}

const char *kiln_graph_strdup(kiln_graph *g, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = kiln_graph_alloc(g, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

kiln_node *kiln_node_append(kiln_graph *g, kiln_op op, kiln_dtype dt,
                            const kiln_shape *shape, kiln_node *const *in,
                            int n_in)
{
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 256;
        kiln_node **nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            return kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory",
                                   kiln_op_table[op].name);
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    /* the inputs right after the node: one bump allocation per node */
    kiln_node *n =
        kiln_graph_alloc(g, sizeof *n + (size_t)n_in * sizeof *n->in);
    if (!n)
        return kiln_graph_fail(g, KILN_ERR_MEMORY, "%s: out of memory",
                               kiln_op_table[op].name);
    if (n_in) {
        n->in = (kiln_node **)(n + 1);
        memcpy(n->in, in, (size_t)n_in * sizeof *n->in);
    }
    n->id = g->n_nodes;
    n->gen = g->gen;
    n->op = op;
    n->dtype = dt;
    n->shape = *shape;
    n->n_in = n_in;
    n->graph = g;
    g->nodes[g->n_nodes++] = n;
    return n;
}

kiln_node *kiln_node_make(kiln_graph *g, kiln_op op, kiln_dtype dt,
                          kiln_shape shape, kiln_node *const *in, int n_in)
{
    if (g->status != KILN_OK)
        return &g->poison;
    /* The net under every builder, rewrite and gradient rule: no node has
       a shape whose sizes could overflow. */
    const char *why = kiln_shape_size(shape, kiln_dtype_size(dt), NULL, NULL);
    if (why) {
        char b[96];
        return kiln_graph_fail(g, KILN_ERR_SHAPE, "kiln_%s: result shape %s %s",
                               kiln_op_table[op].name,
                               kiln_shape_str(shape, b, sizeof b), why);
    }
    return kiln_node_append(g, op, dt, &shape, in, n_in);
}

/* ------------------------------------------------------------ introspection */

int kiln_node_id(const kiln_node *n)
{
    return n ? n->id : -1;
}

const char *kiln_node_op_name(const kiln_node *n)
{
    return n ? kiln_op_table[n->op].name : "";
}

kiln_dtype kiln_node_dtype(const kiln_node *n)
{
    return n ? n->dtype : KILN_F32;
}

kiln_shape kiln_node_shape(const kiln_node *n)
{
    return n ? n->shape : KILN_SCALAR;
}

const char *kiln_node_name(const kiln_node *n)
{
    return n && n->name && !kiln_node_stale(n) ? n->name : "";
}

int kiln_node_num_inputs(const kiln_node *n)
{
    return n ? n->n_in : 0;
}

kiln_node *kiln_node_input(const kiln_node *n, int i)
{
    return n && i >= 0 && i < n->n_in && !kiln_node_stale(n) ? n->in[i] : NULL;
}

kiln_node *kiln_node_set_name(kiln_node *n, const char *name)
{
    if (kiln_node_live(n, "kiln_node_set_name") && name)
        n->name = kiln_graph_strdup(n->graph, name);
    return n;
}

kiln_node *kiln_node_set_trainable(kiln_node *v, int trainable)
{
    if (!kiln_node_live(v, "kiln_node_set_trainable"))
        return v;
    if (v->op != KILN_OP_VARIABLE) {
        kiln_graph_fail(v->graph, KILN_ERR_ARG,
                        "kiln_node_set_trainable: %%%d is a %s, not a variable",
                        v->id, kiln_op_table[v->op].name);
        return &v->graph->poison;
    }
    v->at.trainable = trainable != 0;
    return v;
}

int kiln_node_trainable(const kiln_node *v)
{
    return v && v->op == KILN_OP_VARIABLE && v->at.trainable;
}

kiln_node *kiln_debug(kiln_node *n, const char *msg)
{
    if (!kiln_node_live(n, "kiln_debug"))
        return n;
    n->debug = 1;
    n->debug_msg = kiln_graph_strdup(n->graph, msg ? msg : "");
    return n;
}

kiln_status kiln_graph_print(const kiln_graph *g, FILE *out)
{
    if (!g || !out)
        return kiln_null_arg("kiln_graph_print", g ? "stream" : "graph");
    char line[1024];
    for (int i = 0; i < g->n_nodes; i++) {
        kiln_node_format(g->nodes[i], NULL, '"', line, sizeof line);
        fprintf(out, "%s\n", line);
    }
    return KILN_OK;
}

kiln_status kiln_graph_write_dot(const kiln_graph *g, FILE *out)
{
    if (!g || !out)
        return kiln_null_arg("kiln_graph_write_dot", g ? "stream" : "graph");
    char buf[128];
    fprintf(out, "digraph kiln {\n  rankdir=LR;\n  node [shape=box];\n");
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        const char *colour = n->op == KILN_OP_VARIABLE ? "orange"
                             : n->op == KILN_OP_INPUT  ? "lightblue"
                                                       : "white";
        fprintf(out, "  n%d [style=filled, fillcolor=%s, label=\"%s", n->id,
                colour, kiln_op_table[n->op].name);
        if (n->name) {
            fputs(" ", out);
            for (const char *c = n->name; *c; c++) {
                if (*c == '"' || *c == '\\')
                    fputc('\\', out);
                fputc(*c, out);
            }
        }
        fprintf(out, "\\nid=%d %s%s", n->id, kiln_dtype_name(n->dtype),
                kiln_shape_str(n->shape, buf, sizeof buf));
        if (n->op == KILN_OP_VARIABLE)
            fprintf(out, "\\ntrainable=%d", n->at.trainable);
        fprintf(out, "\"];\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const kiln_node *n = g->nodes[i];
        for (int j = 0; j < n->n_in; j++)
            fprintf(out, "  n%d -> n%d;\n", n->in[j]->id, n->id);
    }
    fprintf(out, "}\n");
    return KILN_OK;
}
