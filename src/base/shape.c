#include "base/shape.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

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

const char *kiln_shape_size_max(kiln_shape s, int64_t max_numel,
                                size_t elem_size, int64_t *numel, size_t *bytes)
{
    if (s.ndim < 0 || s.ndim > KILN_MAX_DIMS)
        return "has a dimension count outside [0, 8]";
    if (max_numel > KILN_MAX_NUMEL || max_numel < 1)
        max_numel = KILN_MAX_NUMEL;
    int64_t n = 1, nonzero = 1;
    for (int i = 0; i < s.ndim; i++) {
        int64_t d = s.d[i];
        if (d < 0)
            return "has a negative dimension";
        /* Zero dimensions count as 1: the others still size strides. */
        if (d > 1 && nonzero > max_numel / d)
            return max_numel == KILN_MAX_NUMEL
                       ? "has more than 2^40 elements"
                       : "has more elements than the limit";
        if (d > 1)
            nonzero *= d;
        n = d == 0 ? 0 : n * d;
    }
    /* numel <= 2^40 and elem_size <= 8 in practice; check anyway. */
    if (elem_size && (uint64_t)n > (uint64_t)PTRDIFF_MAX / elem_size)
        return "is too large in bytes";
    if (numel)
        *numel = n;
    if (bytes)
        *bytes = (size_t)n * elem_size;
    return NULL;
}

const char *kiln_shape_size(kiln_shape s, size_t elem_size, int64_t *numel,
                            size_t *bytes)
{
    return kiln_shape_size_max(s, KILN_MAX_NUMEL, elem_size, numel, bytes);
}

int64_t kiln_shape_numel(kiln_shape s)
{
    int64_t n;
    return kiln_shape_size(s, 0, &n, NULL) ? -1 : n;
}

int kiln_dim_add(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0 || a > KILN_MAX_NUMEL || b > KILN_MAX_NUMEL - a)
        return 0;
    *out = a + b;
    return 1;
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
    return kiln_shape_size(s, 0, NULL, NULL) == NULL;
}

int kiln_shape_equal(kiln_shape a, kiln_shape b)
{
    return kiln_shape_same(&a, &b);
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
    int same = a.ndim == b.ndim;
    /* a loop, not memcmp: a call costs more than comparing a few dims */
    for (int i = 0; same && i < a.ndim; i++)
        same = a.d[i] == b.d[i];
    if (same) {
        /* the common case, no axis broadcast: every mark stays */
        a.sym = (a.sym | b.sym) & ((1u << a.ndim) - 1);
        *out = a;
        return 1;
    }
    int nd = a.ndim > b.ndim ? a.ndim : b.ndim;
    kiln_shape r = {.ndim = nd};
    for (int i = 0; i < nd; i++) {
        int ia = a.ndim - nd + i, ib = b.ndim - nd + i;
        int64_t da = ia >= 0 ? a.d[ia] : 1, db = ib >= 0 ? b.d[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        r.d[i] = da == 1 ? db : da;
        /* an axis of the symbolic size stays one where it is not broadcast */
        if ((ia >= 0 && (a.sym >> ia & 1u) && da == r.d[i]) ||
            (ib >= 0 && (b.sym >> ib & 1u) && db == r.d[i]))
            r.sym |= 1u << i;
    }
    *out = r;
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

int kiln_reduce_split(kiln_shape s, unsigned axes, int64_t *outer, int64_t *red,
                      int64_t *inner)
{
    int64_t len[KILN_MAX_DIMS];
    int kind[KILN_MAX_DIMS], nd = 0;
    for (int d = 0; d < s.ndim; d++) {
        if (s.d[d] == 1)
            continue;
        int k = (axes >> d) & 1;
        if (nd && kind[nd - 1] == k) {
            len[nd - 1] *= s.d[d];
        } else {
            len[nd] = s.d[d];
            kind[nd++] = k;
        }
    }
    *outer = *red = *inner = 1;
    int i = 0;
    if (i < nd && !kind[i])
        *outer = len[i++];
    if (i < nd && kind[i])
        *red = len[i++];
    if (i < nd && !kind[i])
        *inner = len[i++];
    return i == nd;
}
