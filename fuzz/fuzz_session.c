/* kiln_session_load of any checkpoint (.npz, .safetensors or .bin, by its
   first bytes) into a session that already holds variables: a load that
   fails must leave them exactly as they were. */
#include <string.h>

#include "fuzz_file.h"
#include "kiln.h"

static void expect_unchanged(kiln_session *s, int n, const float *w,
                             const int32_t *k)
{
    kiln_param_info a, b;
    if (kiln_session_num_variables(s) != n ||
        kiln_session_variable_info(s, 0, &a) != KILN_OK ||
        kiln_session_variable_info(s, 1, &b) != KILN_OK ||
        memcmp(a.data, w, 6 * sizeof *w) != 0 ||
        memcmp(b.data, k, 2 * sizeof *k) != 0) {
        fprintf(stderr, "failed load changed the session: %s\n",
                kiln_session_error(s));
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    kiln_session *s = kiln_session_new(NULL);
    if (!s ||
        kiln_session_declare(s, "W", KILN_F32, KILN_SHAPE(2, 3),
                             kiln_init_value(0.5), 1) != KILN_OK ||
        kiln_session_declare(s, "n", KILN_I32, KILN_SHAPE(2),
                             kiln_init_value(7), 0) != KILN_OK)
        abort();
    const float w[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    const int32_t k[2] = {7, 7};
    if (kiln_session_load(s, path) != KILN_OK)
        expect_unchanged(s, 2, w, k);
    kiln_session_free(s);
    return 0;
}
