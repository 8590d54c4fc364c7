#include "base/shape.h"

#include <stdio.h>

size_t kiln_dtype_size(kiln_dtype dt)
{
    switch (dt) {
    case KILN_F32:
    case KILN_I32:
        return 4;
    case KILN_F16:
    case KILN_BF16:
        return 2;
    case KILN_F64:
        return 8;
    case KILN_U8:
        return 1;
    }
    return 0;
}

const char *kiln_dtype_name(kiln_dtype dt)
{
    switch (dt) {
    case KILN_F32:
        return "f32";
    case KILN_I32:
        return "i32";
    case KILN_F16:
        return "f16";
    case KILN_BF16:
        return "bf16";
    case KILN_F64:
        return "f64";
    case KILN_U8:
        return "u8";
    }
    return "?";
}

int kiln_dtype_supported(kiln_dtype dt)
{
    return dt == KILN_F32 || dt == KILN_I32;
}

int64_t kiln_shape_numel(kiln_shape s)
{
    int64_t n = 1;
    for (int i = 0; i < s.ndim && i < KILN_MAX_DIMS; i++)
        n *= s.d[i];
    return n;
}

char *kiln_shape_str(kiln_shape s, char *buf, size_t n)
{
    if (!buf || n == 0)
        return buf;
    size_t len = 0;
    buf[0] = 0;
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "[");
    for (int i = 0; i < s.ndim && i < KILN_MAX_DIMS; i++)
        len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%lld",
                                i ? "," : "", (long long)s.d[i]);
    snprintf(buf + (len < n ? len : n - 1), len < n ? n - len : 1, "]");
    return buf;
}

int kiln_shape_valid(kiln_shape s)
{
    if (s.ndim < 0 || s.ndim > KILN_MAX_DIMS)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) {
        if (s.d[i] < 0 || s.d[i] > ((int64_t)1 << 40))
            return 0;
        n *= s.d[i];
        if (n > ((int64_t)1 << 40))
            return 0;
    }
    return 1;
}

int kiln_shape_equal(kiln_shape a, kiln_shape b)
{
    if (a.ndim != b.ndim)
        return 0;
    for (int i = 0; i < a.ndim; i++)
        if (a.d[i] != b.d[i])
            return 0;
    return 1;
}

void kiln_shape_strides(kiln_shape s, int64_t *strides)
{
    int64_t st = 1;
    for (int i = s.ndim - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s.d[i];
    }
}

int kiln_shape_broadcast(kiln_shape a, kiln_shape b, kiln_shape *out)
{
    int nd = a.ndim > b.ndim ? a.ndim : b.ndim;
    out->ndim = nd;
    for (int i = 0; i < nd; i++) {
        int ia = a.ndim - nd + i, ib = b.ndim - nd + i;
        int64_t da = ia >= 0 ? a.d[ia] : 1, db = ib >= 0 ? b.d[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        out->d[i] = da == 1 ? db : da;
    }
    return 1;
}

void kiln_broadcast_strides(kiln_shape in, kiln_shape out, int64_t *strides)
{
    int64_t st[KILN_MAX_DIMS];
    kiln_shape_strides(in, st);
    int off = out.ndim - in.ndim;
    for (int i = 0; i < out.ndim; i++) {
        int j = i - off;
        strides[i] = (j < 0 || in.d[j] == 1) ? 0 : st[j];
    }
}
