/* kiln_onnx_info: what an ONNX file holds, read without building. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static void print_value(FILE *out, const Onnx__ValueInfoProto *vi)
{
    char b[32];
    const Onnx__TypeProto *tp = vi->type;
    fprintf(out, "  %-24s ", vi->name ? vi->name : "");
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !tp->tensor_type) {
        fprintf(out, "(not a tensor)\n");
        return;
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    fprintf(out, "%-7s [", ox_type_name(tt->elem_type, b, sizeof b));
    for (size_t k = 0; tt->shape && k < tt->shape->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
        if (k)
            fputc(',', out);
        if (d->value_case ==
            ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            fprintf(out, "%lld", (long long)d->dim_value);
        else if (d->value_case ==
                 ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            fprintf(out, "%s", d->dim_param);
        else
            fputc('?', out);
    }
    fprintf(out, "]\n");
}

static int is_initializer(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t k = 0; k < gp->n_initializer; k++)
        if (gp->initializer[k]->name && name &&
            !strcmp(gp->initializer[k]->name, name))
            return 1;
    return 0;
}

/* Op types and their counts, most frequent first. */
static void print_histogram(FILE *out, const Onnx__GraphProto *gp)
{
    const char **names = calloc(gp->n_node + 1, sizeof *names);
    size_t *counts = calloc(gp->n_node + 1, sizeof *counts), n = 0;
    for (size_t k = 0; names && counts && k < gp->n_node; k++) {
        const char *t = gp->node[k]->op_type ? gp->node[k]->op_type : "";
        size_t i = 0;
        while (i < n && strcmp(names[i], t))
            i++;
        if (i == n)
            names[n++] = t;
        counts[i]++;
    }
    fprintf(out, "ops (%zu nodes):\n", gp->n_node);
    for (size_t done = 0; done < n; done++) {
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (counts[i] > counts[best])
                best = i;
        fprintf(out, "  %-24s %zu%s\n", names[best], counts[best],
                ox_find_op(names[best]) ? "" : "  (unsupported)");
        counts[best] = 0;
    }
    free(names);
    free(counts);
}

static int64_t parameter_count(const Onnx__GraphProto *gp)
{
    int64_t total = 0;
    for (size_t k = 0; k < gp->n_initializer; k++) {
        const Onnx__TensorProto *t = gp->initializer[k];
        int64_t numel = 1;
        for (size_t d = 0; d < t->n_dims && numel >= 0; d++)
            numel = t->dims[d] < 0 ||
                            (t->dims[d] && numel > KILN_MAX_NUMEL / t->dims[d])
                        ? -1
                        : numel * t->dims[d];
        if (numel < 0)
            return -1;
        total += numel;
        if (total > KILN_MAX_NUMEL)
            return -1;
    }
    return total;
}

kiln_status kiln_onnx_info(const char *path, FILE *out)
{
    if (!path || !out)
        return kiln_null_arg("kiln_onnx_info", path ? "out" : "path");
    Onnx__ModelProto *m = ox_read_model(path);
    if (!m)
        return KILN_ERR_IO;
    const Onnx__GraphProto *gp = m->graph;
    fprintf(out, "%s: ONNX model, IR version %lld\n", path,
            (long long)m->ir_version);
    for (size_t k = 0; k < m->n_opset_import; k++)
        fprintf(out, "opset: %s %lld\n",
                m->opset_import[k]->domain && *m->opset_import[k]->domain
                    ? m->opset_import[k]->domain
                    : "ai.onnx",
                (long long)m->opset_import[k]->version);
    fprintf(out, "producer: %s %s\n", m->producer_name ? m->producer_name : "",
            m->producer_version ? m->producer_version : "");
    fprintf(out, "graph: %s\ninputs:\n", gp->name ? gp->name : "");
    for (size_t k = 0; k < gp->n_input; k++)
        if (!is_initializer(gp, gp->input[k]->name))
            print_value(out, gp->input[k]);
    fprintf(out, "outputs:\n");
    for (size_t k = 0; k < gp->n_output; k++)
        print_value(out, gp->output[k]);
    print_histogram(out, gp);
    fprintf(out, "parameters: %lld in %zu initializers\n",
            (long long)parameter_count(gp), gp->n_initializer);
    onnx__model_proto__free_unpacked(m, NULL);
    return KILN_OK;
}
