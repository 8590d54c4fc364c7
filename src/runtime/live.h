/* The compiled functions not yet freed, process-wide.  A function is freed
   with its session, so a caller may well hold its pointer afterwards: the
   calls taking a function look it up here first and refuse a freed one
   instead of reading freed memory.  (A later kiln_compile may be given the
   same address; the pointer then names the new function.) */
#ifndef KILN_RUNTIME_LIVE_H
#define KILN_RUNTIME_LIVE_H

#include "kiln.h"

/* 0, or -1 when out of memory. */
int kiln_function_live_add(const kiln_function *f);
void kiln_function_live_remove(const kiln_function *f);
/* 1 when f was compiled and is not yet freed; sets kiln_last_error
   ("<fn>: the function was freed ...") and returns 0 otherwise. */
int kiln_function_live(const kiln_function *f, const char *fn);

#endif
