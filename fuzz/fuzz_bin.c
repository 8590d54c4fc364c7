/* kiln_bin_read on one Kiln .bin checkpoint.  The format checksums its
   header, its table and each tensor, which random mutations almost never
   keep valid; so unless the input's first byte is odd, the harness first
   recomputes every checksum it can locate, and mutations reach the table
   parser and the size checks.  The rest of the input is the file. */
#include <string.h>
#include <zlib.h>

#include "fuzz_file.h"
#include "kiln.h"

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t crc(const unsigned char *p, uint64_t n)
{
    return (uint32_t)crc32(0L, p, (uInt)n);
}

/* Walks the table as the reader does, fixing each tensor's checksum when
   its data lies inside the file. */
static void fix_tensor_crcs(unsigned char *f, size_t n, uint64_t table_bytes)
{
    uint64_t data_offset = le64(f + 24);
    unsigned char *p = f + 64, *end = f + 64 + table_bytes;
    while (end - p >= 2) {
        size_t len = (size_t)p[0] | (size_t)p[1] << 8;
        if ((size_t)(end - p) < 4 + len)
            return;
        p += 2 + len;
        size_t ndim = p[1];
        if ((size_t)(end - p) < 2 + 8 * ndim + 20)
            return;
        p += 2 + 8 * ndim;
        uint64_t off = le64(p), bytes = le64(p + 8);
        if (data_offset <= n && off <= n - data_offset &&
            bytes <= n - data_offset - off)
            put_le32(p + 16, crc(f + data_offset + off, bytes));
        p += 20;
    }
}

static void fix_crcs(unsigned char *f, size_t n)
{
    if (n < 64)
        return;
    uint64_t table_bytes = le64(f + 16);
    if (table_bytes <= n - 64) {
        fix_tensor_crcs(f, n, table_bytes);
        put_le32(f + 40, crc(f + 64, table_bytes));
    }
    put_le32(f + 44, crc(f, 44));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned char *f = malloc(size);
    if (!f)
        abort();
    memcpy(f, data + 1, size - 1);
    if (!(data[0] & 1))
        fix_crcs(f, size - 1);
    kiln_tensor_list_free(kiln_bin_read(fuzz_file(f, size - 1)));
    free(f);
    return 0;
}
