/* Sessions, compiled functions and dynamic execution. */
#ifndef KILN_RUNTIME_RUNTIME_H
#define KILN_RUNTIME_RUNTIME_H

#include "base/tensor.h"
#include "graph/graph.h"

typedef struct kiln_var {
    char *name;
    kiln_dtype dtype;
    kiln_shape shape;
    void *data; /* 64-byte aligned */
    int trainable;
} kiln_var;

struct kiln_session {
    kiln_var *vars;
    int n_vars, cap_vars;
    kiln_rng rng;
    int threads;
    char err[KILN_ERRMSG_MAX];
    kiln_function **funcs;
    int n_funcs, cap_funcs;
};

/* Records the session's error message and returns st. */
kiln_status kiln_session_fail(kiln_session *s, kiln_status st, const char *fmt,
                              ...) KILN_PRINTF(3, 4);
kiln_var *kiln_session_find(const kiln_session *s, const char *name);
/* The session variable behind a variable node, created and initialised on
   first use; NULL with the session's error on a dtype or shape clash. */
kiln_var *kiln_session_bind(kiln_session *s, const kiln_node *v);

/* Records where an owner (a computation, a program) keeps f, so that
   freeing f -- by the owner or with the session -- sets *owner to NULL and
   the two may be freed in either order. */
void kiln_function_set_owner(kiln_function *f, kiln_function **owner);

/* Prints a debug summary of a node's value (what = "value"/"gradient"). */
void kiln_debug_print(const kiln_node *n, const void *data, const char *what);

#endif
