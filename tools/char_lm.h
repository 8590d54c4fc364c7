/* The character-level transformer language model: the walkthrough of
   examples/char_lm.c and `kiln train --model transformer`, one code for
   both.  It trains the GPT of tools/gpt.h on a plain-text corpus (by
   default the Debian `fortunes` package's files), reports the held-out
   validation loss in nats per character and samples text with the
   key/value cache. */
#ifndef KILN_TOOLS_CHAR_LM_H
#define KILN_TOOLS_CHAR_LM_H

#include <stdio.h>

typedef struct char_lm_options {
    const char *corpus; /* a file, or a directory whose files without a dot
                           in their name are read in name order */
    const char *prompt; /* the text generation starts from */
    const char *save;   /* NULL, or where the trained variables go */
    int steps, context, layers, heads, width, batch, seed, threads;
    int warmup, eval_batches, top_k, sample_len, log_every;
    float lr, min_lr, weight_decay, clip, temperature;
} char_lm_options;

char_lm_options char_lm_defaults(void);
/* Prints the options (for prog, e.g. "char_lm") and their defaults. */
void char_lm_usage(FILE *out, const char *prog);
/* Parses argv[first] .. argv[argc - 1] into o ("--model transformer" is
   accepted, for the kiln command).  0, 1 after printing an error, or 2 when
   -h or --help stands for a flag. */
int char_lm_parse(int argc, char **argv, int first, char_lm_options *o);
/* Loads the corpus, trains, prints the validation loss and a sample.
   Returns the exit status: 0, or 1 after printing an error. */
int char_lm_run(const char_lm_options *o);
/* The whole program on argv[first] ..: parse (usage on stdout for --help,
   on stderr after a mistake, prog naming the command), then run.  Returns
   the exit status. */
int char_lm_main(int argc, char **argv, int first, const char *prog);

#endif
