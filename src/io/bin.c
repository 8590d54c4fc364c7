/* Kiln's .bin checkpoint format, version 1, all integers little-endian:

     0  magic "KILNBIN\0"            8 bytes
     8  version (1)                  u32
    12  tensor count                 u32
    16  table bytes                  u64
    24  data offset                  u64  64-aligned, >= 64 + table bytes
    32  data bytes                   u64  file size = data offset + data bytes
    40  CRC32 of the table           u32
    44  CRC32 of bytes 0..43         u32
    48  zero                         16 bytes
    64  table: per tensor
          name length u16, name (UTF-8, no NUL), dtype u8 (0 f32, 1 i32),
          ndim u8, dims i64[ndim], offset u64 (from the data offset,
          64-aligned), bytes u64, CRC32 of the bytes u32
        zero padding to the data offset
        data: each tensor at its offset, zero padding between them

   Every tensor starts at a 64-byte aligned file offset, so a reader may
   map the file and use the data in place. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef KILN_HAVE_ZLIB
#include <zlib.h>
#endif

#include "base/error.h"
#include "base/tensor.h"
#include "io/atomic_file.h"
#include "io/formats.h"

#define BIN_VERSION 1
#define BIN_HEADER 64
#define BIN_MAX_COUNT (1u << 24)
#define BIN_MAX_TABLE (UINT64_C(1) << 32)
#define BIN_MAX_NUMEL (INT64_C(1) << 40)

static const unsigned char MAGIC[8] = {'K', 'I', 'L', 'N', 'B', 'I', 'N', 0};

static uint32_t crc32_of(const void *p, size_t n)
{
#ifdef KILN_HAVE_ZLIB
    uLong c = crc32(0L, Z_NULL, 0);
    const unsigned char *b = p;
    while (n > 0) { /* zlib takes uInt lengths */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, b, k);
        b += k;
        n -= k;
    }
    return (uint32_t)c;
#else
    uint32_t c = 0xFFFFFFFFu;
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
#endif
}

static uint64_t align64(uint64_t v)
{
    return (v + 63) / 64 * 64;
}

static void store_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int host_is_le(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void swap4(void *data, size_t bytes)
{
    unsigned char *p = data;
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        unsigned char a = p[i], b = p[i + 1];
        p[i] = p[i + 3];
        p[i + 1] = p[i + 2];
        p[i + 2] = b;
        p[i + 3] = a;
    }
}

/* ------------------------------------------------------------ writing */

typedef struct bin_plan {
    unsigned char *table;
    uint64_t table_bytes, data_offset, data_bytes;
    uint64_t *offsets;
} bin_plan;

static size_t entry_bytes(const char *name, kiln_shape s)
{
    return 2 + strlen(name) + 2 + 8 * (size_t)s.ndim + 8 + 8 + 4;
}

/* Lays out the table and the data; the CRC of each tensor is of its
   little-endian bytes. */
static int plan(const kiln_tensor_list *l, bin_plan *p, io_err *e)
{
    int n = kiln_tensor_list_count(l);
    size_t tb = 0;
    for (int i = 0; i < n; i++) {
        const char *name = kiln_tensor_list_name(l, i);
        const kiln_tensor *t = kiln_tensor_list_get(l, i);
        io_elem el;
        if (strlen(name) > IO_NAME_MAX)
            return io_fail(e, "tensor name '%.40s...' is too long", name);
        if (io_elem_of_dtype(t->dtype, &el, e))
            return io_prefix(e, "tensor '%.100s': ", name);
        tb += entry_bytes(name, t->shape);
    }
    p->table = malloc(tb ? tb : 1);
    p->offsets =
        malloc(((size_t)kiln_tensor_list_count(l) + 1) * sizeof *p->offsets);
    if (!p->table || !p->offsets) {
        e->status = KILN_ERR_MEMORY;
        return io_fail(e, "out of memory");
    }
    unsigned char *q = p->table;
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const char *name = kiln_tensor_list_name(l, i);
        const kiln_tensor *t = kiln_tensor_list_get(l, i);
        size_t len = strlen(name), bytes = kiln_tensor_bytes(t);
        void *owned;
        const void *le = io_le_data(t, &owned, e);
        if (!le)
            return -1;
        uint32_t crc = crc32_of(le, bytes);
        free(owned);
        q[0] = (unsigned char)len;
        q[1] = (unsigned char)(len >> 8);
        memcpy(q + 2, name, len);
        q += 2 + len;
        *q++ = (unsigned char)t->dtype;
        *q++ = (unsigned char)t->shape.ndim;
        for (int d = 0; d < t->shape.ndim; d++, q += 8)
            io_store_le64(q, (uint64_t)t->shape.d[d]);
        p->offsets[i] = off;
        io_store_le64(q, off);
        io_store_le64(q + 8, bytes);
        store_le32(q + 16, crc);
        q += 20;
        off = align64(off + bytes);
    }
    p->table_bytes = tb;
    p->data_offset = align64(BIN_HEADER + tb);
    p->data_bytes = n ? p->offsets[n - 1] +
                            kiln_tensor_bytes(kiln_tensor_list_get(l, n - 1))
                      : 0;
    return 0;
}

static void header(const bin_plan *p, int count, unsigned char h[BIN_HEADER])
{
    memset(h, 0, BIN_HEADER);
    memcpy(h, MAGIC, 8);
    store_le32(h + 8, BIN_VERSION);
    store_le32(h + 12, (uint32_t)count);
    io_store_le64(h + 16, p->table_bytes);
    io_store_le64(h + 24, p->data_offset);
    io_store_le64(h + 32, p->data_bytes);
    store_le32(h + 40, crc32_of(p->table, p->table_bytes));
    store_le32(h + 44, crc32_of(h, 44));
}

static int pad(FILE *f, uint64_t from, uint64_t to)
{
    static const unsigned char zero[64];
    return to - from <= 64 &&
           fwrite(zero, 1, (size_t)(to - from), f) == to - from;
}

static int write_body(FILE *f, const kiln_tensor_list *l, const bin_plan *p,
                      io_err *e)
{
    unsigned char h[BIN_HEADER];
    int n = kiln_tensor_list_count(l);
    header(p, n, h);
    uint64_t pos = BIN_HEADER + p->table_bytes;
    int ok = fwrite(h, 1, BIN_HEADER, f) == BIN_HEADER &&
             fwrite(p->table, 1, p->table_bytes, f) == p->table_bytes;
    for (; pos < p->data_offset && ok; pos += 64)
        ok = pad(f, pos, pos + 64 < p->data_offset ? pos + 64 : p->data_offset);
    pos = 0;
    for (int i = 0; i < n && ok; i++) {
        const kiln_tensor *t = kiln_tensor_list_get(l, i);
        size_t bytes = kiln_tensor_bytes(t);
        void *owned;
        const void *le = io_le_data(t, &owned, e);
        if (!le)
            return -1;
        ok = pad(f, pos, p->offsets[i]) && fwrite(le, 1, bytes, f) == bytes;
        free(owned);
        pos = p->offsets[i] + bytes;
    }
    return ok ? 0 : io_fail(e, "write failed: %s", strerror(errno));
}

kiln_status kiln_bin_write(const char *path, const kiln_tensor_list *l)
{
    if (!path || !l) {
        kiln_set_last_error("kiln_bin_write: NULL %s", path ? "list" : "path");
        return KILN_ERR_ARG;
    }
    io_err e = IO_ERR_INIT;
    bin_plan p = {0};
    io_atomic a;
    int rc = plan(l, &p, &e);
    if (!rc)
        rc = io_atomic_begin(&a, path, &e);
    if (!rc) {
        FILE *f = fdopen(a.fd, "wb");
        if (!f) {
            rc = io_fail(&e, "cannot write '%s': %s", a.tmp, strerror(errno));
        } else {
            a.fd = -1; /* the FILE owns it now */
            rc = write_body(f, l, &p, &e);
            if (fclose(f) != 0 && !rc)
                rc = io_fail(&e, "write failed: %s", strerror(errno));
        }
        if (!rc)
            rc = io_atomic_commit(&a, &e);
        else
            io_atomic_abort(&a);
    }
    free(p.table);
    free(p.offsets);
    if (rc) {
        kiln_set_last_error("kiln_bin_write: %s: %s", path, e.msg);
        return e.status;
    }
    return KILN_OK;
}

/* ------------------------------------------------------------ reading */

typedef struct bin_cursor {
    const unsigned char *p, *end;
} bin_cursor;

static int take(bin_cursor *c, size_t n, const unsigned char **out, io_err *e)
{
    if ((size_t)(c->end - c->p) < n)
        return io_fail(e, "table entry runs past the table");
    *out = c->p;
    c->p += n;
    return 0;
}

typedef struct bin_entry {
    char name[IO_NAME_MAX + 1];
    kiln_dtype dtype;
    kiln_shape shape;
    uint64_t offset, bytes;
    uint32_t crc;
} bin_entry;

static int parse_entry(bin_cursor *c, bin_entry *t, uint64_t *next_free,
                       uint64_t data_bytes, io_err *e)
{
    const unsigned char *q = NULL;
    if (take(c, 2, &q, e))
        return -1;
    size_t len = (size_t)q[0] | (size_t)q[1] << 8;
    if (len == 0 || len > IO_NAME_MAX)
        return io_fail(e, "bad tensor name length %zu", len);
    if (take(c, len, &q, e))
        return -1;
    memcpy(t->name, q, len);
    t->name[len] = 0;
    if (strlen(t->name) != len)
        return io_fail(e, "tensor name holds a NUL byte");
    if (take(c, 2, &q, e))
        return -1;
    if (q[0] != KILN_F32 && q[0] != KILN_I32)
        return io_fail(e,
                       "tensor '%.100s': dtype %u not supported (0 f32, 1 i32)",
                       t->name, q[0]);
    if (q[1] > KILN_MAX_DIMS)
        return io_fail(e, "tensor '%.100s': %u dims (at most %d)", t->name,
                       q[1], KILN_MAX_DIMS);
    t->dtype = (kiln_dtype)q[0];
    t->shape.ndim = q[1];
    if (take(c, 8 * (size_t)t->shape.ndim + 20, &q, e))
        return -1;
    for (int d = 0; d < t->shape.ndim; d++)
        t->shape.d[d] = (int64_t)io_load_le64(q + 8 * d);
    q += 8 * t->shape.ndim;
    t->offset = io_load_le64(q);
    t->bytes = io_load_le64(q + 8);
    t->crc = io_load_le32(q + 16);
    int64_t numel;
    const char *why =
        kiln_shape_size_max(t->shape, BIN_MAX_NUMEL, 4, &numel, NULL);
    if (why)
        return io_fail(e, "tensor '%.100s': bad shape: it %s", t->name, why);
    if (t->bytes != (uint64_t)numel * 4)
        return io_fail(
            e, "tensor '%.100s': %" PRIu64 " bytes for %" PRId64 " elements",
            t->name, t->bytes, numel);
    if (t->offset % 64 || t->offset < *next_free || t->offset > data_bytes ||
        t->bytes > data_bytes - t->offset)
        return io_fail(e,
                       "tensor '%.100s': data at %" PRIu64 "+%" PRIu64
                       " is misaligned, overlapping or outside the %" PRIu64
                       " data bytes",
                       t->name, t->offset, t->bytes, data_bytes);
    *next_free = t->offset + t->bytes;
    return 0;
}

/* Checks the fixed header against the file's size; fills the sizes. */
static int read_header(FILE *f, uint32_t *count, uint64_t *table_bytes,
                       uint64_t *data_offset, uint64_t *data_bytes,
                       uint32_t *table_crc, io_err *e)
{
    struct stat st;
    unsigned char h[BIN_HEADER];
    if (fstat(fileno(f), &st) != 0)
        return io_fail(e, "cannot stat: %s", strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    if (size < BIN_HEADER || fread(h, 1, BIN_HEADER, f) != BIN_HEADER)
        return io_fail(
            e, "truncated: %" PRIu64 " bytes, shorter than the header", size);
    if (memcmp(h, MAGIC, 8) != 0)
        return io_fail(e, "bad magic: not a Kiln .bin file");
    if (io_load_le32(h + 44) != crc32_of(h, 44))
        return io_fail(e, "header checksum mismatch: the file is corrupt");
    uint32_t version = io_load_le32(h + 8);
    if (version != BIN_VERSION)
        return io_fail(e, "version %u not supported (this Kiln reads %d)",
                       version, BIN_VERSION);
    *count = io_load_le32(h + 12);
    *table_bytes = io_load_le64(h + 16);
    *data_offset = io_load_le64(h + 24);
    *data_bytes = io_load_le64(h + 32);
    *table_crc = io_load_le32(h + 40);
    if (*count > BIN_MAX_COUNT || *table_bytes > BIN_MAX_TABLE ||
        *data_offset != align64(BIN_HEADER + *table_bytes))
        return io_fail(e,
                       "bad header: %u tensors, %" PRIu64
                       " table bytes, data at %" PRIu64,
                       *count, *table_bytes, *data_offset);
    if (*data_bytes > UINT64_MAX - *data_offset ||
        size != *data_offset + *data_bytes)
        return io_fail(
            e, "%s: the file has %" PRIu64 " bytes, the header says %" PRIu64,
            size < *data_offset + *data_bytes ? "truncated" : "trailing data",
            size, *data_offset + *data_bytes);
    return 0;
}

static int read_tensor(FILE *f, const bin_entry *t, uint64_t data_offset,
                       kiln_tensor_list *out, io_err *e)
{
    kiln_tensor *x = kiln_tensor_new(t->dtype, t->shape);
    if (!x) {
        e->status = KILN_ERR_MEMORY;
        return io_fail(e, "%s", kiln_last_error());
    }
    if (fseeko(f, (off_t)(data_offset + t->offset), SEEK_SET) != 0 ||
        fread(x->data, 1, (size_t)t->bytes, f) != t->bytes) {
        kiln_tensor_free(x);
        return io_fail(e, "tensor '%.100s': cannot read its data: %s", t->name,
                       feof(f) ? "end of file" : strerror(errno));
    }
    if (crc32_of(x->data, (size_t)t->bytes) != t->crc) {
        kiln_tensor_free(x);
        return io_fail(
            e, "tensor '%.100s': checksum mismatch: the data is corrupt",
            t->name);
    }
    if (!host_is_le())
        swap4(x->data, (size_t)t->bytes);
    return io_list_add(out, t->name, x, e);
}

int bin_load(const char *path, kiln_tensor_list *out, io_info_fn info,
             void *ctx, io_err *e)
{
    (void)info, (void)ctx;
    FILE *f = io_open_read(path, e);
    if (!f)
        return -1;
    uint32_t count = 0, table_crc = 0;
    uint64_t table_bytes = 0, data_offset = 0, data_bytes = 0, next_free = 0;
    unsigned char *table = NULL;
    int rc = read_header(f, &count, &table_bytes, &data_offset, &data_bytes,
                         &table_crc, e);
    if (!rc && !(table = malloc(table_bytes ? table_bytes : 1))) {
        e->status = KILN_ERR_MEMORY;
        rc = io_fail(e, "out of memory");
    }
    if (!rc && fread(table, 1, table_bytes, f) != table_bytes)
        rc = io_fail(e, "truncated table");
    if (!rc && crc32_of(table, table_bytes) != table_crc)
        rc = io_fail(e, "table checksum mismatch: the file is corrupt");
    if (!rc) {
        bin_cursor c = {table, table + table_bytes};
        bin_entry t;
        for (uint32_t i = 0; i < count && !rc; i++) {
            rc = parse_entry(&c, &t, &next_free, data_bytes, e);
            if (!rc)
                rc = read_tensor(f, &t, data_offset, out, e);
        }
        if (!rc && c.p != c.end)
            rc = io_fail(e, "table has bytes after its %u entries", count);
    }
    free(table);
    fclose(f);
    return rc;
}

kiln_tensor_list *kiln_bin_read(const char *path)
{
    return io_read_list("kiln_bin_read", path, bin_load);
}
