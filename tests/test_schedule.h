/* Reading a compiled function's kernel schedule in tests (the includer
   defines _POSIX_C_SOURCE 200809L first, for open_memstream). */
#ifndef KILN_TEST_SCHEDULE_H
#define KILN_TEST_SCHEDULE_H

#include "test_helpers.h"

/* Whether f's printed schedule contains needle (an op's name). */
static inline int th_schedule_has(kiln_function *f, const char *needle)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    kiln_function_print(f, mem);
    fclose(mem);
    int found = strstr(text, needle) != NULL;
    free(text);
    return found;
}

#endif
