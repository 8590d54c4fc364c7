/* Parameters (Marian's params()): finding, freezing and listing the
   variables a session holds. */
#include <string.h>

#include "runtime/runtime.h"

int kiln_session_find_variable(const kiln_session *s, const char *name)
{
    const kiln_var *v = s && name ? kiln_session_find(s, name) : NULL;
    return v ? (int)(v - s->vars) : -1;
}

kiln_status kiln_session_set_trainable(kiln_session *s, const char *name,
                                       int trainable)
{
    if (kiln_session_begin(s, "kiln_session_set_trainable") != KILN_OK)
        return KILN_ERR_ARG;
    if (!name)
        return kiln_session_fail(s, KILN_ERR_ARG,
                                 "kiln_session_set_trainable: name is NULL");
    kiln_var *v = kiln_session_find(s, name);
    if (!v)
        return kiln_session_fail(
            s, KILN_ERR_NOTFOUND,
            "kiln_session_set_trainable: no variable named '%s'", name);
    v->trainable = trainable != 0;
    return KILN_OK;
}

kiln_status kiln_session_print_variables(const kiln_session *s, FILE *out)
{
    if (!s || !out)
        return kiln_null_arg("kiln_session_print_variables",
                             s ? "stream" : "session");
    int64_t total = 0, trained = 0;
    for (int i = 0; i < s->n_vars; i++) {
        const kiln_var *v = &s->vars[i];
        char b[96];
        int64_t n = kiln_shape_numel(v->shape);
        fprintf(out, "%s  %s  %s  %s  %lld values\n", v->name,
                kiln_dtype_name(v->dtype),
                kiln_shape_str(v->shape, b, sizeof b),
                v->trainable ? "trainable" : "frozen", (long long)n);
        total += n;
        trained += v->trainable ? n : 0;
    }
    fprintf(out, "%d variables, %lld values, %lld trainable\n", s->n_vars,
            (long long)total, (long long)trained);
    return KILN_OK;
}
