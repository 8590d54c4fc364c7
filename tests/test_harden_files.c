/* Hardening of files and data (issue 9): atomic saves (long names,
   symlinks, stale temporaries, modes without umask), all-or-nothing
   session loads, validated data sets. */
#define _DEFAULT_SOURCE

#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiln.h"
#include "test_files.h"

/* The library's aligned_alloc and anonymous mmap (variable storage) go
   through here (-Wl,--wrap=aligned_alloc, --wrap=mmap): fail_alloc_in = n fails the n-th call. */
void *__real_aligned_alloc(size_t align, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);
static int fail_alloc_in;

void *__wrap_aligned_alloc(size_t align, size_t size)
{
    if (fail_alloc_in > 0 && --fail_alloc_in == 0)
        return NULL;
    return __real_aligned_alloc(align, size);
}

/* Variables are pages of their own (-Wl,--wrap=mmap): counted the same. */
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off)
{
    if (fd < 0 && fail_alloc_in > 0 && --fail_alloc_in == 0)
        return MAP_FAILED;
    return __real_mmap(addr, len, prot, flags, fd, off);
}

/* {"a": [1, 2, 3] f32, "b": [7, -8] i32} scaled by k */
static kiln_tensor_list *sample(float k)
{
    kiln_tensor_list *l = kiln_tensor_list_new();
    kiln_tensor *a = kiln_tensor_new(KILN_F32, KILN_SHAPE(3));
    kiln_tensor *b = kiln_tensor_new(KILN_I32, KILN_SHAPE(2));
    for (int i = 0; i < 3; i++)
        kiln_tensor_f32(a)[i] = k * (float)(i + 1);
    kiln_tensor_i32(b)[0] = (int32_t)(7 * k);
    kiln_tensor_i32(b)[1] = (int32_t)(-8 * k);
    assert_int_equal(kiln_tensor_list_add(l, "a", a), KILN_OK);
    assert_int_equal(kiln_tensor_list_add(l, "b", b), KILN_OK);
    return l;
}

/* The file at path holds sample(k). */
static void assert_holds(const char *path, float k)
{
    kiln_tensor_list *r = kiln_file_read(path);
    if (!r)
        fail_msg("%s", kiln_last_error());
    kiln_tensor *a = kiln_tensor_list_find(r, "a");
    kiln_tensor *b = kiln_tensor_list_find(r, "b");
    assert_non_null(a);
    assert_non_null(b);
    for (int i = 0; i < 3; i++)
        assert_true(kiln_tensor_f32(a)[i] == k * (float)(i + 1));
    assert_int_equal(kiln_tensor_i32(b)[1], (int32_t)(-8 * k));
    kiln_tensor_list_free(r);
}

static const char *const EXTS[] = {".npz", ".safetensors", ".bin"};

/* ------------------------------------------------------------ atomic saves */

/* 250 bytes is a legal name (NAME_MAX 255); the temporary file must not be
   longer than that. */
static void test_save_long_name(void **state)
{
    (void)state;
    for (int f = 0; f < 3; f++) {
        char name[256];
        size_t ext = strlen(EXTS[f]);
        memset(name, 'n', 250 - ext);
        strcpy(name + 250 - ext, EXTS[f]);
        assert_int_equal(strlen(name), 250);
        kiln_tensor_list *l = sample(1);
        if (kiln_file_write(tmp_path(name), l) != KILN_OK)
            fail_msg("%s: %s", EXTS[f], kiln_last_error());
        assert_holds(tmp_path(name), 1);
        /* and again over the existing file */
        kiln_tensor_list_free(l);
        l = sample(2);
        assert_int_equal(kiln_file_write(tmp_path(name), l), KILN_OK);
        assert_holds(tmp_path(name), 2);
        assert_int_equal(count_entries(1), 1);
        unlink(tmp_path(name));
        kiln_tensor_list_free(l);
    }
    /* a session checkpoint too */
    char name[256];
    memset(name, 'm', 246);
    strcpy(name + 246, ".npz");
    kiln_session *s = kiln_session_new(NULL);
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_ones(), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_save(s, tmp_path(name)), KILN_OK);
    assert_int_equal(count_entries(1), 1);
    unlink(tmp_path(name));
    kiln_session_free(s);
}

/* Saving through a symlink writes the file it points to; the link stays. */
static void test_save_through_symlink(void **state)
{
    (void)state;
    assert_int_equal(mkdir(tmp_path("sub"), 0700), 0);
    for (int f = 0; f < 3; f++) {
        char real[64], link1[64], link2[64], rel[64];
        snprintf(real, sizeof real, "sub/real%s", EXTS[f]);
        snprintf(link1, sizeof link1, "link1%s", EXTS[f]);
        snprintf(link2, sizeof link2, "link2%s", EXTS[f]);
        kiln_tensor_list *l1 = sample(1), *l3 = sample(3);
        assert_int_equal(kiln_file_write(tmp_path(real), l1), KILN_OK);
        assert_int_equal(chmod(tmp_path(real), 0640), 0);
        /* link2 -> link1 -> sub/real, both relative to their directory */
        assert_int_equal(symlink(real, tmp_path(link1)), 0);
        assert_int_equal(symlink(link1, tmp_path(link2)), 0);
        if (kiln_file_write(tmp_path(link2), l3) != KILN_OK)
            fail_msg("%s", kiln_last_error());
        struct stat st;
        assert_int_equal(lstat(tmp_path(link1), &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_int_equal(lstat(tmp_path(link2), &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_int_equal(lstat(tmp_path(real), &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0640); /* mode kept */
        assert_holds(tmp_path(real), 3);
        assert_holds(tmp_path(link2), 3);
        /* a dangling link creates its target */
        snprintf(rel, sizeof rel, "sub/new%s", EXTS[f]);
        unlink(tmp_path(link1));
        assert_int_equal(symlink(rel, tmp_path(link1)), 0);
        assert_int_equal(kiln_file_write(tmp_path(link1), l1), KILN_OK);
        assert_int_equal(lstat(tmp_path(link1), &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_holds(tmp_path(rel), 1);
        unlink(tmp_path(link1));
        unlink(tmp_path(link2));
        unlink(tmp_path(real));
        unlink(tmp_path(rel));
        kiln_tensor_list_free(l1);
        kiln_tensor_list_free(l3);
    }
    /* a link loop is an error, not a hang */
    assert_int_equal(symlink("loop_b", tmp_path("loop_a")), 0);
    assert_int_equal(symlink("loop_a", tmp_path("loop_b")), 0);
    kiln_tensor_list *l = sample(1);
    assert_int_not_equal(kiln_npz_write(tmp_path("loop_a"), l, 0), KILN_OK);
    assert_has(kiln_last_error(), "symbolic links");
    kiln_tensor_list_free(l);
    unlink(tmp_path("loop_a"));
    unlink(tmp_path("loop_b"));
    rmdir(tmp_path("sub"));
    assert_int_equal(count_entries(1), 0);
}

/* Our temporaries are ".<name>.<FNV-1a of name, 8 hex>.<6 random>.tmp". */
static void temp_name_of(char *out, size_t n, const char *name, const char *rnd)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    snprintf(out, n, ".%s.%08x.%s.tmp", name, (unsigned)h, rnd);
}

/* A killed save leaves its temporaries; the next save of the same target
   removes them, and nothing else. */
static void test_save_removes_stale_temporaries(void **state)
{
    (void)state;
    char ours[128], other[128], held[128];
    temp_name_of(ours, sizeof ours, "m.npz", "k1ll3d");
    temp_name_of(other, sizeof other, "n.npz", "k1ll3d");
    temp_name_of(held, sizeof held, "m.npz", "a11ve0");
    /* only our own pattern is ever removed: a user's files that merely
       look like temporaries (or earlier versions' names) are kept */
    const char *stale[] = {ours};
    const char *kept[] = {other,
                          "m.npz.tmp.notes.txt",
                          "mm.npz.tmp.Ab3dE9",
                          "m.npz.tmp.Ab3dE",
                          ".m.npz.tmp",
                          "m.npz.tmp.backup",
                          "m.npz.tmp.Ab3dE9.q2W3e4"};
    for (size_t i = 0; i < 1; i++)
        write_bytes(tmp_path(stale[i]), "partial", 7);
    for (size_t i = 0; i < 7; i++)
        write_bytes(tmp_path(kept[i]), "keep", 4);
    /* a temporary whose writer is alive (holds its lock) stays */
    write_bytes(tmp_path(held), "busy", 4);
    int fd = open(tmp_path(held), O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);

    kiln_tensor_list *l = sample(1);
    assert_int_equal(kiln_npz_write(tmp_path("m.npz"), l, 1), KILN_OK);
    for (size_t i = 0; i < 1; i++)
        if (access(tmp_path(stale[i]), F_OK) == 0)
            fail_msg("stale '%s' was not removed", stale[i]);
    for (size_t i = 0; i < 7; i++)
        if (access(tmp_path(kept[i]), F_OK) != 0)
            fail_msg("'%s' was removed", kept[i]);
    assert_int_equal(access(tmp_path(held), F_OK), 0);
    close(fd);
    /* once its writer is gone it is stale too, for every format */
    write_bytes(tmp_path(ours), "partial", 7);
    assert_int_equal(kiln_npz_write(tmp_path("m.npz"), l, 0), KILN_OK);
    assert_int_equal(access(tmp_path(held), F_OK), -1);
    assert_int_equal(access(tmp_path(ours), F_OK), -1);
    for (int f = 1; f < 3; f++) {
        char name[32], tmp[128];
        snprintf(name, sizeof name, "m%s", EXTS[f]);
        temp_name_of(tmp, sizeof tmp, name, "zz9zz9");
        write_bytes(tmp_path(tmp), "partial", 7);
        assert_int_equal(kiln_file_write(tmp_path(name), l), KILN_OK);
        assert_int_equal(access(tmp_path(tmp), F_OK), -1);
        unlink(tmp_path(name));
    }
    kiln_tensor_list_free(l);
    /* exactly the target and the files that are not its temporaries */
    assert_int_equal(count_entries(1), 1 + 7);
    unlink(tmp_path("m.npz"));
    for (size_t i = 0; i < 7; i++)
        unlink(tmp_path(kept[i]));
}

/* New files get 0666 less the umask, replaced files keep their mode, and
   the library never sets the umask (a process-wide race). */
static void test_save_modes(void **state)
{
    (void)state;
    mode_t old = umask(027);
    kiln_tensor_list *l = sample(1);
    for (int f = 0; f < 3; f++) {
        char name[32];
        snprintf(name, sizeof name, "mode%s", EXTS[f]);
        assert_int_equal(kiln_file_write(tmp_path(name), l), KILN_OK);
        struct stat st;
        assert_int_equal(stat(tmp_path(name), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_int_equal(umask(027), 027); /* untouched */
        assert_int_equal(chmod(tmp_path(name), 0604), 0);
        assert_int_equal(kiln_file_write(tmp_path(name), l), KILN_OK);
        assert_int_equal(stat(tmp_path(name), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0604);
        unlink(tmp_path(name));
    }
    kiln_tensor_list_free(l);
    umask(old);
}

static int source_calls_umask(const char *dir)
{
    DIR *d = opendir(dir);
    int found = 0;
    assert_non_null(d);
    for (struct dirent *ent; (ent = readdir(d));) {
        if (ent->d_name[0] == '.')
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, ent->d_name);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            found += source_calls_umask(p);
            continue;
        }
        FILE *f = fopen(p, "r");
        assert_non_null(f);
        char line[4096];
        while (fgets(line, sizeof line, f))
            if (strstr(line, "umask(")) {
                print_message("%s: %s", p, line);
                found++;
            }
        fclose(f);
    }
    closedir(d);
    return found;
}

static void test_no_umask_in_library(void **state)
{
    (void)state;
    assert_int_equal(source_calls_umask(KILN_SOURCE_DIR "/src"), 0);
}

/* A failed save leaves neither a temporary nor a changed target. */
static void test_failed_save_leaves_nothing(void **state)
{
    (void)state;
    kiln_tensor_list *l = sample(1);
    assert_int_equal(kiln_npz_write(tmp_path("t.npz"), l, 0), KILN_OK);
    kiln_tensor_list *bad = kiln_tensor_list_new();
    kiln_tensor *h = kiln_tensor_new(KILN_F32, KILN_SHAPE(1));
    char name[1100];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    assert_int_equal(kiln_tensor_list_add(bad, name, h), KILN_OK);
    for (int f = 0; f < 3; f++) {
        char path[32];
        snprintf(path, sizeof path, "t%s", EXTS[f]);
        if (f)
            assert_int_equal(kiln_file_write(tmp_path(path), l), KILN_OK);
        assert_int_not_equal(kiln_file_write(tmp_path(path), bad), KILN_OK);
        assert_holds(tmp_path(path), 1);
        assert_int_equal(count_entries(1), f + 1);
    }
    for (int f = 0; f < 3; f++) {
        char path[32];
        snprintf(path, sizeof path, "t%s", EXTS[f]);
        unlink(tmp_path(path));
    }
    /* a directory is not a file name */
    assert_int_not_equal(kiln_npz_write(tmp_dir, l, 0), KILN_OK);
    assert_int_equal(count_entries(1), 0);
    kiln_tensor_list_free(bad);
    kiln_tensor_list_free(l);
}

/* ------------------------------------------------------------ session load */

static void read_var(kiln_session *s, const char *name, float *out, int n)
{
    kiln_tensor *t = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(n), out);
    assert_int_equal(kiln_variable_read(s, name, t), KILN_OK);
    kiln_tensor_free(t);
}

/* Memory runs out after the first new variable: nothing changes. */
static void test_session_load_all_or_nothing(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    float wv[2] = {5, 6}, av[3] = {1, 2, 3}, bv[2] = {-1, -2};
    assert_int_equal(kiln_tensor_list_add(
                         l, "w", kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), wv)),
                     KILN_OK);
    assert_int_equal(kiln_tensor_list_add(
                         l, "a", kiln_tensor_wrap(KILN_F32, KILN_SHAPE(3), av)),
                     KILN_OK);
    assert_int_equal(kiln_tensor_list_add(
                         l, "b", kiln_tensor_wrap(KILN_F32, KILN_SHAPE(2), bv)),
                     KILN_OK);
    for (int f = 0; f < 3; f++) {
        char path[32];
        snprintf(path, sizeof path, "ckpt%s", EXTS[f]);
        assert_int_equal(kiln_file_write(tmp_path(path), l), KILN_OK);
        kiln_session *s = kiln_session_new(NULL);
        float init[2] = {1, 2}, got[3];
        assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                              kiln_init_values(init), 1),
                         KILN_OK);
        kiln_session *twin = kiln_session_new(NULL);
        /* the first new variable's storage succeeds, the second fails */
        fail_alloc_in = 2;
        assert_int_equal(kiln_session_load(s, tmp_path(path)), KILN_ERR_MEMORY);
        fail_alloc_in = 0;
        assert_has(kiln_session_error(s), "out of memory");
        assert_int_equal(kiln_session_num_variables(s), 1);
        read_var(s, "w", got, 2);
        assert_true(got[0] == 1 && got[1] == 2);
        /* the RNG was not restored either: it draws as a fresh one */
        assert_true(kiln_rng_uniform(kiln_session_rng(s)) ==
                    kiln_rng_uniform(kiln_session_rng(twin)));
        /* and with memory the same load succeeds */
        assert_int_equal(kiln_session_load(s, tmp_path(path)), KILN_OK);
        assert_int_equal(kiln_session_num_variables(s), 3);
        read_var(s, "w", got, 2);
        assert_true(got[0] == 5 && got[1] == 6);
        read_var(s, "a", got, 3);
        assert_true(got[0] == 1 && got[1] == 2 && got[2] == 3);
        read_var(s, "b", got, 2);
        assert_true(got[0] == -1 && got[1] == -2);
        kiln_session_free(twin);
        kiln_session_free(s);
        unlink(tmp_path(path));
    }
    kiln_tensor_list_free(l);
}

/* A mismatched shape anywhere in the file: nothing changes either. */
static void test_session_load_mismatch_changes_nothing(void **state)
{
    (void)state;
    kiln_tensor_list *l = kiln_tensor_list_new();
    float av[3] = {1, 2, 3}, wv[3] = {5, 6, 7};
    assert_int_equal(kiln_tensor_list_add(
                         l, "a", kiln_tensor_wrap(KILN_F32, KILN_SHAPE(3), av)),
                     KILN_OK);
    assert_int_equal(kiln_tensor_list_add(
                         l, "w", kiln_tensor_wrap(KILN_F32, KILN_SHAPE(3), wv)),
                     KILN_OK);
    assert_int_equal(kiln_npz_write(tmp_path("mm.npz"), l, 0), KILN_OK);
    kiln_session *s = kiln_session_new(NULL);
    float init[2] = {1, 2}, got[2];
    assert_int_equal(kiln_session_declare(s, "w", KILN_F32, KILN_SHAPE(2),
                                          kiln_init_values(init), 1),
                     KILN_OK);
    assert_int_equal(kiln_session_load(s, tmp_path("mm.npz")), KILN_ERR_SHAPE);
    assert_has(kiln_session_error(s), "'w'");
    assert_int_equal(kiln_session_num_variables(s), 1);
    read_var(s, "w", got, 2);
    assert_true(got[0] == 1 && got[1] == 2);
    kiln_session_free(s);
    kiln_tensor_list_free(l);
    unlink(tmp_path("mm.npz"));
}

/* ------------------------------------------------------------ data sets */

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* An IDX file of unsigned bytes with dims d[0..nd), pixel i = i % 251. */
static void write_idx(const char *name, int nd, const uint32_t *d,
                      const unsigned char *values)
{
    size_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= d[i];
    unsigned char *b = malloc(4 + 4 * (size_t)nd + n + 1);
    b[0] = b[1] = 0;
    b[2] = 8;
    b[3] = (unsigned char)nd;
    for (int i = 0; i < nd; i++)
        put_be32(b + 4 + 4 * i, d[i]);
    for (size_t i = 0; i < n; i++)
        b[4 + 4 * nd + i] = values ? values[i] : (unsigned char)(i % 251);
    write_bytes(tmp_path(name), b, 4 + 4 * (size_t)nd + n);
    free(b);
}

static void write_labels(const char *name, int n, const unsigned char *v)
{
    uint32_t d[1] = {(uint32_t)n};
    write_idx(name, 1, d, v);
}

static void write_images(const char *name, uint32_t n, uint32_t rows,
                         uint32_t cols)
{
    uint32_t d[3] = {n, rows, cols};
    write_idx(name, 3, d, NULL);
}

static void test_dataset_load_valid(void **state)
{
    (void)state;
    write_images("x", 3, 2, 5);
    unsigned char lab[3] = {0, 6, 2};
    write_labels("y", 3, lab);
    kiln_dataset d;
    assert_int_equal(
        kiln_dataset_load(&d, tmp_path("x"), tmp_path("y"), 7, 0.5f), KILN_OK);
    assert_int_equal(d.count, 3);
    assert_int_equal(d.rows, 2);
    assert_int_equal(d.cols, 5);
    assert_int_equal(d.classes, 7);
    kiln_shape xs = kiln_tensor_shape(d.images);
    assert_int_equal(xs.ndim, 2);
    assert_int_equal(xs.d[0], 3);
    assert_int_equal(xs.d[1], 10);
    /* pixel 13 (image 1, pixel 3) is 13, scaled by 0.5 */
    assert_true(kiln_tensor_f32(d.images)[13] == 6.5f);
    assert_int_equal(kiln_tensor_i32(d.labels)[1], 6);
    kiln_dataset_free(&d);
    assert_null(d.images);
    kiln_dataset_free(&d); /* twice is fine */
    /* [count, features] images too */
    uint32_t flat[2] = {3, 4};
    write_idx("x2", 2, flat, NULL);
    assert_int_equal(kiln_dataset_load(&d, tmp_path("x2"), tmp_path("y"), 7, 1),
                     KILN_OK);
    assert_int_equal(d.rows * d.cols, 4);
    kiln_dataset_free(&d);
}

static void expect_load_error(const char *images, const char *labels,
                              int classes, kiln_status st, const char *phrase)
{
    kiln_dataset d;
    assert_int_equal(
        kiln_dataset_load(&d, tmp_path(images), tmp_path(labels), classes, 1),
        st);
    assert_has(kiln_last_error(), phrase);
    assert_null(d.images);
    assert_null(d.labels);
}

static void test_dataset_load_errors(void **state)
{
    (void)state;
    write_images("x", 3, 2, 2);
    unsigned char lab[4] = {0, 9, 10, 1};
    /* a label outside [0, classes): file, index and value named */
    write_labels("y", 3, lab);
    char want[600];
    snprintf(want, sizeof want, "%s: label 10 at index 2 is outside [0, 10)",
             tmp_path("y"));
    expect_load_error("x", "y", 10, KILN_ERR_IO, want);
    expect_load_error("x", "y", 9, KILN_ERR_IO, "label 9 at index 1");
    /* counts that differ */
    write_labels("y4", 4, lab);
    expect_load_error("x", "y4", 11, KILN_ERR_IO, "3 images but 4 labels");
    /* an empty set */
    write_images("x0", 0, 2, 2);
    write_labels("y0", 0, lab);
    expect_load_error("x0", "y0", 10, KILN_ERR_IO, "no images");
    /* images of no size */
    write_images("xz", 3, 2, 0);
    expect_load_error("xz", "y", 11, KILN_ERR_IO, "size zero");
    /* labels that are not a vector, images that are one */
    uint32_t d2[2] = {3, 1};
    write_idx("y2", 2, d2, lab);
    expect_load_error("x", "y2", 11, KILN_ERR_IO, "labels are [count]");
    expect_load_error("y", "y", 11, KILN_ERR_IO, "images are");
    expect_load_error("x", "missing", 11, KILN_ERR_IO, "cannot open");
    expect_load_error("x", "y", 0, KILN_ERR_ARG, "classes");
    assert_int_equal(kiln_dataset_load(NULL, "a", "b", 2, 1), KILN_ERR_ARG);
}

static void test_dataset_match(void **state)
{
    (void)state;
    unsigned char lab[2] = {1, 0};
    write_images("a", 2, 4, 4);
    write_images("b", 2, 4, 5);
    write_images("c", 2, 5, 4);
    write_labels("l", 2, lab);
    kiln_dataset a, b, c, a2;
    assert_int_equal(kiln_dataset_load(&a, tmp_path("a"), tmp_path("l"), 2, 1),
                     KILN_OK);
    assert_int_equal(kiln_dataset_load(&b, tmp_path("b"), tmp_path("l"), 2, 1),
                     KILN_OK);
    assert_int_equal(kiln_dataset_load(&c, tmp_path("c"), tmp_path("l"), 2, 1),
                     KILN_OK);
    assert_int_equal(kiln_dataset_load(&a2, tmp_path("a"), tmp_path("l"), 3, 1),
                     KILN_OK);
    assert_int_equal(kiln_dataset_match(&a, &a), KILN_OK);
    assert_int_equal(kiln_dataset_match(&a, &b), KILN_ERR_SHAPE);
    assert_has(kiln_last_error(), "has 4x5 images but the training set");
    /* same pixel count, other shape: still a different data set */
    kiln_dataset d;
    write_images("d", 2, 2, 8);
    assert_int_equal(kiln_dataset_load(&d, tmp_path("d"), tmp_path("l"), 2, 1),
                     KILN_OK);
    assert_int_equal(kiln_dataset_match(&a, &d), KILN_ERR_SHAPE);
    assert_int_equal(kiln_dataset_match(&a, &c), KILN_ERR_SHAPE);
    assert_int_equal(kiln_dataset_match(&a, &a2), KILN_ERR_SHAPE);
    assert_has(kiln_last_error(), "3 classes");
    assert_int_equal(kiln_dataset_match(&a, NULL), KILN_ERR_ARG);
    kiln_dataset_free(&a);
    kiln_dataset_free(&b);
    kiln_dataset_free(&c);
    kiln_dataset_free(&d);
    kiln_dataset_free(&a2);
}

/* kiln_mnist_load shares the checks: MNIST labels are in [0, 10). */
static void test_mnist_load_checks_labels(void **state)
{
    (void)state;
    assert_int_equal(mkdir(tmp_path("mn"), 0700), 0);
    write_images("mn/t10k-images-idx3-ubyte", 2, 3, 3);
    unsigned char lab[2] = {3, 12};
    write_labels("mn/t10k-labels-idx1-ubyte", 2, lab);
    kiln_tensor *x = NULL, *y = NULL;
    assert_int_equal(kiln_mnist_load(tmp_path("mn"), 0, 1, &x, &y),
                     KILN_ERR_IO);
    assert_has(kiln_last_error(), "label 12 at index 1 is outside [0, 10)");
    assert_null(x);
    assert_null(y);
    lab[1] = 9;
    write_labels("mn/t10k-labels-idx1-ubyte", 2, lab);
    assert_int_equal(kiln_mnist_load(tmp_path("mn"), 0, 1, &x, &y), KILN_OK);
    assert_int_equal(kiln_tensor_shape(x).d[1], 9);
    kiln_tensor_free(x);
    kiln_tensor_free(y);
}

/* The pre-flight check of an output path writes nothing. */
static void test_file_check_writable(void **state)
{
    (void)state;
    int before = count_entries(1);
    assert_int_equal(kiln_file_check_writable(tmp_path("new.npz")), KILN_OK);
    assert_int_equal(count_entries(1), before);
    assert_int_equal(kiln_file_check_writable(tmp_path("no/dir/m.npz")),
                     KILN_ERR_IO);
    assert_has(kiln_last_error(), "does not exist");
    write_bytes(tmp_path("plain"), "x", 1);
    assert_int_equal(kiln_file_check_writable(tmp_path("plain/m.npz")),
                     KILN_ERR_IO);
    assert_has(kiln_last_error(), "is not a directory");
    unlink(tmp_path("plain"));
    assert_int_equal(kiln_file_check_writable(tmp_dir), KILN_ERR_IO);
    assert_has(kiln_last_error(), "is a directory");
    assert_int_equal(symlink("mn", tmp_path("dirlink")), 0);
    assert_int_equal(kiln_file_check_writable(tmp_path("dirlink")),
                     KILN_ERR_IO);
    unlink(tmp_path("dirlink"));
    assert_int_equal(kiln_file_check_writable(NULL), KILN_ERR_ARG);
}

/* A target that exists but is not a regular file (here a FIFO, as a
   device like /dev/full would be) is refused by every writer and by the
   check, directly or through a symlink, and stays what it was: the atomic
   rename would have replaced it with a file. */
static void test_save_refuses_special_files(void **state)
{
    (void)state;
    assert_int_equal(mkfifo(tmp_path("fifo"), 0600), 0);
    assert_int_equal(symlink("fifo", tmp_path("fifolink")), 0);
    const char *targets[2] = {"fifo", "fifolink"};
    for (int t = 0; t < 2; t++) {
        char path[256];
        snprintf(path, sizeof path, "%s", tmp_path(targets[t]));
        for (int f = 0; f < 3; f++) {
            char named[300];
            kiln_tensor_list *l = sample(1);
            /* the extension decides the format: give the FIFO one by a
               link of that name */
            snprintf(named, sizeof named, "%s%s", path, EXTS[f]);
            assert_int_equal(symlink(targets[t], named), 0);
            assert_int_equal(kiln_file_write(named, l), KILN_ERR_IO);
            assert_has(kiln_last_error(), "is not a regular file");
            unlink(named);
            kiln_tensor_list_free(l);
        }
        assert_int_equal(kiln_file_check_writable(path), KILN_ERR_IO);
        assert_has(kiln_last_error(), "is not a regular file");
        struct stat st;
        assert_int_equal(stat(tmp_path("fifo"), &st), 0);
        assert_true(S_ISFIFO(st.st_mode));
    }
    unlink(tmp_path("fifolink"));
    unlink(tmp_path("fifo"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_save_long_name),
        cmocka_unit_test(test_save_through_symlink),
        cmocka_unit_test(test_save_removes_stale_temporaries),
        cmocka_unit_test(test_save_modes),
        cmocka_unit_test(test_no_umask_in_library),
        cmocka_unit_test(test_failed_save_leaves_nothing),
        cmocka_unit_test(test_session_load_all_or_nothing),
        cmocka_unit_test(test_session_load_mismatch_changes_nothing),
        cmocka_unit_test(test_dataset_load_valid),
        cmocka_unit_test(test_dataset_load_errors),
        cmocka_unit_test(test_dataset_match),
        cmocka_unit_test(test_mnist_load_checks_labels),
        cmocka_unit_test(test_file_check_writable),
        cmocka_unit_test(test_save_refuses_special_files),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
