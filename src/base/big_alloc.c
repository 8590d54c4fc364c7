/* mmap's MAP_ANONYMOUS */
#define _DEFAULT_SOURCE
#include "base/big_alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static atomic_size_t held; /* bytes of the live big buffers */

/* The machine's physical memory in bytes (SIZE_MAX when unknown), or
   KILN_MEMORY_LIMIT's bytes when that is set to a smaller positive
   number. */
static size_t limit_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    size_t limit = SIZE_MAX;
    if (pages > 0 && size > 0 && (uint64_t)pages <= SIZE_MAX / (uint64_t)size)
        limit = (size_t)pages * (size_t)size;
    const char *v = getenv("KILN_MEMORY_LIMIT");
    char *end = NULL;
    unsigned long long want = v ? strtoull(v, &end, 10) : 0;
    if (v && end != v && *end == 0 && want > 0 && want < limit)
        limit = (size_t)want;
    return limit;
}

/* Counts rounded more bytes held; 0 when that would pass the limit. */
static int take(size_t rounded)
{
    /* computed once; threads racing here store the same value */
    static atomic_size_t cached;
    size_t limit = atomic_load(&cached);
    if (!limit)
        atomic_store(&cached, limit = limit_bytes());
    size_t before = atomic_fetch_add(&held, rounded);
    if (before > limit || rounded > limit - before) {
        atomic_fetch_sub(&held, rounded);
        return 0;
    }
    return 1;
}

void *kiln_big_alloc(size_t bytes)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded < bytes || !take(rounded))
        return NULL;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p)
        atomic_fetch_sub(&held, rounded);
    return p;
}

void kiln_big_free(void *p, size_t bytes)
{
    if (!p)
        return;
    free(p);
    atomic_fetch_sub(&held, (bytes + 63) / 64 * 64);
}

size_t kiln_page_round(size_t bytes)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096;
    if (bytes == 0)
        bytes = 1;
    size_t r = (bytes + page - 1) / page * page;
    return r < bytes ? 0 : r;
}

void *kiln_big_alloc_pages(size_t bytes)
{
    size_t rounded = kiln_page_round(bytes);
    if (!rounded || !take(rounded))
        return NULL;
    void *p = mmap(NULL, rounded, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        atomic_fetch_sub(&held, rounded);
        return NULL;
    }
    return p;
}

void kiln_big_free_pages(void *p, size_t bytes)
{
    if (!p)
        return;
    size_t rounded = kiln_page_round(bytes);
    munmap(p, rounded);
    atomic_fetch_sub(&held, rounded);
}
