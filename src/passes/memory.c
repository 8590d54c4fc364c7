/* Memory planning over the schedule (the computed nodes in graph order).

   Liveness: a value lives from its step to the last step that reads it;
   outputs and assign nodes (copied out after the last step) live to the
   end.  Leaves (inputs, variables, constants) have storage of their own and
   are never planned, so they are never overwritten.

   In-place, by each op's aliasing rule (kiln_node_alias, the op table): an
   elementwise op (or a copy: reshape, stop_gradient, cast, assign) whose
   input of the same size dies at this step takes over that input's
   buffer; so does a matmul_acc c + alpha a b with its c, as long as c is
   not also a, b or alpha (the GEMM must never write what it reads as an
   operand).  An update v <- f(v, ...) assigned to variable v is
   written straight into v's storage (so the assign copies nothing) when no
   later step reads v, v is not an output and nothing else assigns v: the
   values every step reads are then the same as with the copy at the end.
   For a matmul_acc, v must be its c and none of its other operands (the
   GEMM then accumulates a b straight into the variable), or none of its
   operands at all with every reader of v before it (c is copied into v's
   storage first: SGD with momentum, buf <- buf * mu + a b).
   Buffers are then placed largest first at the lowest 64-byte aligned offset
   that fits among the placed buffers whose lifetimes overlap (best fit), which
   packs close to the peak of live bytes; a segment tree finds those buffers
   (see place).

   Scratch: a kernel that needs memory besides its output (a convolution's
   im2col columns, kiln_cpu_scratch_bytes) gets a buffer of its own that
   lives for its step alone, planned like any value: it never overlaps the
   step's inputs or output, and steps reuse each other's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/dispatch.h"
#include "passes/passes.h"

enum { ALIGN = 64 };

typedef struct buffer {
    int start, end; /* steps: written at start, last read at end */
    size_t size, offset;
    int var; /* variable node whose storage this is, or -1 */
} buffer;

static int computed(const kiln_node *n)
{
    return kiln_op_table[n->op].kind != KILN_KIND_LEAF;
}

static size_t bytes_of(const kiln_node *n)
{
    return (size_t)kiln_shape_numel(n->shape) * kiln_dtype_size(n->dtype);
}

static size_t aligned(size_t b)
{
    return (b + ALIGN - 1) / ALIGN * ALIGN;
}

/* The input index whose buffer n can take over at this step, or -1.  A
   buffer in a variable's storage only passes to an assign (a copy), since
   anything else would write its own value into the variable. */
static int inplace_input(const kiln_node *n, const int *step, const int *last,
                         const int *owner, const buffer *bufs)
{
    kiln_alias a = kiln_node_alias(n);
    for (int i = a.first; i < a.first + a.count; i++) {
        const kiln_node *x = n->in[i];
        /* same element count and size (the rule's condition) */
        if (computed(x) && last[x->id] == step[n->id] &&
            (bufs[owner[x->id]].var < 0 || n->op == KILN_OP_ASSIGN) &&
            kiln_shape_numel(x->shape) == kiln_shape_numel(n->shape) &&
            kiln_dtype_size(x->dtype) == kiln_dtype_size(n->dtype) &&
            bytes_of(n))
            return i;
    }
    return -1;
}

/* Per variable node: its last reader (an assign's target is not read), how
   many assigns target it and the value of the last one.  Per value: the
   variable its assigns target (-1: none, -2: several). */
typedef struct var_use {
    int last_read, assigns, value, target;
} var_use;

static void find_var_uses(const kiln_graph *g, var_use *vu)
{
    for (int id = 0; id < g->n_nodes; id++)
        vu[id] = (var_use){-1, 0, -1, -1};
    for (int id = 0; id < g->n_nodes; id++) {
        const kiln_node *n = g->nodes[id];
        if (n->op == KILN_OP_ASSIGN) {
            int v = n->in[0]->id, x = n->in[1]->id;
            vu[v].assigns++;
            vu[v].value = x;
            vu[x].target = vu[x].target == -1 || vu[x].target == v ? v : -2;
        }
        for (int k = n->op == KILN_OP_ASSIGN; k < n->n_in; k++)
            vu[n->in[k]->id].last_read = id;
    }
}

/* v can hold x's value from x's step on: x is the value of the only assign
   of v, v is not an output and has x's size. */
static int sole_update(const kiln_node *x, const kiln_node *v,
                       const var_use *vu, const unsigned char *is_output)
{
    return v->op == KILN_OP_VARIABLE && !is_output[v->id] &&
           kiln_shape_numel(v->shape) == kiln_shape_numel(x->shape) &&
           v->dtype == x->dtype && vu[v->id].assigns == 1 &&
           vu[v->id].value == x->id;
}

/* The variable node x can write its value into, or NULL: x is the value of
   the only assign of v, v is not an output, and no step after x reads v;
   x is elementwise with v among its inputs, or a matmul_acc whose c is v
   and none of its other operands, or a matmul_acc that does not read v at
   all (every reader of v has run before it, so copying c into v's storage
   and accumulating there changes nothing that is read). */
static const kiln_node *update_target(const kiln_graph *g, const kiln_node *x,
                                      const var_use *vu,
                                      const unsigned char *is_output)
{
    if (kiln_node_pinned(x))
        return NULL;
    if (x->op == KILN_OP_MATMUL_ACC) {
        if (vu[x->id].target < 0)
            return NULL;
        const kiln_node *v = g->nodes[vu[x->id].target];
        int reads = 0;
        for (int k = 0; k < x->n_in; k++)
            reads |= x->in[k] == v;
        if (!sole_update(x, v, vu, is_output))
            return NULL;
        if (reads ? kiln_node_alias(x).count && x->in[0] == v &&
                        vu[v->id].last_read == x->id
                  : vu[v->id].last_read < x->id)
            return v;
        return NULL;
    }
    if (!kiln_node_alias(x).map)
        return NULL;
    for (int k = 0; k < x->n_in; k++) {
        const kiln_node *v = x->in[k];
        if (sole_update(x, v, vu, is_output) && vu[v->id].last_read == x->id)
            return v;
    }
    return NULL;
}

/* ------------------------------------------------------------ placement

   Largest first, each buffer goes to the lowest offset of the smallest gap
   left by the placed buffers whose lifetimes overlap its own (best fit).
   The overlapping buffers come from a segment tree over the buffers in
   order of their start steps holding the latest end under each node, so a
   query costs O(log n) per buffer found: placing takes O((n + E) log n) for
   E overlapping pairs, instead of a scan over every placed buffer for each
   one (O(n^2)). */

static int by_size_desc(const void *a, const void *b)
{
    const buffer *x = *(const buffer *const *)a, *y = *(const buffer *const *)b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->start - y->start;
}

static int by_offset(const void *a, const void *b)
{
    const buffer *x = *(const buffer *const *)a, *y = *(const buffer *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Buffers in start order (the order they were made) and a max-end tree. */
typedef struct overlaps {
    buffer *bufs;
    const unsigned char *placed;
    int *max_end; /* node k covers leaves; leaf i at width + i */
    int width;
    buffer **found;
    int n_found;
} overlaps;

static int overlaps_init(overlaps *o, buffer *bufs, int n)
{
    o->bufs = bufs;
    o->width = 1;
    while (o->width < n)
        o->width *= 2;
    o->max_end = malloc((size_t)2 * (size_t)o->width * sizeof *o->max_end);
    if (!o->max_end)
        return 0;
    for (int i = 0; i < o->width; i++)
        o->max_end[o->width + i] = i < n ? bufs[i].end : -1;
    for (int k = o->width - 1; k >= 1; k--)
        o->max_end[k] = o->max_end[2 * k] > o->max_end[2 * k + 1]
                            ? o->max_end[2 * k]
                            : o->max_end[2 * k + 1];
    return 1;
}

/* Adds the placed buffers among leaves [lo, hi) of node k, limited to the
   first `count`, that end at or after step `from`. */
static void collect(overlaps *o, int k, int lo, int hi, int count, int from)
{
    if (lo >= count || o->max_end[k] < from)
        return;
    if (hi - lo == 1) {
        if (o->placed[lo] && o->bufs[lo].size)
            o->found[o->n_found++] = &o->bufs[lo];
        return;
    }
    int mid = lo + (hi - lo) / 2;
    collect(o, 2 * k, lo, mid, count, from);
    collect(o, 2 * k + 1, mid, hi, count, from);
}

/* Placed buffers live at some step of b's lifetime, into o->found. */
static void find_overlaps(overlaps *o, const buffer *b, int n)
{
    /* buffers starting at or before b ends: a prefix in start order */
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (o->bufs[mid].start <= b->end)
            lo = mid + 1;
        else
            hi = mid;
    }
    o->n_found = 0;
    collect(o, 1, 0, o->width, lo, b->start);
}

/* Best-fit placement, largest buffers first. */
static int place(buffer *bufs, int n, size_t *peak)
{
    buffer **order = malloc(((size_t)n + 1) * sizeof *order);
    unsigned char *placed = calloc((size_t)n + 1, 1);
    overlaps o = {bufs, placed, NULL, 0, NULL, 0};
    o.found = malloc(((size_t)n + 1) * sizeof *o.found);
    int ok = order && placed && o.found && overlaps_init(&o, bufs, n);
    *peak = 0;
    for (int i = 0; ok && i < n; i++)
        order[i] = &bufs[i];
    if (ok)
        qsort(order, (size_t)n, sizeof *order, by_size_desc);
    for (int i = 0; ok && i < n; i++) {
        buffer *b = order[i];
        find_overlaps(&o, b, n);
        qsort(o.found, (size_t)o.n_found, sizeof *o.found, by_offset);
        size_t at = 0, best = (size_t)-1, best_gap = (size_t)-1;
        for (int j = 0; j < o.n_found; j++) {
            const buffer *x = o.found[j];
            if (x->offset >= at && x->offset - at >= b->size &&
                x->offset - at < best_gap) {
                best = at;
                best_gap = x->offset - at;
            }
            if (x->offset + x->size > at)
                at = x->offset + x->size;
        }
        b->offset = best != (size_t)-1 ? best : at;
        if (b->offset + b->size > *peak)
            *peak = b->offset + b->size;
        placed[b - bufs] = 1;
    }
    free(order);
    free(placed);
    free(o.max_end);
    free(o.found);
    return ok;
}

/* The step at which each node is computed (-1: not computed) and the last
   step that reads it (n: read after the run, as outputs and assigns are);
   adds up mp->unplanned. 0 when that sum would pass PTRDIFF_MAX. */
static int live_ranges(const kiln_unit *p, kiln_memory_plan *mp, int *step,
                       int *last, unsigned char *is_output)
{
    const kiln_graph *g = p->g;
    int n = g->n_nodes, n_steps = 0;
    for (int id = 0; id < n; id++) {
        const kiln_node *x = g->nodes[id];
        mp->inplace[id] = -1;
        step[id] = computed(x) ? n_steps++ : -1;
        last[id] = step[id];
        for (int k = 0; k < x->n_in; k++)
            last[x->in[k]->id] = step[id];
        if (computed(x)) {
            /* the sum of all buffers bounds every offset placed below */
            size_t b = aligned(bytes_of(x)),
                   sb = aligned(kiln_cpu_scratch_bytes(x));
            if (sb > (size_t)PTRDIFF_MAX - b)
                return 0;
            b += sb;
            if (b > (size_t)PTRDIFF_MAX - mp->unplanned)
                return 0;
            mp->unplanned += b;
        }
    }
    /* read after the last step: outputs, and assign nodes (copied to their
       variables) */
    for (int id = 0; id < n; id++)
        if (g->nodes[id]->op == KILN_OP_ASSIGN)
            last[id] = n;
    for (int i = 0; i < p->n_out; i++) {
        last[p->outputs[i]->id] = n;
        is_output[p->outputs[i]->id] = 1;
    }
    return 1;
}

/* Each computed node's offsets (its value's and its scratch's) and the
   variable whose storage holds its value, from the placed buffers. */
static void set_offsets(const kiln_graph *g, kiln_memory_plan *mp,
                        const buffer *bufs, const int *owner,
                        const int *scratch)
{
    for (int id = 0; id < g->n_nodes; id++) {
        mp->storage[id] = -1;
        mp->scratch[id] = (size_t)-1;
        if (!computed(g->nodes[id]))
            continue;
        mp->offset[id] = bufs[owner[id]].offset;
        mp->storage[id] = bufs[owner[id]].var;
        if (scratch[id] >= 0)
            mp->scratch[id] = bufs[scratch[id]].offset;
    }
}

kiln_status kiln_plan_memory(const kiln_unit *p, int reuse,
                             kiln_memory_plan *mp)
{
    const kiln_graph *g = p->g;
    int n = g->n_nodes, n_bufs = 0;
    memset(mp, 0, sizeof *mp);
    mp->offset = calloc((size_t)n + 1, sizeof *mp->offset);
    mp->inplace = malloc(((size_t)n + 1) * sizeof *mp->inplace);
    int *step = calloc((size_t)n + 1, sizeof *step),
        *last = calloc((size_t)n + 1, sizeof *last);
    int *owner = calloc((size_t)n + 1, sizeof *owner); /* node -> buffer */
    int *scratch = malloc(((size_t)n + 1) * sizeof *scratch); /* -> buffer */
    /* a buffer per value and one per scratch at most */
    buffer *bufs = calloc(2 * (size_t)n + 1, sizeof *bufs);
    unsigned char *is_output = calloc((size_t)n + 1, 1);
    var_use *vu = malloc(((size_t)n + 1) * sizeof *vu);
    mp->storage = malloc(((size_t)n + 1) * sizeof *mp->storage);
    mp->scratch = malloc(((size_t)n + 1) * sizeof *mp->scratch);
    kiln_status st = KILN_ERR_MEMORY;
    if (!mp->offset || !mp->inplace || !mp->storage || !mp->scratch || !step ||
        !last || !owner || !scratch || !bufs || !is_output || !vu)
        goto done;
    find_var_uses(g, vu);
    if (!live_ranges(p, mp, step, last, is_output))
        goto done;
    for (int id = 0; id < n; id++) {
        const kiln_node *x = g->nodes[id];
        if (!computed(x))
            continue;
        const kiln_node *v = reuse ? update_target(g, x, vu, is_output) : NULL;
        int k = reuse && !v ? inplace_input(x, step, last, owner, bufs) : -1;
        /* assigning a value already written into its variable: no copy,
           even when the value is read after the assign */
        if (reuse && x->op == KILN_OP_ASSIGN && computed(x->in[1]) &&
            bufs[owner[x->in[1]->id]].var == x->in[0]->id)
            k = 1;
        if (k >= 0) {
            owner[id] = owner[x->in[k]->id];
            mp->inplace[id] = x->in[k]->id;
        } else {
            owner[id] = n_bufs++;
            bufs[owner[id]] =
                (buffer){step[id], step[id], v ? 0 : aligned(bytes_of(x)), 0,
                         v ? v->id : -1};
            if (v)
                mp->inplace[id] = v->id;
        }
        buffer *b = &bufs[owner[id]];
        if (last[id] > b->end)
            b->end = last[id];
        size_t sb = kiln_cpu_scratch_bytes(x);
        scratch[id] = sb ? n_bufs : -1;
        if (sb)
            bufs[n_bufs++] = (buffer){step[id], step[id], aligned(sb), 0, -1};
    }
    if (reuse) {
        if (!place(bufs, n_bufs, &mp->peak))
            goto done;
    } else {
        for (int i = 0; i < n_bufs; i++) {
            bufs[i].offset = mp->peak;
            mp->peak += bufs[i].size;
        }
    }
    set_offsets(g, mp, bufs, owner, scratch);
    st = KILN_OK;
done:
    free(step);
    free(last);
    free(owner);
    free(scratch);
    free(bufs);
    free(is_output);
    free(vu);
    if (st != KILN_OK)
        kiln_memory_plan_free(mp);
    return st;
}

void kiln_memory_plan_free(kiln_memory_plan *mp)
{
    free(mp->offset);
    free(mp->inplace);
    free(mp->storage);
    free(mp->scratch);
    mp->scratch = NULL;
    mp->offset = NULL;
    mp->inplace = NULL;
    mp->storage = NULL;
}
