/* Counts every allocation of the library and of the test, which is linked
   with -Wl,--wrap for each of these functions (tests/CMakeLists.txt), so
   that it can check that runs allocate nothing.  Included by the test's
   one source file. */
#ifndef KILN_TEST_ALLOC_COUNT_H
#define KILN_TEST_ALLOC_COUNT_H

#include <stddef.h>

static long allocations;
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);

void *__wrap_malloc(size_t size)
{
    allocations++;
    return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    allocations++;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    allocations++;
    return __real_realloc(p, size);
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
    allocations++;
    return __real_aligned_alloc(align, size);
}

#endif
