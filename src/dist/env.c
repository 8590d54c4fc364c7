/* The environment variables that set a new communicator's defaults. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"

int dist_env_defaults(const char *fn, double *timeout, int *share)
{
    const char *v = getenv("KILN_DIST_TIMEOUT");
    char *end = NULL;
    *timeout = v && *v ? strtod(v, &end) : 0.0;
    if (v && *v && (end == v || *end || !(*timeout >= 0 && *timeout <= 1e9))) {
        kiln_set_last_error("%s: KILN_DIST_TIMEOUT is '%.40s': it must be a "
                            "number of seconds in [0, 1e9] (0 waits for ever)",
                            fn, v);
        return -1;
    }
    v = getenv("KILN_DIST_SHARED_WEIGHTS");
    *share = !v || !*v || strcmp(v, "1") == 0 ? 1
             : strcmp(v, "0") == 0            ? 0
             : strcmp(v, "private") == 0      ? 2 /* see share.c */
             : strcmp(v, "exact") == 0        ? 3
                                              : -1;
    if (*share < 0) {
        kiln_set_last_error("%s: KILN_DIST_SHARED_WEIGHTS is '%.40s': it must "
                            "be 0, 1, exact or private",
                            fn, v);
        return -1;
    }
    return 0;
}
