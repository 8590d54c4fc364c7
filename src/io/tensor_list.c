/* kiln_tensor_list: the in-memory form of a checkpoint file.  Entries keep
   insertion order (files round-trip in the order they were written); an
   open-addressing hash of the names makes find and add O(1), so reading a
   file of n tensors is O(n) however many it holds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/tensor.h"
#include "io/formats.h"
#include "kiln.h"

typedef struct list_entry {
    char *name;
    kiln_tensor *tensor;
} list_entry;

struct kiln_tensor_list {
    list_entry *items;
    int count, capacity;
    int *slots; /* index into items, -1 when empty; 2 * capacity of them */
};

/* FNV-1a: names are short and not chosen to collide with each other. */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t find_slot(const kiln_tensor_list *l, const char *name)
{
    size_t mask = 2 * (size_t)l->capacity - 1;
    size_t i = name_hash(name) & mask;
    while (l->slots[i] >= 0 && strcmp(l->items[l->slots[i]].name, name) != 0)
        i = (i + 1) & mask;
    return i;
}

kiln_tensor_list *kiln_tensor_list_new(void)
{
    kiln_tensor_list *l = calloc(1, sizeof *l);
    if (!l)
        kiln_set_last_error("kiln_tensor_list_new: out of memory");
    return l;
}

void kiln_tensor_list_free(kiln_tensor_list *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->count; i++) {
        free(l->items[i].name);
        kiln_tensor_free(l->items[i].tensor);
    }
    free(l->items);
    free(l->slots);
    free(l);
}

int kiln_tensor_list_count(const kiln_tensor_list *l)
{
    return l ? l->count : 0;
}

const char *kiln_tensor_list_name(const kiln_tensor_list *l, int i)
{
    if (!l || i < 0 || i >= l->count)
        return NULL;
    return l->items[i].name;
}

kiln_tensor *kiln_tensor_list_get(const kiln_tensor_list *l, int i)
{
    if (!l || i < 0 || i >= l->count)
        return NULL;
    return l->items[i].tensor;
}

kiln_tensor *kiln_tensor_list_find(const kiln_tensor_list *l, const char *name)
{
    if (!l || !name || l->count == 0)
        return NULL;
    int k = l->slots[find_slot(l, name)];
    return k >= 0 ? l->items[k].tensor : NULL;
}

/* Doubles the capacity and rehashes: the table stays at most half full. */
static int grow(kiln_tensor_list *l)
{
    if (l->count < l->capacity)
        return 0;
    if (l->capacity > INT32_MAX / 4)
        return -1;
    int cap = l->capacity ? 2 * l->capacity : 8;
    list_entry *items = realloc(l->items, (size_t)cap * sizeof *items);
    if (!items)
        return -1;
    l->items = items;
    int *slots = malloc(2 * (size_t)cap * sizeof *slots);
    if (!slots)
        return -1;
    free(l->slots);
    l->slots = slots;
    l->capacity = cap;
    for (size_t i = 0; i < 2 * (size_t)cap; i++)
        slots[i] = -1;
    for (int i = 0; i < l->count; i++)
        slots[find_slot(l, l->items[i].name)] = i;
    return 0;
}

kiln_status kiln_tensor_list_add(kiln_tensor_list *l, const char *name,
                                 kiln_tensor *t)
{
    if (!l || !name || !t || !name[0]) {
        kiln_set_last_error("kiln_tensor_list_add: %s",
                            !l                  ? "NULL list"
                            : !name || !name[0] ? "empty or NULL name"
                                                : "NULL tensor");
        return KILN_ERR_ARG;
    }
    if (kiln_tensor_list_find(l, name)) {
        kiln_set_last_error("kiln_tensor_list_add: duplicate name '%s'", name);
        return KILN_ERR_ARG;
    }
    if (t->listed) {
        /* Two owners would free it twice. */
        kiln_set_last_error("kiln_tensor_list_add: the tensor for '%s' "
                            "already belongs to a list",
                            name);
        return KILN_ERR_ARG;
    }
    size_t n = strlen(name);
    char *copy = malloc(n + 1);
    if (!copy || grow(l)) {
        free(copy);
        kiln_set_last_error("kiln_tensor_list_add: out of memory");
        return KILN_ERR_MEMORY;
    }
    memcpy(copy, name, n + 1);
    l->slots[find_slot(l, copy)] = l->count;
    l->items[l->count].name = copy;
    l->items[l->count].tensor = t;
    t->listed = 1;
    l->count++;
    return KILN_OK;
}

int io_list_add(kiln_tensor_list *out, const char *name, kiln_tensor *t,
                io_err *e)
{
    if (kiln_tensor_list_find(out, name)) {
        kiln_tensor_free(t);
        return io_fail(e, "tensor name '%s' appears twice", name);
    }
    kiln_status st = kiln_tensor_list_add(out, name, t);
    if (st != KILN_OK) {
        kiln_tensor_free(t);
        e->status = st;
        return io_fail(e, "%s",
                       st == KILN_ERR_MEMORY ? "out of memory"
                                             : "bad tensor name");
    }
    return 0;
}

kiln_tensor_list *
io_read_list(const char *fn, const char *path,
             int (*load)(const char *path, kiln_tensor_list *out,
                         io_info_fn info, void *ctx, io_err *e))
{
    if (!path) {
        kiln_set_last_error("%s: NULL path", fn);
        return NULL;
    }
    io_err e = IO_ERR_INIT;
    kiln_tensor_list *l = kiln_tensor_list_new();
    if (!l)
        return NULL;
    if (load(path, l, NULL, NULL, &e)) {
        kiln_tensor_list_free(l);
        kiln_set_last_error("%s: %s: %s", fn, path, e.msg);
        return NULL;
    }
    return l;
}
