/* Timestamped log lines ("[2026-11-21 15:10:51] [memory] Reserving 256 B,
   device cpu0") with levels and one user callback: the library's only
   global state. */
#ifndef KILN_BASE_LOG_H
#define KILN_BASE_LOG_H

#include "base/error.h"

/* 1 when a message of level would be delivered (cheap: test before
   formatting anything expensive). */
int kiln_log_enabled(kiln_log_level level);
/* Logs one message; category (may be NULL) is shown as "[category] ".
   force delivers it whatever the level (output the user asked for). */
void kiln_log_message(kiln_log_level level, int force, const char *category,
                      const char *fmt, ...) KILN_PRINTF(4, 5);
/* Writes "1.5 MB", "256 B" ... into buf; returns buf. */
char *kiln_log_bytes(size_t bytes, char *buf, size_t n);

#endif
