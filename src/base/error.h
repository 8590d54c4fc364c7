/* Error helpers shared by every layer. */
#ifndef KILN_BASE_ERROR_H
#define KILN_BASE_ERROR_H

#include "kiln.h"

#if defined(__GNUC__)
#define KILN_PRINTF(a, b) __attribute__((format(printf, a, b)))
/* An error path kept out of line: its buffers stay off the hot path's frame. */
#define KILN_COLD __attribute__((cold, noinline))
#else
#define KILN_PRINTF(a, b)
#endif

#define KILN_ERRMSG_MAX 512

/* Records a message for kiln_last_error() (thread-local). */
void kiln_set_last_error(const char *fmt, ...) KILN_PRINTF(1, 2);

/* For a NULL argument of a function whose own object is missing or cannot
   hold a message: records "fn: what is NULL" for kiln_last_error() and
   returns KILN_ERR_ARG, so no failure leaves a stale message behind. */
kiln_status kiln_null_arg(const char *fn, const char *what);

/* For a builder given a NULL graph, which has nowhere to keep its error:
   records "fn: graph is NULL" for kiln_last_error() and returns NULL. */
void *kiln_null_graph(const char *fn);

#endif
