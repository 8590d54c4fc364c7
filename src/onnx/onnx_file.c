/* Reading ONNX files: the whole file into memory, then protobuf-c's
   unpack, which checks the wire format (lengths, tags, nesting). */
#include <stdio.h>
#include <stdlib.h>

#include "io/io_util.h"
#include "onnx/onnx_internal.h"

/* The bytes of path in a new buffer (*size of them); NULL with
   kiln_last_error when unreadable or larger than OX_MAX_FILE. */
static unsigned char *read_all(const char *path, size_t *size)
{
    /* refuses a directory and a device (/dev/zero would fill 2 GiB) */
    io_err e = IO_ERR_INIT;
    FILE *f = io_open_read(path, &e);
    if (!f) {
        kiln_set_last_error("%s: %s", path, e.msg);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            if ((int64_t)cap >= OX_MAX_FILE) {
                kiln_set_last_error("%s: larger than 2 GiB", path);
                free(buf);
                fclose(f);
                return NULL;
            }
            unsigned char *more = realloc(buf, cap * 2);
            if (!more) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (!buf)
        kiln_set_last_error("%s: out of memory reading the file", path);
    else if (ferror(f)) {
        kiln_set_last_error("%s: read error", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = len;
    return buf;
}

/* The message of type d in the file at path; NULL with kiln_last_error
   naming what was expected when unreadable or not such a message. */
static ProtobufCMessage *read_message(const char *path,
                                      const ProtobufCMessageDescriptor *d,
                                      const char *what)
{
    size_t size;
    unsigned char *buf = read_all(path, &size);
    if (!buf)
        return NULL;
    int deep = d == &onnx__model_proto__descriptor
                   ? ox_wire_depth(buf, size, OX_MAX_NESTING)
                   : 0;
    if (deep < 0 || deep > OX_MAX_NESTING) {
        free(buf);
        if (deep < 0)
            kiln_set_last_error("%s: not %s (protobuf decoding failed)", path,
                                what);
        else
            kiln_set_last_error("%s: not %s (messages nested over %d deep)",
                                path, what, OX_MAX_NESTING);
        return NULL;
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, size, buf);
    free(buf);
    if (!m)
        kiln_set_last_error("%s: not %s (protobuf decoding failed)", path,
                            what);
    return m;
}

Onnx__ModelProto *ox_read_model(const char *path)
{
    Onnx__ModelProto *m = (Onnx__ModelProto *)read_message(
        path, &onnx__model_proto__descriptor, "an ONNX model");
    if (m && !m->graph) {
        kiln_set_last_error("%s: the model has no graph", path);
        onnx__model_proto__free_unpacked(m, NULL);
        m = NULL;
    }
    return m;
}

Onnx__TensorProto *ox_read_tensor_file(const char *path)
{
    return (Onnx__TensorProto *)read_message(
        path, &onnx__tensor_proto__descriptor, "a TensorProto");
}

const char *ox_type_name(int type, char *buf, size_t n)
{
    static const char *const names[] = {
        "undefined", "float",  "uint8",     "int8",       "uint16",  "int16",
        "int32",     "int64",  "string",    "bool",       "float16", "double",
        "uint32",    "uint64", "complex64", "complex128", "bfloat16"};
    if (type >= 0 && type < (int)(sizeof names / sizeof *names))
        return names[type];
    snprintf(buf, n, "type %d", type);
    return buf;
}

int ox_type_supported(int type)
{
    switch (type) {
    case OX_FLOAT:
    case OX_DOUBLE:
    case OX_BOOL:
    case OX_UINT8:
    case OX_INT8:
    case OX_UINT16:
    case OX_INT16:
    case OX_INT32:
    case OX_INT64:
    case OX_UINT32:
    case OX_UINT64:
    case OX_FLOAT16:
    case OX_BFLOAT16:
        return 1;
    }
    return 0;
}

kiln_dtype ox_kiln_dtype(int type)
{
    return ox_type_is_float(type) || type == OX_BOOL ? KILN_F32 : KILN_I32;
}
