/* The op table's descriptors: each op's shape rule gives what its builder
   built, the validator reports the rule's reason, attributes compare, hash
   and print by the op's mask, and the aliasing rule says which input an
   output may overwrite.  And every op of the table has what an op needs:
   a reference kernel, a PyTorch reference case (tests/ref/ops), a gradient
   check (or NONE in its gradient column), and a doc row (docs/ops.md);
   INTERNAL ops (compiler-built) need only their kernel, leaves and state
   ops no PyTorch case. */
#define _POSIX_C_SOURCE 200809L
#include "test_helpers.h"

#include <dirent.h>

#include "cpu/kernels.h"
#include "graph/graph.h"
#include "passes/passes.h"

/* One node of every shape rule a builder runs. */
static int build_all(kiln_graph *g, kiln_node **out)
{
    kiln_node *a = kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *b = kiln_input(g, "b", KILN_F32, KILN_SHAPE(4, 3));
    kiln_node *l = kiln_input(g, "l", KILN_I32, KILN_SHAPE(2));
    int perm[2] = {1, 0};
    int64_t lo[2] = {1, 0}, hi[2] = {0, 2};
    kiln_node *ab[2] = {a, a};
    int n = 0;
    out[n++] = kiln_exp(g, a);
    out[n++] = kiln_add(g, a, kiln_scalar(g, 1.0f));
    out[n++] = kiln_select(g, a, a, kiln_scalar(g, 0.0f));
    out[n++] = kiln_matmul(g, a, b, 0, 1);
    out[n++] = kiln_sum(g, a, KILN_AXIS(1), 1);
    out[n++] = kiln_reduce_max(g, a, KILN_AXIS(0), 0);
    out[n++] = kiln_argmax(g, a, 1);
    out[n++] = kiln_reshape(g, a, KILN_SHAPE(3, -1));
    out[n++] = kiln_permute(g, a, perm);
    out[n++] = kiln_broadcast_to(g, a, KILN_SHAPE(5, 2, 3));
    out[n++] = kiln_slice(g, a, lo, (int64_t[]){2, 3});
    out[n++] = kiln_pad(g, a, lo, hi, 0.5f);
    out[n++] = kiln_concat(g, ab, 2, 1);
    out[n++] = kiln_one_hot(g, l, 4);
    out[n++] = kiln_cast(g, l, KILN_F32);
    out[n++] = kiln_stop_gradient(g, a);
    out[n++] = kiln_softmax_cross_entropy(g, a, l);
    kiln_node *img = kiln_input(g, "img", KILN_F32, KILN_SHAPE(1, 2, 5, 4));
    out[n++] = kiln_max_pool2d(g, img, (int[]){2, 2}, NULL, NULL, NULL, 1);
    out[n++] =
        kiln_avg_pool2d(g, img, (int[]){3, 3}, NULL, (int[]){1, 1}, 0, 1);
    out[n++] = kiln_upsample2d(g, img, (int64_t[]){7, 3}, NULL,
                               KILN_UPSAMPLE_BILINEAR, 1);
    kiln_node *rs[2] = {
        kiln_node_set_trainable(
            kiln_variable(g, "rm", KILN_F32, KILN_SHAPE(3), kiln_init_zeros()),
            0),
        kiln_node_set_trainable(
            kiln_variable(g, "rv", KILN_F32, KILN_SHAPE(3), kiln_init_ones()),
            0)};
    out[n++] = kiln_batch_norm(g, a, NULL, NULL, rs[0], rs[1], 0.1f, 1e-5f);
    out[n++] = kiln_group_norm(g, kiln_reshape(g, b, KILN_SHAPE(2, 3, 2)), 3,
                               NULL, NULL, 1e-5f);
    out[n++] = kiln_dropout(g, a, 0.5f);
    kiln_node *q = kiln_input(g, "q", KILN_F32, KILN_SHAPE(1, 2, 3, 4));
    kiln_attention_options causal = {.causal = 1};
    out[n++] = kiln_scaled_dot_product_attention(g, q, q, q, NULL, &causal);
    out[n++] = kiln_rms_norm(g, q, 2, NULL, 1e-5f);
    return n;
}

static void test_rules_give_what_builders_built(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *nodes[32];
    int n = build_all(g, nodes);
    assert_int_equal(kiln_graph_status(g), KILN_OK);
    for (int id = 0; id < g->n_nodes; id++) {
        const kiln_node *x = g->nodes[id];
        kiln_shape s;
        kiln_dtype dt;
        char why[256] = "";
        kiln_status st =
            kiln_op_table[x->op].infer(x, &s, &dt, why, sizeof why);
        if (st != KILN_OK)
            fail_msg("%%%d %s: %s", id, kiln_op_table[x->op].name, why);
        th_assert_shape(s, x->shape);
        assert_int_equal(dt, x->dtype);
    }
    assert_true(n > 10);
    kiln_graph_free(g);
}

/* A node built around the builders with a wrong shape: the validator says
   what the op's rule says. */
static void test_validator_reports_the_rule(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *in[2] = {kiln_input(g, "a", KILN_F32, KILN_SHAPE(2, 3)),
                        kiln_input(g, "b", KILN_F32, KILN_SHAPE(4, 3))};
    kiln_node *m =
        kiln_node_make(g, KILN_OP_MATMUL, KILN_F32, KILN_SHAPE(2, 4), in, 2);
    kiln_unit p = {g, &m, 1, in, 2};
    char err[256];
    assert_int_equal(kiln_unit_validate(&p, err, sizeof err), KILN_ERR_STATE);
    assert_string_equal(err, "%2 = matmul: [2,3] x [4,3]: inner dimensions "
                             "differ (3 vs 4)");
    m->at.trans_b = 1;
    assert_int_equal(kiln_unit_validate(&p, err, sizeof err), KILN_OK);
    kiln_graph_free(g);
}

static void test_attributes_by_mask(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    int p01[2] = {0, 1}, p10[2] = {1, 0};
    kiln_node *t1 = kiln_permute(g, x, p10), *t2 = kiln_permute(g, x, p10);
    kiln_node *t3 = kiln_permute(g, x, p01);
    assert_true(kiln_attrs_equal(t1, t2));
    assert_false(kiln_attrs_equal(t1, t3));
    assert_true(kiln_attrs_hash(t1, 7) == kiln_attrs_hash(t2, 7));
    assert_true(kiln_attrs_hash(t1, 7) != kiln_attrs_hash(t3, 7));
    /* an attribute the op does not read does not count */
    kiln_node *e1 = kiln_exp(g, x), *e2 = kiln_exp(g, x);
    e2->at.axes = 5;
    assert_true(kiln_attrs_equal(e1, e2));
    char line[256];
    kiln_node_format(t1, NULL, '"', line, sizeof line);
    assert_string_equal(line, "%1 = permute(%0) f32[3,2] perm=[1,0]");
    int64_t lo[2] = {1, 0}, hi[2] = {0, 2};
    kiln_node_format(kiln_pad(g, x, lo, hi, 0.5f), NULL, 0, line, sizeof line);
    assert_string_equal(line, "%6 = pad(%0) f32[3,5] lo=[1,0] value=0.5");
    kiln_node_format(kiln_sum(g, x, KILN_AXIS(1), 1), NULL, 0, line,
                     sizeof line);
    assert_string_equal(line, "%7 = sum(%0) f32[2,1] axes=0x2 keepdims");
    kiln_graph_free(g);
}

/* perm, lo and win share storage in kiln_attrs: no op may read two. */
static void test_shared_attribute_storage(void **state)
{
    (void)state;
    const unsigned shared = KILN_ATTR_PERM | KILN_ATTR_LO | KILN_ATTR_WINDOW;
    for (int op = 0; op < KILN_OP_COUNT; op++) {
        unsigned a = kiln_op_table[op].attrs & shared;
        if (a & (a - 1))
            fail_msg("%s reads two attributes that share storage",
                     kiln_op_table[op].name);
    }
}

static void test_alias_rules(void **state)
{
    (void)state;
    kiln_graph *g = kiln_graph_new();
    kiln_node *x = kiln_input(g, "x", KILN_F32, KILN_SHAPE(2, 3));
    kiln_node *v =
        kiln_variable(g, "v", KILN_F32, KILN_SHAPE(2, 3), kiln_init_zeros());
    const struct {
        kiln_node *n;
        kiln_alias want;
    } cases[] = {
        {kiln_add(g, x, x), {0, 2, 0, 1}},
        {kiln_reshape(g, x, KILN_SHAPE(6)), {0, 1, 1, 0}},
        {kiln_stop_gradient(g, x), {0, 1, 1, 0}},
        {kiln_assign(g, v, x), {1, 1, 1, 0}},
        {kiln_cast(g, x, KILN_I32), {0, 1, 0, 0}},
        {kiln_cast(g, x, KILN_F32), {0, 1, 1, 0}},
        {kiln_sum(g, x, KILN_ALL_AXES, 0), {0, 0, 0, 0}},
        {kiln_matmul(g, x, x, 0, 1), {0, 0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_alias a = kiln_node_alias(cases[i].n);
        if (a.first != cases[i].want.first || a.count != cases[i].want.count ||
            a.copy != cases[i].want.copy || a.map != cases[i].want.map)
            fail_msg("%s: alias {%d, %d, %d, %d}",
                     kiln_op_table[cases[i].n->op].name, a.first, a.count,
                     a.copy, a.map);
    }
    kiln_graph_free(g);
}

/* Ops whose tests go by another name: the reference files' prefix and
   the builder the gradient tests call. */
static const struct {
    kiln_op op;
    const char *ref, *builder;
} ALIAS[] = {
    {KILN_OP_RMAX, "rmax", "reduce_max"},
    {KILN_OP_SOFTMAX_CE, "softmax_ce", "softmax_cross_entropy"},
    /* its rule is checked by test_kernels' second-order check */
    {KILN_OP_SOFTMAX_CE_GRAD, "softmax_ce_grad", "softmax_cross_entropy"},
    /* tests/test_conv.c; conv_weight_grad's rule by its second-order
       checks */
    {KILN_OP_CONV, "conv", "conv2d"},
    {KILN_OP_CONV_TRANSPOSE, "conv_transpose", "conv_transpose2d"},
    {KILN_OP_CONV_WGRAD, "conv_weight_grad", "conv2d"},
    /* pooling group: every tests/ref/pool case checks the op, its gradient
       op and (max pooling) the gradient's gradient op; test_pool.c
       gradchecks them through the public builders */
    {KILN_OP_MAX_POOL2D_GRAD, "max_pool2d", "max_pool2d"},
    {KILN_OP_MAX_POOL2D_GATHER, "max_pool2d", "max_pool2d"},
    {KILN_OP_RESAMPLE2D, "avg_pool2d", "avg_pool2d"},
    {KILN_OP_RESAMPLE2D_GRAD, "avg_pool2d", "avg_pool2d"},
    /* batch norm's ops, checked with it (test_norm: first and second
       order, tests/ref/norm) */
    {KILN_OP_NORM_STATS, "bn", "batch_norm"},
    {KILN_OP_NORM, "bn", "batch_norm"},
    {KILN_OP_NORM_GRAD, "bn", "batch_norm"},
    {KILN_OP_NORM_PARAM_GRAD, "bn", "batch_norm"},
    /* attention group: tests/ref/attention cases check each op with its
       gradient op; test_attention.c gradchecks them */
    {KILN_OP_ATTENTION, "attention", "scaled_dot_product_attention"},
    {KILN_OP_ATTENTION_GRAD, "attention", "scaled_dot_product_attention"},
    {KILN_OP_RMS_NORM_GRAD, "rms_norm", "rms_norm"},
};

static const char *alias(kiln_op op, int builder)
{
    for (size_t i = 0; i < sizeof ALIAS / sizeof *ALIAS; i++)
        if (ALIAS[i].op == op)
            return builder ? ALIAS[i].builder : ALIAS[i].ref;
    return kiln_op_table[op].name;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc((size_t)len + 1, 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return text;
}

/* A reference file named prefix, prefix_*, or prefix followed by a digit,
   in tests/ref/ops or the folder of an op group's own script. */
static int has_ref_case_in(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t len = strlen(prefix);
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));)
        found = !strncmp(e->d_name, prefix, len) &&
                (!strcmp(e->d_name + len, ".txt") || e->d_name[len] == '_' ||
                 (e->d_name[len] >= '0' && e->d_name[len] <= '9'));
    closedir(d);
    return found;
}

static int has_ref_case(const char *prefix)
{
    static const char *const dirs[] = {"ops",  "conv",  "pool",
                                       "norm", "index", "attention"};
    char dir[512];
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(dir, sizeof dir, "%s/%s", KILN_TEST_REF_DIR, dirs[i]);
        if (has_ref_case_in(dir, prefix))
            return 1;
    }
    return 0;
}

/* name is one of the ", "-separated names of a "### " heading or of a
   table row's first cell, or is written `name(...)` in the text. */
static int has_doc_row(const char *doc, const char *name)
{
    char call[128];
    snprintf(call, sizeof call, "`%s(", name);
    if (strstr(doc, call))
        return 1;
    size_t len = strlen(name);
    for (const char *l = doc; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : l) {
        const char *p = !strncmp(l, "### ", 4) ? l + 4
                        : !strncmp(l, "| ", 2) ? l + 2
                                               : NULL;
        while (p) {
            if (!strncmp(p, name, len) && strchr(",|\n `", p[len]))
                return 1;
            const char *comma = strpbrk(p, ",|\n");
            p = comma && *comma == ',' ? comma + 2 : NULL;
        }
    }
    return 0;
}

static void test_every_op_is_complete(void **state)
{
    (void)state;
    char *doc = read_text(KILN_SOURCE_DIR "/docs/ops.md");
    char *grad = read_text(KILN_SOURCE_DIR "/tests/test_grad.c");
    char *kern = read_text(KILN_SOURCE_DIR "/tests/test_kernels.c");
    char *conv = read_text(KILN_SOURCE_DIR "/tests/test_conv.c");
    char *pool = read_text(KILN_SOURCE_DIR "/tests/test_pool.c");
    char *norm = read_text(KILN_SOURCE_DIR "/tests/test_norm.c");
    char *drop = read_text(KILN_SOURCE_DIR "/tests/test_dropout.c");
    char *index = read_text(KILN_SOURCE_DIR "/tests/test_index.c");
    char *seqops = read_text(KILN_SOURCE_DIR "/tests/test_seqops.c");
    char *attn = read_text(KILN_SOURCE_DIR "/tests/test_attention.c");
    for (int op = 0; op < KILN_OP_COUNT; op++) {
        const kiln_op_info *o = &kiln_op_table[op];
        int internal = o->grad == KILN_GRAD_INTERNAL;
        if (o->kind != KILN_KIND_LEAF && !kiln_ref_kernels[op])
            fail_msg("%s: no reference kernel", o->name);
        if (internal)
            continue;
        if (!has_doc_row(doc, o->name))
            fail_msg("%s: no row in docs/ops.md", o->name);
        if (o->kind != KILN_KIND_LEAF && o->kind != KILN_KIND_STATE &&
            !has_ref_case(alias((kiln_op)op, 0)))
            fail_msg("%s: no PyTorch case in tests/ref/ops", o->name);
        /* elementwise ops: test_grad.c checks every row with a gradient */
        char call[128];
        snprintf(call, sizeof call, "kiln_%s(", alias((kiln_op)op, 1));
        if (o->grad == KILN_GRAD_RULE && o->kind != KILN_KIND_UNARY &&
            o->kind != KILN_KIND_BINARY && !strstr(grad, call) &&
            !strstr(kern, call) && !strstr(conv, call) && !strstr(pool, call) &&
            !strstr(norm, call) && !strstr(drop, call) &&
            !strstr(index, call) && !strstr(seqops, call) &&
            !strstr(attn, call))
            fail_msg("%s: no gradient check", o->name);
    }
    free(doc);
    free(grad);
    free(kern);
    free(conv);
    free(pool);
    free(norm);
    free(drop);
    free(index);
    free(seqops);
    free(attn);
}

/* The walk above fails on an op that lacks what it checks. */
static void test_walk_finds_what_is_missing(void **state)
{
    (void)state;
    const char *doc = "## Ops\n### sum\n| lt, le, gt | x |\nuse `pad(x)`\n";
    assert_true(has_doc_row(doc, "sum"));
    assert_true(has_doc_row(doc, "le"));
    assert_true(has_doc_row(doc, "gt"));
    assert_true(has_doc_row(doc, "pad"));
    assert_false(has_doc_row(doc, "l"));
    assert_false(has_doc_row(doc, "Ops"));
    assert_false(has_doc_row(doc, "log1q"));
    assert_true(has_ref_case("log1p"));
    assert_true(has_ref_case("concat"));
    assert_false(has_ref_case("log1q"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_give_what_builders_built),
        cmocka_unit_test(test_validator_reports_the_rule),
        cmocka_unit_test(test_attributes_by_mask),
        cmocka_unit_test(test_shared_attribute_storage),
        cmocka_unit_test(test_alias_rules),
        cmocka_unit_test(test_every_op_is_complete),
        cmocka_unit_test(test_walk_finds_what_is_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
