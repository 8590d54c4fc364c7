/* What every part of the kiln command shares. */
#ifndef KILN_TOOLS_TOOL_H
#define KILN_TOOLS_TOOL_H

/* Prints "kiln: <message>" to stderr and returns 1 (the command's failure
 * status). */
int kiln_tool_fail(const char *fmt, ...);
/* *out = v when it is an integer in [lo, hi]; 0, else 1 after printing an
   error naming flag. */
int kiln_tool_parse_int(const char *flag, const char *v, int lo, int hi,
                        int *out);

#endif
