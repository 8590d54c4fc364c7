/* Timestamped log lines ("[2026-11-21 15:10:51] [memory] Reserving 256 B,
   device cpu0") with levels and one user callback: the library's only
   global state. */
#ifndef KILN_BASE_LOG_H
#define KILN_BASE_LOG_H

#include "base/error.h"

/* 1 when a message of level would be delivered (cheap: test before
   formatting anything expensive). */
int kiln_logging_enabled(kiln_logging_level level);
/* Logs one message; category (may be NULL) is shown as "[category] ".
   force delivers it whatever the level (output the user asked for). */
void kiln_logging_message(kiln_logging_level level, int force,
                          const char *category, const char *fmt, ...)
    KILN_PRINTF(4, 5);
/* Writes "1.5 MB", "256 B" ... into buf; returns buf. */
char *kiln_logging_bytes(size_t bytes, char *buf, size_t n);

#endif
