/* What every part of the kiln command shares. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tool.h"

int kiln_tool_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kiln: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int kiln_tool_parse_int(const char *flag, const char *v, int lo, int hi,
                        int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi)
        return kiln_tool_fail("%s: '%s' is not an integer in [%d, %d]", flag, v,
                              lo, hi);
    *out = (int)x;
    return 0;
}
