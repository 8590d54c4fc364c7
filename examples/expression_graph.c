/* Marian's expression-graph walkthrough in C: z = x*y + sin(x), its
   gradient, one SGD step on the loss |6 - z|, and the graph in Graphviz. */
#include <stdio.h>

#include "kiln.h"

static int fail(kiln_session *s, const char *what)
{
    fprintf(stderr, "expression_graph: %s: %s\n", what, kiln_session_error(s));
    return 1;
}

int main(void)
{
    kiln_session *s = kiln_session_new(NULL);
    kiln_graph *graph = kiln_graph_new();

    /* Example 1: constants only. */
    kiln_node *x = kiln_scalar(graph, 2.0f);
    kiln_node *y = kiln_scalar(graph, 3.0f);
    kiln_node *z = kiln_add(graph, kiln_mul(graph, x, y), kiln_sin(graph, x));
    if (kiln_forward(s, graph) != KILN_OK)
        return fail(s, "forward");
    printf("z=%.4f\n", kiln_node_value_f32(z)[0]);

    /* Example 2: x becomes a parameter, so backward gives dz/dx. */
    kiln_graph_clear(graph);
    x = kiln_variable(graph, "x", KILN_F32, KILN_SHAPE(1, 1), kiln_init_value(2.0));
    y = kiln_fill(graph, KILN_SHAPE(1, 1), 3.0f);
    z = kiln_add(graph, kiln_mul(graph, x, y), kiln_sin(graph, x));
    kiln_node *zs = kiln_sum(graph, z, KILN_ALL_AXES, 0);
    if (kiln_backprop(s, graph, zs) != KILN_OK)
        return fail(s, "backprop");
    printf("z=%.4f\n", kiln_node_value_f32(z)[0]);
    printf("dz/dx=%.5f\n", kiln_node_grad_f32(x)[0]);

    /* Example 3: loss |6 - z| and one SGD step with learning rate 0.005. */
    kiln_graph_clear(graph);
    x = kiln_variable(graph, "x", KILN_F32, KILN_SHAPE(1, 1), kiln_init_value(2.0));
    y = kiln_fill(graph, KILN_SHAPE(1, 1), 3.0f);
    z = kiln_add(graph, kiln_mul(graph, x, y), kiln_sin(graph, x));
    kiln_node *loss = kiln_sum(graph,
                               kiln_abs(graph, kiln_sub(graph, kiln_scalar(graph, 6.0f), z)),
                               KILN_ALL_AXES, 0);
    if (kiln_backprop(s, graph, loss) != KILN_OK)
        return fail(s, "backprop");
    printf("loss=%.4f\n", kiln_node_value_f32(loss)[0]);
    if (kiln_sgd_step(s, graph, 0.005f) != KILN_OK)
        return fail(s, "sgd");
    kiln_tensor *xv = kiln_tensor_new(KILN_F32, KILN_SHAPE(1, 1));
    if (kiln_variable_read(s, "x", xv) != KILN_OK)
        return fail(s, "read x");
    printf("x=%.5f\n", kiln_tensor_f32(xv)[0]);
    kiln_tensor_free(xv);

    printf("graphviz:\n");
    kiln_graph_write_dot(graph, stdout);

    kiln_graph_free(graph);
    kiln_session_free(s);
    return 0;
}
