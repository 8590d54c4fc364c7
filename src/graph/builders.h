/* What every op builder shares: the argument checks (check.c) and the
   shape-string shorthand for error messages.  Builders check their operands,
   record a message naming the op and the shapes on error, and return the
   graph's poison node then. */
#ifndef KILN_GRAPH_BUILDERS_H
#define KILN_GRAPH_BUILDERS_H

#include "graph/graph.h"

#define SHAPE_BUF 96
#define S(sh, buf) kiln_shape_str((sh), (buf), sizeof(buf))

/* 1 when axis is in [-ndim, ndim): returns it made non-negative; else
   records an error naming fn and returns -1. */
int kiln_graph_norm_axis(kiln_graph *g, const char *fn, int axis, int ndim);
/* 1 when s is a valid shape / dt a supported dtype; else records why. */
int kiln_graph_check_shape(kiln_graph *g, const char *fn, kiln_shape s);
int kiln_graph_check_dtype(kiln_graph *g, const char *fn, kiln_dtype dt);

/* For the shape rules (graph/infer*.c): writes why and returns st. */
kiln_status kiln_infer_why(char *why, size_t len, kiln_status st,
                           const char *fmt, ...) KILN_PRINTF(4, 5);
/* KILN_OK when inputs [first, first + count) of n are f32; else why. */
kiln_status kiln_infer_f32(const kiln_node *n, int first, int count, char *why,
                           size_t len);

#define check_f32 kiln_graph_check_f32
#define norm_axis kiln_graph_norm_axis
#define check_shape kiln_graph_check_shape
#define check_dtype kiln_graph_check_dtype

#endif
