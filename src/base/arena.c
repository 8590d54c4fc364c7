#include "base/arena.h"
#include "base/big_alloc.h"

#include <stdlib.h>
#include <string.h>

struct kiln_arena_block {
    kiln_arena_block *next;
    size_t size, used;
    _Alignas(64) unsigned char data[];
};

void kiln_arena_init(kiln_arena *a, size_t block_size)
{
    memset(a, 0, sizeof *a);
    a->block_size = block_size ? block_size : 64 * 1024;
}

static kiln_arena_block *take_block(kiln_arena *a, size_t need)
{
    kiln_arena_block **p = &a->spare;
    for (; *p; p = &(*p)->next) {
        if ((*p)->size >= need) {
            kiln_arena_block *b = *p;
            *p = b->next;
            return b;
        }
    }
    size_t size = need > a->block_size ? need : a->block_size;
    /* counted with the other large buffers (base/big_alloc.h) */
    kiln_arena_block *b = kiln_big_alloc(sizeof *b + size);
    if (!b)
        return NULL;
    b->size = size;
    a->reserved_total += size;
    return b;
}

/* No machine Kiln runs on has this much memory; asking for more (a
   constant of 2^40 floats) fails here instead of in the allocator, which
   under AddressSanitizer aborts rather than return NULL. */
#define ARENA_MAX_BYTES ((size_t)1 << 40)

void *kiln_arena_alloc(kiln_arena *a, size_t bytes)
{
    if (bytes > ARENA_MAX_BYTES)
        return NULL;
    size_t need = (bytes + 63) / 64 * 64;
    if (need == 0)
        need = 64;
    kiln_arena_block *b = a->head;
    if (!b || b->size - b->used < need) {
        b = take_block(a, need);
        if (!b)
            return NULL;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used_total += need;
    memset(p, 0, bytes);
    return p;
}

void kiln_arena_reset(kiln_arena *a)
{
    while (a->head) {
        kiln_arena_block *b = a->head;
        a->head = b->next;
        b->next = a->spare;
        a->spare = b;
    }
    a->used_total = 0;
}

void kiln_arena_free(kiln_arena *a)
{
    kiln_arena_reset(a);
    while (a->spare) {
        kiln_arena_block *b = a->spare;
        a->spare = b->next;
        kiln_big_free(b, sizeof *b + b->size);
    }
    a->reserved_total = 0;
}
