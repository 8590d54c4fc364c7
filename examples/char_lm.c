/* A character-level transformer language model (issue 12's walkthrough).
 *
 * The GPT of tools/gpt.h -- token and position embeddings, pre-norm blocks
 * of causal multi-head self-attention and a gelu MLP, a final layer norm,
 * the head tied to the token embedding -- is trained on the texts of
 * Debian's fortunes package (/usr/share/games/fortunes; any text file or
 * directory with --corpus).  The distinct bytes of the corpus are the
 * vocabulary; every tenth block of 4096 characters is held out.  Each step
 * runs one compiled function: forward, backward and AdamW with a linear
 * warm-up, a cosine decay and the gradients clipped to norm 1, on a batch
 * of random windows drawn by a generator seeded with --seed.  The
 * validation loss is the mean cross-entropy of consecutive held-out
 * windows, in nats per character (against ln(vocabulary) for a uniform
 * guess).  Then text is sampled with a temperature among the top k, one
 * character at a time through a key/value cache: each new character runs
 * the network on itself alone and attends to the stored keys and values.
 *
 * The code lives in tools/char_lm*.c, shared with
 * `kiln train --model transformer`, which takes the same options:
 *
 *   char_lm [--steps 2000] [--context 64] [--layers 2] [--heads 4]
 *           [--width 64] [--batch 16] [--seed 1] [--temperature 0.8]
 *           [--top-k 10] [--sample-len 400] ...   (--help lists all)
 */
#include "../tools/char_lm.h"

int main(int argc, char **argv)
{
    return char_lm_main(argc, argv, 1, "char_lm");
}
