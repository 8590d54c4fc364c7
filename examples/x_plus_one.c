/* Nervana graph's first program: x + 1 for x = 0..4, compiled once and run
   five times.  Prints the compiled code, then 1 2 3 4 5. */
#include <stdio.h>

#include "kiln.h"

int main(void)
{
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SCALAR);
    kiln_node *x_plus_one = kiln_add(g, x, kiln_scalar(g, 1.0f));

    kiln_session *s = kiln_session_new(NULL);
    kiln_function *plus_one = kiln_compile(s, g, &x_plus_one, 1, &x, 1);
    if (!plus_one) {
        fprintf(stderr, "x_plus_one: %s\n", kiln_session_error(s));
        return 1;
    }
    printf("compiled x + 1 program:\n");
    kiln_function_print(plus_one, stdout);

    kiln_tensor *in = kiln_tensor_new(KILN_F32, KILN_SCALAR);
    kiln_tensor *out = kiln_function_new_output(plus_one, 0);
    for (int i = 0; i < 5; i++) {
        kiln_tensor_f32(in)[0] = (float)i;
        if (kiln_run(plus_one, &in, &out) != KILN_OK) {
            fprintf(stderr, "x_plus_one: %s\n", kiln_session_error(s));
            return 1;
        }
        printf("%g\n", kiln_tensor_f32(out)[0]);
    }
    kiln_tensor_free(in);
    kiln_tensor_free(out);
    kiln_session_free(s);
    kiln_graph_free(g);
    return 0;
}
