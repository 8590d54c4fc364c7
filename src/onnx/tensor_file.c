/* kiln_onnx_tensor_read: a serialized TensorProto as a Kiln tensor. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* The host values as a new f32 or i32 tensor; NULL with err set. */
static kiln_tensor *host_tensor(const ox_host *h, char *err, size_t n)
{
    kiln_tensor *t = kiln_tensor_new(ox_kiln_dtype(h->type), h->shape);
    if (!t) {
        snprintf(err, n, "%s", kiln_last_error());
        return NULL;
    }
    if (h->f)
        memcpy(kiln_tensor_f32(t), h->f, (size_t)h->numel * sizeof(float));
    else if (h->i) {
        int32_t *v;
        if (ox_host_i32(h, &v, err, n)) {
            kiln_tensor_free(t);
            return NULL;
        }
        memcpy(kiln_tensor_i32(t), v, (size_t)h->numel * sizeof(int32_t));
        free(v);
    }
    return t;
}

kiln_tensor *kiln_onnx_tensor_read(const char *path, int *onnx_type)
{
    if (onnx_type)
        *onnx_type = 0;
    if (!path) {
        kiln_null_arg("kiln_onnx_tensor_read", "path");
        return NULL;
    }
    Onnx__TensorProto *p = ox_read_tensor_file(path);
    if (!p)
        return NULL;
    ox_host h;
    char err[KILN_ERRMSG_MAX];
    int unsupported;
    kiln_tensor *t = NULL;
    if (ox_host_read(p, NULL, &h, err, sizeof err, &unsupported) == 0) {
        t = host_tensor(&h, err, sizeof err);
        if (t && onnx_type)
            *onnx_type = h.type;
        ox_host_free(&h);
    }
    if (!t)
        kiln_set_last_error("%s: %s", path, err);
    onnx__tensor_proto__free_unpacked(p, NULL);
    return t;
}
