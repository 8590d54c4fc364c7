/* Readers against hostile files: headers that claim far more data than the
   file holds must fail before allocating it, files with very many entries
   must load in time linear in their size, and inputs the fuzzers in fuzz/
   found are replayed here. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiln.h"
#include "test_files.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* Many-entry files: the 4.7 MB safetensors file had 80k tensors. */
#define MANY 80000
/* Seconds of CPU time (not wall time, so that a busy machine does not fail
   the test), with room for unoptimised sanitizer builds; the quadratic
   readers took minutes. */
#ifdef UNDER_ASAN
#define MANY_SECONDS 8.0
#else
#define MANY_SECONDS 1.5
#endif

/* CPU time of this process, seconds. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void put_le16(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_le32(unsigned char *p, uint32_t v)
{
    put_le16(p, v & 0xffff);
    put_le16(p + 2, v >> 16);
}

static void put_be32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (24 - 8 * i));
}

/* The CRC-32 of gzip and zip, bit by bit. */
static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* A raw deflate stream of one stored block holding p[0..n) (n < 64 KiB):
   5 header bytes, then the bytes as they are. */
static size_t deflate_stored(unsigned char *out, const unsigned char *p,
                             size_t n)
{
    out[0] = 1; /* final block, stored */
    put_le16(out + 1, (uint32_t)n);
    put_le16(out + 3, (uint32_t)~n & 0xffff);
    memcpy(out + 5, p, n);
    return 5 + n;
}

/* Runs fn in a child process whose address space is capped at 1 GiB more
   than it uses now, so that a reader allocating what a header claims fails
   there (a successful lazy allocation would hide it).  The child's fn
   returns 0 when the reader behaved; its last error is passed back and
   printed on failure.  Under AddressSanitizer, whose shadow memory needs
   the address space, fn runs uncapped in the child. */
static void run_capped(int (*fn)(void))
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
#ifndef UNDER_ASAN
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (!f || fscanf(f, "%lu", &pages) != 1)
            _exit(3);
        fclose(f);
        rlim_t cap =
            (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)1 << 30);
        struct rlimit rl = {cap, cap};
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(3);
#endif
        int rc = fn();
        const char *msg = kiln_last_error();
        ssize_t w = write(fds[1], msg, strlen(msg));
        (void)w;
        _exit(rc);
    }
    close(fds[1]);
    char msg[1024] = "";
    size_t got = 0;
    ssize_t k;
    while (got < sizeof msg - 1 &&
           (k = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0)
        got += (size_t)k;
    msg[got] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("child failed (status 0x%x), last error: \"%s\"", status, msg);
}

/* ---------------------------------------------------------------- IDX */

/* 00 00 08 01, one dimension of 2^31, two data bytes: 10 bytes claiming
   2^31 elements, 8 GiB as f32. */
static const unsigned char idx_huge[10] = {0, 0, 8, 1, 0x80, 0, 0, 0, 'a', 'b'};

static int read_huge_idx(const char *name)
{
    double t0 = now();
    kiln_tensor *t = kiln_idx_read(tmp_path(name), KILN_F32);
    double dt = now() - t0;
    if (t || dt > 1.0)
        return 1;
    return strstr(kiln_last_error(),
                  "truncated: expected 2147483648 data bytes, got 2")
               ? 0
               : 2;
}

static int read_huge_idx_plain(void)
{
    return read_huge_idx("huge-idx");
}

static int read_huge_idx_gz(void)
{
    return read_huge_idx("huge-idx.gz");
}

static void test_idx_huge_claim_plain(void **state)
{
    (void)state;
    write_bytes(tmp_path("huge-idx"), idx_huge, sizeof idx_huge);
    run_capped(read_huge_idx_plain);
}

/* The same bytes gzip-compressed: the size is unknown before inflating, so
   the reader must grow its buffer with the data rather than trust it. */
static void test_idx_huge_claim_gzip(void **state)
{
    (void)state;
    unsigned char gz[64] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    size_t n = 10 + deflate_stored(gz + 10, idx_huge, sizeof idx_huge);
    put_le32(gz + n, crc32_of(idx_huge, sizeof idx_huge));
    put_le32(gz + n + 4, sizeof idx_huge);
    write_bytes(tmp_path("huge-idx.gz"), gz, n + 8);
    run_capped(read_huge_idx_gz);
}

/* A plain file still fails on its size before reading: a 3-dimension
   header over too few bytes names both counts. */
static int read_short_idx(void)
{
    if (kiln_idx_read(tmp_path("short-idx"), KILN_I32))
        return 1;
    return strstr(kiln_last_error(),
                  "truncated: expected 1000000000 data bytes, got 5")
               ? 0
               : 2;
}

static void test_idx_size_checked_first(void **state)
{
    (void)state;
    unsigned char b[4 + 12 + 5] = {0, 0, 8, 3};
    put_be32(b + 4, 1000);
    put_be32(b + 8, 1000);
    put_be32(b + 12, 1000);
    write_bytes(tmp_path("short-idx"), b, sizeof b);
    run_capped(read_short_idx);
}

/* A pipe has no size to check against: its data is read as it comes. */
static void test_idx_from_pipe(void **state)
{
    (void)state;
    static const unsigned char b[11] = {0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 255};
    int fds[2];
    char path[64];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], b, sizeof b), (ssize_t)sizeof b);
    close(fds[1]);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
    kiln_tensor *t = kiln_idx_read(path, KILN_F32);
    close(fds[0]);
    if (!t)
        fail_msg("%s", kiln_last_error());
    assert_int_equal(kiln_tensor_numel(t), 3);
    const float *v = kiln_tensor_f32(t);
    assert_true(v[0] == 7.0f && v[1] == 8.0f && v[2] == 255.0f);
    kiln_tensor_free(t);
}

/* ---------------------------------------------------------------- npz */

/* A zip archive of one deflated member "big.npy" whose directory claims
   4 GB: a '|u1' array of 4e9 elements (16 GB as i32), of which 16 bytes
   are really there. */
static size_t npz_huge_member(unsigned char *zip)
{
    static const char name[] = "big.npy";
    const size_t nlen = sizeof name - 1;
    unsigned char npy[128 + 16];
    const char *dict = "{'descr': '|u1', 'fortran_order': False, "
                       "'shape': (4000000000,), }";
    memcpy(npy, "\x93NUMPY\x01\x00", 8);
    put_le16(npy + 8, 118);
    memset(npy + 10, ' ', 118);
    memcpy(npy + 10, dict, strlen(dict));
    npy[127] = '\n';
    memset(npy + 128, 7, 16);
    unsigned char data[256];
    size_t clen = deflate_stored(data, npy, sizeof npy);
    uint32_t crc = crc32_of(npy, sizeof npy);
    uint32_t claimed = 128u + 4000000000u;
    unsigned char *p = zip;
    /* local file header */
    put_le32(p, 0x04034b50);
    put_le16(p + 4, 20);
    put_le16(p + 6, 0);
    put_le16(p + 8, 8);
    put_le32(p + 10, 0x00210000); /* 1980-01-01 00:00 */
    put_le32(p + 14, crc);
    put_le32(p + 18, (uint32_t)clen);
    put_le32(p + 22, claimed);
    put_le16(p + 26, (uint32_t)nlen);
    put_le16(p + 28, 0);
    memcpy(p + 30, name, nlen);
    p += 30 + nlen;
    memcpy(p, data, clen);
    p += clen;
    /* central directory */
    unsigned char *cd = p;
    put_le32(p, 0x02014b50);
    put_le16(p + 4, 20);
    put_le16(p + 6, 20);
    put_le16(p + 8, 0);
    put_le16(p + 10, 8);
    put_le32(p + 12, 0x00210000);
    put_le32(p + 16, crc);
    put_le32(p + 20, (uint32_t)clen);
    put_le32(p + 24, claimed);
    put_le16(p + 28, (uint32_t)nlen);
    memset(p + 30, 0, 12); /* extra, comment, disk, attributes */
    put_le32(p + 42, 0);   /* local header offset */
    memcpy(p + 46, name, nlen);
    p += 46 + nlen;
    /* end of central directory */
    put_le32(p, 0x06054b50);
    memset(p + 4, 0, 4);
    put_le16(p + 8, 1);
    put_le16(p + 10, 1);
    put_le32(p + 12, (uint32_t)(p - cd));
    put_le32(p + 16, (uint32_t)(cd - zip));
    put_le16(p + 20, 0);
    return (size_t)(p + 22 - zip);
}

static int read_huge_npz(void)
{
    double t0 = now();
    kiln_tensor_list *l = kiln_npz_read(tmp_path("huge.npz"));
    if (l || now() - t0 > 1.0)
        return 1;
    const char *msg = kiln_last_error();
    return strstr(msg, "member 'big.npy'") && strstr(msg, "truncated") ? 0 : 2;
}

static void test_npz_huge_member_claim(void **state)
{
    (void)state;
    unsigned char zip[512];
    write_bytes(tmp_path("huge.npz"), zip, npz_huge_member(zip));
    run_capped(read_huge_npz);
}

/* -------------------------------------------------------- safetensors */

static void write_st(const char *path, const char *json, const void *data,
                     size_t n)
{
    size_t h = strlen(json);
    unsigned char *b = malloc(8 + h + n);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, json, h);
    if (n)
        memcpy(b + 8 + h, data, n);
    write_bytes(path, b, 8 + h + n);
    free(b);
}

/* No tensors at all is a valid file (and used to hand qsort a NULL array). */
static void test_safetensors_no_tensors(void **state)
{
    (void)state;
    static const char *const headers[] = {
        "{}", "{}      ", "{\"__metadata__\":{\"format\":\"pt\"}}"};
    for (size_t i = 0; i < 3; i++) {
        write_st(tmp_path("empty.safetensors"), headers[i], NULL, 0);
        kiln_tensor_list *l =
            kiln_safetensors_read(tmp_path("empty.safetensors"));
        assert_non_null(l);
        assert_int_equal(kiln_tensor_list_count(l), 0);
        kiln_tensor_list_free(l);
        assert_int_equal(kiln_file_info(tmp_path("empty.safetensors"), stdout),
                         KILN_OK);
    }
    /* data nothing describes is still an error */
    write_st(tmp_path("empty.safetensors"), "{}", "abcd", 4);
    assert_null(kiln_safetensors_read(tmp_path("empty.safetensors")));
    assert_error_has("data section has 4 bytes but the tensors cover 0");
}

/* MANY one-element F32 tensors "t00000".."t79999", tensor i holding i;
   with dup set the last one reuses the first one's name. */
static void write_many_st(const char *path, int dup)
{
    size_t cap = (size_t)MANY * 80 + 64, n = 0;
    char *json = malloc(cap);
    float *data = malloc(MANY * sizeof *data);
    assert_non_null(json);
    assert_non_null(data);
    json[n++] = '{';
    for (int i = 0; i < MANY; i++) {
        data[i] = (float)i;
        n += (size_t)snprintf(json + n, cap - n,
                              "%s\"t%05d\":{\"dtype\":\"F32\",\"shape\":[1],"
                              "\"data_offsets\":[%d,%d]}",
                              i ? "," : "", dup && i == MANY - 1 ? 0 : i, 4 * i,
                              4 * i + 4);
    }
    json[n++] = '}';
    json[n] = '\0';
    write_st(path, json, data, MANY * sizeof *data);
    free(json);
    free(data);
}

static void test_safetensors_many_entries(void **state)
{
    (void)state;
    const char *p = tmp_path("many.safetensors");
    write_many_st(p, 0);
    double t0 = now();
    kiln_tensor_list *l = kiln_safetensors_read(p);
    double dt = now() - t0;
    assert_non_null(l);
    assert_int_equal(kiln_tensor_list_count(l), MANY);
    /* data order, and every name finds its own value */
    assert_string_equal(kiln_tensor_list_name(l, 12345), "t12345");
    for (int i = 0; i < MANY; i += 997) {
        char name[16];
        snprintf(name, sizeof name, "t%05d", i);
        kiln_tensor *t = kiln_tensor_list_find(l, name);
        assert_non_null(t);
        assert_true(kiln_tensor_f32(t)[0] == (float)i);
    }
    kiln_tensor_list_free(l);
    if (dt > MANY_SECONDS)
        fail_msg("%d tensors took %.2f s", MANY, dt);
    FILE *null = fopen("/dev/null", "w");
    assert_non_null(null);
    t0 = now();
    assert_int_equal(kiln_file_info(p, null), KILN_OK);
    dt = now() - t0;
    fclose(null);
    if (dt > MANY_SECONDS)
        fail_msg("kiln_file_info took %.2f s", dt);
}

static void test_safetensors_duplicate_among_many(void **state)
{
    (void)state;
    const char *p = tmp_path("dup.safetensors");
    write_many_st(p, 1);
    double t0 = now();
    assert_null(kiln_safetensors_read(p));
    double dt = now() - t0;
    assert_error_has("tensor 't00000' appears twice");
    if (dt > MANY_SECONDS)
        fail_msg("finding the duplicate took %.2f s", dt);
}

/* ------------------------------------------------- lists, npz and bin */

static kiln_tensor_list *many_list(void)
{
    kiln_tensor_list *l = kiln_tensor_list_new();
    assert_non_null(l);
    for (int i = 0; i < MANY; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        float v = (float)i;
        kiln_tensor *t = kiln_tensor_from_f32(KILN_SHAPE(1), &v);
        assert_non_null(t);
        assert_int_equal(kiln_tensor_list_add(l, name, t), KILN_OK);
    }
    return l;
}

static void test_tensor_list_many(void **state)
{
    (void)state;
    double t0 = now();
    kiln_tensor_list *l = many_list();
    kiln_tensor *dup = kiln_tensor_new(KILN_F32, KILN_SHAPE(1));
    assert_int_equal(kiln_tensor_list_add(l, "w4242", dup), KILN_ERR_ARG);
    assert_error_has("duplicate name 'w4242'");
    kiln_tensor_free(dup);
    for (int i = 0; i < MANY; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        assert_true(kiln_tensor_f32(kiln_tensor_list_find(l, name))[0] ==
                    (float)i);
        assert_string_equal(kiln_tensor_list_name(l, i), name);
    }
    assert_null(kiln_tensor_list_find(l, "w80000"));
    assert_null(kiln_tensor_list_find(l, ""));
    double dt = now() - t0;
    kiln_tensor_list_free(l);
    if (dt > MANY_SECONDS)
        fail_msg("%d adds and finds took %.2f s", MANY, dt);
}

static void read_many(kiln_tensor_list *(*read)(const char *), const char *p)
{
    double t0 = now();
    kiln_tensor_list *l = read(p);
    double dt = now() - t0;
    assert_non_null(l);
    assert_int_equal(kiln_tensor_list_count(l), MANY);
    assert_true(kiln_tensor_f32(kiln_tensor_list_find(l, "w79999"))[0] ==
                79999.0f);
    assert_string_equal(kiln_tensor_list_name(l, 31), "w31");
    kiln_tensor_list_free(l);
    if (dt > MANY_SECONDS)
        fail_msg("%s: %d tensors took %.2f s", p, MANY, dt);
}

static void test_npz_many_entries(void **state)
{
    (void)state;
    kiln_tensor_list *l = many_list();
    assert_int_equal(kiln_npz_write(tmp_path("many.npz"), l, 0), KILN_OK);
    kiln_tensor_list_free(l);
    read_many(kiln_npz_read, tmp_path("many.npz"));
}

static void test_bin_many_entries(void **state)
{
    (void)state;
    kiln_tensor_list *l = many_list();
    assert_int_equal(kiln_bin_write(tmp_path("many.bin"), l), KILN_OK);
    kiln_tensor_list_free(l);
    read_many(kiln_bin_read, tmp_path("many.bin"));
}

/* A session of MANY variables saved, then loaded into a new session (every
   variable created) and into the same one (every variable overwritten):
   each load looks every name up in the session. */
static void test_session_load_many(void **state)
{
    (void)state;
    const char *p = tmp_path("many-session.bin");
    double t0 = now();
    kiln_session *s = kiln_session_new(NULL);
    assert_non_null(s);
    for (int i = 0; i < MANY; i++) {
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        assert_int_equal(kiln_session_declare(s, name, KILN_F32, KILN_SHAPE(1),
                                              kiln_init_value(i), 1),
                         KILN_OK);
    }
    assert_int_equal(kiln_session_save(s, p), KILN_OK);
    kiln_session *t = kiln_session_new(NULL);
    assert_non_null(t);
    assert_int_equal(kiln_session_load(t, p), KILN_OK);
    assert_int_equal(kiln_session_load(s, p), KILN_OK);
    double dt = now() - t0;
    assert_int_equal(kiln_session_num_variables(t), MANY);
    assert_int_equal(kiln_session_num_variables(s), MANY);
    int k = kiln_session_find_variable(t, "v4321");
    assert_true(k >= 0);
    kiln_param_info info;
    assert_int_equal(kiln_session_variable_info(t, k, &info), KILN_OK);
    assert_string_equal(info.name, "v4321");
    assert_true(*(const float *)info.data == 4321.0f);
    assert_int_equal(kiln_session_find_variable(t, "v80000"), -1);
    kiln_session_free(t);
    kiln_session_free(s);
    if (dt > 2 * MANY_SECONDS)
        fail_msg("declaring, saving and loading %d variables took %.2f s", MANY,
                 dt);
}

/* ------------------------------------------------------------- setup */

/* An argument runs only the tests matching it (a cmocka pattern). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_huge_claim_plain),
        cmocka_unit_test(test_idx_huge_claim_gzip),
        cmocka_unit_test(test_idx_size_checked_first),
        cmocka_unit_test(test_idx_from_pipe),
        cmocka_unit_test(test_npz_huge_member_claim),
        cmocka_unit_test(test_safetensors_no_tensors),
        cmocka_unit_test(test_safetensors_many_entries),
        cmocka_unit_test(test_safetensors_duplicate_among_many),
        cmocka_unit_test(test_tensor_list_many),
        cmocka_unit_test(test_npz_many_entries),
        cmocka_unit_test(test_bin_many_entries),
        cmocka_unit_test(test_session_load_many),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
