/* kiln_file_info: what a checkpoint holds, from its headers alone. */
#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "io/formats.h"
#include "kiln.h"

static void print_info(void *ctx, const char *name, io_elem el,
                       kiln_shape shape) {
    char s[160], note[32] = "";
    /* Say when loading converts, e.g. f64 arrays that load as f32. */
    if (el != IO_F32 && el != IO_I32)
        snprintf(note, sizeof note, "  (stored %s)", io_elem_name(el));
    fprintf(ctx, "%s  %s  %s%s\n", name, kiln_dtype_name(io_elem_natural(el)),
            kiln_shape_str(shape, s, sizeof s), note);
}

/* Zip archives start with "PK"; safetensors with a length then '{'. */
static int detect(const char *path, int *is_npz, io_err *e) {
    unsigned char b[9];
    FILE *f = fopen(path, "rb");
    if (!f)
        return io_fail(e, "cannot open: %s", strerror(errno));
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n >= 4 && b[0] == 'P' && b[1] == 'K') {
        *is_npz = 1;
        return 0;
    }
    if (n == 9 && b[8] == '{') {
        *is_npz = 0;
        return 0;
    }
    return io_fail(e, "not a .npz or .safetensors file");
}

kiln_status kiln_file_info(const char *path, FILE *out) {
    if (!path || !out) {
        kiln_set_last_error("kiln_file_info: NULL %s",
                            path ? "stream" : "path");
        return KILN_ERR_ARG;
    }
    io_err e = IO_ERR_INIT;
    int is_npz = 0;
    int rc = detect(path, &is_npz, &e);
    if (!rc)
        rc = is_npz ? npz_load(path, NULL, print_info, out, &e)
                    : safetensors_load(path, NULL, print_info, out, &e);
    if (rc) {
        kiln_set_last_error("kiln_file_info: %s: %s", path, e.msg);
        return e.status;
    }
    return KILN_OK;
}
