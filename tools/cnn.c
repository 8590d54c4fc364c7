/* The convolutional network of `kiln train --model cnn`: a LeNet-style
   network (examples/mnist_cnn.c walks through the same one). */
#include <math.h>
#include <stdio.h>

#include "cnn.h"

/* A variable named "<layer>.<part>", uniform in +-1/sqrt(fan_in): PyTorch's
   default for both the weights and the bias of its layers. */
static kiln_node *layer_var(kiln_graph *g, const char *layer, const char *part,
                            kiln_shape shape, int64_t fan_in)
{
    char name[32];
    snprintf(name, sizeof name, "%s.%s", layer, part);
    double lim = 1.0 / sqrt((double)fan_in);
    return kiln_variable(g, name, KILN_F32, shape,
                         kiln_init_uniform(-lim, lim));
}

kiln_node *cnn_logits(kiln_graph *g, kiln_node *x, int64_t rows, int64_t cols,
                      int hidden, int classes,
                      kiln_node *(*act)(kiln_graph *, kiln_node *, int),
                      int act_code)
{
    static const int channels[3] = {1, 32, 64};
    const int pool[2] = {2, 2};
    const kiln_conv_params same = {.padding = {2, 2}};
    int64_t batch = kiln_node_shape(x).d[0];
    kiln_node *h = kiln_reshape(g, x, KILN_SHAPE(batch, 1, rows, cols));
    for (int k = 0; k < 2; k++) {
        char layer[8];
        snprintf(layer, sizeof layer, "conv%d", k);
        int64_t in = channels[k], out = channels[k + 1], fan_in = in * 25;
        kiln_node *w =
            layer_var(g, layer, "W", KILN_SHAPE(out, in, 5, 5), fan_in);
        kiln_node *b = layer_var(g, layer, "b", KILN_SHAPE(out), fan_in);
        h = act(g, kiln_conv2d(g, h, w, b, &same), act_code);
        h = kiln_max_pool2d(g, h, pool, NULL, NULL, NULL, 0);
    }
    h = kiln_flatten(g, h, 1, -1);
    int64_t width = kiln_node_shape(h).d[1];
    const int64_t outs[2] = {hidden, classes};
    for (int k = 0; k < 2; k++) {
        char layer[8];
        snprintf(layer, sizeof layer, "fc%d", k);
        kiln_node *w =
            layer_var(g, layer, "W", KILN_SHAPE(width, outs[k]), width);
        kiln_node *b = layer_var(g, layer, "b", KILN_SHAPE(outs[k]), width);
        h = kiln_affine(g, h, w, b);
        if (k == 0)
            h = act(g, h, act_code);
        width = outs[k];
    }
    return h;
}
