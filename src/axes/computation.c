/* Computations (ngraph's transformer.computation): a result list and a
   placeholder list compiled into a session on the first call, so several
   computations on one session share their variables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes/axes.h"
#include "base/error.h"
#include "runtime/runtime.h"

/* A result or placeholder: its node (until compiled), axes and a label kept
   for printing once the graph may be gone. */
typedef struct port {
    kiln_axes axes;
    char label[48];
} port;

struct kiln_computation {
    kiln_session *s; /* NULL once the session was freed */
    kiln_graph *g;   /* until compiled */
    kiln_node **results, **placeholders;
    port *result_ports, *placeholder_ports;
    int n_results, n_ph;
    kiln_function *f;
    kiln_tensor **values; /* results of the last call */
    int called;
};

static void computation_forget_session(void *holder)
{
    ((kiln_computation *)holder)->s = NULL;
}

kiln_computation *kiln_computation_new(kiln_session *s, kiln_graph *g,
                                       kiln_ax *const *results, int n_results,
                                       kiln_ax *const *placeholders, int n_ph)
{
    if (!s || !g || n_results < 1 || !results || n_ph < 0 ||
        (n_ph && !placeholders)) {
        kiln_set_last_error("kiln_computation_new: needs a session, a graph, "
                            "results and the placeholders array");
        return NULL;
    }
    for (int i = 0; i < n_results; i++)
        if (!results[i]) {
            kiln_set_last_error("kiln_computation_new: result %d is NULL", i);
            return NULL;
        }
    for (int i = 0; i < n_ph; i++)
        if (!placeholders[i]) {
            kiln_set_last_error("kiln_computation_new: placeholder %d is NULL",
                                i);
            return NULL;
        }
    kiln_computation *c = calloc(1, sizeof *c);
    size_t nr = (size_t)n_results, np = (size_t)n_ph + 1;
    if (!c || !(c->results = calloc(nr, sizeof *c->results)) ||
        !(c->placeholders = calloc(np, sizeof *c->placeholders)) ||
        !(c->result_ports = calloc(nr, sizeof *c->result_ports)) ||
        !(c->placeholder_ports = calloc(np, sizeof *c->placeholder_ports)) ||
        !(c->values = calloc(nr, sizeof *c->values))) {
        kiln_computation_free(c);
        kiln_set_last_error("kiln_computation_new: out of memory");
        return NULL;
    }
    if (kiln_session_attach(s, c, computation_forget_session,
                            "kiln_computation_new") != KILN_OK) {
        kiln_set_last_error("%s", kiln_session_error(s));
        kiln_computation_free(c);
        return NULL;
    }
    c->s = s;
    c->g = g;
    c->n_results = n_results;
    c->n_ph = n_ph;
    for (int i = 0; i < n_results; i++) {
        c->results[i] = results[i]->node;
        c->result_ports[i].axes = results[i]->axes;
        snprintf(c->result_ports[i].label, sizeof c->result_ports[i].label,
                 "%s",
                 results[i]->node->name ? results[i]->node->name
                                        : kiln_node_op_name(results[i]->node));
    }
    for (int i = 0; i < n_ph; i++) {
        c->placeholders[i] = placeholders[i]->node;
        c->placeholder_ports[i].axes = placeholders[i]->axes;
        snprintf(c->placeholder_ports[i].label,
                 sizeof c->placeholder_ports[i].label, "%s",
                 kiln_node_name(placeholders[i]->node));
    }
    return c;
}

void kiln_computation_free(kiln_computation *c)
{
    if (!c)
        return;
    kiln_session_detach(c->s, c);
    kiln_function_free(c->f);
    for (int i = 0; c->values && i < c->n_results; i++)
        kiln_tensor_free(c->values[i]);
    free(c->values);
    free(c->results);
    free(c->placeholders);
    free(c->result_ports);
    free(c->placeholder_ports);
    free(c);
}

/* The first call compiles; the graph is not needed afterwards. */
static kiln_status compile(kiln_computation *c, const char *fn)
{
    if (!c->s) { /* its function went with it */
        kiln_set_last_error("%s: the computation's session was freed", fn);
        return KILN_ERR_STATE;
    }
    if (c->f)
        return KILN_OK;
    c->f = kiln_compile(c->s, c->g, c->results, c->n_results, c->placeholders,
                        c->n_ph);
    if (!c->f)
        return kiln_graph_status(c->g) != KILN_OK ? kiln_graph_status(c->g)
                                                  : KILN_ERR_ARG;
    kiln_function_set_owner(c->f, &c->f);
    for (int i = 0; i < c->n_results; i++)
        if (!(c->values[i] = kiln_function_new_output(c->f, i)))
            return kiln_session_fail(c->s, KILN_ERR_MEMORY,
                                     "kiln_computation_call: out of memory");
    c->g = NULL;
    return KILN_OK;
}

kiln_status kiln_computation_call(kiln_computation *c, kiln_tensor *const *in)
{
    if (!c)
        return kiln_null_arg("kiln_computation_call", "computation");
    kiln_status st = compile(c, "kiln_computation_call");
    if (st != KILN_OK)
        return st;
    st = kiln_run(c->f, in, c->values);
    c->called |= st == KILN_OK;
    return st;
}

const kiln_tensor *kiln_computation_result(const kiln_computation *c, int i)
{
    if (!c || !c->called || i < 0 || i >= c->n_results)
        return NULL;
    return c->values[i];
}

float kiln_computation_scalar(const kiln_computation *c, int i)
{
    const kiln_tensor *t = kiln_computation_result(c, i);
    const float *p = kiln_tensor_f32(t);
    return p && kiln_tensor_numel(t) > 0 ? p[0] : NAN;
}

kiln_status kiln_computation_print(kiln_computation *c, FILE *out)
{
    if (!c || !out)
        return kiln_null_arg("kiln_computation_print",
                             c ? "stream" : "computation");
    kiln_status st = compile(c, "kiln_computation_print");
    if (st != KILN_OK)
        return st;
    char b[256];
    fprintf(out, "computation(");
    for (int i = 0; i < c->n_ph; i++)
        fprintf(out, "%s%s%s", i ? ", " : "", c->placeholder_ports[i].label,
                kiln_axes_str(c->placeholder_ports[i].axes, b, sizeof b));
    fprintf(out, ") -> ");
    for (int i = 0; i < c->n_results; i++)
        fprintf(out, "%s%s%s", i ? ", " : "", c->result_ports[i].label,
                kiln_axes_str(c->result_ports[i].axes, b, sizeof b));
    fprintf(out, "\n");
    return kiln_function_print(c->f, out);
}
