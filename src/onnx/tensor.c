/* realpath */
#define _XOPEN_SOURCE 700
/* TensorProto -> host values, trusting nothing: dims are bounded and
   overflow-checked, the data's size must match them exactly, and external
   data must stay inside the model's folder. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/onnx_internal.h"

/* Bytes per element in raw_data; 0 for a type Kiln does not read. */
static size_t raw_size(int type)
{
    switch (type) {
    case OX_UINT8:
    case OX_INT8:
    case OX_BOOL:
        return 1;
    case OX_UINT16:
    case OX_INT16:
    case OX_FLOAT16:
    case OX_BFLOAT16:
        return 2;
    case OX_FLOAT:
    case OX_INT32:
    case OX_UINT32:
        return 4;
    case OX_INT64:
    case OX_DOUBLE:
    case OX_UINT64:
        return 8;
    }
    return 0;
}

/* Element k of little-endian raw bytes as a double / an int64. */
static double raw_float(const unsigned char *p, int type, int64_t k)
{
    if (type == OX_FLOAT) {
        float v;
        memcpy(&v, p + 4 * k, 4);
        return v;
    }
    if (type == OX_DOUBLE) {
        double v;
        memcpy(&v, p + 8 * k, 8);
        return v;
    }
    if (type == OX_FLOAT16 || type == OX_BFLOAT16) {
        uint16_t v;
        memcpy(&v, p + 2 * k, 2);
        return type == OX_FLOAT16 ? ox_half_value(v) : ox_bfloat16_value(v);
    }
    return p[k] != 0; /* bool */
}

static int64_t raw_int(const unsigned char *p, int type, int64_t k)
{
    switch (type) {
    case OX_UINT8:
        return p[k];
    case OX_INT8:
        return (int8_t)p[k];
    case OX_BOOL:
        return p[k] != 0;
    case OX_UINT16: {
        uint16_t v;
        memcpy(&v, p + 2 * k, 2);
        return v;
    }
    case OX_INT16: {
        int16_t v;
        memcpy(&v, p + 2 * k, 2);
        return v;
    }
    case OX_INT32: {
        int32_t v;
        memcpy(&v, p + 4 * k, 4);
        return v;
    }
    case OX_UINT32: {
        uint32_t v;
        memcpy(&v, p + 4 * k, 4);
        return v;
    }
    case OX_UINT64: {
        uint64_t v;
        memcpy(&v, p + 8 * k, 8);
        return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    default: {
        int64_t v;
        memcpy(&v, p + 8 * k, 8);
        return v;
    }
    }
}

static int is_float_type(int type)
{
    return ox_type_is_float(type) || type == OX_BOOL;
}

static int fail(char *err, size_t n, const char *fmt, const char *a)
{
    snprintf(err, n, fmt, a);
    return -1;
}

static int alloc_values(ox_host *h, char *err, size_t n)
{
    if (h->numel == 0)
        return 0;
    if (is_float_type(h->type))
        h->f = malloc((size_t)h->numel * sizeof(float));
    else
        h->i = malloc((size_t)h->numel * sizeof(int64_t));
    if (!h->f && !h->i)
        return fail(err, n, "%s: out of memory", "tensor");
    return 0;
}

static void from_raw(ox_host *h, const unsigned char *p)
{
    for (int64_t k = 0; k < h->numel; k++) {
        if (h->f)
            h->f[k] = (float)raw_float(p, h->type, k);
        else
            h->i[k] = raw_int(p, h->type, k);
    }
}

/* The typed field holding t's values and its length. */
static size_t typed_count(const Onnx__TensorProto *t, int type)
{
    switch (type) {
    case OX_FLOAT:
        return t->n_float_data;
    case OX_INT64:
        return t->n_int64_data;
    case OX_DOUBLE:
        return t->n_double_data;
    case OX_UINT32:
    case OX_UINT64:
        return t->n_uint64_data;
    default:
        return t->n_int32_data;
    }
}

static void from_typed(ox_host *h, const Onnx__TensorProto *t)
{
    for (int64_t k = 0; k < h->numel; k++) {
        switch (h->type) {
        case OX_FLOAT:
            h->f[k] = t->float_data[k];
            break;
        case OX_DOUBLE:
            h->f[k] = (float)t->double_data[k];
            break;
        case OX_BOOL:
            h->f[k] = t->int32_data[k] != 0;
            break;
        case OX_FLOAT16: /* the bits, in int32_data */
            h->f[k] = ox_half_value((uint16_t)t->int32_data[k]);
            break;
        case OX_BFLOAT16:
            h->f[k] = ox_bfloat16_value((uint16_t)t->int32_data[k]);
            break;
        case OX_INT64:
            h->i[k] = t->int64_data[k];
            break;
        case OX_UINT32:
        case OX_UINT64:
            h->i[k] = t->uint64_data[k] > (uint64_t)INT64_MAX
                          ? INT64_MAX
                          : (int64_t)t->uint64_data[k];
            break;
        default:
            h->i[k] = t->int32_data[k];
        }
    }
}

/* The value of key in t's external_data, NULL when absent. */
static const char *ext_key(const Onnx__TensorProto *t, const char *key)
{
    for (size_t k = 0; k < t->n_external_data; k++)
        if (t->external_data[k]->key && !strcmp(t->external_data[k]->key, key))
            return t->external_data[k]->value;
    return NULL;
}

static int parse_size(const char *s, int64_t *out)
{
    if (!s) {
        *out = -1;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* dir/location resolved, refused unless it is a regular file inside dir
   (no absolute path, no "..", no symlink out). */
static char *ext_path(const char *dir, const char *loc, char *err, size_t n)
{
    if (!loc || !*loc || loc[0] == '/' || !strcmp(loc, "..") ||
        !strncmp(loc, "../", 3) || strstr(loc, "/../") ||
        (strlen(loc) >= 3 && !strcmp(loc + strlen(loc) - 3, "/.."))) {
        fail(err, n, "external data location '%s' leaves the model's folder",
             loc ? loc : "");
        return NULL;
    }
    size_t len = strlen(dir) + strlen(loc) + 2;
    char *joined = malloc(len);
    char *real_dir = realpath(dir, NULL);
    char *real = NULL;
    if (joined && real_dir) {
        snprintf(joined, len, "%s/%s", dir, loc);
        real = realpath(joined, NULL);
        size_t dl = strlen(real_dir);
        struct stat st;
        if (!real)
            fail(err, n, "external data '%s' not found", loc);
        else if (strncmp(real, real_dir, dl) || real[dl] != '/' ||
                 stat(real, &st) || !S_ISREG(st.st_mode)) {
            fail(err, n,
                 "external data '%s' is not a file inside the "
                 "model's folder",
                 loc);
            free(real);
            real = NULL;
        }
    } else
        fail(err, n, "%s: cannot resolve the model's folder", dir);
    free(joined);
    free(real_dir);
    return real;
}

/* Reads bytes (exactly want of them) of t's external file. */
static unsigned char *read_external(const Onnx__TensorProto *t, const char *dir,
                                    int64_t want, char *err, size_t n)
{
    int64_t offset, length;
    if (!dir)
        return fail(err, n, "%s: external data is not allowed here", "tensor"),
               NULL;
    if (parse_size(ext_key(t, "offset"), &offset) ||
        parse_size(ext_key(t, "length"), &length))
        return fail(err, n, "%s: bad external data offset or length", "tensor"),
               NULL;
    if (length >= 0 && length != want)
        return fail(err, n, "%s: external data length does not match the dims",
                    "tensor"),
               NULL;
    char *path = ext_path(dir, ext_key(t, "location"), err, n);
    if (!path)
        return NULL;
    FILE *f = fopen(path, "rb");
    free(path);
    struct stat st;
    if (offset < 0)
        offset = 0;
    int fits = f && !fstat(fileno(f), &st) && offset <= st.st_size &&
               want <= st.st_size - offset;
    unsigned char *buf = fits ? malloc(want ? (size_t)want : 1) : NULL;
    int ok = buf && fseeko(f, offset, SEEK_SET) == 0 &&
             fread(buf, 1, (size_t)want, f) == (size_t)want;
    if (f)
        fclose(f);
    if (!ok) {
        free(buf);
        return fail(err, n, "%s: external data file is too short or unreadable",
                    "tensor"),
               NULL;
    }
    return buf;
}

static int read_dims(const Onnx__TensorProto *t, ox_host *h, char *err,
                     size_t n)
{
    if (t->n_dims > KILN_MAX_DIMS)
        return fail(err, n, "%s: more than 8 dims", "tensor");
    h->shape.ndim = (int)t->n_dims;
    int64_t numel = 1;
    for (size_t k = 0; k < t->n_dims; k++) {
        int64_t d = t->dims[k];
        if (d < 0 || d > KILN_MAX_NUMEL)
            return fail(err, n, "%s: a dim is negative or too large", "tensor");
        h->shape.d[k] = d;
        if (d && numel > KILN_MAX_NUMEL / d)
            return fail(err, n, "%s: too many elements", "tensor");
        numel = d ? numel * d : 0;
    }
    h->numel = numel;
    return 0;
}

int ox_host_read(const Onnx__TensorProto *t, const char *dir, ox_host *h,
                 char *err, size_t n, int *unsupported)
{
    memset(h, 0, sizeof *h);
    *unsupported = 0;
    h->type = t->has_data_type ? t->data_type : 0;
    size_t esize = raw_size(h->type);
    if (!esize) {
        char b[32];
        *unsupported = 1;
        return fail(err, n, "tensor of unsupported type %s",
                    ox_type_name(h->type, b, sizeof b));
    }
    if (t->segment)
        return fail(err, n, "%s: segmented tensors are not supported",
                    "tensor");
    if (read_dims(t, h, err, n))
        return -1;
    /* The data's size is checked against the dims before anything the dims
       size is allocated: a few bytes cannot claim terabytes. */
    int64_t bytes = h->numel * (int64_t)esize;
    if (t->has_data_location &&
        t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        unsigned char *buf = read_external(t, dir, bytes, err, n);
        if (!buf)
            return -1;
        if (alloc_values(h, err, n) == 0)
            from_raw(h, buf);
        free(buf);
        return h->numel && !h->f && !h->i ? -1 : 0;
    }
    if (t->has_raw_data && (int64_t)t->raw_data.len != bytes)
        return fail(err, n, "%s: raw_data size does not match the dims",
                    "tensor");
    if (!t->has_raw_data && (int64_t)typed_count(t, h->type) != h->numel)
        return fail(err, n, "%s: element count does not match the dims",
                    "tensor");
    if (alloc_values(h, err, n))
        return -1;
    if (t->has_raw_data)
        from_raw(h, t->raw_data.data);
    else
        from_typed(h, t);
    return 0;
}

void ox_host_free(ox_host *h)
{
    if (!h)
        return;
    free(h->f);
    free(h->i);
    h->f = NULL;
    h->i = NULL;
}

int ox_host_i32(const ox_host *h, int32_t **out, char *err, size_t n)
{
    *out = malloc(h->numel ? (size_t)h->numel * sizeof(int32_t) : 1);
    if (!*out)
        return fail(err, n, "%s: out of memory", "tensor");
    for (int64_t k = 0; k < h->numel; k++) {
        int64_t v = h->i ? h->i[k] : (int64_t)h->f[k];
        if (v < INT32_MIN || v > INT32_MAX) {
            free(*out);
            *out = NULL;
            return fail(err, n, "%s: an integer does not fit Kiln's i32",
                        "tensor");
        }
        (*out)[k] = (int32_t)v;
    }
    return 0;
}

ox_host *ox_host_ints(kiln_shape shape, const int64_t *v)
{
    ox_host *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->type = OX_INT64;
    h->shape = shape;
    h->numel = kiln_shape_numel(shape);
    if (h->numel > 0) {
        h->i = malloc((size_t)h->numel * sizeof(int64_t));
        if (!h->i) {
            free(h);
            return NULL;
        }
        memcpy(h->i, v, (size_t)h->numel * sizeof(int64_t));
    }
    return h;
}

ox_host *ox_host_dup(const ox_host *h)
{
    if (!h)
        return NULL;
    if (h->i || !h->f) {
        ox_host *d = ox_host_ints(h->shape, h->i);
        if (d)
            d->type = h->type;
        return d;
    }
    ox_host *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    *d = *h;
    d->f = malloc((size_t)h->numel * sizeof(float) + 1);
    if (!d->f) {
        free(d);
        return NULL;
    }
    memcpy(d->f, h->f, (size_t)h->numel * sizeof(float));
    return d;
}
