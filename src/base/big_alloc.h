/* The large buffers a session holds for long (variables, the planned
   buffers of compiled functions), counted process-wide: one that would
   take the count past the machine's physical memory is refused, as an
   error, rather than granted by the kernel's overcommit and then killed
   by it when first written (kiln train --hidden 65536,65536,65536 asks
   for 34 GB on a 24 GB machine, each piece alone looking possible). */
#ifndef KILN_BASE_BIG_ALLOC_H
#define KILN_BASE_BIG_ALLOC_H

#include <stddef.h>

/* bytes of 64-byte aligned memory, counted; NULL when the count would
   pass physical memory or malloc fails. */
void *kiln_big_alloc(size_t bytes);
/* Frees p, allocated by kiln_big_alloc(bytes) (the same bytes). */
void kiln_big_free(void *p, size_t bytes);

/* Zeroed whole pages of their own (mmap) holding bytes, counted as above:
   a variable's storage, which src/dist/ may replace in place by pages the
   processes of one machine share (the same address, other pages).  NULL
   when refused. */
void *kiln_big_alloc_pages(size_t bytes);
/* Unmaps p, allocated by kiln_big_alloc_pages(bytes). */
void kiln_big_free_pages(void *p, size_t bytes);
/* bytes rounded up to whole pages; 0 when that overflows. */
size_t kiln_page_round(size_t bytes);

#endif
