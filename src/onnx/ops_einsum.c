/* Einsum: the equation parsed into one label per axis, then each operand
   reduced on its own (repeated labels to their diagonal, labels no one
   else needs summed away) and operands contracted pairwise, left to
   right, as one batched matrix product each: the labels both share and
   keep are the batch, the ones they share and drop the inner dimension.
   Ellipsis dims broadcast as numpy's do. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

enum { ELLIPSIS = 52, LABELS = ELLIPSIS + KILN_MAX_DIMS, MAX_OPS = 8 };

/* A node with one label per axis. */
typedef struct term {
    kiln_node *x;
    int n;
    int label[KILN_MAX_DIMS];
} term;

static int label_of(char ch)
{
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a';
    if (ch >= 'A' && ch <= 'Z')
        return 26 + ch - 'A';
    return -1;
}

/* Labels of one term of the equation for a node of rank `rank` (-1 for
   the output, whose ellipsis has `ell` dims); -1 when malformed. */
static int parse_term(const char *s, size_t len, int rank, int ell, int *out,
                      int *n_out, int *n_ell)
{
    int letters = 0, dots = 0;
    for (size_t k = 0; k < len; k++)
        if (s[k] == '.')
            dots++;
        else if (label_of(s[k]) >= 0)
            letters++;
        else
            return -1;
    if (dots != 0 && (dots != 3 || !strstr(s, "...") ||
                      (size_t)(strstr(s, "...") - s) > len - 3))
        return -1;
    int e = dots ? (rank >= 0 ? rank - letters : ell) : 0;
    if (e < 0 || (rank >= 0 && !dots && letters != rank) ||
        letters + e > KILN_MAX_DIMS)
        return -1;
    int n = 0;
    for (size_t k = 0; k < len; k++)
        if (s[k] == '.') {
            for (int j = 0; j < e; j++)
                out[n++] = ELLIPSIS + KILN_MAX_DIMS - e + j;
            k += 2;
        } else
            out[n++] = label_of(s[k]);
    *n_out = n;
    *n_ell = e;
    return 0;
}

static int has(const int *labels, int n, int l)
{
    for (int k = 0; k < n; k++)
        if (labels[k] == l)
            return 1;
    return 0;
}

/* Replaces the axes p < q of equal label by their diagonal (axis q goes):
   x times an identity mask on (p, q), summed over q. */
static int diagonal(kiln_graph *g, term *t, int p, int q)
{
    kiln_shape s = kiln_node_shape(t->x), m = {.ndim = s.ndim};
    int64_t d = s.d[p];
    if (s.d[q] != d || d > 4096)
        return -1;
    for (int k = 0; k < s.ndim; k++)
        m.d[k] = k == p || k == q ? d : 1;
    float *eye = calloc((size_t)(d > 0 ? d * d : 1), sizeof *eye);
    if (!eye)
        return -1;
    for (int64_t i = 0; i < d; i++)
        eye[i * d + i] = 1;
    kiln_node *mask = kiln_constant(g, KILN_F32, m, eye);
    free(eye);
    t->x = kiln_sum(g, kiln_mul(g, t->x, mask), KILN_AXIS(q), 0);
    memmove(t->label + q, t->label + q + 1,
            sizeof(int) * (size_t)(t->n - q - 1));
    t->n--;
    return 0;
}

/* Diagonals of repeated labels, then the sum over labels not in keep. */
static int reduce(kiln_graph *g, term *t, const int *keep, int n_keep)
{
    for (int p = 0; p < t->n; p++)
        for (int q = p + 1; q < t->n; q++)
            if (t->label[p] == t->label[q]) {
                if (diagonal(g, t, p, q))
                    return -1;
                q = p;
            }
    unsigned mask = 0;
    int n = 0;
    for (int k = 0; k < t->n; k++)
        if (has(keep, n_keep, t->label[k]))
            t->label[n++] = t->label[k];
        else
            mask |= KILN_AXIS(k);
    if (mask)
        t->x = kiln_sum(g, t->x, mask, 0);
    t->n = n;
    return 0;
}

/* t's axes in the order of labels (each of t's labels once). */
static kiln_node *arrange(kiln_graph *g, const term *t, const int *labels)
{
    int perm[KILN_MAX_DIMS], identity = 1;
    for (int k = 0; k < t->n; k++) {
        for (int j = 0; j < t->n; j++)
            if (t->label[j] == labels[k])
                perm[k] = j;
        identity &= perm[k] == k;
    }
    return identity ? t->x : kiln_permute(g, t->x, perm);
}

static int64_t size_of(const term *t, int l)
{
    kiln_shape s = kiln_node_shape(t->x);
    for (int k = 0; k < t->n; k++)
        if (t->label[k] == l)
            return s.d[k];
    return 1;
}

/* Appends the labels of t that are not yet in list (at most 8 in all). */
static int gather_labels(const term *t, int *list, int n)
{
    for (int k = 0; k < t->n; k++)
        if (!has(list, n, t->label[k]))
            list[n++] = t->label[k];
    return n;
}

/* x arranged in labels' order, broadcast to sizes, as [rows, cols] of a
   batch: shape {nb, rows, cols} from the products of the three groups. */
static kiln_node *as_batch(kiln_graph *g, const term *t, const int *labels,
                           const int64_t *sizes, const int *group)
{
    kiln_shape s = {.ndim = group[0] + group[1] + group[2]};
    for (int k = 0; k < s.ndim; k++)
        s.d[k] = sizes[k];
    kiln_node *x = kiln_broadcast_to(g, arrange(g, t, labels), s);
    int64_t p[3] = {1, 1, 1};
    for (int k = 0; k < s.ndim; k++)
        p[k < group[0] ? 0 : k < group[0] + group[1] ? 1 : 2] *= sizes[k];
    return kiln_reshape(g, x, KILN_SHAPE(p[0], p[1], p[2]));
}

/* a and b contracted into *a: their shared labels in keep are the batch,
   shared labels not in keep the inner dimension. */
static int contract(kiln_graph *g, term *a, term *b, const int *keep,
                    int n_keep)
{
    int ka[2 * KILN_MAX_DIMS + LABELS], kb[2 * KILN_MAX_DIMS + LABELS];
    memcpy(ka, keep, sizeof(int) * (size_t)n_keep);
    memcpy(kb, keep, sizeof(int) * (size_t)n_keep);
    if (reduce(g, a, ka, gather_labels(b, ka, n_keep)) ||
        reduce(g, b, kb, gather_labels(a, kb, n_keep)))
        return -1;
    int bat[KILN_MAX_DIMS], in[KILN_MAX_DIMS], lft[KILN_MAX_DIMS],
        rgt[KILN_MAX_DIMS], nb = 0, nk = 0, nl = 0, nr = 0;
    for (int k = 0; k < a->n; k++) {
        int l = a->label[k], shared = has(b->label, b->n, l);
        if (shared && has(keep, n_keep, l))
            bat[nb++] = l;
        else if (shared)
            in[nk++] = l;
        else
            lft[nl++] = l;
    }
    for (int k = 0; k < b->n; k++)
        if (!has(a->label, a->n, b->label[k]))
            rgt[nr++] = b->label[k];
    if (nb + nl + nr > KILN_MAX_DIMS)
        return -1;
    int la[KILN_MAX_DIMS], lb[KILN_MAX_DIMS], out[KILN_MAX_DIMS];
    int64_t sa[KILN_MAX_DIMS], sb[KILN_MAX_DIMS], so[KILN_MAX_DIMS];
    for (int k = 0; k < nb + nk + nl + nr; k++) {
        int l = k < nb             ? bat[k]
                : k < nb + nk      ? in[k - nb]
                : k < nb + nk + nl ? lft[k - nb - nk]
                                   : rgt[k - nb - nk - nl];
        int64_t x = size_of(a, l), y = size_of(b, l);
        if (x != y && x != 1 && y != 1)
            return -1;
        int64_t d = x > y || y == 1 ? x : y;
        if (k < nb) { /* batch: in a, b and the result */
            la[k] = lb[k] = out[k] = l;
            sa[k] = sb[k] = so[k] = d;
        } else if (k < nb + nk) { /* inner: last in a, after batch in b */
            la[nl + k] = lb[k] = l;
            sa[nl + k] = sb[k] = d;
        } else if (k < nb + nk + nl) { /* left: a's rows */
            la[k - nk] = out[k - nk] = l;
            sa[k - nk] = so[k - nk] = d;
        } else { /* right: b's columns */
            lb[k - nl] = out[k - nk] = l;
            sb[k - nl] = so[k - nk] = d;
        }
    }
    /* each operand broadcast to the other's sizes must stay a shape */
    kiln_shape ca = {.ndim = nb + nl + nk}, cb = {.ndim = nb + nk + nr},
               co = {.ndim = nb + nl + nr};
    memcpy(ca.d, sa, sizeof(int64_t) * (size_t)ca.ndim);
    memcpy(cb.d, sb, sizeof(int64_t) * (size_t)cb.ndim);
    memcpy(co.d, so, sizeof(int64_t) * (size_t)co.ndim);
    if (kiln_shape_numel(ca) < 0 || kiln_shape_numel(cb) < 0 ||
        kiln_shape_numel(co) < 0)
        return -1;
    kiln_node *x = as_batch(g, a, la, sa, (const int[]){nb, nl, nk}),
              *y = as_batch(g, b, lb, sb, (const int[]){nb, nk, nr});
    kiln_shape s = {.ndim = nb + nl + nr};
    memcpy(s.d, so, sizeof(int64_t) * (size_t)s.ndim);
    a->x = kiln_reshape(g, kiln_matmul(g, x, y, 0, 0), s);
    a->n = s.ndim;
    memcpy(a->label, out, sizeof(int) * (size_t)s.ndim);
    return 0;
}

/* The implicit output: the ellipsis, then the labels used once, in
   alphabetical (ASCII) order. */
static int implicit_out(const term *t, int n_in, int ell, int *out)
{
    int n = 0, count[LABELS] = {0};
    for (int j = 0; j < ell; j++)
        out[n++] = ELLIPSIS + KILN_MAX_DIMS - ell + j;
    for (int k = 0; k < n_in; k++)
        for (int j = 0; j < t[k].n; j++)
            count[t[k].label[j]]++;
    for (int l = 26; l < ELLIPSIS; l++) /* 'A'..'Z' sort before 'a'..'z' */
        if (count[l] == 1 && n < KILN_MAX_DIMS)
            out[n++] = l;
    for (int l = 0; l < 26; l++)
        if (count[l] == 1 && n < KILN_MAX_DIMS)
            out[n++] = l;
    return n;
}

/* Parses the equation into the inputs' terms and the output's labels;
   the number of output labels, or -1 (recorded). */
static int parse(ox_ctx *c, const ox_node *n, term *t, int *out)
{
    char eq[512], *arrow;
    if (ox_attr_string(c, n, "equation", "", eq, sizeof eq))
        return -1;
    size_t len = 0;
    for (char *p = eq; *p; p++) /* spaces are allowed anywhere */
        if (*p != ' ')
            eq[len++] = *p;
    eq[len] = 0;
    arrow = strstr(eq, "->");
    const char *seg = eq;
    int ell = 0, e;
    for (int k = 0; k < n->n_in; k++) {
        const char *end = strchr(seg, ',');
        size_t stop = arrow ? (size_t)(arrow - eq) : len;
        size_t l = end && (size_t)(end - eq) < stop ? (size_t)(end - seg)
                                                    : stop - (size_t)(seg - eq);
        t[k].x = ox_f32(c, n, k);
        if (!t[k].x ||
            (k < n->n_in - 1) != (end && (size_t)(end - eq) < stop) ||
            parse_term(seg, l, kiln_node_shape(t[k].x).ndim, 0, t[k].label,
                       &t[k].n, &e))
            return ox_problem(c, n, KILN_ERR_ARG,
                              "equation '%s' does not match input %d", eq, k),
                   -1;
        ell = e > ell ? e : ell;
        seg += l + 1;
    }
    if (!arrow)
        return implicit_out(t, n->n_in, ell, out);
    int n_out;
    if (parse_term(arrow + 2, strlen(arrow + 2), -1, ell, out, &n_out, &e))
        return ox_problem(c, n, KILN_ERR_ARG, "equation '%s': bad output", eq),
               -1;
    for (int k = 0; k < n_out; k++) {
        int found = has(out, k, out[k]) ? -1 : 0;
        for (int j = 0; j < n->n_in && !found; j++)
            found = has(t[j].label, t[j].n, out[k]);
        if (found != 1)
            return ox_problem(c, n, KILN_ERR_ARG,
                              "equation '%s': output label %d repeated or "
                              "not in any input",
                              eq, k),
                   -1;
    }
    return n_out;
}

static int conv_einsum(ox_ctx *c, ox_node *n)
{
    term t[MAX_OPS];
    int out[KILN_MAX_DIMS];
    if (n->n_in < 1 || n->n_in > MAX_OPS)
        return ox_problem(c, n, KILN_ERR_UNSUPPORTED, "%d operands (1 to %d)",
                          n->n_in, MAX_OPS),
               -1;
    int n_out = parse(c, n, t, out);
    if (n_out < 0)
        return -1;
    for (int k = 1; k < n->n_in; k++) {
        int keep[LABELS], n_keep = n_out; /* the output's, and later ones' */
        memcpy(keep, out, sizeof(int) * (size_t)n_out);
        for (int j = k + 1; j < n->n_in; j++)
            n_keep = gather_labels(&t[j], keep, n_keep);
        if (contract(c->g, &t[0], &t[k], keep, n_keep))
            return ox_problem(c, n, KILN_ERR_SHAPE,
                              "operand %d: sizes of a shared label differ, a "
                              "diagonal over 4096, more than 8 dims or "
                              "over 2^40 elements",
                              k),
                   -1;
    }
    if (reduce(c->g, &t[0], out, n_out))
        return ox_problem(c, n, KILN_ERR_SHAPE,
                          "a diagonal of unequal sizes or over 4096"),
               -1;
    ox_out(c, n, arrange(c->g, &t[0], out), ox_in_type(n, 0));
    return 0;
}

const ox_op ox_einsum_ops[] = {
    {"Einsum", conv_einsum, "equation"},
    {NULL, NULL, NULL},
};
