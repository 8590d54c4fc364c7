/* The ONNX API in a library built without protobuf-c: every call that can
   fail says so, so programs link and run either way. */
#include "base/error.h"

#define NO_ONNX "built without ONNX support (protobuf-c or onnx.proto missing)"

kiln_status kiln_onnx_load(kiln_graph *g, const char *path,
                           const kiln_onnx_options *opt,
                           kiln_onnx_model **model)
{
    (void)g, (void)path, (void)opt;
    if (model)
        *model = NULL;
    kiln_set_last_error("kiln_onnx_load: %s", NO_ONNX);
    return KILN_ERR_UNSUPPORTED;
}

kiln_tensor *kiln_onnx_tensor_read(const char *path, int *onnx_type)
{
    (void)path;
    if (onnx_type)
        *onnx_type = 0;
    kiln_set_last_error("kiln_onnx_tensor_read: %s", NO_ONNX);
    return NULL;
}

kiln_status kiln_onnx_save(kiln_graph *g, kiln_session *s,
                           kiln_node *const *outputs, int n_out,
                           const kiln_onnx_save_options *opt, const char *path)
{
    (void)g, (void)s, (void)outputs, (void)n_out, (void)opt, (void)path;
    kiln_set_last_error("kiln_onnx_save: %s", NO_ONNX);
    return KILN_ERR_UNSUPPORTED;
}

kiln_status kiln_onnx_info(const char *path, FILE *out)
{
    (void)path, (void)out;
    kiln_set_last_error("kiln_onnx_info: %s", NO_ONNX);
    return KILN_ERR_UNSUPPORTED;
}

void kiln_onnx_free(kiln_onnx_model *m)
{
    (void)m;
}

kiln_status kiln_onnx_status(const kiln_onnx_model *m)
{
    (void)m;
    return KILN_ERR_UNSUPPORTED;
}

const char *kiln_onnx_error(const kiln_onnx_model *m)
{
    (void)m;
    return NO_ONNX;
}

int kiln_onnx_num_inputs(const kiln_onnx_model *m)
{
    (void)m;
    return 0;
}

int kiln_onnx_num_outputs(const kiln_onnx_model *m)
{
    (void)m;
    return 0;
}

const char *kiln_onnx_input_name(const kiln_onnx_model *m, int i)
{
    (void)m, (void)i;
    return NULL;
}

const char *kiln_onnx_output_name(const kiln_onnx_model *m, int i)
{
    (void)m, (void)i;
    return NULL;
}

kiln_node *kiln_onnx_input(const kiln_onnx_model *m, int i)
{
    (void)m, (void)i;
    return NULL;
}

kiln_node *kiln_onnx_output(const kiln_onnx_model *m, int i)
{
    (void)m, (void)i;
    return NULL;
}

int kiln_onnx_input_type(const kiln_onnx_model *m, int i)
{
    (void)m, (void)i;
    return 0;
}

int kiln_onnx_output_type(const kiln_onnx_model *m, int i)
{
    (void)m, (void)i;
    return 0;
}

int64_t kiln_onnx_opset(const kiln_onnx_model *m)
{
    (void)m;
    return 0;
}
