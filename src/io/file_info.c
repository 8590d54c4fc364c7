/* kiln_file_info: what a checkpoint holds, from its headers alone. */
#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "io/formats.h"
#include "kiln.h"

static void print_info(void *ctx, const char *name, io_elem el,
                       kiln_shape shape)
{
    char s[160], note[32] = "";
    /* Say when loading converts, e.g. f64 arrays that load as f32. */
    if (el != IO_F32 && el != IO_I32)
        snprintf(note, sizeof note, "  (stored %s)", io_elem_name(el));
    fprintf(ctx, "%s  %s  %s%s\n", name, kiln_dtype_name(io_elem_natural(el)),
            kiln_shape_str(shape, s, sizeof s), note);
}

/* Zip archives start with "PK", Kiln's .bin with "KILNBIN\0", safetensors
   with a length then '{'.  *is_npz: 0 safetensors, 1 npz, 2 bin. */
static int detect(const char *path, int *is_npz, io_err *e)
{
    unsigned char b[9];
    FILE *f = io_open_read(path, e);
    if (!f)
        return -1;
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n >= 4 && b[0] == 'P' && b[1] == 'K') {
        *is_npz = 1;
        return 0;
    }
    if (n >= 8 && memcmp(b, "KILNBIN", 8) == 0) {
        *is_npz = 2;
        return 0;
    }
    if (n == 9 && b[8] == '{') {
        *is_npz = 0;
        return 0;
    }
    return io_fail(e, "not a .npz, .safetensors or .bin file");
}

/* .bin files are read whole (they are validated by their checksum). */
static kiln_status bin_info(const char *path, FILE *out)
{
    kiln_tensor_list *l = kiln_bin_read(path);
    if (!l)
        return KILN_ERR_IO;
    for (int i = 0; i < kiln_tensor_list_count(l); i++) {
        kiln_tensor *t = kiln_tensor_list_get(l, i);
        char s[160];
        fprintf(out, "%s  %s  %s\n", kiln_tensor_list_name(l, i),
                kiln_dtype_name(kiln_tensor_dtype(t)),
                kiln_shape_str(kiln_tensor_shape(t), s, sizeof s));
    }
    kiln_tensor_list_free(l);
    return KILN_OK;
}

enum { NAME_OTHER, NAME_NPZ, NAME_SAFETENSORS, NAME_BIN };

/* The format a file name's extension names. */
static int format_of_name(const char *path)
{
    static const struct {
        const char *ext;
        int format;
    } names[] = {{".npz", NAME_NPZ},
                 {".safetensors", NAME_SAFETENSORS},
                 {".bin", NAME_BIN}};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t k = strlen(names[i].ext);
        if (n > k && strcmp(path + n - k, names[i].ext) == 0)
            return names[i].format;
    }
    return NAME_OTHER;
}

kiln_status kiln_file_write(const char *path, const kiln_tensor_list *l)
{
    if (!path) {
        kiln_set_last_error("kiln_file_write: NULL path");
        return KILN_ERR_ARG;
    }
    switch (format_of_name(path)) {
    case NAME_SAFETENSORS:
        return kiln_safetensors_write(path, l);
    case NAME_BIN:
        return kiln_bin_write(path, l);
    default:
        return kiln_npz_write(path, l, 0);
    }
}

kiln_tensor_list *kiln_file_read(const char *path)
{
    if (!path) {
        kiln_set_last_error("kiln_file_read: NULL path");
        return NULL;
    }
    io_err e = IO_ERR_INIT;
    int kind = 0;
    if (detect(path, &kind, &e)) {
        /* an unrecognised file with a known extension gets that reader's
           more precise message (bad magic, truncated header...) */
        switch (format_of_name(path)) {
        case NAME_BIN:
            return kiln_bin_read(path);
        case NAME_NPZ:
            return kiln_npz_read(path);
        case NAME_SAFETENSORS:
            return kiln_safetensors_read(path);
        default:
            break;
        }
        kiln_set_last_error("kiln_file_read: %s: %s", path, e.msg);
        return NULL;
    }
    return kind == 1   ? kiln_npz_read(path)
           : kind == 2 ? kiln_bin_read(path)
                       : kiln_safetensors_read(path);
}

kiln_status kiln_file_info(const char *path, FILE *out)
{
    if (!path || !out) {
        kiln_set_last_error("kiln_file_info: NULL %s",
                            path ? "stream" : "path");
        return KILN_ERR_ARG;
    }
    io_err e = IO_ERR_INIT;
    int is_npz = 0;
    int rc = detect(path, &is_npz, &e);
    if (!rc && is_npz == 2)
        return bin_info(path, out);
    if (!rc)
        rc = is_npz ? npz_load(path, NULL, print_info, out, &e)
                    : safetensors_load(path, NULL, print_info, out, &e);
    if (rc) {
        kiln_set_last_error("kiln_file_info: %s: %s", path, e.msg);
        return e.status;
    }
    return KILN_OK;
}
