/* What every part of the kiln command shares. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tool.h"

/* One write per line, so that the lines of ranks under mpirun never mix. */
int kiln_tool_fail(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "kiln: %s\n", line);
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
