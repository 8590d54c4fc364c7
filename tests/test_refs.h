/* Reading the PyTorch reference files of tests/ref: tensors written as
   "<kind> <name> <f32|i32> <ndim> <dims...>" and their values (the format
   tests/ref/make_op_refs.py describes). */
#ifndef KILN_TEST_REFS_H
#define KILN_TEST_REFS_H

#include <dirent.h>
#include <inttypes.h>

#include "test_helpers.h"

typedef struct ref_tensor {
    char name[16];
    kiln_dtype dt;
    kiln_shape shape;
    double *v;
} ref_tensor;

/* Reads the next tensor of f (the file path) into t and its kind ("in",
   "out") into kind[8]; 0 at the end of the file. */
static inline int ref_read_tensor(FILE *f, const char *path, ref_tensor *t,
                                  char *kind)
{
    char dt[8];
    memset(t, 0, sizeof *t);
    if (fscanf(f, "%7s %15s %7s %d", kind, t->name, dt, &t->shape.ndim) != 4)
        return 0;
    assert_true(t->shape.ndim >= 0 && t->shape.ndim <= KILN_MAX_DIMS);
    for (int i = 0; i < t->shape.ndim; i++)
        assert_int_equal(fscanf(f, "%" SCNd64, &t->shape.d[i]), 1);
    t->dt = strcmp(dt, "i32") == 0 ? KILN_I32 : KILN_F32;
    int64_t n = kiln_shape_numel(t->shape);
    t->v = malloc(((size_t)n + 1) * sizeof *t->v);
    assert_non_null(t->v);
    for (int64_t i = 0; i < n; i++)
        if (fscanf(f, "%lf", &t->v[i]) != 1)
            fail_msg("%s: %s: value %lld missing", path, t->name, (long long)i);
    return 1;
}

/* A new tensor holding r's values. */
static inline kiln_tensor *ref_tensor_new(const ref_tensor *r)
{
    kiln_tensor *t = kiln_tensor_new(r->dt, r->shape);
    assert_non_null(t);
    for (int64_t i = 0; i < kiln_tensor_numel(t); i++) {
        if (r->dt == KILN_I32)
            kiln_tensor_i32(t)[i] = (int32_t)r->v[i];
        else
            kiln_tensor_f32(t)[i] = (float)r->v[i];
    }
    return t;
}

/* A case file of an op group's folder (tests/ref/<dir>/<name>.txt): its
   first line "params ..." and its tensors, inputs and outputs in file
   order. */
enum { REF_FILE_MAX = 8 };
typedef struct ref_file {
    char params[256];
    int n_in, n_out;
    ref_tensor in[REF_FILE_MAX], out[REF_FILE_MAX];
} ref_file;

static inline void ref_file_load(const char *dir, const char *name, ref_file *c)
{
    char path[512], kind[8];
    snprintf(path, sizeof path, "%s/%s/%s.txt", KILN_TEST_REF_DIR, dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run its tests/ref/make_*_refs.py)", path);
    memset(c, 0, sizeof *c);
    assert_non_null(fgets(c->params, sizeof c->params, f));
    ref_tensor t;
    while (ref_read_tensor(f, path, &t, kind)) {
        int in = !strcmp(kind, "in");
        assert_true((in ? c->n_in : c->n_out) < REF_FILE_MAX);
        if (in)
            c->in[c->n_in++] = t;
        else
            c->out[c->n_out++] = t;
    }
    fclose(f);
}

static inline void ref_file_free(ref_file *c)
{
    for (int i = 0; i < c->n_in; i++)
        free(c->in[i].v);
    for (int i = 0; i < c->n_out; i++)
        free(c->out[i].v);
}

/* Calls fn(name, ctx) for every <name>.txt of tests/ref/<dir>; returns how
   many there were. */
static inline int ref_each_file(const char *dir,
                                void (*fn)(const char *name, void *ctx),
                                void *ctx)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", KILN_TEST_REF_DIR, dir);
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") != 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 4), e->d_name);
        fn(name, ctx);
        n++;
    }
    closedir(d);
    return n;
}

#endif
