/* Graph inputs whose values the caller gives while loading
   (kiln_onnx_options.input_values): the importer keeps them on the host,
   as it does initializers, so converters needing values while building
   (shapes, axes, pads, scales) can take them. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* Floats kept on the host for converters (as load.c keeps initializers'):
   scales, bounds and such are small. */
#define KEEP_FLOATS 4096

static ox_host *host_copy(const kiln_tensor *t, int type)
{
    ox_host *h = calloc(1, sizeof *h);
    int64_t n = kiln_tensor_numel(t);
    if (!h)
        return NULL;
    h->type = type;
    h->shape = kiln_tensor_shape(t);
    h->numel = n;
    if (kiln_tensor_dtype(t) == KILN_I32) {
        h->i = malloc((size_t)n * sizeof *h->i + 1);
        for (int64_t k = 0; h->i && k < n; k++)
            h->i[k] = kiln_tensor_i32(t)[k];
    } else {
        h->f = malloc((size_t)n * sizeof *h->f + 1);
        if (h->f && n)
            memcpy(h->f, kiln_tensor_f32(t), (size_t)n * sizeof *h->f);
    }
    if (!h->i && !h->f) {
        free(h);
        return NULL;
    }
    return h;
}

ox_host *ox_known_input(ox_ctx *c, const char *name, int k, kiln_shape s,
                        int type)
{
    const kiln_tensor *t = c->opt.input_values && k < c->opt.n_input_values
                               ? c->opt.input_values[k]
                               : NULL;
    char a[128], b[128];
    if (!t)
        return NULL;
    kiln_shape ts = kiln_tensor_shape(t);
    if (ts.ndim != s.ndim ||
        memcmp(ts.d, s.d, sizeof(int64_t) * (size_t)s.ndim)) {
        ox_model_problem(c, KILN_ERR_SHAPE,
                         "input '%s': given values %s, the input is %s", name,
                         kiln_shape_str(ts, a, sizeof a),
                         kiln_shape_str(s, b, sizeof b));
        return NULL;
    }
    if (kiln_tensor_dtype(t) != ox_kiln_dtype(type)) {
        ox_model_problem(c, KILN_ERR_DTYPE,
                         "input '%s': given %s values for a %s input", name,
                         kiln_dtype_name(kiln_tensor_dtype(t)),
                         ox_type_name(type, a, sizeof a));
        return NULL;
    }
    if (kiln_tensor_dtype(t) != KILN_I32 && kiln_tensor_numel(t) > KEEP_FLOATS)
        return NULL;
    ox_host *h = host_copy(t, type);
    if (!h)
        ox_model_problem(c, KILN_ERR_MEMORY, "out of memory");
    return h;
}
