/* What the parts of the character-level language model share
   (tools/char_lm*.c). */
#ifndef KILN_TOOLS_CHAR_LM_INTERNAL_H
#define KILN_TOOLS_CHAR_LM_INTERNAL_H

#include <stdint.h>

#include "char_lm.h"
#include "gpt.h"

/* A text as token ids: its distinct bytes, in byte order, are the
   vocabulary; every tenth block of 4096 characters is held out for
   validation, the rest is the training text. */
typedef struct lm_corpus {
    int32_t *train, *val;
    int64_t n_train, n_val;
    int vocab;
    unsigned char chars[256]; /* id -> byte */
    int16_t ids[256];         /* byte -> id, -1 when absent */
} lm_corpus;

/* Reads path (a file, or a directory's files without a dot in their name,
   in name order) and splits it; both parts must hold a window of context
   + 1 characters.  0, or 1 after printing an error (c left empty). */
int lm_corpus_load(lm_corpus *c, const char *path, int context);
void lm_corpus_free(lm_corpus *c);

/* Prints o->sample_len characters generated after o->prompt with the
   key/value cache, drawn with o->temperature and o->top_k, and the rate.
   0, or 1 after printing an error. */
int lm_sample(kiln_session *s, const gpt_config *g, const lm_corpus *c,
              const char_lm_options *o);

#endif
