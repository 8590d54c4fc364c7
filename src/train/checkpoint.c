/* Session checkpoints: every variable plus the initialiser RNG, written
   atomically through the file formats, validated before anything loads. */
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "runtime/runtime.h"
#include "train/checkpoint.h"

static const char *RNG_KEY = "__rng__";

/* Appends a view of data under name to l. */
static kiln_status add_view(kiln_tensor_list *l, const char *name,
                            kiln_dtype dt, kiln_shape shape, void *data)
{
    kiln_tensor *t = kiln_tensor_wrap(dt, shape, data);
    kiln_status st = t ? kiln_tensor_list_add(l, name, t) : KILN_ERR_MEMORY;
    if (st != KILN_OK)
        kiln_tensor_free(t);
    return st;
}

kiln_status kiln_session_save(kiln_session *s, const char *path)
{
    return kiln_session_save_with(s, path, NULL, NULL, NULL);
}

kiln_status kiln_session_save_with(kiln_session *s, const char *path,
                                   int (*skip)(void *ctx, const char *name),
                                   void *ctx, const kiln_tensor_list *extra)
{
    if (kiln_session_begin(s, "kiln_session_save") != KILN_OK)
        return KILN_ERR_ARG;
    if (!path)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_session_save: path is NULL");
    kiln_tensor_list *l = kiln_tensor_list_new();
    if (!l)
        return kiln_session_fail(s, KILN_ERR_MEMORY,
                                 "kiln_session_save: out of memory");
    kiln_status st = KILN_OK;
    for (int i = 0; i < s->n_vars && st == KILN_OK; i++) {
        kiln_var *v = &s->vars[i];
        if (!skip || !skip(ctx, v->name))
            st = add_view(l, v->name, v->dtype, v->shape, v->data);
    }
    for (int i = 0; i < kiln_tensor_list_count(extra) && st == KILN_OK; i++) {
        kiln_tensor *t = kiln_tensor_list_get(extra, i);
        st = add_view(l, kiln_tensor_list_name(extra, i), t->dtype, t->shape,
                      t->data);
    }
    int32_t rng[4] = {(int32_t)(uint32_t)s->rng.state,
                      (int32_t)(uint32_t)(s->rng.state >> 32),
                      (int32_t)(uint32_t)s->rng.inc,
                      (int32_t)(uint32_t)(s->rng.inc >> 32)};
    kiln_tensor *r =
        st == KILN_OK ? kiln_tensor_wrap(KILN_I32, KILN_SHAPE(4), rng) : NULL;
    if (st == KILN_OK &&
        (!r || (st = kiln_tensor_list_add(l, RNG_KEY, r)) != KILN_OK))
        kiln_tensor_free(r);
    if (st == KILN_OK)
        st = kiln_file_write(path, l);
    kiln_tensor_list_free(l);
    if (st != KILN_OK)
        return kiln_session_fail(s, st, "kiln_session_save: %s",
                                 kiln_last_error());
    return KILN_OK;
}

static kiln_status validate(kiln_session *s, const kiln_tensor_list *l,
                            const char *path)
{
    char b1[96], b2[96];
    for (int i = 0; i < kiln_tensor_list_count(l); i++) {
        const char *name = kiln_tensor_list_name(l, i);
        kiln_tensor *t = kiln_tensor_list_get(l, i);
        if (strcmp(name, RNG_KEY) == 0) {
            if (t->dtype != KILN_I32 || kiln_shape_numel(t->shape) != 4)
                return kiln_session_fail(s, KILN_ERR_IO, "%s: bad %s entry",
                                         path, RNG_KEY);
            continue;
        }
        kiln_var *v = kiln_session_find(s, name);
        if (v &&
            (v->dtype != t->dtype || !kiln_shape_equal(v->shape, t->shape)))
            return kiln_session_fail(
                s, KILN_ERR_SHAPE,
                "%s: '%s' is %s%s in the file but %s%s in the session", path,
                name, kiln_dtype_name(t->dtype),
                kiln_shape_str(t->shape, b1, sizeof b1),
                kiln_dtype_name(v->dtype),
                kiln_shape_str(v->shape, b2, sizeof b2));
    }
    return KILN_OK;
}

/* The file's variables that the session lacks, allocated but not yet in
   the session: a load commits only when every one of them exists. */
typedef struct staged_vars {
    kiln_var *v;
    int n;
} staged_vars;

static void staged_free(staged_vars *st)
{
    for (int i = 0; i < st->n; i++)
        kiln_var_release(&st->v[i]);
    free(st->v);
}

static kiln_status stage_new(kiln_session *s, const kiln_tensor_list *l,
                             staged_vars *st)
{
    int n = kiln_tensor_list_count(l);
    st->n = 0;
    st->v = calloc((size_t)n + 1, sizeof *st->v);
    if (!st->v || kiln_session_reserve(s, n) != KILN_OK)
        return KILN_ERR_MEMORY;
    for (int i = 0; i < n; i++) {
        const char *name = kiln_tensor_list_name(l, i);
        kiln_tensor *t = kiln_tensor_list_get(l, i);
        if (strcmp(name, RNG_KEY) == 0 || kiln_session_find(s, name))
            continue;
        if (kiln_var_alloc(&st->v[st->n], name, t->dtype, t->shape,
                           t->dtype == KILN_F32) != KILN_OK)
            return KILN_ERR_MEMORY;
        memcpy(st->v[st->n++].data, t->data, kiln_tensor_bytes(t));
    }
    return KILN_OK;
}

/* Cannot fail: every check and allocation happened before. */
static void commit(kiln_session *s, const kiln_tensor_list *l, staged_vars *st)
{
    for (int i = 0; i < kiln_tensor_list_count(l); i++) {
        const char *name = kiln_tensor_list_name(l, i);
        kiln_tensor *t = kiln_tensor_list_get(l, i);
        kiln_var *v = kiln_session_find(s, name);
        if (strcmp(name, RNG_KEY) == 0) {
            const uint32_t *r = t->data;
            s->rng.state = (uint64_t)r[0] | (uint64_t)r[1] << 32;
            s->rng.inc = (uint64_t)r[2] | (uint64_t)r[3] << 32;
        } else if (v) {
            memcpy(v->data, t->data, kiln_tensor_bytes(t));
        }
    }
    memcpy(s->vars + s->n_vars, st->v, (size_t)st->n * sizeof *st->v);
    s->n_vars += st->n;
    st->n = 0;
}

kiln_status kiln_session_load(kiln_session *s, const char *path)
{
    if (kiln_session_begin(s, "kiln_session_load") != KILN_OK)
        return KILN_ERR_ARG;
    if (!path)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_session_load: path is NULL");
    kiln_tensor_list *l = kiln_file_read(path);
    if (!l)
        return kiln_session_fail(s, KILN_ERR_IO, "kiln_session_load: %s",
                                 kiln_last_error());
    kiln_status rc = kiln_session_load_list(s, l, path);
    kiln_tensor_list_free(l);
    return rc;
}

kiln_status kiln_session_check_list(kiln_session *s, const kiln_tensor_list *l,
                                    const char *path)
{
    return validate(s, l, path);
}

kiln_status kiln_session_load_list(kiln_session *s, const kiln_tensor_list *l,
                                   const char *path)
{
    staged_vars st = {NULL, 0};
    kiln_status rc = validate(s, l, path);
    if (rc == KILN_OK && stage_new(s, l, &st) != KILN_OK)
        rc = kiln_session_fail(s, KILN_ERR_MEMORY,
                               "kiln_session_load: %s: out of memory", path);
    if (rc == KILN_OK)
        commit(s, l, &st);
    staged_free(&st);
    return rc;
}
