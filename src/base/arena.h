/* Bump allocator in chained blocks: allocation is a pointer bump, reset frees
   everything at once (graphs and the dynamic workspace use it). */
#ifndef KILN_BASE_ARENA_H
#define KILN_BASE_ARENA_H

#include <stddef.h>

typedef struct kiln_arena_block kiln_arena_block;

typedef struct kiln_arena {
    kiln_arena_block *head;  /* current block */
    kiln_arena_block *spare; /* blocks kept after a reset */
    size_t block_size;
    size_t used_total;     /* bytes handed out since the last reset */
    size_t reserved_total; /* bytes held in blocks */
} kiln_arena;

void kiln_arena_init(kiln_arena *a, size_t block_size);
/* 64-byte aligned, zero-filled memory; NULL when out of memory. */
void *kiln_arena_alloc(kiln_arena *a, size_t bytes);
void kiln_arena_reset(kiln_arena *a);
void kiln_arena_free(kiln_arena *a);

#endif
