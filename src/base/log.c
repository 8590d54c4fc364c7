#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static kiln_logging_level log_level = KILN_LOGGING_INFO;
static kiln_logging_fn log_fn;
static void *log_user;

void kiln_set_logging_level(kiln_logging_level level)
{
    if (level >= KILN_LOGGING_DEBUG && level <= KILN_LOGGING_OFF)
        log_level = level;
}

kiln_logging_level kiln_get_logging_level(void)
{
    return log_level;
}

void kiln_set_logging_callback(kiln_logging_fn fn, void *user)
{
    log_fn = fn;
    log_user = fn ? user : NULL;
}

int kiln_logging_enabled(kiln_logging_level level)
{
    return level >= log_level && level < KILN_LOGGING_OFF;
}

static const char *level_tag(kiln_logging_level level)
{
    return level == KILN_LOGGING_WARN    ? "[warn] "
           : level == KILN_LOGGING_ERROR ? "[error] "
                                         : "";
}

void kiln_logging_message(kiln_logging_level level, int force,
                          const char *category, const char *fmt, ...)
{
    if (!force && !kiln_logging_enabled(level))
        return;
    char line[4096];
    time_t now = time(NULL);
    struct tm tm;
    size_t k = localtime_r(&now, &tm)
                   ? strftime(line, sizeof line, "[%Y-%m-%d %H:%M:%S] ", &tm)
                   : 0;
    int m = snprintf(line + k, sizeof line - k, "%s", level_tag(level));
    k += m > 0 ? (size_t)m : 0;
    if (category && k < sizeof line) {
        m = snprintf(line + k, sizeof line - k, "[%s] ", category);
        k += m > 0 ? (size_t)m : 0;
    }
    if (k < sizeof line) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line + k, sizeof line - k, fmt, ap);
        va_end(ap);
    }
    if (log_fn) {
        log_fn(level, line, log_user);
    } else {
        fputs(line, stderr);
        fputc('\n', stderr);
    }
}

char *kiln_logging_bytes(size_t bytes, char *buf, size_t n)
{
    static const char *unit[] = {"B", "kB", "MB", "GB", "TB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0 || v == (double)(size_t)v)
        snprintf(buf, n, "%zu %s", (size_t)v, unit[u]);
    else
        snprintf(buf, n, "%.1f %s", v, unit[u]);
    return buf;
}

void kiln_logging_printf(kiln_logging_level level, const char *category,
                         const char *fmt, ...)
{
    if (!fmt || !kiln_logging_enabled(level))
        return;
    char msg[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kiln_logging_message(level, 0, category, "%s", msg);
}
