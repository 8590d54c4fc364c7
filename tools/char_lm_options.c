/* The language model's options, shared by examples/char_lm.c and
   `kiln train --model transformer`. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "char_lm_internal.h"
#include "tool.h"

char_lm_options char_lm_defaults(void)
{
    return (char_lm_options){
        .corpus = "/usr/share/games/fortunes",
        .prompt = "%\n",
        .steps = 2000,
        .context = 64,
        .layers = 2,
        .heads = 4,
        .width = 64,
        .batch = 16,
        .seed = 1,
        .warmup = 50,
        .eval_batches = 32,
        .top_k = 10,
        .sample_len = 400,
        .log_every = 100,
        .lr = 3e-3f,
        .min_lr = 3e-4f,
        .weight_decay = 0.01f,
        .clip = 1.0f,
        .temperature = 0.8f,
    };
}

void char_lm_usage(FILE *out, const char *prog)
{
    char_lm_options d = char_lm_defaults();
    fprintf(out,
            "usage: %s [--corpus PATH] [--steps N] [--context N] [--layers N]\n"
            "       [--heads N] [--width N] [--batch N] [--seed N] "
            "[--threads N]\n"
            "       [--lr X] [--warmup N] [--temperature X] [--top-k N]\n"
            "       [--sample-len N] [--prompt TEXT] [--eval-batches N]\n"
            "       [--log-every N] [--save FILE.npz]\n"
            "defaults: --corpus %s --steps %d --context %d --layers %d "
            "--heads %d\n"
            "  --width %d --batch %d --seed %d --threads 0 (all cores) --lr "
            "%g\n"
            "  --warmup %d --temperature %g --top-k %d (0: all) --sample-len "
            "%d\n"
            "  --prompt '%%\\n' --eval-batches %d --log-every %d\n",
            prog, d.corpus, d.steps, d.context, d.layers, d.heads, d.width,
            d.batch, d.seed, d.lr, d.warmup, d.temperature, d.top_k,
            d.sample_len, d.eval_batches, d.log_every);
}

static int parse_float(const char *flag, const char *v, float lo, float hi,
                       float *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi))
        return kiln_tool_fail("%s: '%s' is not a number in [%g, %g]", flag, v,
                              lo, hi);
    *out = (float)x;
    return 0;
}

typedef struct int_flag {
    const char *name;
    size_t offset;
    int lo, hi;
} int_flag;

#define INT_FLAG(name, field, lo, hi)                                          \
    {                                                                          \
        name, offsetof(char_lm_options, field), lo, hi                         \
    }
static const int_flag INT_FLAGS[] = {
    INT_FLAG("--steps", steps, 1, 100000000),
    INT_FLAG("--context", context, 1, 1 << 16),
    INT_FLAG("--layers", layers, 1, GPT_MAX_LAYERS),
    INT_FLAG("--heads", heads, 1, 1 << 12),
    INT_FLAG("--width", width, 1, 1 << 16),
    INT_FLAG("--batch", batch, 1, 1 << 16),
    INT_FLAG("--seed", seed, 0, 2147483647),
    INT_FLAG("--threads", threads, 0, 1024),
    INT_FLAG("--warmup", warmup, 0, 100000000),
    INT_FLAG("--top-k", top_k, 0, 256),
    INT_FLAG("--sample-len", sample_len, 0, 100000000),
    INT_FLAG("--eval-batches", eval_batches, 1, 1 << 20),
    INT_FLAG("--log-every", log_every, 1, 100000000),
};

/* One flag and its value; 0, or 1 after printing an error. */
static int parse_flag(const char *a, const char *v, char_lm_options *o)
{
    for (size_t i = 0; i < sizeof INT_FLAGS / sizeof *INT_FLAGS; i++)
        if (!strcmp(a, INT_FLAGS[i].name))
            return kiln_tool_parse_int(
                a, v, INT_FLAGS[i].lo, INT_FLAGS[i].hi,
                (int *)((char *)o + INT_FLAGS[i].offset));
    if (!strcmp(a, "--lr"))
        return parse_float(a, v, 0, 10, &o->lr) || (o->min_lr = o->lr / 10, 0);
    if (!strcmp(a, "--temperature"))
        return parse_float(a, v, 0, 100, &o->temperature);
    if (!strcmp(a, "--corpus"))
        return o->corpus = v, 0;
    if (!strcmp(a, "--prompt"))
        return o->prompt = v, 0;
    /* a checkpoint under an .onnx name would mislead kiln info and run */
    if (!strcmp(a, "--save") && strlen(v) >= 5 &&
        !strcmp(v + strlen(v) - 5, ".onnx"))
        return kiln_tool_fail("--save: the transformer saves .npz checkpoints "
                              "(ONNX export is for --model mlp and cnn)");
    if (!strcmp(a, "--save"))
        return o->save = v, 0;
    if (!strcmp(a, "--model"))
        return strcmp(v, "transformer")
                   ? kiln_tool_fail("--model: '%s' is not transformer", v)
                   : 0;
    return kiln_tool_fail("unknown option '%s'", a);
}

int char_lm_parse(int argc, char **argv, int first, char_lm_options *o)
{
    /* every flag takes a value, which may itself be "-h" */
    for (int i = first; i < argc; i += strncmp(argv[i], "--", 2) ? 1 : 2)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 2;
    for (int i = first; i < argc; i += 2) {
        if (strncmp(argv[i], "--", 2))
            return kiln_tool_fail("unexpected argument '%s'", argv[i]);
        if (i + 1 >= argc)
            return kiln_tool_fail("%s needs a value", argv[i]);
        if (parse_flag(argv[i], argv[i + 1], o))
            return 1;
    }
    if (o->width % o->heads)
        return kiln_tool_fail("--width %d is not a multiple of --heads %d",
                              o->width, o->heads);
    return 0;
}

int char_lm_main(int argc, char **argv, int first, const char *prog)
{
    char_lm_options o = char_lm_defaults();
    int r = char_lm_parse(argc, argv, first, &o);
    if (r) {
        char_lm_usage(r == 2 ? stdout : stderr, prog);
        return r == 2 ? 0 : 1;
    }
    return char_lm_run(&o);
}
