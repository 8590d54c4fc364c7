#include "base/error.h"

#include <stdarg.h>

static _Thread_local char last_error[KILN_ERRMSG_MAX];

void kiln_set_last_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

kiln_status kiln_null_arg(const char *fn, const char *what)
{
    kiln_set_last_error("%s: %s is NULL", fn, what);
    return KILN_ERR_ARG;
}

void *kiln_null_graph(const char *fn)
{
    kiln_null_arg(fn, "graph");
    return NULL;
}

const char *kiln_last_error(void)
{
    return last_error;
}

const char *kiln_status_str(kiln_status st)
{
    switch (st) {
    case KILN_OK:
        return "ok";
    case KILN_ERR_ARG:
        return "bad argument";
    case KILN_ERR_SHAPE:
        return "shape error";
    case KILN_ERR_DTYPE:
        return "dtype error";
    case KILN_ERR_STATE:
        return "wrong state";
    case KILN_ERR_MEMORY:
        return "out of memory";
    case KILN_ERR_IO:
        return "i/o error";
    case KILN_ERR_NOTFOUND:
        return "not found";
    case KILN_ERR_NUMERIC:
        return "numeric error";
    case KILN_ERR_UNSUPPORTED:
        return "unsupported";
    }
    return "unknown status";
}
