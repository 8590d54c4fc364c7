/* The training plot of `kiln train --plot` (tools/plot.c). */
#ifndef KILN_TOOLS_PLOT_H
#define KILN_TOOLS_PLOT_H

/* One row of the metrics, kept for the plot. */
typedef struct epoch_row {
    double train_loss, test_loss, acc, seconds;
} epoch_row;

/* 1 when name is an executable in $PATH. */
int have_program(const char *name);
/* Writes the n rows as a PNG at png through gnuplot; 0, or 1 after an
   error (reported with kiln_tool_fail). */
int plot(const epoch_row *rows, int n, const char *png);

#endif
