/* A progress bar: redrawn in place on a terminal at most ten times a
   second, one line per call to _end otherwise so logs stay readable. */
#include <time.h>
#include <unistd.h>

#include "kiln.h"

double kiln_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void kiln_progress_begin(kiln_progress *p, FILE *out, const char *label,
                         int64_t total)
{
    if (!p)
        return;
    p->out = out ? out : stderr;
    p->label = label ? label : "";
    p->total = total;
    p->done = 0;
    p->start = kiln_now();
    p->last_draw = 0;
    p->tty = isatty(fileno(p->out));
}

void kiln_progress_update(kiln_progress *p, int64_t done, double loss,
                          double samples_per_step)
{
    if (!p || !p->out)
        return;
    p->done = done;
    double now = kiln_now();
    if (!p->tty || (now - p->last_draw < 0.1 && done < p->total))
        return;
    p->last_draw = now;
    double el = now - p->start;
    double rate = el > 0 ? (double)done * samples_per_step / el : 0;
    /* In double: done and total are the caller's and may be anything. */
    double frac = p->total > 0 ? (double)done / (double)p->total : 1.0;
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    double eta =
        done > 0 ? el * ((double)p->total - (double)done) / (double)done : 0;
    int width = 30, fill = (int)(width * frac);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(p->out, "\r%s [%s] %lld/%lld loss %.4f %.0f samples/s ETA %.1fs ",
            p->label, bar, (long long)done, (long long)p->total, loss, rate,
            eta);
    fflush(p->out);
}

void kiln_progress_end(kiln_progress *p, const char *summary)
{
    if (!p || !p->out)
        return;
    double el = kiln_now() - p->start;
    if (p->tty)
        fputc('\n', p->out);
    fprintf(p->out, "%s %lld/%lld steps in %.2fs %s\n", p->label,
            (long long)p->done, (long long)p->total, el,
            summary ? summary : "");
    fflush(p->out);
}
