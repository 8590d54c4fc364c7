#include "base/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/shape.h"

/* A tensor header for dt and shape, its checked byte size in *bytes. */
static kiln_tensor *tensor_alloc(kiln_dtype dt, kiln_shape shape,
                                 const char *fn, size_t *bytes)
{
    char buf[128];
    if (!kiln_dtype_supported(dt)) {
        kiln_set_last_error("%s: unsupported dtype %s", fn,
                            kiln_dtype_name(dt));
        return NULL;
    }
    const char *why = kiln_shape_size(shape, kiln_dtype_size(dt), NULL, bytes);
    if (why) {
        kiln_set_last_error("%s: invalid shape %s: %s", fn,
                            kiln_shape_str(shape, buf, sizeof buf), why);
        return NULL;
    }
    kiln_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        kiln_set_last_error("%s: out of memory", fn);
        return NULL;
    }
    t->dtype = dt;
    t->shape = shape;
    t->shape.sym = 0; /* a tensor has its sizes, none symbolic */
    return t;
}

/* kiln_tensor_new, with fn naming the public call in messages. */
static kiln_tensor *tensor_new_as(kiln_dtype dt, kiln_shape shape,
                                  const char *fn)
{
    size_t bytes;
    kiln_tensor *t = tensor_alloc(dt, shape, fn, &bytes);
    if (!t)
        return NULL;
    t->data = calloc(1, bytes ? bytes : 1);
    if (!t->data) {
        free(t);
        kiln_set_last_error("%s: out of memory (%zu bytes)", fn, bytes);
        return NULL;
    }
    t->owned = 1;
    return t;
}

kiln_tensor *kiln_tensor_new(kiln_dtype dt, kiln_shape shape)
{
    return tensor_new_as(dt, shape, "kiln_tensor_new");
}

kiln_tensor *kiln_tensor_wrap(kiln_dtype dt, kiln_shape shape, void *data)
{
    size_t bytes;
    kiln_tensor *t = tensor_alloc(dt, shape, "kiln_tensor_wrap", &bytes);
    if (t && !data && bytes) {
        free(t);
        kiln_set_last_error("kiln_tensor_wrap: data is NULL");
        return NULL;
    }
    if (t)
        t->data = data;
    return t;
}

kiln_tensor *kiln_tensor_from_f32(kiln_shape shape, const float *values)
{
    if (!values && kiln_shape_numel(shape) > 0) {
        kiln_set_last_error("kiln_tensor_from_f32: values is NULL");
        return NULL;
    }
    kiln_tensor *t = tensor_new_as(KILN_F32, shape, "kiln_tensor_from_f32");
    if (t && values)
        memcpy(t->data, values, kiln_tensor_bytes(t));
    return t;
}

void kiln_tensor_free(kiln_tensor *t)
{
    if (!t)
        return;
    if (t->owned)
        free(t->data);
    free(t);
}

kiln_dtype kiln_tensor_dtype(const kiln_tensor *t)
{
    return t ? t->dtype : KILN_F32;
}

kiln_shape kiln_tensor_shape(const kiln_tensor *t)
{
    return t ? t->shape : KILN_SCALAR;
}

int64_t kiln_tensor_numel(const kiln_tensor *t)
{
    return t ? kiln_shape_numel(t->shape) : 0;
}

void *kiln_tensor_data(const kiln_tensor *t)
{
    return t ? t->data : NULL;
}

float *kiln_tensor_f32(const kiln_tensor *t)
{
    return t && t->dtype == KILN_F32 ? (float *)t->data : NULL;
}

int32_t *kiln_tensor_i32(const kiln_tensor *t)
{
    return t && t->dtype == KILN_I32 ? (int32_t *)t->data : NULL;
}

size_t kiln_tensor_bytes(const kiln_tensor *t)
{
    return (size_t)kiln_shape_numel(t->shape) * kiln_dtype_size(t->dtype);
}
