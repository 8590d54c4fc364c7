/* File formats: tensor lists, .npz, .safetensors, IDX and kiln_file_info.
   Reference files come from tests/ref/make_io_refs.py (numpy). */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiln.h"
#include "test_files.h"

#define REF(name) KILN_TEST_REF_DIR "/io/" name

/* ------------------------------------------------------------ helpers */

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)size + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return b;
}

static void clear_dir(void)
{
    DIR *d = opendir(tmp_dir);
    struct dirent *ent;
    assert_non_null(d);
    while ((ent = readdir(d)))
        if (ent->d_name[0] != '.')
            unlink(tmp_path(ent->d_name));
    closedir(d);
}

static int clean_dir(void **state)
{
    (void)state;
    clear_dir();
    return 0;
}

/* A list with what the formats must carry exactly: special floats (-0,
   inf, NaN, denormals), int32 extremes, a scalar, an empty tensor. */
static kiln_tensor_list *sample_list(void)
{
    kiln_tensor_list *l = kiln_tensor_list_new();
    kiln_tensor *w = kiln_tensor_new(KILN_F32, KILN_SHAPE(3, 4));
    kiln_tensor *y = kiln_tensor_new(KILN_I32, KILN_SHAPE(5));
    kiln_tensor *s = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_tensor *z = kiln_tensor_new(KILN_F32, KILN_SHAPE(0, 7));
    float *wf = kiln_tensor_f32(w);
    for (int i = 0; i < 12; i++)
        wf[i] = (float)i * 0.25f - 1.5f;
    wf[0] = -0.0f;
    wf[1] = INFINITY;
    wf[2] = NAN;
    wf[3] = 1e-40f;
    const int32_t yv[5] = {INT32_MIN, -1, 0, 1, INT32_MAX};
    memcpy(kiln_tensor_i32(y), yv, sizeof yv);
    kiln_tensor_f32(s)[0] = 42.5f;
    assert_int_equal(kiln_tensor_list_add(l, "layer1/W", w), KILN_OK);
    assert_int_equal(kiln_tensor_list_add(l, "labels", y), KILN_OK);
    assert_int_equal(kiln_tensor_list_add(l, "step", s), KILN_OK);
    assert_int_equal(kiln_tensor_list_add(l, "empty", z), KILN_OK);
    return l;
}

static void assert_tensors_identical(const kiln_tensor *a, const kiln_tensor *b)
{
    char sa[64], sb[64];
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(kiln_tensor_dtype(a), kiln_tensor_dtype(b));
    assert_string_equal(kiln_shape_str(kiln_tensor_shape(a), sa, sizeof sa),
                        kiln_shape_str(kiln_tensor_shape(b), sb, sizeof sb));
    assert_memory_equal(kiln_tensor_data(a), kiln_tensor_data(b),
                        (size_t)kiln_tensor_numel(a) * 4);
}

static void assert_lists_identical(const kiln_tensor_list *a,
                                   const kiln_tensor_list *b)
{
    assert_int_equal(kiln_tensor_list_count(a), kiln_tensor_list_count(b));
    for (int i = 0; i < kiln_tensor_list_count(a); i++) {
        assert_string_equal(kiln_tensor_list_name(a, i),
                            kiln_tensor_list_name(b, i));
        assert_tensors_identical(kiln_tensor_list_get(a, i),
                                 kiln_tensor_list_get(b, i));
    }
}

static void assert_shape(const kiln_tensor *t, const char *want)
{
    char s[64];
    assert_non_null(t);
    assert_string_equal(kiln_shape_str(kiln_tensor_shape(t), s, sizeof s),
                        want);
}

/* ------------------------------------------------------------ tensor lists */

static void test_list_basics(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    kiln_tensor *a = kiln_tensor_new(KILN_F32, KILN_SHAPE(2));
    kiln_tensor *b = kiln_tensor_new(KILN_I32, KILN_SHAPE(3));
    assert_int_equal(kiln_tensor_list_count(l), 0);
    assert_int_equal(kiln_tensor_list_add(l, "a", a), KILN_OK);
    assert_int_equal(kiln_tensor_list_add(l, "a", b), KILN_ERR_ARG);
    assert_error_has("duplicate name 'a'");
    assert_int_equal(kiln_tensor_list_add(l, "", b), KILN_ERR_ARG);
    assert_int_equal(kiln_tensor_list_add(l, NULL, b), KILN_ERR_ARG);
    assert_int_equal(kiln_tensor_list_add(l, "n", NULL), KILN_ERR_ARG);
    assert_int_equal(kiln_tensor_list_add(NULL, "b", b), KILN_ERR_ARG);
    assert_int_equal(kiln_tensor_list_add(l, "b", b), KILN_OK);
    assert_int_equal(kiln_tensor_list_count(l), 2);
    assert_string_equal(kiln_tensor_list_name(l, 1), "b");
    assert_ptr_equal(kiln_tensor_list_get(l, 0), a);
    assert_ptr_equal(kiln_tensor_list_find(l, "b"), b);
    assert_null(kiln_tensor_list_find(l, "c"));
    assert_null(kiln_tensor_list_get(l, 2));
    assert_null(kiln_tensor_list_name(l, -1));
    assert_int_equal(kiln_tensor_list_count(NULL), 0);
    kiln_tensor_list_free(l);
    kiln_tensor_list_free(NULL);
}

/* ------------------------------------------------------------ round trips */

static void roundtrip_npz(int compress)
{
    kiln_tensor_list *l = sample_list();
    const char *p = tmp_path("rt.npz");
    assert_int_equal(kiln_npz_write(p, l, compress), KILN_OK);
    kiln_tensor_list *r = kiln_npz_read(p);
    if (!r)
        fail_msg("%s", kiln_last_error());
    assert_lists_identical(l, r);
    assert_int_equal(count_entries(0), 1);
    /* Overwriting an existing file works and is atomic too. */
    assert_int_equal(kiln_npz_write(p, r, !compress), KILN_OK);
    assert_int_equal(count_entries(0), 1);
    kiln_tensor_list_free(r);
    r = kiln_npz_read(p);
    assert_lists_identical(l, r);
    kiln_tensor_list_free(r);
    kiln_tensor_list_free(l);
}

static void test_npz_roundtrip_stored(void **state)
{
    (void)state;
    roundtrip_npz(0);
}

static void test_npz_roundtrip_compressed(void **state)
{
    (void)state;
    roundtrip_npz(1);
}

static void test_safetensors_roundtrip(void **state)
{
    (void)state;
    kiln_tensor_list *l = sample_list();
    const char *p = tmp_path("rt.safetensors");
    assert_int_equal(kiln_safetensors_write(p, l), KILN_OK);
    kiln_tensor_list *r = kiln_safetensors_read(p);
    if (!r)
        fail_msg("%s", kiln_last_error());
    assert_lists_identical(l, r);
    kiln_tensor_list_free(r);
    size_t n;
    unsigned char *b = read_bytes(p, &n);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | b[i];
    assert_int_equal(hlen % 8, 0); /* data starts aligned */
    assert_int_equal(b[8], '{');
    assert_int_equal(n, 8 + hlen + 12 * 4 + 5 * 4 + 4);
    free(b);
    assert_int_equal(count_entries(0), 1);
    kiln_tensor_list_free(l);
}

static void test_empty_list_roundtrip(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    assert_int_equal(kiln_npz_write(tmp_path("e.npz"), l, 1), KILN_OK);
    assert_int_equal(kiln_safetensors_write(tmp_path("e.st"), l), KILN_OK);
    kiln_tensor_list *a = kiln_npz_read(tmp_path("e.npz"));
    kiln_tensor_list *b = kiln_safetensors_read(tmp_path("e.st"));
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(kiln_tensor_list_count(a), 0);
    assert_int_equal(kiln_tensor_list_count(b), 0);
    kiln_tensor_list_free(a);
    kiln_tensor_list_free(b);
    kiln_tensor_list_free(l);
}

/* Wrapped tensors are written from the caller's memory. */
static void test_write_wrapped(void **state)
{
    (void)state;
    float v[6] = {1, 2, 3, 4, 5, 6};
    kiln_tensor_list *l = kiln_tensor_list_new();
    kiln_tensor_list_add(l, "v",
                         kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2, 3), v));
    assert_int_equal(kiln_npz_write(tmp_path("w.npz"), l, 0), KILN_OK);
    kiln_tensor_list_free(l);
    l = kiln_npz_read(tmp_path("w.npz"));
    assert_memory_equal(kiln_tensor_f32(kiln_tensor_list_find(l, "v")), v,
                        sizeof v);
    kiln_tensor_list_free(l);
}

/* ------------------------------------------------------------ numpy files */

/* The arrays of make_io_refs.py, recomputed from their formulas. */
static void check_numpy_arrays(const kiln_tensor_list *l)
{
    static const char *const names[] = {"a", "b", "c", "d", "e", "s", "z"};
    assert_int_equal(kiln_tensor_list_count(l), 7);
    for (int i = 0; i < 7; i++)
        assert_string_equal(kiln_tensor_list_name(l, i), names[i]);
    const float *a = kiln_tensor_f32(kiln_tensor_list_find(l, "a"));
    const int32_t *b = kiln_tensor_i32(kiln_tensor_list_find(l, "b"));
    const float *c = kiln_tensor_f32(kiln_tensor_list_find(l, "c"));
    const int32_t *d = kiln_tensor_i32(kiln_tensor_list_find(l, "d"));
    const int32_t *e = kiln_tensor_i32(kiln_tensor_list_find(l, "e"));
    assert_shape(kiln_tensor_list_find(l, "a"), "[3,4]");
    assert_shape(kiln_tensor_list_find(l, "b"), "[10]");
    assert_shape(kiln_tensor_list_find(l, "c"), "[2,3]");
    assert_shape(kiln_tensor_list_find(l, "e"), "[2,3]");
    assert_shape(kiln_tensor_list_find(l, "s"), "[]");
    assert_shape(kiln_tensor_list_find(l, "z"), "[0,3]");
    assert_true(a && b && c && d && e);
    for (int i = 0; i < 12; i++)
        assert_true(a[i] == (float)i * 0.5f - 1.0f);
    for (int i = 0; i < 10; i++)
        assert_int_equal(b[i], i - 5);
    for (int i = 0; i < 6; i++) {
        assert_true(c[i] == (float)i / 4.0f);
        assert_int_equal(e[i], 250 + i);
    }
    assert_int_equal(d[0], 1);
    assert_int_equal(d[1], -2);
    assert_int_equal(d[2], INT32_MAX);
    assert_true(kiln_tensor_f32(kiln_tensor_list_find(l, "s"))[0] == 3.25f);
}

static void test_numpy_plain(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_npz_read(REF("np_plain.npz"));
    if (!l)
        fail_msg("%s", kiln_last_error());
    check_numpy_arrays(l);
    kiln_tensor_list_free(l);
}

static void test_numpy_compressed(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_npz_read(REF("np_compressed.npz"));
    if (!l)
        fail_msg("%s", kiln_last_error());
    check_numpy_arrays(l);
    kiln_tensor_list_free(l);
}

/* Written by the script in its own code: JSON keys out of data order,
   F64/I64/U8 to convert, and a __metadata__ with escapes to skip. */
static void test_safetensors_reference(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_safetensors_read(REF("ref.safetensors"));
    if (!l)
        fail_msg("%s", kiln_last_error());
    kiln_tensor *z = kiln_tensor_new(KILN_F32, KILN_SHAPE(0, 3));
    kiln_tensor_list_add(l, "z", z); /* safetensors has no empty "z" */
    check_numpy_arrays(l);
    kiln_tensor_list_free(l);
}

static void test_idx(void **state)
{
    (void)state;
    static const char *const images[] = {REF("images-idx3-ubyte"),
                                         REF("images-idx3-ubyte.gz")};
    static const char *const labels[] = {REF("labels-idx1-ubyte"),
                                         REF("labels-idx1-ubyte.gz")};
    for (int k = 0; k < 2; k++) {
        kiln_tensor *x = kiln_idx_read(images[k], KILN_F32);
        kiln_tensor *y = kiln_idx_read(labels[k], KILN_I32);
        if (!x || !y)
            fail_msg("%s", kiln_last_error());
        assert_shape(x, "[3,4,5]");
        assert_shape(y, "[3]");
        for (int i = 0; i < 60; i++)
            assert_true(kiln_tensor_f32(x)[i] == (float)((7 * i) % 256));
        assert_int_equal(kiln_tensor_i32(y)[0], 7);
        assert_int_equal(kiln_tensor_i32(y)[1], 0);
        assert_int_equal(kiln_tensor_i32(y)[2], 255);
        kiln_tensor_free(x);
        kiln_tensor_free(y);
    }
    assert_null(kiln_idx_read(images[0], KILN_F16));
    assert_error_has("dtype must be f32 or i32");
}

/* ------------------------------------------------------------ file info */

static char *info_of(const char *path)
{
    static char text[1024];
    FILE *f = tmpfile();
    assert_non_null(f);
    if (kiln_file_info(path, f) != KILN_OK)
        fail_msg("%s", kiln_last_error());
    rewind(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void test_file_info(void **state)
{
    (void)state;
    kiln_tensor_list *l = sample_list();
    kiln_npz_write(tmp_path("i.npz"), l, 1);
    kiln_safetensors_write(tmp_path("i.safetensors"), l);
    const char *want = "layer1/W  f32  [3,4]\nlabels  i32  [5]\n"
                       "step  f32  []\nempty  f32  [0,7]\n";
    assert_string_equal(info_of(tmp_path("i.npz")), want);
    assert_string_equal(info_of(tmp_path("i.safetensors")), want);
    assert_string_equal(info_of(REF("ref.safetensors")),
                        "a  f32  [3,4]\nb  i32  [10]\nc  f32  [2,3]  (stored "
                        "<f8)\nd  i32  [3]  (stored <i8)\ne  i32  [2,3]  "
                        "(stored |u1)\ns  f32  []\n");
    assert_int_equal(kiln_file_info(REF("labels-idx1-ubyte"), stdout),
                     KILN_ERR_IO);
    assert_error_has("not a .npz, .safetensors or .bin file");
    assert_int_equal(kiln_file_info(NULL, stdout), KILN_ERR_ARG);
    kiln_tensor_list_free(l);
}

/* ------------------------------------------------------------ bad input */

static void test_missing_files(void **state)
{
    (void)state;
    const char *p = tmp_path("missing");
    assert_null(kiln_npz_read(p));
    assert_error_has("cannot open: No such file");
    assert_null(kiln_safetensors_read(p));
    assert_error_has("cannot open: No such file");
    assert_null(kiln_idx_read(p, KILN_F32));
    assert_error_has("cannot open");
    assert_int_equal(kiln_file_info(p, stdout), KILN_ERR_IO);
    assert_error_has("cannot open");
    assert_null(kiln_npz_read(NULL));
    assert_error_has("NULL path");
}

/* Every proper prefix of a valid file must be refused, never crash. */
static void check_prefixes_fail(const char *src, int is_npz)
{
    size_t n;
    unsigned char *b = read_bytes(src, &n);
    const char *p = tmp_path("cut");
    for (size_t len = 0; len < n; len++) {
        write_bytes(p, b, len);
        kiln_tensor_list *l =
            is_npz ? kiln_npz_read(p) : kiln_safetensors_read(p);
        if (l)
            fail_msg("%s cut to %zu of %zu bytes was accepted", src, len, n);
        assert_error_has(p);
    }
    free(b);
}

static void test_npz_truncated(void **state)
{
    (void)state;
    kiln_tensor_list *l = sample_list();
    kiln_npz_write(tmp_path("t1.npz"), l, 0);
    kiln_npz_write(tmp_path("t2.npz"), l, 1);
    check_prefixes_fail(tmp_path("t1.npz"), 1);
    check_prefixes_fail(tmp_path("t2.npz"), 1);
    check_prefixes_fail(REF("np_compressed.npz"), 1);
    write_bytes(tmp_path("cut"), "PK\3\4", 4);
    assert_null(kiln_npz_read(tmp_path("cut")));
    assert_error_has("not a valid zip archive");
    kiln_tensor_list_free(l);
}

/* Flipping any byte must never crash or leak; flipping a byte of tensor
   data must be caught (the zip CRC). */
static void test_npz_corrupted(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    kiln_tensor *t = kiln_tensor_new(KILN_I32, KILN_SHAPE(64));
    for (int i = 0; i < 64; i++)
        kiln_tensor_i32(t)[i] = 0x5a5a0000 + i;
    kiln_tensor_list_add(l, "t", t);
    for (int compress = 0; compress < 2; compress++) {
        kiln_npz_write(tmp_path("c.npz"), l, compress);
        size_t n;
        unsigned char *b = read_bytes(tmp_path("c.npz"), &n);
        for (size_t i = 0; i < n; i++) {
            b[i] ^= 0x10;
            write_bytes(tmp_path("bad.npz"), b, n);
            kiln_tensor_list_free(kiln_npz_read(tmp_path("bad.npz")));
            b[i] ^= 0x10;
        }
        /* The stored member's data: 30-byte local header, the name, the
           128-byte npy header; the element 10 is past all of them. */
        if (!compress) {
            b[30 + 5 + 128 + 40] ^= 1;
            write_bytes(tmp_path("bad.npz"), b, n);
            assert_null(kiln_npz_read(tmp_path("bad.npz")));
            assert_error_has("CRC");
        }
        free(b);
    }
    kiln_tensor_list_free(l);
}

static void test_npz_bad_members(void **state)
{
    (void)state;
    static const struct {
        const char *file, *phrase;
    } cases[] = {
        {REF("bad_magic.npz"), "bad npy magic"},
        {REF("bad_header.npz"), "unknown key 'shapf'"},
        {REF("bad_version.npz"), "unsupported npy version 7.0"},
        {REF("bad_short_data.npz"), "needs 16 data bytes, the member has 12"},
        {REF("bad_fortran.npz"), "fortran_order"},
        {REF("bad_bigendian.npz"), "big-endian dtype '>f4'"},
        {REF("bad_dtype.npz"), "unsupported dtype '<c8'"},
        {REF("bad_i64_range.npz"), "2147483648 at element 1 does not fit"},
        {REF("bad_not_npy.npz"), "'readme.txt' is not a .npy array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_null(kiln_npz_read(cases[i].file));
        assert_error_has(cases[i].phrase);
        assert_error_has("member '");
    }
}

static void test_idx_errors(void **state)
{
    (void)state;
    size_t n, gn;
    unsigned char *b = read_bytes(REF("images-idx3-ubyte"), &n);
    unsigned char *gz = read_bytes(REF("images-idx3-ubyte.gz"), &gn);
    const char *p = tmp_path("x-idx");
    write_bytes(p, b, n - 7);
    assert_null(kiln_idx_read(p, KILN_F32));
    assert_error_has("truncated: expected 60 data bytes, got 53");
    write_bytes(p, b, 10);
    assert_null(kiln_idx_read(p, KILN_F32));
    assert_error_has("truncated IDX header");
    write_bytes(p, gz, gn - 12); /* cut inside the deflate stream */
    assert_null(kiln_idx_read(p, KILN_F32));
    assert_error_has("truncated");
    b[0] = 0x12;
    write_bytes(p, b, n);
    assert_null(kiln_idx_read(p, KILN_F32));
    assert_error_has("bad IDX magic 0x12000803");
    b[0] = 0;
    b[2] = 0x0d;
    write_bytes(p, b, n);
    assert_null(kiln_idx_read(p, KILN_F32));
    assert_error_has("element type 0x0d not supported");
    b[2] = 0x08;
    b[3] = 5;
    write_bytes(p, b, n);
    assert_null(kiln_idx_read(p, KILN_F32));
    assert_error_has("5 dimensions");
    b[3] = 3;
    unsigned char *longer = calloc(n + 3, 1);
    memcpy(longer, b, n);
    write_bytes(p, longer, n + 3);
    assert_null(kiln_idx_read(p, KILN_I32));
    assert_error_has("trailing data");
    /* A header claiming 2^32-1 x 2^32-1 x ... elements. */
    memset(b + 4, 0xff, 12);
    write_bytes(p, b, n);
    assert_null(kiln_idx_read(p, KILN_F32));
    assert_error_has("too large");
    free(longer);
    free(b);
    free(gz);
}

/* A safetensors file from a header text and n data bytes. */
static void write_st(const char *path, const char *json, size_t data)
{
    size_t h = strlen(json);
    unsigned char *b = calloc(8 + h + data + 1, 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, json, h);
    write_bytes(path, b, 8 + h + data);
    free(b);
}

static void expect_st_error(const char *json, size_t data, const char *phrase)
{
    const char *p = tmp_path("bad.safetensors");
    write_st(p, json, data);
    kiln_tensor_list *l = kiln_safetensors_read(p);
    if (l)
        fail_msg("accepted header %s", json);
    assert_error_has(phrase);
}

static void test_safetensors_errors(void **state)
{
    (void)state;
    const char *ok = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
                     "\"data_offsets\":[0,8]}}";
    write_st(tmp_path("ok.st"), ok, 8);
    kiln_tensor_list *l = kiln_safetensors_read(tmp_path("ok.st"));
    assert_non_null(l);
    kiln_tensor_list_free(l);
    check_prefixes_fail(tmp_path("ok.st"), 0);

    expect_st_error(ok, 4, "out of range (data section has 4 bytes)");
    expect_st_error(ok, 12,
                    "data section has 12 bytes but the tensors cover 8");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"shape\":[3],"
                    "\"data_offsets\":[0,8]}}",
                    8, "data_offsets hold 8 bytes but shape [3] needs 12");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":"
                    "[4,8]},\"y\":{\"dtype\":\"F32\",\"shape\":[1],"
                    "\"data_offsets\":[4,8]}}",
                    8, "overlap or gap");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
                    "\"data_offsets\":[8,0]}}",
                    8, "out of range");
    expect_st_error("{\"x\":{\"dtype\":\"BF16\",\"shape\":[4],"
                    "\"data_offsets\":[0,8]}}",
                    8, "dtype 'BF16' not supported");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8,
                    "missing field 'data_offsets'");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],"
                    "\"data_offsets\":[0,8]}}",
                    8, "repeated");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
                    "[0,8]},\"x\":{\"dtype\":\"F32\",\"shape\":[0],"
                    "\"data_offsets\":[8,8]}}",
                    8, "appears twice");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"shape\":[2,],"
                    "\"data_offsets\":[0,8]}}",
                    8, "trailing comma");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"shape\":[-2],"
                    "\"data_offsets\":[0,8]}}",
                    8, "non-negative integer");
    expect_st_error("{\"x\":{\"dtype\":\"F32\",\"shape\":[2.0],"
                    "\"data_offsets\":[0,8]}}",
                    8, "non-negative integer");
    expect_st_error("{\"a\":1} x", 0, "bad JSON header");
    expect_st_error("{\"__metadata__\":[1]}", 0, "not an object");
    expect_st_error("{\"__metadata__\":{\"k\":\"\\q\"}}", 0, "bad escape");
    expect_st_error("{\"__metadata__\":{\"k\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]"
                    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
                    0, "nested too deeply");
    expect_st_error("not json", 0, "bad JSON header");

    /* Header length beyond the end of the file. */
    unsigned char big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
    write_bytes(tmp_path("big.st"), big, sizeof big);
    assert_null(kiln_safetensors_read(tmp_path("big.st")));
    assert_error_has("header length 65535 larger than the file (16 bytes)");
}

/* ------------------------------------------------------------ writes */

static void test_failed_writes_keep_target(void **state)
{
    (void)state;
    kiln_tensor_list *l = sample_list();
    assert_int_equal(kiln_npz_write(tmp_path("nodir/x.npz"), l, 0),
                     KILN_ERR_IO);
    assert_error_has("cannot create temporary file");
    assert_int_equal(kiln_safetensors_write(tmp_path("nodir/x.st"), l),
                     KILN_ERR_IO);
    assert_error_has("No such file or directory");
    assert_int_equal(count_entries(0), 0);

    const char *p = tmp_path("keep.bin");
    const char old[] = "the previous checkpoint";
    write_bytes(p, old, sizeof old);
    /* The second member fails after the archive is under way. */
    char name[1100];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    kiln_tensor_list_add(l, name, kiln_tensor_new(KILN_F32, KILN_SHAPE(1)));
    assert_int_equal(kiln_npz_write(p, l, 1), KILN_ERR_IO);
    assert_error_has("too long");
    assert_int_equal(kiln_safetensors_write(p, l), KILN_ERR_IO);
    kiln_tensor_list_free(l);
    l = kiln_tensor_list_new();
    kiln_tensor_list_add(l, "__metadata__",
                         kiln_tensor_new(KILN_F32, KILN_SHAPE(1)));
    assert_int_equal(kiln_safetensors_write(p, l), KILN_ERR_IO);
    assert_error_has("reserved");
    size_t n;
    unsigned char *b = read_bytes(p, &n);
    assert_int_equal(n, sizeof old);
    assert_memory_equal(b, old, sizeof old);
    assert_int_equal(count_entries(0), 1); /* no temporary file left */
    free(b);
    assert_int_equal(kiln_npz_write(NULL, l, 0), KILN_ERR_ARG);
    assert_int_equal(kiln_safetensors_write(p, NULL), KILN_ERR_ARG);
    kiln_tensor_list_free(l);
}

/* numpy reading what Kiln writes, when this machine has it. */
static void test_numpy_reads_kiln(void **state)
{
    (void)state;
    if (access("/usr/bin/python3", X_OK) != 0 ||
        system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0)
        skip();
    kiln_tensor_list *l = sample_list();
    assert_int_equal(kiln_npz_write(tmp_path("py0.npz"), l, 0), KILN_OK);
    assert_int_equal(kiln_npz_write(tmp_path("py1.npz"), l, 1), KILN_OK);
    assert_int_equal(kiln_safetensors_write(tmp_path("py.st"), l), KILN_OK);
    kiln_tensor_list_free(l);
    const char *script =
        "import json, struct, sys\n"
        "import numpy as np\n"
        "d = sys.argv[1]\n"
        "w = (np.arange(12, dtype=np.float32) * 0.25 - 1.5).reshape(3, 4)\n"
        "w.flat[:4] = [-0.0, np.inf, np.nan, 1e-40]\n"
        "y = np.array([-2**31, -1, 0, 1, 2**31 - 1], np.int32)\n"
        "def check(get):\n"
        "    assert np.array_equal(get('layer1/W'), w, equal_nan=True)\n"
        "    assert np.signbit(get('layer1/W').flat[0])\n"
        "    assert get('layer1/W').dtype == np.float32\n"
        "    assert np.array_equal(get('labels'), y)\n"
        "    assert get('labels').dtype == np.int32\n"
        "    assert get('step').shape == () and get('step') == 42.5\n"
        "    assert get('empty').shape == (0, 7)\n"
        "for f in ('py0.npz', 'py1.npz'):\n"
        "    z = np.load(d + '/' + f)\n"
        "    assert list(z.keys()) == ['layer1/W', 'labels', 'step', 'empty']\n"
        "    check(lambda k: z[k])\n"
        "raw = open(d + '/py.st', 'rb').read()\n"
        "n = struct.unpack('<Q', raw[:8])[0]\n"
        "h = json.loads(raw[8:8 + n])\n"
        "def st(k):\n"
        "    e = h[k]; b, x = e['data_offsets']\n"
        "    dt = {'F32': '<f4', 'I32': '<i4'}[e['dtype']]\n"
        "    return np.frombuffer(raw[8 + n + b:8 + n + x], "
        "dt).reshape(e['shape'])\n"
        "check(st)\n";
    write_bytes(tmp_path("check.py"), script, strlen(script));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", tmp_path("check.py"),
             tmp_dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_list_basics, clean_dir),
        cmocka_unit_test_teardown(test_npz_roundtrip_stored, clean_dir),
        cmocka_unit_test_teardown(test_npz_roundtrip_compressed, clean_dir),
        cmocka_unit_test_teardown(test_safetensors_roundtrip, clean_dir),
        cmocka_unit_test_teardown(test_empty_list_roundtrip, clean_dir),
        cmocka_unit_test_teardown(test_write_wrapped, clean_dir),
        cmocka_unit_test_teardown(test_numpy_plain, clean_dir),
        cmocka_unit_test_teardown(test_numpy_compressed, clean_dir),
        cmocka_unit_test_teardown(test_safetensors_reference, clean_dir),
        cmocka_unit_test_teardown(test_idx, clean_dir),
        cmocka_unit_test_teardown(test_file_info, clean_dir),
        cmocka_unit_test_teardown(test_missing_files, clean_dir),
        cmocka_unit_test_teardown(test_npz_truncated, clean_dir),
        cmocka_unit_test_teardown(test_npz_corrupted, clean_dir),
        cmocka_unit_test_teardown(test_npz_bad_members, clean_dir),
        cmocka_unit_test_teardown(test_idx_errors, clean_dir),
        cmocka_unit_test_teardown(test_safetensors_errors, clean_dir),
        cmocka_unit_test_teardown(test_failed_writes_keep_target, clean_dir),
        cmocka_unit_test_teardown(test_numpy_reads_kiln, clean_dir),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
