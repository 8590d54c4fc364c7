/* The imported model object: inputs and outputs by name, the load's
   status and message. */
#ifndef KILN_ONNX_MODEL_H
#define KILN_ONNX_MODEL_H

#include "onnx/onnx_internal.h"

typedef struct ox_io {
    char *name;
    kiln_node *node;
    int type;
} ox_io;

struct kiln_onnx_model {
    kiln_status st;
    char *msg;
    ox_io *io[2]; /* inputs, outputs */
    int n_io[2], cap_io[2];
    int64_t opset;
};

kiln_onnx_model *ox_model_new(void);
/* Appends an input (out 0) or output (out 1); out of memory is recorded
   on the model. */
void ox_model_add_io(kiln_onnx_model *m, int out, const char *name,
                     kiln_node *node, int type);
/* Records the load's failure (msg copied); returns st. */
kiln_status ox_model_fail(kiln_onnx_model *m, kiln_status st, const char *msg);
/* The folder of path ("." for a bare name), malloc'd; NULL when out of
   memory. */
char *ox_dirname(const char *path);

#endif
