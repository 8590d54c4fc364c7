#include "runtime/live.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"

/* Few functions live at once, so a plain array searched from the end
   (where the newest, most used ones are) is enough. */
static struct {
    pthread_mutex_t lock;
    const kiln_function **fs;
    size_t n, cap;
} live = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Index of f in live.fs, or live.n; call with the lock held. */
static size_t find(const kiln_function *f)
{
    for (size_t i = live.n; i-- > 0;)
        if (live.fs[i] == f)
            return i;
    return live.n;
}

int kiln_function_live_add(const kiln_function *f)
{
    int ok = 1;
    pthread_mutex_lock(&live.lock);
    if (live.n == live.cap) {
        size_t cap = live.cap ? 2 * live.cap : 16;
        const kiln_function **fs = realloc(live.fs, cap * sizeof *fs);
        if (fs) {
            live.fs = fs;
            live.cap = cap;
        }
        ok = fs != NULL;
    }
    if (ok)
        live.fs[live.n++] = f;
    pthread_mutex_unlock(&live.lock);
    return ok ? 0 : -1;
}

void kiln_function_live_remove(const kiln_function *f)
{
    pthread_mutex_lock(&live.lock);
    size_t i = find(f);
    if (i < live.n)
        live.fs[i] = live.fs[--live.n];
    if (live.n == 0) { /* nothing left for a leak checker to report */
        free(live.fs);
        live.fs = NULL;
        live.cap = 0;
    }
    pthread_mutex_unlock(&live.lock);
}

int kiln_function_live(const kiln_function *f, const char *fn)
{
    pthread_mutex_lock(&live.lock);
    int found = find(f) < live.n;
    pthread_mutex_unlock(&live.lock);
    if (!found)
        kiln_set_last_error("%s: the function was freed (by "
                            "kiln_function_free or with its session)",
                            fn);
    return found;
}
