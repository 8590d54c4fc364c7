/* The pass pipeline: runs the passes named by the options in order, each
   building a new graph that is validated (and printed on request) before it
   replaces the old one. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static const char *const DEFAULT_PIPELINE =
    "eval_mode,dce,cse,simplify,fold,cse,simplify,bn_fold,conv_fuse,gemm_acc,"
    "fuse,dce";

typedef struct pass_entry {
    const char *name;
    kiln_pass_fn run;
    size_t flag; /* offset of its on/off flag in kiln_compile_options */
} pass_entry;

static const pass_entry PASSES[] = {
    {"dce", kiln_pass_dce, offsetof(kiln_compile_options, dce)},
    {"cse", kiln_pass_cse, offsetof(kiln_compile_options, cse)},
    {"fold", kiln_pass_fold, offsetof(kiln_compile_options, fold)},
    {"simplify", kiln_pass_simplify, offsetof(kiln_compile_options, simplify)},
    {"gemm_acc", kiln_pass_gemm_acc, offsetof(kiln_compile_options, gemm_acc)},
    {"fuse", kiln_pass_fuse, offsetof(kiln_compile_options, fuse)},
    {"conv_fuse", kiln_pass_conv_fuse,
     offsetof(kiln_compile_options, conv_fuse)},
    /* eval_mode runs only for inference */
    {"eval_mode", kiln_pass_eval_mode,
     offsetof(kiln_compile_options, inference)},
    {"bn_fold", kiln_pass_bn_fold, offsetof(kiln_compile_options, bn_fold)},
};

kiln_compile_options kiln_compile_defaults(void)
{
    kiln_compile_options o = {0};
    o.dce = o.cse = o.fold = o.simplify = o.gemm_acc = o.fuse = 1;
    o.conv_fuse = o.bn_fold = 1;
    o.plan_memory = 1;
    o.fold_max_elements = 65536;
    return o;
}

/* The pass named by s[0..len), or NULL. */
static const pass_entry *find_pass(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof PASSES / sizeof *PASSES; i++)
        if (strlen(PASSES[i].name) == len && !strncmp(PASSES[i].name, s, len))
            return &PASSES[i];
    return NULL;
}

kiln_status kiln_passes_check_options(const kiln_compile_options *o, char *err,
                                      size_t len)
{
    if (o->fold_max_elements < 0) {
        snprintf(err, len, "fold_max_elements is %lld, must be >= 0",
                 (long long)o->fold_max_elements);
        return KILN_ERR_ARG;
    }
    const char *s = o->pipeline ? o->pipeline : DEFAULT_PIPELINE;
    while (*s) {
        size_t n = strcspn(s, ",");
        if (!find_pass(s, n)) {
            snprintf(
                err, len,
                "unknown pass '%.*s' in pipeline \"%s\" (passes: dce, cse, "
                "fold, simplify, conv_fuse, eval_mode, bn_fold, gemm_acc, "
                "fuse)",
                (int)n, s, o->pipeline);
            return KILN_ERR_ARG;
        }
        s += n + (s[n] == ',');
    }
    return KILN_OK;
}

static FILE *dump_stream(const kiln_compile_options *o)
{
    if (o->dump)
        return o->dump;
    const char *env = getenv("KILN_DUMP");
    return env && strstr(env, "passes") ? stderr : NULL;
}

kiln_status kiln_unit_alloc(kiln_unit *q, int n_out, int n_in)
{
    *q = (kiln_unit){kiln_graph_new(), NULL, n_out, NULL, n_in};
    q->outputs = calloc((size_t)n_out + 1, sizeof *q->outputs);
    q->inputs = calloc((size_t)n_in + 1, sizeof *q->inputs);
    if (q->g && q->outputs && q->inputs)
        return KILN_OK;
    kiln_unit_free(q);
    return KILN_ERR_MEMORY;
}

void kiln_unit_free(kiln_unit *p)
{
    kiln_graph_free(p->g);
    free(p->outputs);
    free(p->inputs);
    *p = (kiln_unit){0};
}

/* Runs one pass from p into a new unit; replaces p on success. */
static kiln_status run_pass(kiln_unit *p, const pass_entry *pe,
                            const kiln_compile_options *o, kiln_eval_fn eval,
                            char *err, size_t len)
{
    kiln_unit q;
    if (kiln_unit_alloc(&q, p->n_out, p->n_in) != KILN_OK) {
        snprintf(err, len, "out of memory in pass '%s'", pe->name);
        return KILN_ERR_MEMORY;
    }
    kiln_status st = pe->run(p, &q, o, eval);
    char why[KILN_ERRMSG_MAX];
    if (st == KILN_OK)
        st = kiln_unit_validate(&q, why, sizeof why);
    else
        snprintf(why, sizeof why, "%s",
                 q.g->err[0] ? q.g->err : kiln_status_str(st));
    if (st != KILN_OK) {
        snprintf(err, len, "pass '%s' produced an invalid graph: %s", pe->name,
                 why);
        kiln_unit_free(&q);
        return st;
    }
    kiln_unit_free(p);
    *p = q;
    return KILN_OK;
}

kiln_status kiln_passes_run(kiln_unit *p, const kiln_compile_options *o,
                            kiln_eval_fn eval, char *err, size_t len)
{
    kiln_status st = kiln_passes_check_options(o, err, len);
    if (st != KILN_OK)
        return st;
    FILE *dump = dump_stream(o);
    if (dump) {
        fprintf(dump, "--- IR before the passes (%d nodes)\n", p->g->n_nodes);
        kiln_unit_print(p, dump);
    }
    const char *s = o->pipeline ? o->pipeline : DEFAULT_PIPELINE;
    while (*s) {
        size_t n = strcspn(s, ",");
        const pass_entry *pe = find_pass(s, n);
        s += n + (s[n] == ',');
        if (!*(const int *)((const char *)o + pe->flag))
            continue;
        int before = p->g->n_nodes;
        if ((st = run_pass(p, pe, o, eval, err, len)) != KILN_OK)
            return st;
        if (dump) {
            fprintf(dump, "--- IR after %s (%d -> %d nodes)\n", pe->name,
                    before, p->g->n_nodes);
            kiln_unit_print(p, dump);
        }
    }
    return KILN_OK;
}
