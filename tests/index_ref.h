/* Reader of the reference files tests/ref/make_index_refs.py writes
   (tests/ref/index/<case>.txt): a params line, then named tensors. */
#ifndef KILN_TEST_INDEX_REF_H
#define KILN_TEST_INDEX_REF_H

#include <inttypes.h>

#include "test_helpers.h"

#define IREF_MAXT 24

typedef struct iref_tensor {
    char kind[8], name[8];
    kiln_dtype dt;
    kiln_shape shape;
    double *v;
    float *f;   /* the values as f32 */
    int32_t *i; /* the values as i32 */
} iref_tensor;

typedef struct iref {
    char op[24];
    double p[8]; /* the params after the op */
    int np;
    iref_tensor t[IREF_MAXT];
    int n;
} iref;

static inline void iref_read_tensor(FILE *f, const char *path, iref_tensor *t)
{
    char dt[8];
    if (fscanf(f, "%7s %7s %7s %d", t->kind, t->name, dt, &t->shape.ndim) != 4)
        fail_msg("%s: bad tensor header", path);
    t->dt = strcmp(dt, "i32") ? KILN_F32 : KILN_I32;
    for (int i = 0; i < t->shape.ndim; i++)
        assert_int_equal(fscanf(f, "%" SCNd64, &t->shape.d[i]), 1);
    int64_t n = kiln_shape_numel(t->shape);
    t->v = malloc(((size_t)n + 1) * sizeof *t->v);
    t->f = malloc(((size_t)n + 1) * sizeof *t->f);
    t->i = malloc(((size_t)n + 1) * sizeof *t->i);
    assert_true(t->v && t->f && t->i);
    for (int64_t k = 0; k < n; k++) {
        if (fscanf(f, "%lf", &t->v[k]) != 1)
            fail_msg("%s: %s: value %lld missing", path, t->name, (long long)k);
        t->f[k] = (float)t->v[k];
        t->i[k] = (int32_t)t->v[k];
    }
}

static inline void iref_load(const char *name, iref *r)
{
    char path[512], line[256];
    snprintf(path, sizeof path, "%s/index/%s.txt", KILN_TEST_REF_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run tests/ref/make_index_refs.py)", path);
    memset(r, 0, sizeof *r);
    if (!fgets(line, sizeof line, f) || sscanf(line, "params %23s", r->op) != 1)
        fail_msg("%s: bad params line", path);
    char *at = strstr(line, r->op) + strlen(r->op);
    for (int used; r->np < 8 && sscanf(at, "%lf%n", &r->p[r->np], &used) == 1;
         at += used)
        r->np++;
    int c;
    while (r->n < IREF_MAXT && fscanf(f, " %c", (char *)&c) == 1) {
        ungetc(c, f);
        iref_read_tensor(f, path, &r->t[r->n++]);
    }
    fclose(f);
}

static inline iref_tensor *iref_get(iref *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->t[i].name, name))
            return &r->t[i];
    return NULL;
}

static inline void iref_free(iref *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->t[i].v);
        free(r->t[i].f);
        free(r->t[i].i);
    }
}

/* A variable (f32) or constant (i32) holding t's values. */
static inline kiln_node *iref_node(kiln_graph *g, iref_tensor *t)
{
    if (t->dt == KILN_I32)
        return kiln_constant(g, KILN_I32, t->shape, t->i);
    return kiln_variable(g, t->name, KILN_F32, t->shape,
                         kiln_init_values(t->f));
}

/* sum(y * gy): the loss whose gradient for y is gy. */
static inline kiln_node *iref_weighted_sum(kiln_graph *g, kiln_node *y,
                                           iref_tensor *gy)
{
    kiln_node *c = kiln_constant(g, KILN_F32, gy->shape, gy->f);
    return kiln_sum(g, kiln_mul(g, y, c), KILN_ALL_AXES, 0);
}

#endif
