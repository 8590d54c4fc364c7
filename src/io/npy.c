#include "io/npy.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest element count a header may claim; checked again against the
   member's real size before any allocation. */
#define NPY_MAX_NUMEL (INT64_C(1) << 40)
/* Version 2.0 allows 4 GiB headers; real ones are a few hundred bytes. */
#define NPY_MAX_DICT (1u << 20)

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* A cursor over the dict text; every parse function returns -1 on error. */
typedef struct dict_parser {
    const char *s, *end;
    io_err *e;
} dict_parser;

static void skip_ws(dict_parser *p)
{
    while (p->s < p->end &&
           (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static int expect(dict_parser *p, char c)
{
    skip_ws(p);
    if (p->s >= p->end || *p->s != c)
        return io_fail(p->e, "bad npy header: expected '%c' in dict", c);
    p->s++;
    return 0;
}

/* 'text' or "text" without escapes, copied into out (cap bytes). */
static int parse_pystr(dict_parser *p, char *out, size_t cap)
{
    skip_ws(p);
    if (p->s >= p->end || (*p->s != '\'' && *p->s != '"'))
        return io_fail(p->e, "bad npy header: expected a quoted string");
    char q = *p->s++;
    size_t n = 0;
    while (p->s < p->end && *p->s != q) {
        if (*p->s == '\\' || n + 1 >= cap)
            return io_fail(p->e, "bad npy header: unexpected string");
        out[n++] = *p->s++;
    }
    if (p->s >= p->end)
        return io_fail(p->e, "bad npy header: unterminated string");
    p->s++;
    out[n] = '\0';
    return 0;
}

static int parse_descr(dict_parser *p, io_elem *el)
{
    static const struct {
        const char *descr;
        io_elem elem;
    } known[] = {{"<f4", IO_F32}, {"<f8", IO_F64}, {"<i4", IO_I32},
                 {"<i8", IO_I64}, {"|u1", IO_U8},  {"|b1", IO_U8}};
    char d[32];
    skip_ws(p);
    if (p->s < p->end && *p->s == '[')
        return io_fail(p->e, "structured dtypes are not supported");
    if (parse_pystr(p, d, sizeof d))
        return -1;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(d, known[i].descr) == 0) {
            *el = known[i].elem;
            return 0;
        }
    if (d[0] == '>')
        return io_fail(p->e, "big-endian dtype '%s' is not supported", d);
    return io_fail(p->e,
                   "unsupported dtype '%s' (supported: <f4 <f8 <i4 "
                   "<i8 |u1 |b1)",
                   d);
}

static int parse_bool(dict_parser *p, int *v)
{
    skip_ws(p);
    size_t left = (size_t)(p->end - p->s);
    if (left >= 4 && memcmp(p->s, "True", 4) == 0) {
        p->s += 4;
        *v = 1;
    } else if (left >= 5 && memcmp(p->s, "False", 5) == 0) {
        p->s += 5;
        *v = 0;
    } else {
        return io_fail(p->e, "bad npy header: fortran_order is not a bool");
    }
    return 0;
}

/* A non-negative decimal, with Python 2's optional 'L' suffix. */
static int parse_dim(dict_parser *p, int64_t *v)
{
    skip_ws(p);
    if (p->s >= p->end || *p->s < '0' || *p->s > '9')
        return io_fail(p->e, "bad npy header: bad shape dimension");
    int64_t x = 0;
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
        if (x > (NPY_MAX_NUMEL - 9) / 10)
            return io_fail(p->e, "bad npy header: dimension too large");
        x = 10 * x + (*p->s++ - '0');
    }
    if (p->s < p->end && *p->s == 'L')
        p->s++;
    *v = x;
    return 0;
}

static int parse_shape(dict_parser *p, kiln_shape *shape)
{
    shape->ndim = 0;
    if (expect(p, '('))
        return -1;
    for (;;) {
        skip_ws(p);
        if (p->s < p->end && *p->s == ')') {
            p->s++;
            return 0;
        }
        if (shape->ndim == KILN_MAX_DIMS)
            return io_fail(p->e, "shape has more than %d dimensions",
                           KILN_MAX_DIMS);
        if (parse_dim(p, &shape->d[shape->ndim++]))
            return -1;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',')
            p->s++;
        else if (p->s >= p->end || *p->s != ')')
            return io_fail(p->e, "bad npy header: bad shape tuple");
    }
}

/* One "key: value" entry; seen[] catches repeated keys. */
static int parse_entry(dict_parser *p, npy_header *h, int seen[3])
{
    char key[32];
    if (parse_pystr(p, key, sizeof key) || expect(p, ':'))
        return -1;
    int k = strcmp(key, "descr") == 0           ? 0
            : strcmp(key, "fortran_order") == 0 ? 1
            : strcmp(key, "shape") == 0         ? 2
                                                : -1;
    if (k < 0)
        return io_fail(p->e, "bad npy header: unknown key '%s'", key);
    if (seen[k]++)
        return io_fail(p->e, "bad npy header: key '%s' repeated", key);
    if (k == 0)
        return parse_descr(p, &h->elem);
    if (k == 2)
        return parse_shape(p, &h->shape);
    int fortran = 0;
    if (parse_bool(p, &fortran))
        return -1;
    if (fortran)
        return io_fail(p->e, "fortran_order arrays are not supported "
                             "(save with np.ascontiguousarray)");
    return 0;
}

static int parse_dict(const char *s, size_t n, npy_header *h, io_err *e)
{
    dict_parser p = {s, s + n, e};
    int seen[3] = {0, 0, 0};
    if (expect(&p, '{'))
        return -1;
    for (;;) {
        skip_ws(&p);
        if (p.s < p.end && *p.s == '}')
            break;
        if (parse_entry(&p, h, seen))
            return -1;
        skip_ws(&p);
        if (p.s < p.end && *p.s == ',')
            p.s++;
        else if (p.s >= p.end || *p.s != '}')
            return io_fail(e, "bad npy header: expected ',' or '}'");
    }
    p.s++;
    skip_ws(&p);
    if (p.s != p.end)
        return io_fail(e, "bad npy header: text after the dict");
    if (!seen[0] || !seen[1] || !seen[2])
        return io_fail(e, "bad npy header: missing '%s'",
                       !seen[0]   ? "descr"
                       : !seen[1] ? "fortran_order"
                                  : "shape");
    return 0;
}

/* Magic and version; the dict length field is 2 bytes in 1.0, 4 after. */
static int read_prefix(io_reader *r, size_t *prefix, size_t *dict_len,
                       io_err *e)
{
    unsigned char b[12];
    if (io_read_exact(r, b, 10, "npy header", e))
        return -1;
    if (memcmp(b, npy_magic, 6) != 0)
        return io_fail(e, "bad npy magic (not a .npy array)");
    if (b[6] == 1 && b[7] == 0) {
        *prefix = 10;
        *dict_len = (size_t)b[8] | (size_t)b[9] << 8;
    } else if ((b[6] == 2 || b[6] == 3) && b[7] == 0) {
        if (io_read_exact(r, b + 10, 2, "npy header", e))
            return -1;
        *prefix = 12;
        *dict_len = io_load_le32(b + 8);
    } else {
        return io_fail(e, "unsupported npy version %d.%d", b[6], b[7]);
    }
    if (*dict_len == 0 || *dict_len > NPY_MAX_DICT)
        return io_fail(e, "bad npy header length %zu", *dict_len);
    return 0;
}

int npy_read_header(io_reader *r, npy_header *h, io_err *e)
{
    size_t prefix = 0, len = 0;
    memset(h, 0, sizeof *h);
    if (read_prefix(r, &prefix, &len, e))
        return -1;
    char *dict = malloc(len);
    if (!dict)
        return io_fail(e, "out of memory");
    int rc = io_read_exact(r, dict, len, "npy header", e) ||
             parse_dict(dict, len, h, e);
    free(dict);
    if (rc)
        return -1;
    const char *why = kiln_shape_size_max(
        h->shape, NPY_MAX_NUMEL, io_elem_size(h->elem), &h->numel, NULL);
    if (why)
        return io_fail(e, "npy shape is too large: it %s", why);
    h->header_bytes = (int64_t)(prefix + len);
    return 0;
}

size_t npy_format_header(unsigned char *buf, io_elem el, kiln_shape shape)
{
    char dict[NPY_HEADER_MAX];
    int n = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     io_elem_name(el));
    for (int i = 0; i < shape.ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%" PRId64,
                      i ? ", " : "", shape.d[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }",
                  shape.ndim == 1 ? "," : "");
    /* 10 bytes of magic, version and length, then the dict, spaces and a
       final newline, to a multiple of 64 so the data is aligned. */
    size_t total = ((10 + (size_t)n + 1) + 63) / 64 * 64;
    size_t dict_len = total - 10;
    memcpy(buf, npy_magic, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(dict_len & 0xff);
    buf[9] = (unsigned char)(dict_len >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', dict_len - (size_t)n - 1);
    buf[total - 1] = '\n';
    return total;
}
