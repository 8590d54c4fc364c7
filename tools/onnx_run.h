/* kiln run: ONNX inference from the command line, and the export of
   kiln train --save model.onnx (tools/onnx_run.c). */
#ifndef KILN_TOOLS_ONNX_RUN_H
#define KILN_TOOLS_ONNX_RUN_H

#include "kiln.h"

/* argv[1] is "run"; returns the command's exit status. */
int onnx_run_main(int argc, char **argv);

/* 1 when path names an ONNX file (ends in .onnx). */
int onnx_path(const char *path);
/* kiln train --save model.onnx: the inference graph of logits (output
   "logits") with the session's weights; 0, or 1 after printing why. */
int onnx_save_logits(kiln_graph *g, kiln_session *s, kiln_node *logits,
                     const char *path);

#endif
