/* The training plot of `kiln train --plot`: the metrics as CSV and a
   gnuplot script in a temporary directory, gnuplot run on them (fork/exec,
   no shell), the PNG copied to where the user asked. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plot.h"
#include "tool.h"

/* Whether name is an executable in $PATH. */
int have_program(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    while (*path) {
        size_t n = strcspn(path, ":");
        char full[4096];
        if (n + strlen(name) + 2 <= sizeof full) {
            snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? path : ".",
                     name);
            if (access(full, X_OK) == 0)
                return 1;
        }
        path += n + (path[n] == ':');
    }
    return 0;
}

/* gnuplot, run in a private directory on files with fixed names: no string
   of the user's (the output path, the log path) ever reaches gnuplot or a
   shell. */
static const char PLOT_SCRIPT[] =
    "set terminal png size 900,400\nset output 'plot.png'\n"
    "set datafile separator ','\nset multiplot layout 1,2\n"
    "set xlabel 'epoch'\nset title 'loss'\n"
    "plot 'metrics.csv' using 1:2 with linespoints title 'train', "
    "'' using 1:3 with linespoints title 'test'\n"
    "set title 'test accuracy'\n"
    "plot 'metrics.csv' using 1:4 with linespoints notitle\n"
    "unset multiplot\n";

static int write_text(const char *dir, const char *name, const char *text)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    int bad = fputs(text, f) < 0;
    return fclose(f) != 0 || bad ? -1 : 0;
}

static int write_metrics(const char *dir, const epoch_row *rows, int n)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/metrics.csv", dir);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    for (int i = 0; i < n; i++)
        fprintf(f, "%d,%.6f,%.6f,%.6f\n", i + 1, rows[i].train_loss,
                rows[i].test_loss, rows[i].acc);
    return fclose(f) != 0 ? -1 : 0;
}

static int run_gnuplot(const char *dir)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char *argv[] = {"gnuplot", "plot.gp", NULL};
        if (chdir(dir) == 0)
            execvp("gnuplot", argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int bad = !in || !out;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
        bad = fwrite(buf, 1, n, out) != n;
    if (in)
        bad |= ferror(in), fclose(in);
    if (out)
        bad |= fclose(out) != 0;
    return bad ? -1 : 0;
}

int plot(const epoch_row *rows, int n, const char *png)
{
    const char *base = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/kiln-plot-XXXXXX",
             base && *base && strlen(base) < 4000 ? base : "/tmp");
    if (!mkdtemp(dir))
        return kiln_tool_fail("--plot: cannot create a temporary directory");
    char out[4200];
    snprintf(out, sizeof out, "%s/plot.png", dir);
    int rc = 0;
    if (write_metrics(dir, rows, n) || write_text(dir, "plot.gp", PLOT_SCRIPT))
        rc = kiln_tool_fail("--plot: cannot write in %s", dir);
    else if (run_gnuplot(dir))
        rc = kiln_tool_fail("--plot: gnuplot failed");
    else if (copy_file(out, png))
        rc = kiln_tool_fail("--plot: cannot write %s", png);
    else
        fprintf(stderr, "kiln: plot written to %s\n", png);
    const char *files[] = {"plot.png", "plot.gp", "metrics.csv"};
    for (int i = 0; i < 3; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    return rc;
}
