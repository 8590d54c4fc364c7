/* Checking an imported ONNX model against PyTorch (tests/test_onnx_ops.c,
   tests/test_onnx_more.c): the model's .txt in tests/ref/onnx holds an
   input x, PyTorch's output y and its gradient dx of sum(y). */
#ifndef KILN_TEST_ONNX_REFS_H
#define KILN_TEST_ONNX_REFS_H

#include "test_refs.h"

#define ONNX_DIR KILN_TEST_REF_DIR "/onnx/"

/* x, y and dx of a model's .txt. */
typedef struct refs {
    ref_tensor t[3];
    char kind[3][8];
} refs;

static inline void read_refs(const char *name, refs *r)
{
    char path[512];
    snprintf(path, sizeof path, ONNX_DIR "%s.txt", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    memset(r, 0, sizeof *r);
    for (int k = 0; k < 3; k++)
        assert_true(ref_read_tensor(f, path, &r->t[k], r->kind[k]));
    fclose(f);
}

static inline kiln_status load(kiln_graph *g, const char *name,
                               const kiln_onnx_options *opt,
                               kiln_onnx_model **m)
{
    char path[512];
    snprintf(path, sizeof path, ONNX_DIR "%s.onnx", name);
    return kiln_onnx_load(g, path, opt, m);
}

#define TOL 1e-5

/* y and the gradient of sum(y) from the compiled function and from the
   dynamic path against PyTorch's (the gradient at relative tolerance
   gtol); with fd set, a finite-difference check of the gradient too. */
static inline void check_model(const char *name, double gtol, int fd)
{
    refs r;
    read_refs(name, &r);
    kiln_graph *g = kiln_graph_new();
    kiln_onnx_model *m = NULL;
    if (load(g, name, NULL, &m) != KILN_OK)
        fail_msg("%s: %s", name, kiln_onnx_error(m));
    kiln_node *x = kiln_onnx_input(m, 0), *y = kiln_onnx_output(m, 0);
    kiln_node *loss = kiln_sum(g, y, KILN_ALL_AXES, 0);
    kiln_node *outs[2] = {y, kiln_grad(g, loss, x)};
    kiln_tensor *xt = ref_tensor_new(&r.t[0]);
    kiln_session *s = kiln_session_new(NULL);
    kiln_function *f = kiln_compile(s, g, outs, 2, &x, 1);
    if (!f)
        fail_msg("%s: %s", name, kiln_session_error(s));
    kiln_tensor *got[2] = {ref_tensor_new(&r.t[1]), ref_tensor_new(&r.t[2])};
    assert_int_equal(kiln_run(f, &xt, got), KILN_OK);
    for (int k = 0; k < 2; k++)
        th_assert_close(r.t[1 + k].name, kiln_tensor_f32(got[k]), r.t[1 + k].v,
                        kiln_tensor_numel(got[k]), k ? gtol : TOL, TOL);
    assert_int_equal(kiln_feed(s, x, xt), KILN_OK);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    for (int k = 0; k < 2; k++)
        th_assert_close(r.t[1 + k].name, kiln_node_value_f32(s, outs[k]),
                        r.t[1 + k].v, kiln_tensor_numel(got[k]), k ? gtol : TOL,
                        TOL);
    kiln_gradcheck_result res;
    if (fd && kiln_gradcheck(s, g, loss, &x, 1, &x, &xt, 1, 1e-3, 1e-2, &res) !=
                  KILN_OK)
        fail_msg("%s: gradcheck: %s", name, kiln_session_error(s));
    for (int k = 0; k < 2; k++)
        kiln_tensor_free(got[k]);
    kiln_tensor_free(xt);
    kiln_session_free(s);
    kiln_onnx_free(m);
    kiln_graph_free(g);
    for (int k = 0; k < 3; k++)
        free(r.t[k].v);
}

#endif
