/* Reader of the reference files tests/ref/make_norm_refs.py writes: an
   "attr" line, then named input and output tensors. */
#ifndef KILN_TEST_NORM_REFS_H
#define KILN_TEST_NORM_REFS_H

#include "test_refs.h"

#define REF_MAX 24

/* A tensor of a case: as read, with its f32 values (inputs) and its values
   as read (expected outputs). */
typedef struct ref_entry {
    ref_tensor r;
    kiln_shape shape;
    int64_t numel;
    float *f;
    const double *d;
} ref_entry;

typedef struct ref_case {
    char attrs[256];
    ref_entry t[REF_MAX];
    int n;
} ref_case;

static inline void ref_load(const char *name, ref_case *c)
{
    char path[512], kind[8];
    snprintf(path, sizeof path, "%s/norm/%s.txt", KILN_TEST_REF_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read %s", path);
    memset(c, 0, sizeof *c);
    if (!fgets(c->attrs, sizeof c->attrs, f))
        fail_msg("%s: no attr line", path);
    while (c->n < REF_MAX && ref_read_tensor(f, path, &c->t[c->n].r, kind)) {
        ref_entry *t = &c->t[c->n++];
        t->shape = t->r.shape;
        t->numel = kiln_shape_numel(t->shape);
        t->d = t->r.v;
        t->f = malloc((size_t)t->numel * sizeof *t->f + 4);
        assert_non_null(t->f);
        for (int64_t i = 0; i < t->numel; i++)
            t->f[i] = (float)t->d[i];
    }
    fclose(f);
}

static inline void ref_free(ref_case *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->t[i].f);
        free(c->t[i].r.v);
    }
}

/* The tensor called name, or NULL. */
static inline const ref_entry *ref_get(const ref_case *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->t[i].r.name, name))
            return &c->t[i];
    return NULL;
}

static inline const ref_entry *ref_need(const ref_case *c, const char *name)
{
    const ref_entry *t = ref_get(c, name);
    if (!t)
        fail_msg("reference has no tensor %s", name);
    return t;
}

/* The number after " key " in the attr line. */
static inline double ref_attr(const ref_case *c, const char *key)
{
    char pat[40];
    snprintf(pat, sizeof pat, " %s ", key);
    const char *p = strstr(c->attrs, pat);
    if (!p)
        fail_msg("reference has no attribute %s", key);
    return atof(p + strlen(pat));
}

#endif
