/* The convolutional network of `kiln train --model cnn`. */
#ifndef KILN_TOOLS_CNN_H
#define KILN_TOOLS_CNN_H

#include "kiln.h"

/* Logits [N, classes] of x [N, rows * cols] (images, one channel) through
   two blocks of conv 5x5 (pad 2) + activation + 2x2 max pooling (32 then 64
   channels), a dense layer of width hidden with the activation, and a
   dense layer to the classes; act is applied by the caller's function.
   Variables conv0.W/b, conv1.W/b, fc0.W/b, fc1.W/b, initialised as
   PyTorch's layers are. */
kiln_node *cnn_logits(kiln_graph *g, kiln_node *x, int64_t rows, int64_t cols,
                      int hidden, int classes,
                      kiln_node *(*act)(kiln_graph *, kiln_node *, int),
                      int act_code);

#endif
