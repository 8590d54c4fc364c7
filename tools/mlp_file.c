/* The kiln tool's saved MLP and CNN models read back: the architecture
   recovered from the variables' shapes (mlp_read_architecture). */
#include <stdio.h>

#include "mlp.h"
#include "tool.h"

/* Layer k's weight in the model file: a matrix [in, out] whose in is the
   previous layer's out (in_dim for the first); 0, or 1 after an error. */
static int check_layer(const char *path, const kiln_tensor *w, int k,
                       int64_t in, int64_t *out)
{
    kiln_shape s = kiln_tensor_shape(w);
    if (s.ndim != 2)
        return kiln_tool_fail("%s: fc%d.W is not a matrix", path, k);
    if (k > 0 && s.d[0] != in)
        return kiln_tool_fail("%s: fc%d.W has %lld inputs, fc%d has %lld "
                              "outputs",
                              path, k, (long long)s.d[0], k - 1, (long long)in);
    if (s.d[0] < 1 || s.d[1] < 1 || s.d[1] > 65536)
        return kiln_tool_fail("%s: fc%d.W [%lld,%lld] is not a layer of the "
                              "kiln tool",
                              path, k, (long long)s.d[0], (long long)s.d[1]);
    *out = s.d[1];
    return 0;
}

/* Recovers the architecture from the variable shapes in the model file. */
int mlp_read_architecture(const char *path, mlp_config *c, int64_t *in_dim)
{
    kiln_tensor_list *l = kiln_file_read(path);
    if (!l)
        return kiln_tool_fail("%s", kiln_last_error());
    int layers = 0, rc = 0;
    int64_t width = 0;
    for (;; layers++) {
        char name[32];
        snprintf(name, sizeof name, "fc%d.W", layers);
        kiln_tensor *w = kiln_tensor_list_find(l, name);
        if (!w)
            break;
        if (layers == MLP_MAX_LAYERS) {
            rc = kiln_tool_fail("%s: more than %d layers (the kiln tool "
                                "supports up to %d)",
                                path, MLP_MAX_LAYERS, MLP_MAX_LAYERS);
            break;
        }
        if ((rc = check_layer(path, w, layers, width, &width)))
            break;
        if (layers == 0)
            *in_dim = kiln_tensor_shape(w).d[0];
        c->hidden[layers] = (int)width;
    }
    kiln_tensor *act = kiln_tensor_list_find(l, MLP_ACT_KEY);
    const int32_t *code =
        act && kiln_tensor_numel(act) == 1 ? kiln_tensor_i32(act) : NULL;
    c->activation = code ? code[0] : act ? -1 : 0;
    /* a CNN's first dense layer reads the pooled features, not the image */
    c->arch = kiln_tensor_list_find(l, "conv0.W") != NULL;
    kiln_tensor_list_free(l);
    if (rc)
        return rc;
    if (layers < 1 || c->hidden[layers - 1] != MLP_CLASSES ||
        (c->arch == 1 && layers != 2))
        return kiln_tool_fail("%s: not a kiln MLP or CNN model (no fc0.W ... "
                              "with 10 outputs)",
                              path);
    if (c->activation < 0 || c->activation > 2)
        return kiln_tool_fail("%s: bad %s (0 relu, 1 gelu, 2 tanh)", path,
                              MLP_ACT_KEY);
    c->n_hidden = layers - 1;
    return 0;
}
