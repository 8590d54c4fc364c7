/* The imported model's accessors. */
#include <stdlib.h>
#include <string.h>

#include "onnx/model.h"

kiln_onnx_model *ox_model_new(void)
{
    return calloc(1, sizeof(kiln_onnx_model));
}

void ox_model_add_io(kiln_onnx_model *m, int out, const char *name,
                     kiln_node *node, int type)
{
    if (m->n_io[out] == m->cap_io[out]) {
        int cap = m->cap_io[out] ? 2 * m->cap_io[out] : 8;
        ox_io *io = realloc(m->io[out], (size_t)cap * sizeof *io);
        if (!io) {
            ox_model_fail(m, KILN_ERR_MEMORY, "out of memory");
            return;
        }
        m->io[out] = io;
        m->cap_io[out] = cap;
    }
    char *copy = strdup(name);
    if (!copy) {
        ox_model_fail(m, KILN_ERR_MEMORY, "out of memory");
        return;
    }
    m->io[out][m->n_io[out]++] = (ox_io){copy, node, type};
}

kiln_status ox_model_fail(kiln_onnx_model *m, kiln_status st, const char *msg)
{
    if (m->st == KILN_OK) {
        m->st = st;
        free(m->msg);
        m->msg = strdup(msg);
    }
    return m->st;
}

char *ox_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, path, len);
        d[len] = 0;
    }
    return d;
}

void kiln_onnx_free(kiln_onnx_model *m)
{
    if (!m)
        return;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < m->n_io[k]; i++)
            free(m->io[k][i].name);
        free(m->io[k]);
    }
    free(m->msg);
    free(m);
}

kiln_status kiln_onnx_status(const kiln_onnx_model *m)
{
    return m ? m->st : KILN_ERR_ARG;
}

const char *kiln_onnx_error(const kiln_onnx_model *m)
{
    if (!m)
        return "model is NULL";
    return m->st == KILN_OK ? "" : m->msg ? m->msg : "out of memory";
}

/* The i-th input or output of a loaded model, NULL otherwise. */
static const ox_io *io_at(const kiln_onnx_model *m, int out, int i)
{
    if (!m || m->st != KILN_OK || i < 0 || i >= m->n_io[out])
        return NULL;
    return &m->io[out][i];
}

int kiln_onnx_num_inputs(const kiln_onnx_model *m)
{
    return m && m->st == KILN_OK ? m->n_io[0] : 0;
}

int kiln_onnx_num_outputs(const kiln_onnx_model *m)
{
    return m && m->st == KILN_OK ? m->n_io[1] : 0;
}

const char *kiln_onnx_input_name(const kiln_onnx_model *m, int i)
{
    const ox_io *io = io_at(m, 0, i);
    return io ? io->name : NULL;
}

const char *kiln_onnx_output_name(const kiln_onnx_model *m, int i)
{
    const ox_io *io = io_at(m, 1, i);
    return io ? io->name : NULL;
}

kiln_node *kiln_onnx_input(const kiln_onnx_model *m, int i)
{
    const ox_io *io = io_at(m, 0, i);
    return io ? io->node : NULL;
}

kiln_node *kiln_onnx_output(const kiln_onnx_model *m, int i)
{
    const ox_io *io = io_at(m, 1, i);
    return io ? io->node : NULL;
}

int kiln_onnx_input_type(const kiln_onnx_model *m, int i)
{
    const ox_io *io = io_at(m, 0, i);
    return io ? io->type : 0;
}

int kiln_onnx_output_type(const kiln_onnx_model *m, int i)
{
    const ox_io *io = io_at(m, 1, i);
    return io ? io->type : 0;
}

int64_t kiln_onnx_opset(const kiln_onnx_model *m)
{
    return m ? m->opset : 0;
}
