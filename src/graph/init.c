/* Variable initialisers: the values a kiln_init describes, drawn from a
   session's generator when random.  Here, beside the IR that carries them,
   so that kiln_variable checks an initialiser without reaching into the
   runtime. */
#include <math.h>
#include <string.h>

#include "graph/graph.h"

kiln_status kiln_init_fill(kiln_init init, kiln_shape shape, float *data,
                           kiln_rng *rng)
{
    char b[96];
    if (!kiln_shape_valid(shape)) {
        kiln_set_last_error("kiln_init_fill: invalid shape %s",
                            kiln_shape_str(shape, b, sizeof b));
        return KILN_ERR_ARG;
    }
    int64_t n = kiln_shape_numel(shape);
    if (!data && n) {
        kiln_set_last_error("kiln_init_fill: data is NULL");
        return KILN_ERR_ARG;
    }
    int random = init.kind == KILN_INIT_UNIFORM ||
                 init.kind == KILN_INIT_NORMAL ||
                 init.kind == KILN_INIT_GLOROT_UNIFORM;
    if (random && !rng && n) {
        kiln_set_last_error("kiln_init_fill: rng is NULL");
        return KILN_ERR_ARG;
    }
    /* As torch's uniform_ and normal_: a reversed or non-finite range or a
       negative or NaN deviation is refused, not turned into NaN or
       reversed values. */
    if (init.kind == KILN_INIT_UNIFORM &&
        !(isfinite(init.a) && isfinite(init.b) && init.a <= init.b)) {
        kiln_set_last_error("kiln_init_fill: uniform range [%g, %g) must be "
                            "finite with low <= high",
                            init.a, init.b);
        return KILN_ERR_ARG;
    }
    if (init.kind == KILN_INIT_NORMAL &&
        !(isfinite(init.a) && isfinite(init.b) && init.b >= 0)) {
        kiln_set_last_error("kiln_init_fill: normal mean %g and standard "
                            "deviation %g must be finite, the deviation >= 0",
                            init.a, init.b);
        return KILN_ERR_ARG;
    }
    double lim;
    switch (init.kind) {
    case KILN_INIT_ZEROS:
        if (n)
            memset(data, 0, (size_t)n * sizeof *data);
        return KILN_OK;
    case KILN_INIT_ONES:
    case KILN_INIT_VALUE:
        for (int64_t i = 0; i < n; i++)
            data[i] = init.kind == KILN_INIT_ONES ? 1.0f : (float)init.a;
        return KILN_OK;
    case KILN_INIT_VALUES:
        if (!init.values && n) {
            kiln_set_last_error("kiln_init_fill: values is NULL");
            return KILN_ERR_ARG;
        }
        if (n)
            memcpy(data, init.values, (size_t)n * sizeof *data);
        return KILN_OK;
    case KILN_INIT_UNIFORM:
        for (int64_t i = 0; i < n; i++)
            data[i] =
                (float)(init.a + (init.b - init.a) * kiln_rng_uniform(rng));
        return KILN_OK;
    case KILN_INIT_NORMAL:
        for (int64_t i = 0; i < n; i++)
            data[i] = (float)(init.a + init.b * kiln_rng_normal(rng));
        return KILN_OK;
    case KILN_INIT_GLOROT_UNIFORM: {
        int64_t fan_out = shape.ndim ? shape.d[shape.ndim - 1] : 1;
        int64_t fan_in = shape.ndim > 1 && fan_out ? n / fan_out : fan_out;
        lim = sqrt(6.0 / (double)(fan_in + fan_out > 0 ? fan_in + fan_out : 1));
        for (int64_t i = 0; i < n; i++)
            data[i] = (float)(lim * (2.0 * kiln_rng_uniform(rng) - 1.0));
        return KILN_OK;
    }
    }
    kiln_set_last_error("kiln_init_fill: unknown initialiser %d",
                        (int)init.kind);
    return KILN_ERR_ARG;
}

kiln_status kiln_init_check_i32(kiln_init init)
{
    /* (int32_t)a is undefined outside (-2^31 - 1, 2^31) and for NaN */
    if (init.kind == KILN_INIT_VALUE &&
        !(init.a > -2147483649.0 && init.a < 2147483648.0)) {
        kiln_set_last_error("value %g is not an i32 (finite, in [-2^31, "
                            "2^31))",
                            init.a);
        return KILN_ERR_ARG;
    }
    return KILN_OK;
}
