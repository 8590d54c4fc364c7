/* kiln run: ONNX inference from the command line (tools/onnx_run.c). */
#ifndef KILN_TOOLS_ONNX_RUN_H
#define KILN_TOOLS_ONNX_RUN_H

/* argv[1] is "run"; returns the command's exit status. */
int onnx_run_main(int argc, char **argv);

#endif
