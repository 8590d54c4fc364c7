/* Optimisers: 10-step trajectories of SGD, Adagrad, Adam and AdamW (with
   schedules, clipping and accumulation) against torch.optim, in both the
   run-time and the graph form; the forms against each other; checkpoint and
   resume; error paths.  Reference files come from
   tests/ref/make_optim_refs.py. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln.h"

#define REF_DIR KILN_TEST_REF_DIR "/optim/"
#define MAX_STEPS 16
#define NW 12
#define NB 4
#define NP (NW + NB)

/* ------------------------------------------------------------ reference files
 */

typedef struct problem {
    float W[NW], b[NB], X[3][15], T[3][20];
} problem;

typedef struct ref_case {
    char name[64];
    kiln_optim_options opt;
    int steps;
    double lr[MAX_STEPS];
    float p[MAX_STEPS][NP]; /* W then b after each step */
} ref_case;

static problem prob;

static void read_floats(FILE *f, const char *tag, float *out, int n)
{
    char word[64];
    assert_int_equal(fscanf(f, "%63s", word), 1);
    if (strcmp(word, tag) != 0)
        fail_msg("expected '%s', found '%s'", tag, word);
    for (int i = 0; i < n; i++)
        assert_int_equal(fscanf(f, "%f", &out[i]), 1);
}

static void skip_comments(FILE *f)
{
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (c == '#') {
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
        } else if (c != '\n' && c != ' ') {
            ungetc(c, f);
            return;
        }
    }
}

static int load_problem(void **state)
{
    (void)state;
    FILE *f = fopen(REF_DIR "problem.txt", "r");
    assert_non_null(f);
    skip_comments(f);
    read_floats(f, "W", prob.W, NW);
    read_floats(f, "b", prob.b, NB);
    for (int k = 0; k < 3; k++) {
        read_floats(f, "X", prob.X[k], 15);
        read_floats(f, "T", prob.T[k], 20);
    }
    fclose(f);
    return 0;
}

static kiln_optim_kind kind_named(const char *s)
{
    if (!strcmp(s, "sgd"))
        return KILN_SGD;
    if (!strcmp(s, "adagrad"))
        return KILN_ADAGRAD;
    if (!strcmp(s, "adam"))
        return KILN_ADAM;
    if (!strcmp(s, "adamw"))
        return KILN_ADAMW;
    fail_msg("unknown kind '%s'", s);
    return KILN_SGD;
}

static void set_option(kiln_optim_options *o, const char *key, const char *val)
{
    double v = atof(val);
    if (!strcmp(key, "kind"))
        return; /* read first */
    if (!strcmp(key, "schedule")) {
        o->schedule = !strcmp(val, "step")     ? KILN_LR_STEP
                      : !strcmp(val, "cosine") ? KILN_LR_COSINE
                                               : KILN_LR_CONSTANT;
        return;
    }
    static const struct {
        const char *key;
        size_t off;
        int is_int;
    } fields[] = {
#define F(f) {#f, offsetof(kiln_optim_options, f), 0}
#define I(f)                                                                   \
    {                                                                          \
#f, offsetof(kiln_optim_options, f), 1                                 \
    }
        F(lr),        F(momentum),    F(weight_decay), F(beta1),
        F(beta2),     F(eps),         F(lr_decay),     F(initial_accumulator),
        F(gamma),     F(min_lr),      F(clip_norm),    I(nesterov),
        I(step_size), I(total_steps), I(warmup_steps), I(accumulate),
#undef F
#undef I
    };
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        if (strcmp(key, fields[i].key) != 0)
            continue;
        char *p = (char *)o + fields[i].off;
        if (fields[i].is_int)
            *(int *)p = (int)v;
        else
            *(float *)p = (float)v;
        return;
    }
    fail_msg("unknown option '%s'", key);
}

static void load_case(const char *name, ref_case *rc)
{
    char path[512], word[64], key[64], val[64];
    snprintf(path, sizeof path, REF_DIR "%s.txt", name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s", path);
    memset(rc, 0, sizeof *rc);
    snprintf(rc->name, sizeof rc->name, "%s", name);
    skip_comments(f);
    /* options: kind first, then the rest over its defaults */
    long start = ftell(f);
    while (fscanf(f, "%63s", word) == 1 && !strcmp(word, "opt")) {
        assert_int_equal(fscanf(f, "%63s %63s", key, val), 2);
        if (!strcmp(key, "kind"))
            rc->opt = kiln_optim_defaults(kind_named(val));
    }
    fseek(f, start, SEEK_SET);
    while (fscanf(f, "%63s", word) == 1 && !strcmp(word, "opt")) {
        assert_int_equal(fscanf(f, "%63s %63s", key, val), 2);
        set_option(&rc->opt, key, val);
    }
    assert_string_equal(word, "steps");
    assert_int_equal(fscanf(f, "%d", &rc->steps), 1);
    assert_true(rc->steps > 0 && rc->steps <= MAX_STEPS);
    for (int s = 0; s < rc->steps; s++) {
        int k;
        assert_int_equal(fscanf(f, "%63s %d lr %lf", word, &k, &rc->lr[s]), 3);
        assert_string_equal(word, "step");
        assert_int_equal(k, s + 1);
        read_floats(f, "W", rc->p[s], NW);
        read_floats(f, "b", rc->p[s] + NW, NB);
    }
    fclose(f);
}

/* ------------------------------------------------------------ the problem */

typedef struct model {
    kiln_node *x, *t, *W, *b, *loss;
} model;

/* loss = mean((x W + b - t)^2) with W, b initialised from the problem. */
static model build_model(kiln_graph *g)
{
    model m;
    m.x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(5, 3));
    m.t = kiln_input(g, "t", KILN_F32, KILN_SHAPE(5, 4));
    m.W = kiln_variable(g, "W", KILN_F32, KILN_SHAPE(3, 4),
                        kiln_init_values(prob.W));
    m.b = kiln_variable(g, "b", KILN_F32, KILN_SHAPE(4),
                        kiln_init_values(prob.b));
    kiln_node *d =
        kiln_sub(g, kiln_add(g, kiln_matmul(g, m.x, m.W, 0, 0), m.b), m.t);
    m.loss = kiln_mean(g, kiln_mul(g, d, d), KILN_ALL_AXES, 0);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    return m;
}

static kiln_tensor *batch_x(int call)
{
    return kiln_tensor_wrap(KILN_F32, KILN_SHAPE(5, 3), prob.X[call % 3]);
}

static kiln_tensor *batch_t(int call)
{
    return kiln_tensor_wrap(KILN_F32, KILN_SHAPE(5, 4), prob.T[call % 3]);
}

static void read_params(kiln_session *s, float *out)
{
    kiln_tensor *W = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(3, 4), out);
    kiln_tensor *b = kiln_tensor_wrap(KILN_F32, KILN_SHAPE(4), out + NW);
    assert_int_equal(kiln_variable_read(s, "W", W), KILN_OK);
    assert_int_equal(kiln_variable_read(s, "b", b), KILN_OK);
    kiln_tensor_free(W);
    kiln_tensor_free(b);
}

static int calls_per_step(const kiln_optim_options *o)
{
    return o->accumulate > 1 ? o->accumulate : 1;
}

/* One call of the run-time form: a fresh dynamic graph, forward, backward,
   kiln_optimizer_update.  Returns 1 when the call applied a step. */
static int dynamic_call(kiln_session *s, kiln_optimizer *o, kiln_graph *g,
                        int call)
{
    kiln_graph_clear(g);
    model m = build_model(g);
    kiln_tensor *x = batch_x(call), *t = batch_t(call);
    assert_int_equal(kiln_feed(s, m.x, x), KILN_OK);
    assert_int_equal(kiln_feed(s, m.t, t), KILN_OK);
    kiln_tensor_free(x);
    kiln_tensor_free(t);
    int64_t before = kiln_optimizer_step_count(o);
    assert_int_equal(kiln_backprop(s, g, m.loss), KILN_OK);
    kiln_status st = kiln_optimizer_update(o, g);
    if (st != KILN_OK)
        fail_msg("update: %s", kiln_session_error(s));
    return kiln_optimizer_step_count(o) == before + 1;
}

/* Runs calls [first, last) of the run-time form, recording the parameters
   after each applied step at p[step - 1] and checking the lr beforehand. */
static void run_dynamic(kiln_session *s, const ref_case *rc, int first,
                        int last, float (*p)[NP])
{
    kiln_optimizer *o = kiln_optimizer_new(s, &rc->opt);
    assert_non_null(o);
    kiln_graph *g = kiln_graph_new();
    for (int call = first; call < last; call++) {
        int64_t step = kiln_optimizer_step_count(o);
        double lr = kiln_optimizer_lr(o), want = rc->lr[step];
        if (fabs(lr - want) > 1e-6 * fabs(want))
            fail_msg("%s step %d: lr %.9g, torch %.9g", rc->name, (int)step + 1,
                     lr, want);
        if (dynamic_call(s, o, g, call))
            read_params(s, p[step]);
    }
    kiln_graph_free(g);
    kiln_optimizer_free(o);
}

/* The same with one compiled training step run once per call; exact: with
   the gemm_acc pass off, so that the step runs the run-time form's kernels
   (gemm_acc folds a weight gradient's product into its update, which
   changes the update by rounding). */
static void run_compiled(kiln_session *s, const ref_case *rc, int first,
                         int last, float (*p)[NP], int exact)
{
    kiln_compile_options co = kiln_compile_defaults();
    co.gemm_acc = !exact;
    kiln_optimizer *o = kiln_optimizer_new(s, &rc->opt);
    assert_non_null(o);
    kiln_graph *g = kiln_graph_new();
    model m = build_model(g);
    kiln_node *step = kiln_optimizer_build_step(o, g, m.loss);
    if (kiln_graph_status(g) != KILN_OK)
        fail_msg("build_step: %s", kiln_graph_error(g));
    kiln_node *outs[2] = {m.loss, step}, *ins[2] = {m.x, m.t};
    kiln_function *f = kiln_compile_ex(s, g, outs, 2, ins, 2, &co);
    if (!f)
        fail_msg("compile: %s", kiln_session_error(s));
    kiln_tensor *loss = kiln_function_new_output(f, 0);
    for (int call = first; call < last; call++) {
        kiln_tensor *in[2] = {batch_x(call), batch_t(call)},
                    *out[2] = {loss, NULL};
        int64_t before = kiln_optimizer_step_count(o);
        assert_int_equal(kiln_run(f, in, out), KILN_OK);
        if (kiln_optimizer_step_count(o) == before + 1)
            read_params(s, p[before]);
        kiln_tensor_free(in[0]);
        kiln_tensor_free(in[1]);
    }
    assert_true(isfinite(kiln_tensor_f32(loss)[0]));
    kiln_tensor_free(loss);
    kiln_function_free(f);
    kiln_graph_free(g);
    kiln_optimizer_free(o);
}

static void check_against_torch(const ref_case *rc, float (*p)[NP],
                                const char *form)
{
    double worst = 0;
    for (int s = 0; s < rc->steps; s++)
        for (int i = 0; i < NP; i++) {
            double e = fabs(p[s][i] - rc->p[s][i]) / (fabs(rc->p[s][i]) + 1e-1);
            worst = e > worst ? e : worst;
        }
    if (getenv("OPTIM_VERBOSE"))
        printf("%-22s %-9s max |kiln-torch|/(|torch|+0.1) = %.2e\n", rc->name,
               form, worst);
    for (int s = 0; s < rc->steps; s++)
        for (int i = 0; i < NP; i++) {
            double a = p[s][i], r = rc->p[s][i];
            if (!(fabs(a - r) <= 1e-5 * fabs(r) + 1e-6))
                fail_msg("%s (%s) step %d %s[%d]: kiln %.9g, torch %.9g",
                         rc->name, form, s + 1, i < NW ? "W" : "b",
                         i < NW ? i : i - NW, a, r);
        }
}

/* ------------------------------------------------------------ trajectories */

static void test_trajectory(void **state)
{
    const char *name = *state;
    ref_case rc;
    float pd[MAX_STEPS][NP], pc[MAX_STEPS][NP];
    load_case(name, &rc);
    int calls = rc.steps * calls_per_step(&rc.opt);

    kiln_session *s1 = kiln_session_new(NULL);
    run_dynamic(s1, &rc, 0, calls, pd);
    check_against_torch(&rc, pd, "run-time");

    /* the default passes: within rounding of the run-time form */
    kiln_session *s3 = kiln_session_new(NULL);
    run_compiled(s3, &rc, 0, calls, pc, 0);
    check_against_torch(&rc, pc, "graph");
    for (int s = 0; s < rc.steps; s++)
        for (int i = 0; i < NP; i++)
            if (!(fabs(pd[s][i] - pc[s][i]) <= 1e-6 * fabs(pd[s][i]) + 1e-7))
                fail_msg("%s step %d [%d]: run-time %.9g, graph %.9g", name,
                         s + 1, i, pd[s][i], pc[s][i]);
    kiln_session_free(s3);

    kiln_session *s2 = kiln_session_new(NULL);
    run_compiled(s2, &rc, 0, calls, pc, 1);
    check_against_torch(&rc, pc, "graph");

    /* the two forms run the same kernels on the same values */
    for (int s = 0; s < rc.steps; s++)
        for (int i = 0; i < NP; i++)
            if (pd[s][i] != pc[s][i])
                fail_msg("%s step %d [%d]: run-time %.9g, graph %.9g", name,
                         s + 1, i, pd[s][i], pc[s][i]);
    /* and leave the same state behind */
    assert_int_equal(kiln_session_num_variables(s1),
                     kiln_session_num_variables(s2));
    for (int i = 0; i < kiln_session_num_variables(s1); i++) {
        kiln_param_info a, b;
        assert_int_equal(kiln_session_variable_info(s1, i, &a), KILN_OK);
        assert_int_equal(kiln_session_variable_info(s2, i, &b), KILN_OK);
        assert_string_equal(a.name, b.name);
        assert_memory_equal(a.data, b.data,
                            (size_t)kiln_shape_numel(a.shape) *
                                kiln_dtype_size(a.dtype));
    }
    kiln_session_free(s1);
    kiln_session_free(s2);
}

/* Saving every session variable mid-run (in the middle of an accumulation
   too) and restoring it in a fresh session resumes bitwise; the second half
   here also switches from the run-time to the graph form. */
static void test_resume(void **state)
{
    (void)state;
    ref_case rc;
    float full[MAX_STEPS][NP], part[MAX_STEPS][NP];
    load_case("adam_accumulate_clip", &rc);
    int calls = rc.steps * calls_per_step(&rc.opt), cut = 13; /* 4 steps + 1 */

    kiln_session *s = kiln_session_new(NULL);
    run_dynamic(s, &rc, 0, calls, full);
    kiln_session_free(s);

    s = kiln_session_new(NULL);
    run_dynamic(s, &rc, 0, cut, part);
    kiln_tensor_list *saved = kiln_tensor_list_new();
    int trainable[64], n = kiln_session_num_variables(s);
    assert_true(n < 64);
    for (int i = 0; i < n; i++) {
        kiln_param_info info;
        assert_int_equal(kiln_session_variable_info(s, i, &info), KILN_OK);
        kiln_tensor *t = kiln_tensor_new(info.dtype, info.shape);
        memcpy(kiln_tensor_data(t), info.data,
               (size_t)kiln_tensor_numel(t) * kiln_dtype_size(info.dtype));
        assert_int_equal(kiln_tensor_list_add(saved, info.name, t), KILN_OK);
        trainable[i] = info.trainable;
    }
    kiln_session_free(s);

    s = kiln_session_new(NULL);
    for (int i = 0; i < n; i++) {
        kiln_tensor *t = kiln_tensor_list_get(saved, i);
        const char *name = kiln_tensor_list_name(saved, i);
        assert_int_equal(kiln_session_declare(s, name, kiln_tensor_dtype(t),
                                              kiln_tensor_shape(t),
                                              kiln_init_zeros(), trainable[i]),
                         KILN_OK);
        assert_int_equal(kiln_variable_write(s, name, t), KILN_OK);
    }
    kiln_tensor_list_free(saved);
    run_compiled(s, &rc, cut, calls, part, 1);
    kiln_session_free(s);
    for (int st = 0; st < rc.steps; st++)
        for (int i = 0; i < NP; i++)
            if (full[st][i] != part[st][i])
                fail_msg("step %d [%d]: uninterrupted %.9g, resumed %.9g",
                         st + 1, i, full[st][i], part[st][i]);
    check_against_torch(&rc, part, "resumed");
}

/* State lives in the session under derived names, non-trainable. */
static void test_state_variables(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options oo = kiln_optim_defaults(KILN_ADAM);
    oo.accumulate = 2;
    kiln_optimizer *o = kiln_optimizer_new(s, &oo);
    oo = kiln_optim_defaults(KILN_SGD);
    oo.momentum = 0.9f;
    oo.name = "second";
    kiln_optimizer *o2 = kiln_optimizer_new(s, &oo);
    assert_non_null(o);
    assert_non_null(o2);
    assert_int_equal(kiln_optimizer_step_count(o), 0);
    kiln_graph *g = kiln_graph_new();
    for (int call = 0; call < 4; call++) {
        dynamic_call(s, o, g, call);
        kiln_graph_clear(g);
        model m = build_model(g);
        kiln_tensor *x = batch_x(call), *t = batch_t(call);
        kiln_feed(s, m.x, x);
        kiln_feed(s, m.t, t);
        kiln_tensor_free(x);
        kiln_tensor_free(t);
        assert_int_equal(kiln_backprop(s, g, m.loss), KILN_OK);
        assert_int_equal(kiln_optimizer_update(o2, g), KILN_OK);
    }
    assert_int_equal(kiln_optimizer_step_count(o), 2);
    assert_int_equal(kiln_optimizer_step_count(o2), 4);
    const char *names[] = {
        "optim.step",       "optim.micro", "optim.bias1", "optim.bias2",
        "W.adam_m",         "W.adam_v",    "W.accum",     "b.adam_m",
        "b.adam_v",         "b.accum",     "second.step", "W.second.momentum",
        "b.second.momentum"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int found = 0;
        for (int j = 0; j < kiln_session_num_variables(s); j++) {
            kiln_param_info info;
            kiln_session_variable_info(s, j, &info);
            if (!strcmp(info.name, names[i])) {
                found = 1;
                assert_false(info.trainable);
                assert_int_equal(info.dtype, KILN_F32);
            }
        }
        if (!found)
            fail_msg("no state variable '%s'", names[i]);
    }
    kiln_graph_free(g);
    kiln_optimizer_free(o);
    kiln_optimizer_free(o2);
    kiln_session_free(s);
}

static void test_defaults(void **state)
{
    (void)state;
    kiln_optim_options o = kiln_optim_defaults(KILN_ADAM);
    assert_true(o.kind == KILN_ADAM && o.lr == 1e-3f && o.beta1 == 0.9f &&
                o.beta2 == 0.999f && o.eps == 1e-8f && o.weight_decay == 0.0f);
    o = kiln_optim_defaults(KILN_ADAMW);
    assert_true(o.weight_decay == 1e-2f && o.beta2 == 0.999f);
    o = kiln_optim_defaults(KILN_ADAGRAD);
    assert_true(o.lr == 1e-2f && o.eps == 1e-10f &&
                o.initial_accumulator == 0.0f);
    o = kiln_optim_defaults(KILN_SGD);
    assert_true(o.lr == 1e-3f && o.momentum == 0.0f && !o.nesterov &&
                o.schedule == KILN_LR_CONSTANT && o.clip_norm == 0.0f &&
                o.accumulate == 0 && o.name == NULL);
}

/* ------------------------------------------------------------ errors */

static void expect_bad(kiln_session *s, kiln_optim_options o,
                       const char *phrase)
{
    assert_null(kiln_optimizer_new(s, &o));
    if (!strstr(kiln_session_error(s), phrase))
        fail_msg("error \"%s\" lacks \"%s\"", kiln_session_error(s), phrase);
    if (!strstr(kiln_last_error(), phrase))
        fail_msg("last error \"%s\" lacks \"%s\"", kiln_last_error(), phrase);
}

static void test_bad_options(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options o = kiln_optim_defaults(KILN_SGD);
    assert_null(kiln_optimizer_new(NULL, &o));
    assert_non_null(strstr(kiln_last_error(), "session is NULL"));
    assert_null(kiln_optimizer_new(s, NULL));
    assert_non_null(strstr(kiln_session_error(s), "options are NULL"));

    o.kind = (kiln_optim_kind)7;
    expect_bad(s, o, "unknown optimiser kind 7");
    o = kiln_optim_defaults(KILN_SGD);
    o.lr = -1.0f;
    expect_bad(s, o, "lr must be finite and >= 0");
    o.lr = NAN;
    expect_bad(s, o, "lr must be finite and >= 0");
    o = kiln_optim_defaults(KILN_SGD);
    o.nesterov = 1;
    expect_bad(s, o, "Nesterov momentum needs momentum > 0");
    o.momentum = -0.5f;
    expect_bad(s, o, "momentum must be finite and >= 0");
    o = kiln_optim_defaults(KILN_ADAM);
    o.beta1 = 1.0f;
    expect_bad(s, o, "beta1 must be in [0, 1)");
    o = kiln_optim_defaults(KILN_ADAMW);
    o.beta2 = -0.1f;
    expect_bad(s, o, "beta2 must be in [0, 1)");
    o = kiln_optim_defaults(KILN_ADAMW);
    o.weight_decay = -1.0f;
    expect_bad(s, o, "weight_decay must be finite and >= 0");
    o = kiln_optim_defaults(KILN_ADAGRAD);
    o.lr_decay = -1.0f;
    expect_bad(s, o, "lr_decay must be finite and >= 0");
    o = kiln_optim_defaults(KILN_ADAGRAD);
    o.initial_accumulator = -1.0f;
    expect_bad(s, o, "initial_accumulator must be finite and >= 0");
    o = kiln_optim_defaults(KILN_ADAGRAD);
    o.eps = -1.0f;
    expect_bad(s, o, "eps must be finite and >= 0");
    o = kiln_optim_defaults(KILN_SGD);
    o.schedule = KILN_LR_STEP;
    o.step_size = 0;
    expect_bad(s, o, "step schedule needs step_size >= 1");
    o.step_size = 2;
    o.gamma = 0.0f;
    expect_bad(s, o, "step schedule needs gamma > 0");
    o = kiln_optim_defaults(KILN_SGD);
    o.schedule = KILN_LR_COSINE;
    o.total_steps = 0;
    expect_bad(s, o, "cosine schedule needs total_steps >= 1");
    o.total_steps = 5;
    o.min_lr = -1.0f;
    expect_bad(s, o, "min_lr must be finite and >= 0");
    o = kiln_optim_defaults(KILN_SGD);
    o.schedule = (kiln_schedule_kind)9;
    expect_bad(s, o, "unknown schedule 9");
    o = kiln_optim_defaults(KILN_SGD);
    o.warmup_steps = -1;
    expect_bad(s, o, "warmup_steps must be >= 0");
    o = kiln_optim_defaults(KILN_SGD);
    o.clip_norm = -1.0f;
    expect_bad(s, o, "clip_norm must be finite and >= 0");
    o = kiln_optim_defaults(KILN_SGD);
    o.accumulate = -2;
    expect_bad(s, o, "accumulate must be >= 0");
    o = kiln_optim_defaults(KILN_SGD);
    o.name = "";
    expect_bad(s, o, "name must have 1 to 63 characters");

    /* a state variable already in the session with another shape */
    assert_int_equal(kiln_session_declare(s, "clash.step", KILN_F32,
                                          KILN_SHAPE(2), kiln_init_zeros(), 0),
                     KILN_OK);
    o = kiln_optim_defaults(KILN_SGD);
    o.name = "clash";
    expect_bad(s, o, "state variable 'clash.step'");
    kiln_session_free(s);
}

static void test_update_errors(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options oo = kiln_optim_defaults(KILN_ADAM);
    kiln_optimizer *o = kiln_optimizer_new(s, &oo);
    kiln_graph *g = kiln_graph_new();

    assert_int_equal(kiln_optimizer_update(NULL, g), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_last_error(), "optimizer is NULL"));
    assert_int_equal(kiln_optimizer_update(o, NULL), KILN_ERR_ARG);
    assert_non_null(strstr(kiln_session_error(s), "graph is NULL"));

    /* before backward */
    model m = build_model(g);
    kiln_tensor *x = batch_x(0), *t = batch_t(0);
    kiln_feed(s, m.x, x);
    kiln_feed(s, m.t, t);
    assert_int_equal(kiln_forward(s, g), KILN_OK);
    assert_int_equal(kiln_optimizer_update(o, g), KILN_ERR_STATE);
    assert_non_null(strstr(kiln_session_error(s), "run kiln_backward first"));
    assert_int_equal(kiln_optimizer_step_count(o), 0);

    /* nothing trainable */
    kiln_graph_clear(g);
    m = build_model(g);
    kiln_node_set_trainable(m.W, 0);
    kiln_node_set_trainable(m.b, 0);
    kiln_feed(s, m.x, x);
    kiln_feed(s, m.t, t);
    assert_int_equal(kiln_backprop(s, g, m.loss), KILN_OK);
    assert_int_equal(kiln_optimizer_update(o, g), KILN_ERR_ARG);
    assert_non_null(
        strstr(kiln_session_error(s), "depends on no trainable variable"));
    assert_int_equal(kiln_optimizer_step_count(o), 0);

    /* a failed graph */
    kiln_graph_clear(g);
    m = build_model(g);
    kiln_add(g, m.W, m.x); /* [3,4] + [5,3]: shape error */
    assert_int_equal(kiln_optimizer_update(o, g), KILN_ERR_SHAPE);
    assert_non_null(strstr(kiln_session_error(s), "the graph failed"));

    /* graph form */
    assert_null(kiln_optimizer_build_step(o, NULL, NULL));
    kiln_graph_clear(g);
    m = build_model(g);
    kiln_node *n = kiln_optimizer_build_step(NULL, g, m.loss);
    assert_string_equal(kiln_node_op_name(n), "error");
    assert_non_null(strstr(kiln_graph_error(g), "optimizer is NULL"));

    kiln_graph_clear(g);
    m = build_model(g);
    n = kiln_optimizer_build_step(o, g, m.W);
    assert_string_equal(kiln_node_op_name(n), "error");
    assert_int_equal(kiln_graph_status(g), KILN_ERR_SHAPE);
    assert_non_null(strstr(kiln_graph_error(g), "must be an f32 scalar"));

    kiln_graph_clear(g);
    m = build_model(g);
    n = kiln_optimizer_build_step(o, g, NULL);
    assert_int_equal(kiln_graph_status(g), KILN_ERR_ARG);

    kiln_graph_clear(g);
    m = build_model(g);
    kiln_node_set_trainable(m.W, 0);
    kiln_node_set_trainable(m.b, 0);
    n = kiln_optimizer_build_step(o, g, m.loss);
    assert_int_equal(kiln_graph_status(g), KILN_ERR_ARG);
    assert_non_null(
        strstr(kiln_graph_error(g), "depends on no trainable variable"));

    /* NULL optimizer queries */
    assert_int_equal(kiln_optimizer_step_count(NULL), -1);
    assert_true(kiln_optimizer_lr(NULL) == 0.0f);
    kiln_optimizer_free(NULL);

    kiln_tensor_free(x);
    kiln_tensor_free(t);
    kiln_graph_free(g);
    kiln_optimizer_free(o);
    kiln_session_free(s);
}

/* kiln_optimizer_lr follows the step counter in the session: warm-up, then
   cosine, held at min_lr after total_steps. */
static void test_lr_schedule_host(void **state)
{
    (void)state;
    kiln_session *s = kiln_session_new(NULL);
    kiln_optim_options oo = kiln_optim_defaults(KILN_SGD);
    oo.lr = 1.0f;
    oo.schedule = KILN_LR_COSINE;
    oo.total_steps = 4;
    oo.min_lr = 0.25f;
    oo.warmup_steps = 2;
    kiln_optimizer *o = kiln_optimizer_new(s, &oo);
    float expect[] = {0.5f,   1.0f,      1.0f,  0.890165f,
                      0.625f, 0.359835f, 0.25f, 0.25f};
    for (int e = 0; e < 8; e++) {
        kiln_tensor *t = kiln_tensor_from_f32(KILN_SCALAR, (float[]){(float)e});
        assert_int_equal(kiln_variable_write(s, "optim.step", t), KILN_OK);
        kiln_tensor_free(t);
        assert_int_equal(kiln_optimizer_step_count(o), e);
        assert_float_equal(kiln_optimizer_lr(o), expect[e], 1e-6);
    }
    kiln_optimizer_free(o);
    kiln_session_free(s);
}

/* One test per reference file, named after it. */
#define CASE(name)                                                             \
    {                                                                          \
        name, test_trajectory, NULL, NULL, (void *)name                        \
    }

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE("sgd"),
        CASE("sgd_momentum"),
        CASE("sgd_nesterov"),
        CASE("sgd_weight_decay"),
        CASE("sgd_momentum_wd"),
        CASE("adagrad"),
        CASE("adagrad_decay"),
        CASE("adam"),
        CASE("adam_l2"),
        CASE("adamw"),
        CASE("adamw_wd"),
        CASE("sgd_step"),
        CASE("adam_cosine"),
        CASE("sgd_warmup"),
        CASE("adamw_warmup_cosine"),
        CASE("sgd_clip"),
        CASE("adam_clip"),
        CASE("sgd_accumulate"),
        CASE("adam_accumulate_clip"),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_state_variables),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_update_errors),
        cmocka_unit_test(test_lr_schedule_host),
    };
    return cmocka_run_group_tests(tests, load_problem, NULL);
}
