/* .npz: a zip archive (libzip) of .npy members, as np.savez writes it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "io/atomic_file.h"
#include "io/formats.h"
#include "io/npy.h"
#include "kiln.h"

#ifdef KILN_HAVE_LIBZIP
#include <zip.h>

/* ------------------------------------------------------------ reading */

static int64_t zip_reader_read(void *ctx, void *buf, size_t n, io_err *e)
{
    zip_file_t *zf = ctx;
    zip_int64_t k = zip_fread(zf, buf, n);
    if (k < 0)
        return io_fail(e, "read failed: %s", zip_file_strerror(zf));
    return k;
}

/* "W0.npy" -> "W0"; members that are not .npy arrays are an error, as
   np.load would hand them back as raw bytes. */
static int member_tensor_name(const char *member, char *name, size_t cap,
                              io_err *e)
{
    size_t n = strlen(member);
    if (n <= 4 || strcmp(member + n - 4, ".npy") != 0)
        return io_fail(e, "member '%s' is not a .npy array", member);
    if (n - 4 >= cap)
        return io_fail(e, "member name '%s' is too long", member);
    memcpy(name, member, n - 4);
    name[n - 4] = '\0';
    return 0;
}

/* The zip directory's size for the member must match the header's shape
   before anything is allocated from that shape. */
static int check_member_size(const npy_header *h, zip_uint64_t size, io_err *e)
{
    uint64_t want = (uint64_t)h->numel * io_elem_size(h->elem);
    uint64_t have = size - (uint64_t)h->header_bytes;
    if (size < (uint64_t)h->header_bytes || have != want) {
        char s[128];
        return io_fail(e,
                       "truncated or size mismatch: shape %s of %s needs "
                       "%" PRIu64 " data bytes, the member has %" PRIu64,
                       kiln_shape_str(h->shape, s, sizeof s),
                       io_elem_name(h->elem), want,
                       size < (uint64_t)h->header_bytes ? 0 : have);
    }
    return 0;
}

static int load_member_data(io_reader *r, const npy_header *h, const char *name,
                            kiln_tensor_list *out, io_err *e)
{
    /* The member's size is only the zip directory's word, which a deflated
       member cannot back up until it is inflated: grow as data arrives. */
    kiln_tensor *t = io_read_tensor_growing(
        r, h->elem, io_elem_natural(h->elem), h->shape, e);
    if (!t)
        return -1;
    /* Reading to the end makes libzip verify the member's CRC. */
    if (io_expect_end(r, h->numel * (int64_t)io_elem_size(h->elem), e)) {
        kiln_tensor_free(t);
        return -1;
    }
    return io_list_add(out, name, t, e);
}

static int load_member(zip_t *za, zip_uint64_t i, kiln_tensor_list *out,
                       io_info_fn fn, void *ctx, io_err *e)
{
    zip_stat_t st;
    char name[IO_NAME_MAX + 1];
    if (zip_stat_index(za, i, 0, &st) != 0)
        return io_fail(e, "cannot stat member %" PRIu64 ": %s", (uint64_t)i,
                       zip_strerror(za));
    if (member_tensor_name(st.name, name, sizeof name, e))
        return -1;
    zip_file_t *zf = zip_fopen_index(za, i, 0);
    if (!zf)
        return io_fail(e, "member '%s': cannot open: %s", st.name,
                       zip_strerror(za));
    io_reader r = {zip_reader_read, zf};
    npy_header h;
    int rc = npy_read_header(&r, &h, e) || check_member_size(&h, st.size, e);
    if (!rc && out)
        rc = load_member_data(&r, &h, name, out, e);
    else if (!rc && fn)
        fn(ctx, name, h.elem, h.shape);
    zip_fclose(zf);
    if (rc)
        return io_prefix(e, "member '%s': ", st.name);
    return 0;
}

/* The archive is mapped and read through a memory source: libzip on a file
   descriptor seeks and stats once or more per member, which made an
   archive of 80k small arrays take seconds. */
typedef struct npz_archive {
    zip_t *za;
    void *map;
    size_t size;
} npz_archive;

static void close_archive(npz_archive *a)
{
    zip_discard(a->za);
    if (a->map)
        munmap(a->map, a->size);
}

static int map_file(const char *path, npz_archive *a, io_err *e)
{
    struct stat st;
    int fd = io_open_fd(path, e);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return io_fail(e, "cannot stat: %s", strerror(errno));
    }
    a->size = (size_t)st.st_size;
    if (a->size > 0) {
        a->map = mmap(NULL, a->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (a->map == MAP_FAILED) {
            a->map = NULL;
            close(fd);
            return io_fail(e, "cannot map: %s", strerror(errno));
        }
    }
    close(fd);
    return 0;
}

static int open_archive(const char *path, npz_archive *a, io_err *e)
{
    memset(a, 0, sizeof *a);
    if (map_file(path, a, e))
        return -1;
    zip_error_t ze;
    zip_error_init(&ze);
    /* libzip would open an empty source as an archive with no members. */
    if (a->size == 0)
        zip_error_set(&ze, ZIP_ER_NOZIP, 0);
    zip_source_t *src =
        a->size ? zip_source_buffer_create(a->map, a->size, 0, &ze) : NULL;
    if (src)
        a->za = zip_open_from_source(src, ZIP_CHECKCONS | ZIP_RDONLY, &ze);
    if (!a->za) {
        io_fail(e, "not a valid zip archive: %s", zip_error_strerror(&ze));
        zip_source_free(src);
        if (a->map)
            munmap(a->map, a->size);
    }
    zip_error_fini(&ze);
    return a->za ? 0 : -1;
}

int npz_load(const char *path, kiln_tensor_list *out, io_info_fn fn, void *ctx,
             io_err *e)
{
    npz_archive a;
    if (open_archive(path, &a, e))
        return -1;
    zip_int64_t n = zip_get_num_entries(a.za, 0);
    int rc = 0;
    for (zip_int64_t i = 0; i < n && !rc; i++)
        rc = load_member(a.za, (zip_uint64_t)i, out, fn, ctx, e);
    close_archive(&a);
    return rc;
}

kiln_tensor_list *kiln_npz_read(const char *path)
{
    return io_read_list("kiln_npz_read", path, npz_load);
}

/* ------------------------------------------------------------ writing */

/* What must outlive zip_close: libzip reads the sources only then. */
typedef struct npz_pending {
    unsigned char (*headers)[NPY_HEADER_MAX];
    void **swapped; /* byte-swapped copies, big-endian hosts only */
    int count;
} npz_pending;

static void pending_free(npz_pending *p)
{
    for (int i = 0; i < p->count && p->swapped; i++)
        free(p->swapped[i]);
    free(p->swapped);
    free(p->headers);
}

/* One member: the header and the tensor's own bytes as two fragments, so
   the data is not copied. */
static int add_member(zip_t *za, const char *name, const kiln_tensor *t,
                      npz_pending *p, int i, int compress, io_err *e)
{
    io_elem el;
    if (io_elem_of_dtype(kiln_tensor_dtype(t), &el, e))
        return io_prefix(e, "tensor '%s': ", name);
    const void *data = io_le_data(t, &p->swapped[i], e);
    if (!data)
        return -1;
    zip_buffer_fragment_t frag[2];
    frag[0].data = p->headers[i];
    frag[0].length = npy_format_header(p->headers[i], el, kiln_tensor_shape(t));
    frag[1].data = (zip_uint8_t *)data;
    frag[1].length = (zip_uint64_t)kiln_tensor_numel(t) * io_elem_size(el);
    char member[IO_NAME_MAX + 8];
    if (strlen(name) > IO_NAME_MAX)
        return io_fail(e, "tensor name '%.40s...' is too long", name);
    snprintf(member, sizeof member, "%s.npy", name);
    zip_source_t *src =
        zip_source_buffer_fragment(za, frag, frag[1].length ? 2 : 1, 0);
    zip_int64_t idx = src ? zip_file_add(za, member, src, 0) : -1;
    if (idx < 0) {
        zip_source_free(src);
        return io_fail(e, "cannot add '%s': %s", member, zip_strerror(za));
    }
    if (zip_set_file_compression(za, (zip_uint64_t)idx,
                                 compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0))
        return io_fail(e, "cannot set compression: %s", zip_strerror(za));
    return 0;
}

/* libzip deletes an archive with no members on close; numpy writes the
   bare end-of-central-directory record instead, and so do we. */
static int write_empty_zip(io_atomic *a, io_err *e)
{
    static const unsigned char eocd[22] = {'P', 'K', 5, 6};
    if (write(a->fd, eocd, sizeof eocd) != (ssize_t)sizeof eocd)
        return io_fail(e, "cannot write '%s': %s", a->tmp, strerror(errno));
    return 0;
}

/* libzip writes the archive through this source straight into the
   temporary file of the atomic save: it names no file and makes no
   temporary file of its own (which a kill would leave behind), and calls
   no umask. */
typedef struct fd_sink {
    int fd;
    zip_error_t err;
} fd_sink;

static zip_int64_t sink_fail(fd_sink *s, int code, int sys)
{
    zip_error_set(&s->err, code, sys);
    return -1;
}

static zip_int64_t sink_write(fd_sink *s, const char *p, zip_uint64_t n)
{
    for (zip_uint64_t done = 0; done < n;) {
        ssize_t k = write(s->fd, p + done, (size_t)(n - done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return sink_fail(s, ZIP_ER_WRITE, k < 0 ? errno : ENOSPC);
        done += (zip_uint64_t)k;
    }
    return (zip_int64_t)n;
}

static zip_int64_t sink_seek(fd_sink *s, void *data, zip_uint64_t len)
{
    zip_source_args_seek_t *a =
        ZIP_SOURCE_GET_ARGS(zip_source_args_seek_t, data, len, &s->err);
    if (!a)
        return -1;
    if (lseek(s->fd, (off_t)a->offset, a->whence) < 0)
        return sink_fail(s, ZIP_ER_SEEK, errno);
    return 0;
}

static zip_int64_t sink_cb(void *ud, void *data, zip_uint64_t len,
                           zip_source_cmd_t cmd)
{
    fd_sink *s = ud;
    off_t at;
    switch (cmd) {
    case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(
            ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_SEEK,
            ZIP_SOURCE_TELL, ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE,
            ZIP_SOURCE_BEGIN_WRITE, ZIP_SOURCE_WRITE, ZIP_SOURCE_SEEK_WRITE,
            ZIP_SOURCE_TELL_WRITE, ZIP_SOURCE_COMMIT_WRITE,
            ZIP_SOURCE_ROLLBACK_WRITE, ZIP_SOURCE_REMOVE, -1);
    case ZIP_SOURCE_STAT:
        /* "no archive yet": libzip then starts a new one */
        return sink_fail(s, ZIP_ER_READ, ENOENT);
    case ZIP_SOURCE_ERROR:
        return zip_error_to_data(&s->err, data, len);
    case ZIP_SOURCE_BEGIN_WRITE:
        if (ftruncate(s->fd, 0) != 0 || lseek(s->fd, 0, SEEK_SET) < 0)
            return sink_fail(s, ZIP_ER_WRITE, errno);
        return 0;
    case ZIP_SOURCE_WRITE:
        return sink_write(s, data, len);
    case ZIP_SOURCE_SEEK_WRITE:
        return sink_seek(s, data, len);
    case ZIP_SOURCE_TELL_WRITE:
        at = lseek(s->fd, 0, SEEK_CUR);
        return at < 0 ? sink_fail(s, ZIP_ER_TELL, errno) : (zip_int64_t)at;
    case ZIP_SOURCE_READ:
    case ZIP_SOURCE_SEEK:
    case ZIP_SOURCE_TELL:
        /* never asked of a new archive */
        return sink_fail(s, ZIP_ER_INTERNAL, 0);
    default: /* open, close, commit, rollback, remove, free: the atomic
                save owns the file */
        return 0;
    }
}

static int write_members(int fd, const kiln_tensor_list *l, int compress,
                         io_err *e)
{
    int n = kiln_tensor_list_count(l), rc = 0;
    npz_pending p = {calloc((size_t)n, NPY_HEADER_MAX),
                     calloc((size_t)n, sizeof(void *)), n};
    fd_sink sink = {fd, {0}};
    zip_error_t ze;
    zip_error_init(&ze);
    zip_error_init(&sink.err);
    zip_source_t *src = p.headers && p.swapped
                            ? zip_source_function_create(sink_cb, &sink, &ze)
                            : NULL;
    zip_t *za =
        src ? zip_open_from_source(src, ZIP_CREATE | ZIP_TRUNCATE, &ze) : NULL;
    if (!za) {
        zip_source_free(src);
        rc = io_fail(e, "cannot create zip archive: %s",
                     p.headers && p.swapped ? zip_error_strerror(&ze)
                                            : "out of memory");
    } else {
        for (int i = 0; i < n && !rc; i++)
            rc = add_member(za, kiln_tensor_list_name(l, i),
                            kiln_tensor_list_get(l, i), &p, i, compress, e);
        if (!rc && zip_close(za) != 0)
            rc = io_fail(e, "cannot write zip archive: %s", zip_strerror(za));
        if (rc)
            zip_discard(za);
    }
    zip_error_fini(&ze);
    zip_error_fini(&sink.err);
    pending_free(&p);
    return rc;
}

kiln_status kiln_npz_write(const char *path, const kiln_tensor_list *l,
                           int compress)
{
    if (!path || !l) {
        kiln_set_last_error("kiln_npz_write: NULL %s", path ? "list" : "path");
        return KILN_ERR_ARG;
    }
    io_err e = IO_ERR_INIT;
    io_atomic a;
    int rc = io_atomic_begin(&a, path, &e);
    if (!rc && kiln_tensor_list_count(l) == 0) {
        rc = write_empty_zip(&a, &e);
    } else if (!rc) {
        rc = write_members(a.fd, l, compress, &e);
    }
    if (!rc)
        rc = io_atomic_commit(&a, &e);
    else if (a.path)
        io_atomic_abort(&a);
    if (rc) {
        kiln_set_last_error("kiln_npz_write: %s: %s", path, e.msg);
        return e.status;
    }
    return KILN_OK;
}

#else /* !KILN_HAVE_LIBZIP */

static int no_libzip(io_err *e)
{
    return io_fail(e, "built without libzip: .npz files unsupported");
}

int npz_load(const char *path, kiln_tensor_list *out, io_info_fn fn, void *ctx,
             io_err *e)
{
    (void)path, (void)out, (void)fn, (void)ctx;
    return no_libzip(e);
}

kiln_tensor_list *kiln_npz_read(const char *path)
{
    kiln_set_last_error("kiln_npz_read: %s: built without libzip",
                        path ? path : "(null)");
    return NULL;
}

kiln_status kiln_npz_write(const char *path, const kiln_tensor_list *l,
                           int compress)
{
    (void)l, (void)compress;
    kiln_set_last_error("kiln_npz_write: %s: built without libzip",
                        path ? path : "(null)");
    return KILN_ERR_IO;
}

#endif
