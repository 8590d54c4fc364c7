/* What every part of the kiln command shares. */
#ifndef KILN_TOOLS_TOOL_H
#define KILN_TOOLS_TOOL_H

/* Prints "kiln: <message>" to stderr and returns 1 (the command's failure
 * status). */
int kiln_tool_fail(const char *fmt, ...);

#endif
