/* The graph API under hostile programs: the input is read as a sequence of
   calls (fuzz/make_corpus.py writes seeds in the same encoding): leaves
   with byte-chosen dtypes and shapes (0, 1, a few, and hostile sizes such
   as 2^31, 2^62, INT64_MAX, negative), then op builders with byte-chosen
   attributes whose operands are earlier nodes, NULL, a node of another
   graph or one built before the last kiln_graph_clear; gradients; and,
   when the graph is sound and every value small, compiled and dynamic runs
   on deterministic data.

   Invariants (abort() on a broken one; a crash inside Kiln is Kiln's bug):
   a builder given a graph never returns NULL; a failed graph, session call
   or constructor leaves a non-empty message; a sound graph's nodes have a
   valid dtype and shape; a successful session call leaves "".

   Encoding: one byte chooses the call (op % N_OPS), the following bytes
   its operands and attributes (see the readers below); missing bytes read
   as 0.  A graph that fails is checked, then cleared, and the nodes it
   held become the "stale" operands of the next build. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "kiln.h"

/* What one input may do: bounded so that an input runs in milliseconds. */
enum {
    MAX_OPS = 96,            /* calls per input */
    MAX_NODES = 512,         /* nodes the harness keeps per build */
    RUN_NODE_MAX = 2048,     /* elements of any one value in a run */
    RUN_TOTAL_MAX = 1 << 15, /* elements of all values in a run */
    CONST_MAX = 1024,        /* elements of a constant the harness copies */
};

/* ------------------------------------------------------------ the reader */

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd;

static uint8_t u8(rd *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

/* A small int, or (top bytes) a hostile one. */
static int rint_(rd *r)
{
    static const int hostile[] = {
        INT_MIN, INT_MAX, -1000, 1000, 1 << 16,     -(1 << 16),  1 << 30, -7,
        64,      33,      17,    -3,   INT_MIN + 1, INT_MAX - 1, 255,     9};
    uint8_t b = u8(r);
    if (b >= 0xF0)
        return hostile[b - 0xF0];
    return (int)(b % 9) - 2;
}

/* A small non-negative int (sizes, depths, counts), or a hostile one. */
static int rsize(rd *r)
{
    static const int hostile[] = {INT_MAX, INT_MIN, -1,   1 << 20,
                                  1 << 30, 65536,   4097, 100};
    uint8_t b = u8(r);
    if (b >= 0xF8)
        return hostile[b - 0xF8];
    return b % 6;
}

static int64_t ri64(rd *r)
{
    static const int64_t hostile[] = {INT64_MIN,
                                      INT64_MAX,
                                      (int64_t)1 << 31,
                                      (int64_t)1 << 62,
                                      -((int64_t)1 << 62),
                                      (int64_t)1 << 40,
                                      -((int64_t)1 << 31),
                                      ((int64_t)1 << 32) + 1,
                                      1000000,
                                      -1000000,
                                      (int64_t)INT_MAX + 1,
                                      (int64_t)INT_MIN - 1,
                                      1 << 20,
                                      -65,
                                      4,
                                      -1};
    uint8_t b = u8(r);
    if (b >= 0xF0)
        return hostile[b - 0xF0];
    return (int64_t)(b % 9) - 3;
}

static float rfloat(rd *r)
{
    static const float v[] = {0.0f, 1.0f,     -1.0f,     0.5f,  2.0f,  1e-5f,
                              NAN,  INFINITY, -INFINITY, 1e30f, -0.0f, 0.1f,
                              3.0f, -2.5f,    FLT_MAX,   1e-40f};
    return v[u8(r) % 16];
}

static double rdouble(rd *r)
{
    static const double v[] = {1.0,  2.0,      0.5,   1.5, 0.0,  -1.0,
                               NAN,  INFINITY, 1e300, 3.0, 0.25, 1e-300,
                               1e10, 4.0,      0.3,   7};
    return v[u8(r) % 16];
}

static unsigned raxes(rd *r)
{
    static const unsigned hostile[] = {KILN_ALL_AXES, 0x100u, 0x80000000u,
                                       0xFFFFFFFFu,   0x1FFu, 0x40u,
                                       0x80u,         0x10u};
    uint8_t b = u8(r);
    if (b >= 0xF8)
        return hostile[b - 0xF8];
    return b & 0x0F;
}

static kiln_dtype rdtype(rd *r)
{
    static const kiln_dtype v[] = {KILN_F32, KILN_F32,      KILN_F32,
                                   KILN_F32, KILN_I32,      KILN_I32,
                                   KILN_F16, (kiln_dtype)77};
    return v[u8(r) % 8];
}

/* A shape: rank 0-4 (or a hostile rank), dims 0-5 or hostile. */
static kiln_shape rshape(rd *r)
{
    static const int64_t hostile[] = {(int64_t)1 << 31,
                                      (int64_t)1 << 62,
                                      -1,
                                      INT64_MAX,
                                      (int64_t)1 << 40,
                                      (int64_t)1 << 20,
                                      1000,
                                      INT64_MIN,
                                      (int64_t)1 << 32,
                                      65536,
                                      -(1 << 20),
                                      7,
                                      16,
                                      32,
                                      12,
                                      64};
    kiln_shape s = {0};
    uint8_t b = u8(r);
    s.ndim = b % 5;
    if (b == 0xFF)
        s.ndim = KILN_MAX_DIMS + 1;
    else if (b == 0xFE)
        s.ndim = -1;
    else if (b == 0xFD)
        s.ndim = KILN_MAX_DIMS;
    int nd = s.ndim < 0 ? 0 : s.ndim > KILN_MAX_DIMS ? KILN_MAX_DIMS : s.ndim;
    for (int i = 0; i < nd; i++) {
        uint8_t d = u8(r);
        s.d[i] = d >= 0xF0 ? hostile[d - 0xF0] : d % 6;
    }
    return s;
}

/* ------------------------------------------------------------ invariants */

#define BROKEN(...)                                                            \
    do {                                                                       \
        fprintf(stderr, "fuzz_graph: invariant broken: " __VA_ARGS__);         \
        fputc('\n', stderr);                                                   \
        abort();                                                               \
    } while (0)

/* FUZZ_GRAPH_TRACE=1 prints every call and its outcome on stderr (to
   read a crashing input or check that a seed does what it should). */
static int trace = -1;
#define TRACE(...)                                                             \
    do {                                                                       \
        if (trace)                                                             \
            fprintf(stderr, __VA_ARGS__);                                      \
    } while (0)

static bool valid_dtype(kiln_dtype dt)
{
    return dt == KILN_F32 || dt == KILN_I32;
}

/* ------------------------------------------------------------ the state */

typedef struct st {
    kiln_graph *g;     /* the graph being built */
    kiln_graph *other; /* a graph whose nodes are foreign operands */
    kiln_node *other_nodes[2];
    kiln_session *s;
    kiln_node *nodes[MAX_NODES]; /* returned by builders since the clear */
    int n;
    kiln_node *stale[MAX_NODES]; /* the build before the last clear */
    int n_stale;
    kiln_node *inputs[MAX_NODES]; /* inputs of this build, in order */
    int n_in;
    int names; /* counter making input names unique */
    float buf[CONST_MAX * 2];
} st;

/* The graph's state after a builder returned n. */
static void check_node(st *z, kiln_node *n, const char *what)
{
    if (!n)
        BROKEN("%s returned NULL for a graph", what);
    if (trace) {
        char buf[96];
        fprintf(stderr, "%s -> %%%d %s%s %s\n", what, kiln_node_id(n),
                kiln_dtype_name(kiln_node_dtype(n)),
                kiln_shape_str(kiln_node_shape(n), buf, sizeof buf),
                kiln_graph_error(z->g));
    }
    if (kiln_graph_status(z->g) != KILN_OK) {
        if (!*kiln_graph_error(z->g))
            BROKEN("%s failed the graph without a message", what);
        return;
    }
    if (*kiln_graph_error(z->g))
        BROKEN("%s: sound graph with message \"%s\"", what,
               kiln_graph_error(z->g));
    kiln_shape sh = kiln_node_shape(n);
    if (!valid_dtype(kiln_node_dtype(n)) || kiln_shape_numel(sh) < 0)
        BROKEN("%s built a node with dtype %d, ndim %d, numel %lld", what,
               (int)kiln_node_dtype(n), sh.ndim,
               (long long)kiln_shape_numel(sh));
}

static void keep(st *z, kiln_node *n, const char *what)
{
    check_node(z, n, what);
    if (z->n < MAX_NODES && kiln_graph_status(z->g) == KILN_OK)
        z->nodes[z->n++] = n;
}

/* An operand: an earlier node (counted back from the latest), NULL, a node
   of the other graph or a stale one. */
static kiln_node *operand(st *z, rd *r)
{
    uint8_t b = u8(r);
    if (b == 0xFF)
        return NULL;
    if (b == 0xFE)
        return z->other_nodes[u8(r) & 1];
    if (b == 0xFD)
        return z->n_stale ? z->stale[u8(r) % z->n_stale] : NULL;
    if (!z->n)
        return NULL;
    return z->nodes[z->n - 1 - b % z->n];
}

/* An operand or (byte 0) none, for the optional ones (bias, weight). */
static kiln_node *maybe(st *z, rd *r)
{
    return u8(r) % 3 == 0 ? NULL : operand(z, r);
}

/* Clears a failed (or any) graph; its nodes become the stale ones. */
static void clear_graph(st *z)
{
    TRACE("kiln_graph_clear\n");
    memcpy(z->stale, z->nodes, (size_t)z->n * sizeof *z->nodes);
    z->n_stale = z->n;
    z->n = 0;
    z->n_in = 0;
    kiln_graph_clear(z->g);
    if (kiln_graph_status(z->g) != KILN_OK || *kiln_graph_error(z->g))
        BROKEN("kiln_graph_clear left an error");
}

/* ------------------------------------------------------------ leaves */

/* Deterministic values: f32 in [-1.875, 1.875], i32 in [-1, 3] (mostly
   valid indices of small axes). */
static void fill_data(void *p, int64_t n, uint8_t seed, kiln_dtype dt)
{
    for (int64_t i = 0; i < n; i++) {
        int v = (int)((i * 7 + seed) % 11);
        if (dt == KILN_I32) {
            int32_t k = v % 4 - (seed & 1);
            memcpy((char *)p + 4 * i, &k, 4);
        } else {
            float x = (float)(v - 5) * 0.375f;
            memcpy((char *)p + 4 * i, &x, 4);
        }
    }
}

static void op_leaf(st *z, rd *r, int kind)
{
    char name[32];
    kiln_dtype dt = rdtype(r);
    kiln_shape sh = rshape(r);
    int64_t numel = kiln_shape_numel(sh);
    kiln_node *n = NULL;
    switch (kind) {
    case 0:
        snprintf(name, sizeof name, "in%d", z->names++);
        n = kiln_input(z->g, u8(r) == 0xFF ? NULL : name, dt, sh);
        keep(z, n, "kiln_input");
        break;
    case 1: {
        snprintf(name, sizeof name, "in%d", z->names++);
        unsigned sym = raxes(r);
        n = kiln_input_sym(z->g, name, dt, sh, sym);
        keep(z, n, "kiln_input_sym");
        break;
    }
    case 2: {
        /* The harness copies at most CONST_MAX elements of 8 bytes: bigger
           valid shapes are not asked for (the constant would be read past
           the buffer), invalid ones must be refused before reading. */
        if (numel > CONST_MAX)
            return;
        fill_data(z->buf, numel < 0 ? 0 : numel, u8(r), dt);
        n = kiln_constant(z->g, dt, sh, u8(r) == 0xFF ? NULL : z->buf);
        keep(z, n, "kiln_constant");
        return;
    }
    case 3:
        /* kiln_fill stores every element: only small ones. */
        if (numel > CONST_MAX)
            return;
        n = kiln_fill(z->g, sh, rfloat(r));
        keep(z, n, "kiln_fill");
        return;
    case 4:
        n = kiln_scalar(z->g, rfloat(r));
        keep(z, n, "kiln_scalar");
        return;
    default: {
        /* Variables share storage by name across graphs and builds: a few
           names, so that shapes and dtypes conflict. */
        snprintf(name, sizeof name, "v%d", u8(r) % 4);
        kiln_init init = {(kiln_init_kind)(u8(r) % 9), rdouble(r), rdouble(r),
                          NULL};
        if (init.kind == KILN_INIT_VALUES) {
            if (numel > CONST_MAX)
                return;
            fill_data(z->buf, numel < 0 ? 0 : numel, 3, KILN_F32);
            init.values = u8(r) == 0xFF ? NULL : z->buf;
        }
        n = kiln_variable(z->g, name, dt, sh, init);
        keep(z, n, "kiln_variable");
        if (u8(r) % 4 == 0 && kiln_graph_status(z->g) == KILN_OK)
            kiln_node_set_trainable(n, 0);
        return;
    }
    }
    if (kiln_graph_status(z->g) == KILN_OK && z->n_in < MAX_NODES)
        z->inputs[z->n_in++] = n;
}

/* ------------------------------------------------------------ op table */

typedef kiln_node *(*unary_fn)(kiln_graph *, kiln_node *);
typedef kiln_node *(*binary_fn)(kiln_graph *, kiln_node *, kiln_node *);

static const struct {
    const char *name;
    unary_fn f;
} UNARY[] = {
#define KILN_UNARY(OP, name, ...) {"kiln_" #name, kiln_##name},
#define KILN_BINARY(...)
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY
    {"kiln_gelu", kiln_gelu},
    {"kiln_gelu_erf", kiln_gelu_erf},
    {"kiln_transpose", kiln_transpose},
    {"kiln_stop_gradient", kiln_stop_gradient},
    {"kiln_merge_heads", kiln_merge_heads},
};

static const struct {
    const char *name;
    binary_fn f;
} BINARY[] = {
#define KILN_UNARY(...)
#define KILN_BINARY(OP, name, ...) {"kiln_" #name, kiln_##name},
#include "graph/elementwise.def"
#undef KILN_UNARY
#undef KILN_BINARY
    {"kiln_int_add", kiln_int_add},
    {"kiln_int_sub", kiln_int_sub},
    {"kiln_int_mul", kiln_int_mul},
    {"kiln_int_floor_div", kiln_int_floor_div},
    {"kiln_int_mod", kiln_int_mod},
    {"kiln_softmax_cross_entropy", kiln_softmax_cross_entropy},
    {"kiln_binary_cross_entropy", kiln_binary_cross_entropy},
    {"kiln_embedding", kiln_embedding},
};

#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

static void read_conv(rd *r, kiln_conv_params *p)
{
    for (int i = 0; i < 2; i++) {
        p->stride[i] = rint_(r);
        p->padding[i] = rint_(r);
        p->dilation[i] = rint_(r);
        p->output_padding[i] = rint_(r);
    }
    p->groups = rint_(r);
    p->flags = u8(r) & 7;
}

/* The builders with attributes: each reads its operands and attributes. */
static void op_build(st *z, rd *r, int which)
{
    kiln_graph *g = z->g;
    kiln_node *a, *b, *c;
    int i1, i2;
    switch (which) {
    case 0: {
        int k = u8(r) % COUNT(UNARY);
        a = operand(z, r);
        keep(z, UNARY[k].f(g, a), UNARY[k].name);
        break;
    }
    case 1: {
        int k = u8(r) % COUNT(BINARY);
        a = operand(z, r);
        b = operand(z, r);
        keep(z, BINARY[k].f(g, a, b), BINARY[k].name);
        break;
    }
    case 2: {
        a = operand(z, r);
        float v = rfloat(r);
        switch (u8(r) % 5) {
        case 0:
            keep(z, kiln_scale(g, a, v), "kiln_scale");
            break;
        case 1:
            keep(z, kiln_leaky_relu(g, a, v), "kiln_leaky_relu");
            break;
        case 2:
            keep(z, kiln_elu(g, a, v), "kiln_elu");
            break;
        case 3:
            keep(z, kiln_clamp(g, a, v, rfloat(r)), "kiln_clamp");
            break;
        default:
            keep(z, kiln_dropout(g, a, v), "kiln_dropout");
            break;
        }
        break;
    }
    case 3:
        a = operand(z, r);
        b = operand(z, r);
        c = operand(z, r);
        keep(z, kiln_select(g, a, b, c), "kiln_select");
        break;
    case 4: {
        a = operand(z, r);
        unsigned ax = raxes(r);
        int keepdims = u8(r) & 1;
        switch (u8(r) % 8) {
        case 0:
            keep(z, kiln_sum(g, a, ax, keepdims), "kiln_sum");
            break;
        case 1:
            keep(z, kiln_reduce_max(g, a, ax, keepdims), "kiln_reduce_max");
            break;
        case 2:
            keep(z, kiln_mean(g, a, ax, keepdims), "kiln_mean");
            break;
        case 3:
            keep(z, kiln_reduce_min(g, a, ax, keepdims), "kiln_reduce_min");
            break;
        case 4:
            keep(z, kiln_logsumexp(g, a, ax, keepdims), "kiln_logsumexp");
            break;
        case 5:
            keep(z, kiln_prod(g, a, ax, keepdims), "kiln_prod");
            break;
        case 6:
            keep(z, kiln_variance(g, a, ax, rfloat(r), keepdims),
                 "kiln_variance");
            break;
        default:
            keep(z, kiln_std(g, a, ax, rfloat(r), keepdims), "kiln_std");
            break;
        }
        break;
    }
    case 5: {
        a = operand(z, r);
        i1 = rint_(r);
        switch (u8(r) % 6) {
        case 0:
            keep(z, kiln_argmax(g, a, i1), "kiln_argmax");
            break;
        case 1:
            keep(z, kiln_softmax(g, a, i1), "kiln_softmax");
            break;
        case 2:
            keep(z, kiln_log_softmax(g, a, i1), "kiln_log_softmax");
            break;
        case 3:
            keep(z, kiln_cumsum(g, a, i1), "kiln_cumsum");
            break;
        case 4:
            keep(z, kiln_tril(g, a, i1), "kiln_tril");
            break;
        default:
            keep(z, kiln_triu(g, a, i1), "kiln_triu");
            break;
        }
        break;
    }
    case 6: {
        a = operand(z, r);
        kiln_shape sh = rshape(r);
        switch (u8(r) % 3) {
        case 0:
            keep(z, kiln_reshape(g, a, sh), "kiln_reshape");
            break;
        case 1:
            keep(z, kiln_broadcast_to(g, a, sh), "kiln_broadcast_to");
            break;
        default:
            keep(z, kiln_broadcast(g, a, sh, raxes(r)), "kiln_broadcast");
            break;
        }
        break;
    }
    case 7: {
        a = operand(z, r);
        int perm[KILN_MAX_DIMS];
        for (int i = 0; i < KILN_MAX_DIMS; i++)
            perm[i] = u8(r) >= 0xF8 ? rint_(r) : i;
        /* a permutation of the first dims, from the bytes */
        int nd = kiln_node_shape(a).ndim;
        for (int i = 0; nd > 1 && nd <= KILN_MAX_DIMS && i < nd; i++) {
            int j = u8(r) % nd, t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        keep(z, kiln_permute(g, a, perm), "kiln_permute");
        break;
    }
    case 8: {
        a = operand(z, r);
        int64_t lo[KILN_MAX_DIMS], hi[KILN_MAX_DIMS];
        for (int i = 0; i < KILN_MAX_DIMS; i++) {
            lo[i] = ri64(r);
            hi[i] = ri64(r);
        }
        switch (u8(r) % 3) {
        case 0:
            keep(z, kiln_slice(g, a, lo, hi), "kiln_slice");
            break;
        case 1:
            keep(z, kiln_pad(g, a, lo, hi, rfloat(r)), "kiln_pad");
            break;
        default: {
            int n_pad = (int)(u8(r) % 6);
            keep(z, kiln_pad_mode(g, a, lo, n_pad, (kiln_padding)(u8(r) % 4)),
                 "kiln_pad_mode");
            break;
        }
        }
        break;
    }
    case 9: {
        kiln_node *xs[4];
        int n = u8(r) % 5;
        for (int i = 0; i < n; i++)
            xs[i] = operand(z, r);
        if (u8(r) == 0xFF)
            n = -1;
        i1 = rint_(r);
        if (u8(r) & 1)
            keep(z, kiln_concat(g, xs, n, i1), "kiln_concat");
        else
            keep(z, kiln_doall(g, xs, n), "kiln_doall");
        break;
    }
    case 10:
        a = operand(z, r);
        b = operand(z, r);
        i1 = u8(r);
        if (i1 & 4)
            keep(z, kiln_dot(g, a, b, rint_(r)), "kiln_dot");
        else
            keep(z, kiln_matmul(g, a, b, i1 & 1, (i1 >> 1) & 1), "kiln_matmul");
        break;
    case 11:
        a = operand(z, r);
        switch (u8(r) % 4) {
        case 0:
            keep(z, kiln_one_hot(g, a, rsize(r)), "kiln_one_hot");
            break;
        case 1:
            keep(z, kiln_cast(g, a, rdtype(r)), "kiln_cast");
            break;
        case 2:
            keep(z, kiln_split_heads(g, a, rsize(r)), "kiln_split_heads");
            break;
        default:
            i1 = rint_(r);
            keep(z, kiln_flatten(g, a, i1, rint_(r)), "kiln_flatten");
            break;
        }
        break;
    case 12:
        a = operand(z, r);
        b = operand(z, r);
        c = maybe(z, r);
        keep(z, kiln_affine(g, a, b, c), "kiln_affine");
        break;
    case 13:
        a = operand(z, r);
        b = operand(z, r);
        c = operand(z, r);
        keep(z, kiln_cross_entropy(g, a, b, c, rfloat(r)),
             "kiln_cross_entropy");
        break;
    case 14: {
        a = operand(z, r);
        b = operand(z, r);
        kiln_reduction red = (kiln_reduction)(u8(r) % 4);
        if (u8(r) & 1) {
            keep(z, kiln_softmax_cross_entropy_reduce(g, a, b, red),
                 "kiln_softmax_cross_entropy_reduce");
        } else {
            int ignore = u8(r) & 1 ? KILN_IGNORE_NONE : rint_(r);
            keep(z, kiln_cross_entropy_loss(g, a, b, red, ignore, rfloat(r)),
                 "kiln_cross_entropy_loss");
        }
        break;
    }
    case 15: {
        a = operand(z, r);
        b = operand(z, r);
        kiln_node *loss = NULL, *dl = NULL;
        kiln_status stt = kiln_nll_loss_with_softmax_grad(g, a, b, &loss, &dl);
        if (stt != kiln_graph_status(g))
            BROKEN("kiln_nll_loss_with_softmax_grad returned %d, graph %d",
                   (int)stt, (int)kiln_graph_status(g));
        keep(z, loss, "kiln_nll_loss_with_softmax_grad");
        keep(z, dl, "kiln_nll_loss_with_softmax_grad");
        break;
    }
    case 16: {
        a = operand(z, r);
        b = operand(z, r);
        c = maybe(z, r);
        kiln_conv_params p;
        memset(&p, 0, sizeof p);
        read_conv(r, &p);
        const kiln_conv_params *pp = u8(r) == 0xFF ? NULL : &p;
        switch (u8(r) % 3) {
        case 0:
            keep(z, kiln_conv2d(g, a, b, c, pp), "kiln_conv2d");
            break;
        case 1:
            keep(z, kiln_conv1d(g, a, b, c, pp), "kiln_conv1d");
            break;
        default:
            keep(z, kiln_conv_transpose2d(g, a, b, c, pp),
                 "kiln_conv_transpose2d");
            break;
        }
        break;
    }
    case 17: {
        a = operand(z, r);
        int k[2], s[2], p[2], d[2];
        for (int i = 0; i < 2; i++) {
            k[i] = rint_(r);
            s[i] = rint_(r);
            p[i] = rint_(r);
            d[i] = rint_(r);
        }
        uint8_t f = u8(r);
        if (f & 1)
            keep(z,
                 kiln_max_pool2d(g, a, k, f & 2 ? s : NULL, f & 4 ? p : NULL,
                                 f & 8 ? d : NULL, (f >> 4) & 1),
                 "kiln_max_pool2d");
        else
            keep(z,
                 kiln_avg_pool2d(g, a, k, f & 2 ? s : NULL, f & 4 ? p : NULL,
                                 (f >> 4) & 1, (f >> 5) & 1),
                 "kiln_avg_pool2d");
        break;
    }
    case 18: {
        a = operand(z, r);
        int64_t h = ri64(r), w = ri64(r);
        uint8_t f = u8(r);
        if (f & 1) {
            keep(z, kiln_adaptive_avg_pool2d(g, a, h, w),
                 "kiln_adaptive_avg_pool2d");
        } else {
            int64_t size[2] = {h, w};
            double scale[2] = {rdouble(r), rdouble(r)};
            keep(z,
                 kiln_upsample2d(g, a, f & 2 ? size : NULL,
                                 f & 4 ? scale : NULL,
                                 (kiln_upsample)((f >> 3) % 4), (f >> 5) & 1),
                 "kiln_upsample2d");
        }
        break;
    }
    case 19: {
        a = operand(z, r);
        i1 = rint_(r);
        b = operand(z, r);
        switch (u8(r) % 4) {
        case 0:
            keep(z, kiln_index_select(g, a, i1, b), "kiln_index_select");
            break;
        case 1:
            keep(z, kiln_gather(g, a, i1, b), "kiln_gather");
            break;
        case 2:
            keep(z, kiln_index_add(g, a, i1, b, operand(z, r)),
                 "kiln_index_add");
            break;
        default:
            keep(z, kiln_scatter_add(g, a, i1, b, operand(z, r)),
                 "kiln_scatter_add");
            break;
        }
        break;
    }
    case 20: {
        a = operand(z, r);
        i1 = rint_(r);
        i2 = rint_(r);
        kiln_node *v = NULL, *ix = NULL;
        kiln_status stt = kiln_topk(g, a, i1, i2, &v, &ix);
        if (stt != kiln_graph_status(g))
            BROKEN("kiln_topk returned %d, graph %d", (int)stt,
                   (int)kiln_graph_status(g));
        keep(z, v, "kiln_topk");
        keep(z, ix, "kiln_topk");
        break;
    }
    case 21:
        a = operand(z, r);
        b = operand(z, r);
        keep(z, kiln_masked_fill(g, a, b, rfloat(r)), "kiln_masked_fill");
        break;
    case 22: {
        kiln_node *q = operand(z, r), *k = operand(z, r), *v = operand(z, r);
        kiln_node *mask = maybe(z, r);
        kiln_attention_options o = {u8(r) & 1, rfloat(r)};
        keep(z,
             kiln_scaled_dot_product_attention(g, q, k, v, mask,
                                               u8(r) & 1 ? &o : NULL),
             "kiln_scaled_dot_product_attention");
        break;
    }
    case 23: {
        a = operand(z, r);
        b = maybe(z, r);
        c = maybe(z, r);
        float eps = rfloat(r);
        switch (u8(r) % 4) {
        case 0:
            keep(z, kiln_rms_norm(g, a, rint_(r), b, eps), "kiln_rms_norm");
            break;
        case 1:
            keep(z, kiln_layer_norm(g, a, rshape(r), b, c, eps),
                 "kiln_layer_norm");
            break;
        case 2:
            keep(z, kiln_group_norm(g, a, rint_(r), b, c, eps),
                 "kiln_group_norm");
            break;
        default:
            keep(z, kiln_instance_norm(g, a, b, c, eps), "kiln_instance_norm");
            break;
        }
        break;
    }
    case 24: {
        a = operand(z, r);
        b = maybe(z, r);
        c = maybe(z, r);
        kiln_node *rm = maybe(z, r), *rv = maybe(z, r);
        float mom = rfloat(r);
        keep(z, kiln_batch_norm(g, a, b, c, rm, rv, mom, rfloat(r)),
             "kiln_batch_norm");
        break;
    }
    case 25: {
        kiln_node *x = operand(z, r), *h = operand(z, r);
        kiln_node *wi = operand(z, r), *wh = operand(z, r);
        kiln_node *bi = maybe(z, r), *bh = maybe(z, r);
        if (u8(r) & 1) {
            keep(z, kiln_gru_cell(g, x, h, wi, wh, bi, bh), "kiln_gru_cell");
        } else {
            kiln_node *cc = operand(z, r), *ho = NULL, *co = NULL;
            kiln_status stt =
                kiln_lstm_cell(g, x, h, cc, wi, wh, bi, bh, &ho, &co);
            if (stt != kiln_graph_status(g))
                BROKEN("kiln_lstm_cell returned %d, graph %d", (int)stt,
                       (int)kiln_graph_status(g));
            keep(z, ho, "kiln_lstm_cell");
            keep(z, co, "kiln_lstm_cell");
        }
        break;
    }
    case 26:
        a = operand(z, r);
        b = operand(z, r);
        keep(z, kiln_assign(g, a, b), "kiln_assign");
        break;
    case 27:
        switch (u8(r) % 3) {
        case 0:
            keep(z, kiln_mode(g), "kiln_mode");
            break;
        case 1:
            a = operand(z, r);
            keep(z, kiln_dropout2d(g, a, rfloat(r)), "kiln_dropout2d");
            break;
        default:
            /* marks: a name, a checkpoint, a debug print */
            a = z->n ? z->nodes[z->n - 1 - u8(r) % z->n] : NULL;
            if (a) {
                kiln_node_set_name(a, "named");
                kiln_checkpoint(a);
                if (u8(r) & 1)
                    kiln_debug(a, "fuzz");
            }
            break;
        }
        break;
    default: {
        /* gradients */
        kiln_node *y = operand(z, r);
        uint8_t f = u8(r);
        if (f % 3 == 0) {
            keep(z, kiln_grad(g, y, operand(z, r)), "kiln_grad");
        } else if (f % 3 == 1) {
            kiln_node *d = maybe(z, r);
            keep(z, kiln_backprop_node(g, y, d, operand(z, r)),
                 "kiln_backprop_node");
        } else {
            kiln_node *d = maybe(z, r), *xs[3], *out[3] = {0};
            int n = u8(r) % 4;
            for (int i = 0; i < n; i++)
                xs[i] = operand(z, r);
            kiln_status stt = kiln_grads(g, y, d, xs, n, out);
            if (stt != kiln_graph_status(g))
                BROKEN("kiln_grads returned %d, graph %d", (int)stt,
                       (int)kiln_graph_status(g));
            if (stt != KILN_OK && !*kiln_graph_error(g))
                BROKEN("kiln_grads failed without a message");
            for (int i = 0; i < n && stt == KILN_OK; i++)
                keep(z, out[i], "kiln_grads");
        }
        break;
    }
    }
}
enum { N_BUILD = 29 };

/* ------------------------------------------------------------ runs */

/* Elements of every value reachable from the kept nodes; -1 when one is
   too big (or unknown) to run. */
static int64_t run_size(st *z)
{
    int count = kiln_graph_node_count(z->g);
    if (count <= 0)
        return 0;
    unsigned char *seen = calloc((size_t)count, 1);
    kiln_node **stack = malloc((size_t)count * sizeof *stack);
    if (!seen || !stack)
        abort();
    int sp = 0;
    int64_t total = 0;
    for (int i = 0; i < z->n; i++) {
        int id = kiln_node_id(z->nodes[i]);
        if (id >= 0 && id < count && !seen[id]) {
            seen[id] = 1;
            stack[sp++] = z->nodes[i];
        }
    }
    while (sp > 0 && total >= 0) {
        kiln_node *n = stack[--sp];
        int64_t e = kiln_shape_numel(kiln_node_shape(n));
        if (e < 0 || e > RUN_NODE_MAX) {
            total = -1;
            break;
        }
        total += e;
        if (total > RUN_TOTAL_MAX)
            total = -1;
        for (int i = 0; i < kiln_node_num_inputs(n); i++) {
            kiln_node *m = kiln_node_input(n, i);
            int id = kiln_node_id(m);
            if (m && id >= 0 && id < count && !seen[id]) {
                seen[id] = 1;
                stack[sp++] = m;
            }
        }
    }
    free(seen);
    free(stack);
    return total;
}

static void session_ok(kiln_session *s, kiln_status stt, const char *what)
{
    const char *msg = kiln_session_error(s);
    TRACE("%s: %s %s\n", what, kiln_status_str(stt), msg);
    if (stt != KILN_OK && !*msg)
        BROKEN("%s failed (%d) without a message", what, (int)stt);
    if (stt == KILN_OK && *msg)
        BROKEN("%s succeeded with message \"%s\"", what, msg);
}

/* A tensor for input n, its symbolic axes at size sym (-1: as built). */
static kiln_tensor *input_tensor(kiln_node *n, int64_t sym, uint8_t seed)
{
    kiln_shape sh = kiln_node_shape(n);
    for (int i = 0; i < sh.ndim && sym >= 0; i++)
        if (sh.sym & KILN_AXIS(i))
            sh.d[i] = sym;
    sh.sym = 0;
    kiln_tensor *t = kiln_tensor_new(kiln_node_dtype(n), sh);
    if (!t) {
        if (!*kiln_last_error())
            BROKEN("kiln_tensor_new failed without a message");
        return NULL;
    }
    fill_data(kiln_tensor_data(t), kiln_tensor_numel(t), seed,
              kiln_node_dtype(n));
    return t;
}

static void compiled_run(st *z, rd *r)
{
    kiln_node *outs[4];
    int n_out = 1 + u8(r) % 4;
    if (n_out > z->n)
        n_out = z->n;
    for (int i = 0; i < n_out; i++)
        outs[i] = operand(z, r);
    kiln_compile_options o = kiln_compile_defaults();
    uint8_t f = u8(r);
    o.dce = f & 1;
    o.cse = (f >> 1) & 1;
    o.fold = (f >> 2) & 1;
    o.simplify = (f >> 3) & 1;
    o.fuse = (f >> 4) & 1;
    o.plan_memory = (f >> 5) & 1;
    o.finite_math = (f >> 6) & 1;
    o.inference = (f >> 7) & 1;
    static const char *pipes[] = {NULL,
                                  NULL,
                                  "dce,simplify,fuse",
                                  "cse,fold,gemm_acc,fuse,dce",
                                  "nonsense",
                                  "fuse,fuse,simplify,cse",
                                  "",
                                  "bn_fold,"
                                  "conv_fuse,eval_mode"};
    o.pipeline = pipes[u8(r) % 8];
    kiln_function *fn =
        kiln_compile_ex(z->s, z->g, outs, n_out, z->inputs, z->n_in, &o);
    TRACE("kiln_compile_ex of %d outputs, %d inputs: %s\n", n_out, z->n_in,
          kiln_session_error(z->s));
    if (!fn) {
        if (!*kiln_session_error(z->s))
            BROKEN("kiln_compile_ex failed without a message");
        return;
    }
    session_ok(z->s, KILN_OK, "kiln_compile_ex");
    kiln_function_print(fn, fuzz_null());
    uint8_t seed = u8(r);
    int64_t sym = u8(r) % 4 == 0 ? u8(r) % 4 : -1;
    /* Twice at one size: without outputs, then into outputs shaped as the
       function says they are at the size it ran at. */
    for (int rep = 0; rep < 2; rep++) {
        kiln_tensor *in[MAX_NODES] = {0}, *out[4] = {0};
        for (int i = 0; i < z->n_in; i++)
            in[i] = input_tensor(z->inputs[i], sym, seed);
        for (int i = 0; i < n_out && rep; i++)
            out[i] = kiln_function_new_output(fn, i);
        kiln_status stt = kiln_run(fn, in, out);
        session_ok(z->s, stt, "kiln_run");
        for (int i = 0; i < z->n_in; i++)
            kiln_tensor_free(in[i]);
        for (int i = 0; i < n_out; i++)
            kiln_tensor_free(out[i]);
    }
    if (u8(r) & 1)
        kiln_function_free(fn); /* else the session frees it */
}

static void dynamic_run(st *z, rd *r)
{
    uint8_t f = u8(r), seed = u8(r);
    kiln_status stt;
    if (f & 1) {
        stt = kiln_session_set_checkpointing(z->s, z->g, 1);
        session_ok(z->s, stt, "kiln_session_set_checkpointing");
    }
    if (f & 2) {
        stt = kiln_session_set_check_finite(z->s, z->g, 1);
        session_ok(z->s, stt, "kiln_session_set_check_finite");
    }
    kiln_session_set_training(z->s, (f >> 2) & 1);
    for (int i = 0; i < z->n_in; i++) {
        kiln_tensor *t = input_tensor(z->inputs[i], -1, seed);
        stt = kiln_feed(z->s, z->inputs[i], t);
        session_ok(z->s, stt, "kiln_feed");
        kiln_tensor_free(t);
    }
    stt = kiln_forward(z->s, z->g);
    session_ok(z->s, stt, "kiln_forward");
    kiln_node *loss = operand(z, r);
    if (f & 8) {
        stt = kiln_backward(z->s, z->g, loss);
        session_ok(z->s, stt, "kiln_backward");
        if (stt == KILN_OK && (f & 16)) {
            stt = kiln_sgd_step(z->s, z->g, rfloat(r));
            session_ok(z->s, stt, "kiln_sgd_step");
        }
    }
    /* Reading a value or gradient back; the new nodes backward built are
       not in the harness's list, which is fine. */
    kiln_node *n = operand(z, r);
    kiln_tensor *v = kiln_node_value(z->s, n);
    if (!v && !*kiln_session_error(z->s))
        BROKEN("kiln_node_value failed without a message");
    kiln_tensor_free(v);
    v = kiln_node_grad(z->s, n);
    if (!v && !*kiln_session_error(z->s))
        BROKEN("kiln_node_grad failed without a message");
    kiln_tensor_free(v);
    kiln_node_value_f32(z->s, n);
    kiln_node_grad_f32(z->s, n);
}

static void run(st *z, rd *r)
{
    if (kiln_graph_status(z->g) != KILN_OK || !z->n)
        return;
    int64_t size = run_size(z);
    TRACE("run: %lld elements\n", (long long)size);
    if (size < 0)
        return;
    kiln_graph_print(z->g, fuzz_null());
    kiln_graph_write_dot(z->g, fuzz_null());
    if (u8(r) & 1)
        compiled_run(z, r);
    else
        dynamic_run(z, r);
}

/* ------------------------------------------------------------ the program */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static st z; /* large: not on the stack */
    if (trace < 0) {
        const char *e = getenv("FUZZ_GRAPH_TRACE");
        trace = e && *e == '1';
    }
    memset(&z, 0, sizeof z);
    rd r = {data, size};
    kiln_set_logging_level(KILN_LOGGING_OFF);
    kiln_session_options so = {
        .seed = 7, .threads = 1, .debug_stream = fuzz_null()};
    uint8_t head = u8(&r);
    so.reference_kernels = head & 1 ? 1 : -1;
    z.s = kiln_session_new(&so);
    z.g = kiln_graph_new();
    z.other = kiln_graph_new();
    if (!z.s || !z.g || !z.other)
        abort();
    z.other_nodes[0] = kiln_input(z.other, "x", KILN_F32, KILN_SHAPE(2, 3));
    z.other_nodes[1] = kiln_variable(z.other, "v0", KILN_F32, KILN_SHAPE(3, 2),
                                     kiln_init_ones());
    for (int op = 0; op < MAX_OPS && r.n; op++) {
        uint8_t c = u8(&r);
        int k = c % (6 + N_BUILD + 2);
        if (k < 6)
            op_leaf(&z, &r, k);
        else if (k < 6 + N_BUILD)
            op_build(&z, &r, k - 6);
        else if (k == 6 + N_BUILD)
            run(&z, &r);
        else
            clear_graph(&z);
        if (kiln_graph_status(z.g) != KILN_OK)
            clear_graph(&z);
    }
    run(&z, &r);
    kiln_graph_free(z.g);
    kiln_graph_free(z.other);
    kiln_session_free(z.s);
    return 0;
}
