/* The kiln command: train, evaluate and inspect MLPs and CNNs on
   MNIST-format data, and train character-level language models.
 *
 *   kiln train --dataset mnist|fashion-mnist [options]
 *   kiln train --model transformer [options]
 *   kiln eval --model model.npz [--dataset ...] [--data DIR]
 *   kiln info FILE
 *   kiln run model.onnx --input name=file.npy ... --output out.npz
 *
 * Every failure prints one line "kiln: ..." and exits with status 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "char_lm.h"
#include "mlp.h"
#include "onnx_run.h"
#include "tool.h"

/* The usage text: on stdout with status 0 when asked for (-h, --help),
   on stderr with status 1 after a mistake. */
static int usage_to(FILE *out, int status)
{
    fprintf(
        out,
        "usage: kiln train --dataset mnist|fashion-mnist [--data DIR]\n"
        "                  [--model mlp|cnn] [--hidden 600[,N...]]\n"
        "                  [--activation relu|gelu|tanh]\n"
        "                  [--optimizer sgd|momentum|adam|adamw|adagrad] [--lr "
        "X]\n"
        "                  [--epochs N] [--steps N] [--batch N] [--seed N]\n"
        "                  [--threads N] [--resume model.npz] [--zero1]\n"
        "                  [--save model.npz|model.onnx] [--log metrics.csv]\n"
        "                  [--plot curves.png]\n"
        "       kiln train --model transformer [--corpus PATH] [--steps N] "
        "...\n"
        "                  (a character-level language model: kiln train "
        "--model\n"
        "                  transformer --help lists its options)\n"
        "       kiln eval --model model.npz [--dataset mnist|fashion-mnist] "
        "[--data DIR]\n"
        "       kiln info FILE.npz|FILE.safetensors|FILE.bin|FILE.onnx\n"
        "       kiln run model.onnx --input NAME=FILE.npy|FILE.pb ... "
        "--output out.npz\n"
        "                [--threads N]\n"
        "       kiln help | -h | --help, or kiln COMMAND -h | --help\n");
    return status;
}

static int usage(void)
{
    return usage_to(stderr, 1);
}

static int is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

static int parse_float(const char *flag, const char *v, float *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !(x > 0) || x > 1e6)
        return kiln_tool_fail("%s: '%s' is not a positive number", flag, v);
    *out = (float)x;
    return 0;
}

static int parse_hidden(const char *v, mlp_config *c)
{
    c->n_hidden = 0;
    const char *p = v;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 65536 || c->n_hidden == MLP_MAX_LAYERS - 1)
            return kiln_tool_fail(
                "--hidden: '%s' is not a list like 600 or 256,128", v);
        c->hidden[c->n_hidden++] = (int)x;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return kiln_tool_fail(
                "--hidden: '%s' is not a list like 600 or 256,128", v);
    }
    return c->n_hidden ? 0 : kiln_tool_fail("--hidden: empty list");
}

static int one_of(const char *flag, const char *v, const char *const *names,
                  int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) {
            *out = i;
            return 0;
        }
    return kiln_tool_fail("%s: unknown value '%s'", flag, v);
}

static const char *const DATASETS[] = {"mnist", "fashion-mnist"};
static const char *const MODELS[] = {"mlp", "cnn"};
static const char *const ACTIVATIONS[] = {"relu", "gelu", "tanh"};
static const char *const OPTIMIZERS[] = {"sgd", "momentum", "adam", "adamw",
                                         "adagrad"};

enum { ARGS_OK, ARGS_BAD, ARGS_HELP };

/* Parses the flags shared by train and eval: ARGS_OK, ARGS_BAD after
   printing an error, or ARGS_HELP when -h or --help stands for a flag. */
static int parse_args(int argc, char **argv, mlp_config *c, int is_train)
{
    /* every other flag but --zero1 takes a value, which may be "-h" */
    for (int i = 2; i < argc;
         i +=
         strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i], "--zero1") ? 2 : 1)
        if (is_help(argv[i]))
            return ARGS_HELP;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0)
            return kiln_tool_fail("unexpected argument '%s'", a);
        if (is_train && !strcmp(a, "--zero1")) {
            c->zero1 = 1;
            continue;
        }
        if (i + 1 >= argc)
            return kiln_tool_fail("%s needs a value", a);
        const char *v = argv[++i];
        int r;
        if (!strcmp(a, "--dataset"))
            r = one_of(a, v, DATASETS, 2, &c->dataset);
        else if (!strcmp(a, "--data"))
            r = (c->data_dir = v, 0);
        else if (!strcmp(a, "--model") && is_train)
            r = one_of(a, v, MODELS, 2, &c->arch);
        else if (!strcmp(a, "--model"))
            r = (c->model = v, 0);
        else if (!is_train)
            r = kiln_tool_fail("eval: unknown option '%s'", a);
        else if (!strcmp(a, "--hidden"))
            r = parse_hidden(v, c), c->hidden_given = 1;
        else if (!strcmp(a, "--activation"))
            r = one_of(a, v, ACTIVATIONS, 3, &c->activation);
        else if (!strcmp(a, "--optimizer"))
            r = one_of(a, v, OPTIMIZERS, 5, &c->optimizer);
        else if (!strcmp(a, "--lr"))
            r = parse_float(a, v, &c->lr);
        else if (!strcmp(a, "--epochs"))
            r = kiln_tool_parse_int(a, v, 1, 100000, &c->epochs);
        else if (!strcmp(a, "--batch"))
            r = kiln_tool_parse_int(a, v, 1, 1 << 20, &c->batch);
        else if (!strcmp(a, "--seed"))
            r = kiln_tool_parse_int(a, v, 0, 2147483647, &c->seed);
        else if (!strcmp(a, "--threads"))
            r = kiln_tool_parse_int(a, v, 0, 1024, &c->threads);
        else if (!strcmp(a, "--steps"))
            r = kiln_tool_parse_int(a, v, 1, 2147483647, &c->steps);
        else if (!strcmp(a, "--resume"))
            r = (c->resume = v, 0);
        else if (!strcmp(a, "--save"))
            r = (c->save = v, 0);
        else if (!strcmp(a, "--log"))
            r = (c->log = v, 0);
        else if (!strcmp(a, "--plot"))
            r = (c->plot = v, 0);
        else
            r = kiln_tool_fail("train: unknown option '%s'", a);
        if (r)
            return 1;
    }
    if (c->arch == 1 && c->hidden_given && c->n_hidden != 1)
        return kiln_tool_fail("--hidden: the cnn has one dense hidden layer "
                              "(give one width, e.g. --hidden 512)");
    if (!c->data_dir)
        c->data_dir = c->dataset == 0 ? "data/mnist" : "data/fashion-mnist";
    return 0;
}

/* `kiln train --model transformer` trains the character-level language
   model, with its own options (tools/char_lm.h). */
static int wants_transformer(int argc, char **argv)
{
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--model") && !strcmp(argv[i + 1], "transformer"))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    if (is_help(cmd) || !strcmp(cmd, "help"))
        return usage_to(stdout, 0);
    if (!strcmp(cmd, "info")) {
        if (argc == 3 && is_help(argv[2]))
            return usage_to(stdout, 0);
        if (argc != 3)
            return usage();
        size_t len = strlen(argv[2]);
        int onnx = len >= 5 && !strcmp(argv[2] + len - 5, ".onnx");
        if ((onnx ? kiln_onnx_info(argv[2], stdout)
                  : kiln_file_info(argv[2], stdout)) != KILN_OK)
            return kiln_tool_fail("%s", kiln_last_error());
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return argc == 3 && is_help(argv[2]) ? usage_to(stdout, 0)
                                             : onnx_run_main(argc, argv);
    if (!strcmp(cmd, "train") && wants_transformer(argc, argv))
        return char_lm_main(argc, argv, 2, "kiln train --model transformer");
    mlp_config c = mlp_defaults();
    if (!strcmp(cmd, "train") || !strcmp(cmd, "eval")) {
        int train = !strcmp(cmd, "train");
        int r = parse_args(argc, argv, &c, train);
        if (r != ARGS_OK)
            return r == ARGS_HELP ? usage_to(stdout, 0) : 1;
        if (train)
            return mlp_train(&c);
        if (!c.model)
            return kiln_tool_fail("eval: --model is required");
        return mlp_eval(&c);
    }
    kiln_tool_fail("unknown command '%s'", cmd);
    return usage();
}
