/* The indexing kernels (cpu/index_ref.c, cpu/index_fast.c) and the check
   of their index values (cpu/index_check.c). */
#ifndef KILN_CPU_INDEX_H
#define KILN_CPU_INDEX_H

#include "graph/graph.h"

/* An indexing node's sizes: the indexed axis of x has size `size`; x is
   [outer, size, inner] around it.  take (index_select, index_add): the k
   indices (all of idx) pick slices of inner elements.  along (gather,
   scatter_add): idx has x's rank; its dims and the strides of x, idx and
   src (scatter_add) give each position's offsets. */
typedef struct kiln_index_geom {
    int64_t outer, size, inner, k;
    int nd, axis;
    int64_t dims[KILN_MAX_DIMS]; /* idx's */
    int64_t xs[KILN_MAX_DIMS], is[KILN_MAX_DIMS], ss[KILN_MAX_DIMS];
} kiln_index_geom;

kiln_index_geom kiln_index_geom_of(const kiln_node *n);

/* Offsets in x and src of the first position of line `line` of idx (a
   line runs along the axis; lines count the other positions in order),
   and of the position in idx. */
void kiln_index_line(const kiln_index_geom *g, int64_t line, int64_t *xo,
                     int64_t *io, int64_t *so);

/* KILN_OK when every index of an indexing node n lies in [0, size);
   else KILN_ERR_ARG and "index_select %4: index 9 at [2] of indices [3]
   is outside [0, 5) (axis 0 of [5,2])" in msg.  Other ops: KILN_OK. */
kiln_status kiln_cpu_check_index(const kiln_node *n, void *const *in, char *msg,
                                 size_t len);
/* "[1,2]": the coordinates of flat position i in shape s, for messages. */
void kiln_index_position(kiln_shape s, int64_t i, char *buf, size_t len);

void kiln_ref_INDEX_SELECT(const kiln_node *n, void *out, void *const *in);
void kiln_ref_INDEX_ADD(const kiln_node *n, void *out, void *const *in);
void kiln_ref_GATHER(const kiln_node *n, void *out, void *const *in);
void kiln_ref_SCATTER_ADD(const kiln_node *n, void *out, void *const *in);

#endif
