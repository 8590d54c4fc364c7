#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/big_alloc.h"
#include "runtime/runtime.h"

/* A hash of the variables' names (open addressing, at most half full) so
   that finding one is O(1): loading a checkpoint of n variables looks each
   up, which was O(n^2).  It covers vars[0..indexed) and catches up with
   appended variables on the next lookup, however they were appended;
   removing variables must call index_invalidate. */
typedef struct kiln_var_index {
    int *slots; /* index into vars, -1 when empty */
    size_t n_slots;
    int indexed;
} kiln_var_index;

/* Session ids start at 1 (0 is "no session") and are never reused, so a
   graph can tell its session from a new one at the same address. */
static atomic_uint_fast64_t last_session_id;

kiln_session *kiln_session_new(const kiln_session_options *opt)
{
    kiln_session *s = calloc(1, sizeof *s);
    if (!s) {
        kiln_set_last_error("kiln_session_new: out of memory");
        return NULL;
    }
    if (kiln_session_exec_init(s, opt) != KILN_OK) {
        free(s);
        return NULL;
    }
    s->id = (uint64_t)atomic_fetch_add(&last_session_id, 1) + 1;
    kiln_rng_seed(&s->rng, s->seed);
    s->training = 1; /* as a new PyTorch module */
    s->rng_seed = s->seed;
    return s;
}

void kiln_session_free(kiln_session *s)
{
    if (!s)
        return;
    while (s->n_funcs > 0)
        kiln_function_free(s->funcs[s->n_funcs - 1]);
    free(s->funcs);
    while (s->n_holders > 0) {
        kiln_session_holder h = s->holders[--s->n_holders];
        h.forget(h.holder);
    }
    free(s->holders);
    kiln_run_free_all(s);
    for (int i = 0; i < s->n_vars; i++)
        kiln_var_release(&s->vars[i]);
    free(s->vars);
    if (s->index)
        free(s->index->slots);
    free(s->index);
    kiln_session_exec_free(s);
    free(s);
}

kiln_status kiln_session_attach(kiln_session *s, void *holder,
                                kiln_session_forget_fn forget, const char *fn)
{
    for (int i = 0; i < s->n_holders; i++)
        if (s->holders[i].holder == holder) {
            s->holders[i].forget = forget;
            return KILN_OK;
        }
    if (s->n_holders == s->cap_holders) {
        int cap = s->cap_holders ? 2 * s->cap_holders : 8;
        kiln_session_holder *h = realloc(s->holders, (size_t)cap * sizeof *h);
        if (!h)
            return kiln_session_fail(s, KILN_ERR_MEMORY, "%s: out of memory",
                                     fn);
        s->holders = h;
        s->cap_holders = cap;
    }
    s->holders[s->n_holders++] = (kiln_session_holder){holder, forget};
    return KILN_OK;
}

void kiln_session_detach(kiln_session *s, void *holder)
{
    for (int i = 0; s && i < s->n_holders; i++)
        if (s->holders[i].holder == holder) {
            s->holders[i] = s->holders[--s->n_holders];
            return;
        }
}

void *kiln_session_next_holder(const kiln_session *s,
                               kiln_session_forget_fn forget, int *cursor)
{
    while (*cursor < s->n_holders) {
        const kiln_session_holder *h = &s->holders[(*cursor)++];
        if (h->forget == forget)
            return h->holder;
    }
    return NULL;
}

kiln_status kiln_session_fail(kiln_session *s, kiln_status st, const char *fmt,
                              ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    kiln_set_last_error("%s", s->err);
    return st;
}

kiln_status kiln_session_begin(kiln_session *s, const char *fn)
{
    if (!s)
        return kiln_null_arg(fn, "session");
    s->err[0] = 0;
    return KILN_OK;
}

const char *kiln_session_error(const kiln_session *s)
{
    return s ? s->err : "session is NULL";
}

kiln_rng *kiln_session_rng(kiln_session *s)
{
    return s ? &s->rng : NULL;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 14695981039346656037u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static size_t index_slot(const kiln_session *s, const kiln_var_index *x,
                         const char *name)
{
    size_t i = (size_t)name_hash(name) & (x->n_slots - 1);
    while (x->slots[i] >= 0 && strcmp(s->vars[x->slots[i]].name, name) != 0)
        i = (i + 1) & (x->n_slots - 1);
    return i;
}

/* The next lookup rebuilds the index from scratch. */
static void index_invalidate(kiln_session *s)
{
    if (s->index)
        s->index->indexed = INT_MAX;
}

/* Brings the index up to date; 0 when out of memory (lookups then scan). */
static int index_update(kiln_var_index *x, const kiln_session *s)
{
    if (x->indexed == s->n_vars)
        return 1;
    if (x->indexed > s->n_vars || 2 * (size_t)s->n_vars >= x->n_slots) {
        size_t n = 64;
        while (n <= 2 * (size_t)s->n_vars)
            n *= 2;
        int *slots = malloc(n * sizeof *slots);
        if (!slots)
            return 0;
        free(x->slots);
        x->slots = slots;
        x->n_slots = n;
        x->indexed = 0;
        for (size_t i = 0; i < n; i++)
            slots[i] = -1;
    }
    for (; x->indexed < s->n_vars; x->indexed++)
        x->slots[index_slot(s, x, s->vars[x->indexed].name)] = x->indexed;
    return 1;
}

kiln_var *kiln_session_find(const kiln_session *s, const char *name)
{
    /* The index is a cache: updating it does not change the session. */
    kiln_session *m = (kiln_session *)s;
    if (!m->index && s->n_vars >= 16)
        m->index = calloc(1, sizeof *m->index);
    if (m->index && index_update(m->index, s)) {
        int k = m->index->slots[index_slot(s, m->index, name)];
        return k >= 0 ? &m->vars[k] : NULL;
    }
    for (int i = 0; i < s->n_vars; i++)
        if (strcmp(s->vars[i].name, name) == 0)
            return &m->vars[i];
    return NULL;
}

int kiln_session_num_variables(const kiln_session *s)
{
    return s ? s->n_vars : 0;
}

kiln_status kiln_session_variable_info(const kiln_session *s, int i,
                                       kiln_param_info *info)
{
    const char *fn = "kiln_session_variable_info";
    if (!s || !info)
        return kiln_null_arg(fn, s ? "info" : "session");
    /* the message is the session's error state, not part of its value:
       a const session still reports on itself */
    kiln_session *w = (kiln_session *)s;
    kiln_session_begin(w, fn);
    if (i < 0 || i >= s->n_vars)
        return kiln_session_fail(w, KILN_ERR_ARG,
                                 "%s: index %d is outside [0, %d)", fn, i,
                                 s->n_vars);
    const kiln_var *v = &s->vars[i];
    info->name = v->name;
    info->dtype = v->dtype;
    info->shape = v->shape;
    info->trainable = v->trainable;
    info->data = v->data;
    return KILN_OK;
}

kiln_status kiln_session_reserve(kiln_session *s, int extra)
{
    if (extra < 0 || s->n_vars > INT_MAX / 2 - extra)
        return KILN_ERR_MEMORY;
    if (s->n_vars + extra <= s->cap_vars)
        return KILN_OK;
    int cap = s->cap_vars ? s->cap_vars : 16;
    while (cap < s->n_vars + extra)
        cap *= 2;
    kiln_var *vars = realloc(s->vars, (size_t)cap * sizeof *vars);
    if (!vars)
        return KILN_ERR_MEMORY;
    s->vars = vars;
    s->cap_vars = cap;
    return KILN_OK;
}

kiln_status kiln_var_alloc(kiln_var *v, const char *name, kiln_dtype dt,
                           kiln_shape shape, int trainable)
{
    size_t bytes = (size_t)kiln_shape_numel(shape) * kiln_dtype_size(dt);
    /* large ones pages of their own (zeroed): see kiln_big_alloc_pages */
    int pages = bytes >= KILN_VAR_PAGES_MIN;
    void *data =
        pages ? kiln_big_alloc_pages(bytes) : kiln_big_alloc(bytes + 64);
    char *nm = strdup(name);
    if (!data || !nm) {
        if (pages)
            kiln_big_free_pages(data, bytes);
        else
            kiln_big_free(data, bytes + 64);
        free(nm);
        return KILN_ERR_MEMORY;
    }
    if (!pages)
        memset(data, 0, bytes);
    *v = (kiln_var){nm, dt, shape, data, trainable, pages};
    return KILN_OK;
}

void kiln_var_release(kiln_var *v)
{
    free(v->name);
    if (v->data) {
        size_t bytes =
            (size_t)kiln_shape_numel(v->shape) * kiln_dtype_size(v->dtype);
        if (v->own_pages)
            kiln_big_free_pages(v->data, bytes);
        else
            kiln_big_free(v->data, bytes + 64);
    }
    v->name = NULL;
    v->data = NULL;
}

static kiln_var *add_var(kiln_session *s, const char *name, kiln_dtype dt,
                         kiln_shape shape, int trainable)
{
    if (kiln_session_reserve(s, 1) != KILN_OK ||
        kiln_var_alloc(&s->vars[s->n_vars], name, dt, shape, trainable) !=
            KILN_OK)
        return NULL;
    return &s->vars[s->n_vars++];
}

kiln_status kiln_session_declare(kiln_session *s, const char *name,
                                 kiln_dtype dt, kiln_shape shape,
                                 kiln_init init, int trainable)
{
    char b1[96], b2[96];
    if (kiln_session_begin(s, "kiln_session_declare") != KILN_OK)
        return KILN_ERR_ARG;
    if (!name || !*name)
        return kiln_session_fail(
            s, KILN_ERR_ARG, "kiln_session_declare: a variable needs a name");
    kiln_var *v = kiln_session_find(s, name);
    if (v) {
        if (v->dtype != dt || !kiln_shape_equal(v->shape, shape))
            return kiln_session_fail(
                s, KILN_ERR_SHAPE,
                "variable '%s' is %s%s in the session, the graph wants %s%s",
                name, kiln_dtype_name(v->dtype),
                kiln_shape_str(v->shape, b1, sizeof b1), kiln_dtype_name(dt),
                kiln_shape_str(shape, b2, sizeof b2));
        return KILN_OK;
    }
    if (!kiln_dtype_supported(dt) || !kiln_shape_valid(shape))
        return kiln_session_fail(
            s, KILN_ERR_ARG, "kiln_session_declare: '%s': bad dtype or shape",
            name);
    if (dt == KILN_I32 && kiln_init_check_i32(init) != KILN_OK)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_session_declare: '%s': %s", name,
                                 kiln_last_error());
    v = add_var(s, name, dt, shape, trainable);
    if (!v)
        return kiln_session_fail(s, KILN_ERR_MEMORY,
                                 "variable '%s': out of memory", name);
    if (dt == KILN_F32) {
        if (kiln_init_fill(init, shape, v->data, &s->rng) != KILN_OK) {
            /* no half-made variable: a later declare must not find it */
            s->n_vars--;
            index_invalidate(s);
            kiln_var_release(v);
            return kiln_session_fail(s, KILN_ERR_ARG, "variable '%s': %s", name,
                                     kiln_last_error());
        }
    } else if (init.kind == KILN_INIT_ONES || init.kind == KILN_INIT_VALUE) {
        int32_t *d = v->data;
        for (int64_t i = 0; i < kiln_shape_numel(shape); i++)
            d[i] = init.kind == KILN_INIT_ONES ? 1 : (int32_t)init.a;
    }
    return KILN_OK;
}

kiln_var *kiln_session_bind(kiln_session *s, const kiln_node *v)
{
    if (kiln_session_declare(s, v->name, v->dtype, v->shape, v->at.init,
                             v->at.trainable) != KILN_OK)
        return NULL;
    kiln_var *var = kiln_session_find(s, v->name);
    var->trainable = v->at.trainable;
    return var;
}

static kiln_var *lookup(kiln_session *s, const char *name, const kiln_tensor *t,
                        const char *fn)
{
    char b1[96], b2[96];
    if (kiln_session_begin(s, fn) != KILN_OK)
        return NULL;
    if (!name || !t) {
        kiln_session_fail(s, KILN_ERR_ARG, "%s: name or tensor is NULL", fn);
        return NULL;
    }
    kiln_var *v = kiln_session_find(s, name);
    if (!v) {
        kiln_session_fail(s, KILN_ERR_NOTFOUND, "%s: no variable named '%s'",
                          fn, name);
        return NULL;
    }
    if (v->dtype != t->dtype || !kiln_shape_equal(v->shape, t->shape)) {
        kiln_session_fail(
            s, v->dtype != t->dtype ? KILN_ERR_DTYPE : KILN_ERR_SHAPE,
            "%s: variable '%s' is %s%s, tensor is %s%s", fn, name,
            kiln_dtype_name(v->dtype), kiln_shape_str(v->shape, b1, sizeof b1),
            kiln_dtype_name(t->dtype), kiln_shape_str(t->shape, b2, sizeof b2));
        return NULL;
    }
    return v;
}

/* The status of a failed lookup, which left its message in s. */
static kiln_status lookup_status(const kiln_session *s, const char *name,
                                 const kiln_tensor *t)
{
    const kiln_var *v = s && name && t ? kiln_session_find(s, name) : NULL;
    if (!s || !name || !t)
        return KILN_ERR_ARG;
    if (!v)
        return KILN_ERR_NOTFOUND;
    return v->dtype != t->dtype ? KILN_ERR_DTYPE : KILN_ERR_SHAPE;
}

kiln_status kiln_variable_read(kiln_session *s, const char *name,
                               kiln_tensor *out)
{
    kiln_var *v = lookup(s, name, out, "kiln_variable_read");
    if (!v)
        return lookup_status(s, name, out);
    memcpy(out->data, v->data, kiln_tensor_bytes(out));
    return KILN_OK;
}

kiln_status kiln_variable_write(kiln_session *s, const char *name,
                                const kiln_tensor *t)
{
    kiln_var *v = lookup(s, name, t, "kiln_variable_write");
    if (!v)
        return lookup_status(s, name, t);
    memcpy(v->data, t->data, kiln_tensor_bytes(t));
    return KILN_OK;
}
