/* .safetensors: an 8-byte little-endian header length N, N bytes of JSON
   describing each tensor, then the tensors' bytes. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/error.h"
#include "io/atomic_file.h"
#include "io/formats.h"
#include "io/json.h"
#include "kiln.h"

/* The reference implementation refuses headers above 100 MB. */
#define ST_MAX_HEADER (100 * 1000 * 1000)
#define ST_MAX_NUMEL (INT64_C(1) << 40)

typedef struct st_entry {
    char *name;
    io_elem elem;
    kiln_shape shape;
    int64_t begin, end;
} st_entry;

typedef struct st_header {
    st_entry *items;
    int count, capacity;
} st_header;

static void header_free(st_header *h)
{
    for (int i = 0; i < h->count; i++)
        free(h->items[i].name);
    free(h->items);
}

/* ------------------------------------------------------------ header */

static int parse_dtype(json_cursor *c, io_elem *el, io_err *e)
{
    static const struct {
        const char *name;
        io_elem elem;
    } known[] = {{"F32", IO_F32}, {"F64", IO_F64}, {"I32", IO_I32},
                 {"I64", IO_I64}, {"U8", IO_U8},   {"BOOL", IO_U8}};
    char *s;
    if (json_string(c, &s))
        return -1;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(s, known[i].name) == 0) {
            *el = known[i].elem;
            free(s);
            return 0;
        }
    io_fail(e, "dtype '%.20s' not supported (F32 F64 I32 I64 U8 BOOL)", s);
    free(s);
    return -1;
}

/* A JSON array of at most max non-negative integers; *n gets the count. */
static int parse_uint_array(json_cursor *c, int64_t *v, int max, int *n,
                            io_err *e)
{
    int first = 1, more;
    *n = 0;
    if (json_expect(c, '['))
        return -1;
    while ((more = json_next(c, ']', &first)) == 1) {
        if (*n == max)
            return io_fail(e, "array longer than %d", max);
        if (json_uint(c, &v[(*n)++]))
            return -1;
    }
    return more;
}

static int parse_field(json_cursor *c, const char *key, st_entry *t, io_err *e)
{
    int n;
    int64_t off[2];
    if (strcmp(key, "dtype") == 0)
        return parse_dtype(c, &t->elem, e);
    if (strcmp(key, "shape") == 0) {
        if (parse_uint_array(c, t->shape.d, KILN_MAX_DIMS, &n, e))
            return -1;
        t->shape.ndim = n;
        return 0;
    }
    if (strcmp(key, "data_offsets") == 0) {
        if (parse_uint_array(c, off, 2, &n, e))
            return -1;
        if (n != 2)
            return io_fail(e, "data_offsets needs 2 numbers");
        t->begin = off[0];
        t->end = off[1];
        return 0;
    }
    return io_fail(e, "unknown field '%.40s'", key);
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, each once. */
static int parse_entry(json_cursor *c, st_entry *t, io_err *e)
{
    static const char *const fields[3] = {"dtype", "shape", "data_offsets"};
    int seen[3] = {0, 0, 0}, first = 1, more;
    if (json_expect(c, '{'))
        return -1;
    while ((more = json_next(c, '}', &first)) == 1) {
        char *key;
        if (json_string(c, &key))
            return -1;
        int rc = json_expect(c, ':') || parse_field(c, key, t, e);
        for (int k = 0; k < 3 && !rc; k++)
            if (strcmp(key, fields[k]) == 0 && seen[k]++)
                rc = io_fail(e, "field '%s' repeated", key);
        free(key);
        if (rc)
            return -1;
    }
    for (int k = 0; k < 3 && more == 0; k++)
        if (!seen[k])
            return io_fail(e, "missing field '%s'", fields[k]);
    return more;
}

static st_entry *header_push(st_header *h)
{
    if (h->count == h->capacity) {
        int cap = h->capacity ? 2 * h->capacity : 16;
        st_entry *items = realloc(h->items, (size_t)cap * sizeof *items);
        if (!items)
            return NULL;
        h->items = items;
        h->capacity = cap;
    }
    st_entry *t = &h->items[h->count++];
    memset(t, 0, sizeof *t);
    return t;
}

static int parse_member(json_cursor *c, char *key, st_header *h, io_err *e)
{
    if (strcmp(key, "__metadata__") == 0) {
        free(key);
        if (json_peek(c) != '{')
            return io_fail(e, "__metadata__ is not an object");
        return json_skip(c);
    }
    st_entry *t = header_push(h);
    if (!t) {
        free(key);
        return io_fail(e, "out of memory");
    }
    t->name = key;
    if (parse_entry(c, t, e))
        return io_prefix(e, "tensor '%.100s': ", key);
    return 0;
}

static int parse_header(const char *text, size_t n, st_header *h, io_err *e)
{
    json_cursor c;
    int first = 1, more;
    e->msg[0] = '\0';
    json_init(&c, text, n);
    if (json_expect(&c, '{'))
        goto bad;
    while ((more = json_next(&c, '}', &first)) == 1) {
        char *key;
        if (json_string(&c, &key))
            goto bad;
        if (json_expect(&c, ':')) {
            free(key);
            goto bad;
        }
        if (parse_member(&c, key, h, e))
            goto bad;
    }
    if (more == 0 && json_finish(&c) == 0)
        return 0;
bad:
    /* Semantic errors are in e already; syntax errors are in the cursor. */
    if (!e->msg[0] || c.err[0])
        io_fail(e, "%s", c.err[0] ? c.err : "bad header");
    return io_prefix(e, "bad JSON header: ");
}

/* ------------------------------------------------------------ checks */

static int check_entry(const st_entry *t, int64_t data_size, io_err *e)
{
    char s[128];
    size_t bytes;
    const char *why = kiln_shape_size_max(t->shape, ST_MAX_NUMEL,
                                          io_elem_size(t->elem), NULL, &bytes);
    if (why)
        return io_fail(e, "tensor '%.100s': shape too large: it %s", t->name,
                       why);
    int64_t need = (int64_t)bytes;
    if (t->end < t->begin || t->end > data_size)
        return io_fail(e,
                       "tensor '%.100s': data_offsets [%" PRId64 ",%" PRId64
                       "] out of range (data section has %" PRId64 " bytes)",
                       t->name, t->begin, t->end, data_size);
    if (t->end - t->begin != need)
        return io_fail(e,
                       "tensor '%.100s': data_offsets hold %" PRId64
                       " bytes but shape %s needs %" PRId64,
                       t->name, t->end - t->begin,
                       kiln_shape_str(t->shape, s, sizeof s), need);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* Sorting by name puts equal names next to each other: O(n log n) where a
   search per entry would be quadratic in the number of tensors. */
static int check_unique_names(st_header *h, io_err *e)
{
    if (h->count < 2)
        return 0;
    qsort(h->items, (size_t)h->count, sizeof *h->items, by_name);
    for (int i = 1; i < h->count; i++)
        if (strcmp(h->items[i - 1].name, h->items[i].name) == 0)
            return io_fail(e, "tensor '%.100s' appears twice",
                           h->items[i].name);
    return 0;
}

static int by_offset(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Sorts into data order and requires the tensors to tile the data section
   exactly, as the format's specification does (no holes, no overlap). */
static int check_layout(st_header *h, int64_t data_size, io_err *e)
{
    for (int i = 0; i < h->count; i++)
        if (check_entry(&h->items[i], data_size, e))
            return -1;
    if (check_unique_names(h, e))
        return -1;
    if (h->count > 1)
        qsort(h->items, (size_t)h->count, sizeof *h->items, by_offset);
    int64_t at = 0;
    for (int i = 0; i < h->count; i++) {
        if (h->items[i].begin != at)
            return io_fail(e,
                           "tensor '%.100s' starts at byte %" PRId64
                           " of the data, expected %" PRId64
                           " (overlap or gap)",
                           h->items[i].name, h->items[i].begin, at);
        at = h->items[i].end;
    }
    if (at != data_size)
        return io_fail(e,
                       "data section has %" PRId64 " bytes but the "
                       "tensors cover %" PRId64,
                       data_size, at);
    return 0;
}

/* ------------------------------------------------------------ reading */

static int64_t file_reader_read(void *ctx, void *buf, size_t n, io_err *e)
{
    FILE *f = ctx;
    size_t k = fread(buf, 1, n, f);
    if (k < n && ferror(f))
        return io_fail(e, "read failed: %s", strerror(errno));
    return (int64_t)k;
}

static int read_header(FILE *f, st_header *h, int64_t *data_start, io_err *e)
{
    struct stat st;
    unsigned char len8[8];
    if (fstat(fileno(f), &st) != 0)
        return io_fail(e, "cannot stat: %s", strerror(errno));
    int64_t size = (int64_t)st.st_size;
    if (size < 8 || fread(len8, 1, 8, f) != 8)
        return io_fail(
            e, "file too short for a safetensors header (%" PRId64 " bytes)",
            size);
    uint64_t n = io_load_le64(len8);
    if (n > (uint64_t)(size - 8))
        return io_fail(e,
                       "header length %" PRIu64 " larger than the file "
                       "(%" PRId64 " bytes)",
                       n, size);
    if (n > ST_MAX_HEADER)
        return io_fail(e, "header length %" PRIu64 " too large", n);
    char *text = malloc(n ? n : 1);
    if (!text)
        return io_fail(e, "out of memory");
    int rc = fread(text, 1, n, f) != n
                 ? io_fail(e, "cannot read the header: %s", strerror(errno))
                 : parse_header(text, n, h, e);
    free(text);
    *data_start = 8 + (int64_t)n;
    return rc ? -1 : check_layout(h, size - *data_start, e);
}

static int load_entry(FILE *f, const st_entry *t, int64_t data_start,
                      kiln_tensor_list *out, io_err *e)
{
    kiln_tensor *x = kiln_tensor_new(io_elem_natural(t->elem), t->shape);
    if (!x) {
        e->status = KILN_ERR_MEMORY;
        return io_fail(e, "%s", kiln_last_error());
    }
    io_reader r = {file_reader_read, f};
    if (fseeko(f, (off_t)(data_start + t->begin), SEEK_SET) != 0) {
        kiln_tensor_free(x);
        return io_fail(e, "seek failed: %s", strerror(errno));
    }
    if (io_read_tensor(&r, t->elem, x, e)) {
        kiln_tensor_free(x);
        return io_prefix(e, "tensor '%.100s': ", t->name);
    }
    return io_list_add(out, t->name, x, e);
}

int safetensors_load(const char *path, kiln_tensor_list *out, io_info_fn fn,
                     void *ctx, io_err *e)
{
    FILE *f = io_open_read(path, e);
    if (!f)
        return -1;
    st_header h = {NULL, 0, 0};
    int64_t data_start;
    int rc = read_header(f, &h, &data_start, e);
    for (int i = 0; i < h.count && !rc; i++) {
        if (out)
            rc = load_entry(f, &h.items[i], data_start, out, e);
        else if (fn)
            fn(ctx, h.items[i].name, h.items[i].elem, h.items[i].shape);
    }
    header_free(&h);
    fclose(f);
    return rc;
}

kiln_tensor_list *kiln_safetensors_read(const char *path)
{
    return io_read_list("kiln_safetensors_read", path, safetensors_load);
}

/* ------------------------------------------------------------ writing */

typedef struct strbuf {
    char *p;
    size_t n, cap;
    int oom;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) IO_PRINTF(2, 3);
static void sb_printf(strbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        /* No arithmetic on the NULL of an empty buffer. */
        char *dst = b->p ? b->p + b->n : NULL;
        int k = b->oom ? 0 : vsnprintf(dst, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (b->oom || (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = 2 * b->cap + (size_t)k + 64;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

/* Quotes, backslashes and control bytes are escaped; other bytes are
   copied, so UTF-8 names stay UTF-8. */
static void sb_json_string(strbuf *b, const char *s)
{
    sb_printf(b, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            sb_printf(b, "\\%c", ch);
        else if (ch < 0x20)
            sb_printf(b, "\\u%04x", ch);
        else
            sb_printf(b, "%c", ch);
    }
    sb_printf(b, "\"");
}

static int write_entry_json(strbuf *b, const char *name, const kiln_tensor *t,
                            int64_t *offset, io_err *e)
{
    io_elem el;
    if (strcmp(name, "__metadata__") == 0)
        return io_fail(e, "'__metadata__' is reserved, not a tensor name");
    if (strlen(name) > IO_NAME_MAX)
        return io_fail(e, "tensor name '%.40s...' is too long", name);
    if (io_elem_of_dtype(kiln_tensor_dtype(t), &el, e))
        return io_prefix(e, "tensor '%.100s': ", name);
    kiln_shape s = kiln_tensor_shape(t);
    int64_t bytes = kiln_tensor_numel(t) * (int64_t)io_elem_size(el);
    sb_printf(b, "%s", b->n > 1 ? "," : "");
    sb_json_string(b, name);
    sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[",
              el == IO_F32 ? "F32" : "I32");
    for (int i = 0; i < s.ndim; i++)
        sb_printf(b, "%s%" PRId64, i ? "," : "", s.d[i]);
    sb_printf(b, "],\"data_offsets\":[%" PRId64 ",%" PRId64 "]}", *offset,
              *offset + bytes);
    *offset += bytes;
    return 0;
}

/* The JSON header, padded with spaces so that the data starts 8-byte
   aligned, as the reference writer does. */
static int build_header(const kiln_tensor_list *l, strbuf *b, io_err *e)
{
    int64_t offset = 0;
    sb_printf(b, "{");
    for (int i = 0; i < kiln_tensor_list_count(l); i++)
        if (write_entry_json(b, kiln_tensor_list_name(l, i),
                             kiln_tensor_list_get(l, i), &offset, e))
            return -1;
    sb_printf(b, "}");
    while (b->n % 8)
        sb_printf(b, " ");
    if (b->oom) {
        e->status = KILN_ERR_MEMORY;
        return io_fail(e, "out of memory");
    }
    return 0;
}

static int write_body(FILE *f, const kiln_tensor_list *l, const strbuf *hdr,
                      io_err *e)
{
    unsigned char len8[8];
    io_store_le64(len8, hdr->n);
    int ok =
        fwrite(len8, 1, 8, f) == 8 && fwrite(hdr->p, 1, hdr->n, f) == hdr->n;
    for (int i = 0; i < kiln_tensor_list_count(l) && ok; i++) {
        const kiln_tensor *t = kiln_tensor_list_get(l, i);
        void *owned;
        const void *data = io_le_data(t, &owned, e);
        if (!data)
            return -1;
        size_t bytes = (size_t)kiln_tensor_numel(t) * 4;
        ok = fwrite(data, 1, bytes, f) == bytes;
        free(owned);
    }
    if (!ok)
        return io_fail(e, "write failed: %s", strerror(errno));
    return 0;
}

static int write_file(io_atomic *a, const kiln_tensor_list *l,
                      const strbuf *hdr, io_err *e)
{
    FILE *f = fdopen(a->fd, "wb");
    if (!f)
        return io_fail(e, "cannot write '%s': %s", a->tmp, strerror(errno));
    a->fd = -1; /* the FILE owns it now */
    int rc = write_body(f, l, hdr, e);
    if (fclose(f) != 0 && !rc)
        rc = io_fail(e, "write failed: %s", strerror(errno));
    return rc;
}

kiln_status kiln_safetensors_write(const char *path, const kiln_tensor_list *l)
{
    if (!path || !l) {
        kiln_set_last_error("kiln_safetensors_write: NULL %s",
                            path ? "list" : "path");
        return KILN_ERR_ARG;
    }
    io_err e = IO_ERR_INIT;
    strbuf hdr = {NULL, 0, 0, 0};
    io_atomic a;
    int rc = build_header(l, &hdr, &e);
    if (!rc)
        rc = io_atomic_begin(&a, path, &e);
    if (!rc) {
        rc = write_file(&a, l, &hdr, &e);
        if (!rc)
            rc = io_atomic_commit(&a, &e);
        else
            io_atomic_abort(&a);
    }
    free(hdr.p);
    if (rc) {
        kiln_set_last_error("kiln_safetensors_write: %s: %s", path, e.msg);
        return e.status;
    }
    return KILN_OK;
}
