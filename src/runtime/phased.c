/* Shared writes of a compiled run (kiln_grad_sync's phases): updates
   written in place over variables that several processes share, run in
   phases, each process writing its block of the variable in turn, and the
   check that refuses an update of one planned as a copy. */
#include <string.h>

#include "cpu/dispatch.h"
#include "cpu/gemm.h"
#include "graph/fused_program.h"
#include "runtime/variant.h"

/* 1 when value v of prog is an argument of no instruction but the last. */
static int used_last_only(const kiln_fused_program *prog, int v)
{
    for (int i = v + 1; i < prog->n - 1; i++) {
        const kiln_fused_instr *x = &prog->ins[i];
        if (x->op < 0)
            continue;
        for (int a = 0; a < kiln_op_table[x->op].arity; a++)
            if (x->arg[a] == v)
                return 0;
    }
    return 1;
}

/* How st, a write in place over its variable (out is var's buffer),
   changes it: 1 when it is a product accumulating into it (matmul_acc),
   2 when it is var + d or var - d, elementwise, with d not reading var
   (a plain SGD update, fused or not): run on zeros instead of var, it
   computes d; 0 otherwise (var read again inside, as a penalty on the
   weights would). */
static int adds_to_var(const kiln_step *st)
{
    const kiln_node *n = st->n;
    int at = -1;
    if (n->n_in > KILN_FUSED_MAX_INPUTS)
        return 0;
    for (int k = 0; k < n->n_in; k++)
        if (st->in[k] == st->out) {
            if (at >= 0)
                return 0;
            at = k;
        }
    if (n->op == KILN_OP_MATMUL_ACC)
        return at == 0 ? 1 : 0;
    if (n->op == KILN_OP_SUB)
        return at == 0 ? 2 : 0;
    if (n->op == KILN_OP_ADD)
        return at >= 0 ? 2 : 0;
    if (n->op != KILN_OP_FUSED || at < 0 || kiln_fused_is_reduction(n))
        return 0;
    const kiln_fused_program *prog = n->at.data;
    int load = -1;
    for (int i = 0; i < prog->n; i++)
        if (prog->ins[i].op == KILN_FUSED_LOAD && prog->ins[i].arg[0] == at) {
            if (load >= 0)
                return 0;
            load = i;
        }
    const kiln_fused_instr *last = &prog->ins[prog->n - 1];
    if (load < 0 || load == prog->n - 1 || !used_last_only(prog, load))
        return 0;
    if (last->op == KILN_OP_SUB)
        return last->arg[0] == load && last->arg[1] != load ? 2 : 0;
    if (last->op == KILN_OP_ADD)
        return (last->arg[0] == load) != (last->arg[1] == load) ? 2 : 0;
    return 0;
}

/* Runs st's kernel on acc in place of its variable: acc = acc + d. */
static int run_on(kiln_session *s, const kiln_step *st, float *acc, char *msg,
                  size_t size)
{
    void *in[KILN_FUSED_MAX_INPUTS]; /* adds_to_var: no more */
    for (int k = 0; k < st->n->n_in; k++)
        in[k] = st->in[k] == st->out ? acc : st->in[k];
    return kiln_cpu_run_prepared(&s->exec, st->n, acc, in, st->scratch,
                                 st->prep, msg, size);
}

/* Block blk of nb of step st, an update written in place over variable
   var, in phase p: rows of an accumulating product, else the whole
   kernel by the process whose block is 0 (one after the other).  Where
   the sync sums the phases' changes apart (sum_into) and the kernel adds
   a change d to var, d goes there instead: into the scratch acc in the
   first phases and, in the last, var += (acc + d), so that var is
   rounded once per step as in one process. */
static int run_block(kiln_session *s, const kiln_grad_sync *sync, kiln_var *var,
                     const kiln_step *st, int p, int blk, int nb, char *msg,
                     size_t size)
{
    const kiln_node *n = st->n;
    int form = adds_to_var(st);
    float *acc = NULL;
    int mode =
        sync->sum_into ? sync->sum_into(sync->ctx, var, p, form != 0, &acc) : 0;
    if (mode < 0)
        return -1;
    if (form == 1 && (nb > 1 || mode)) {
        kiln_shape sa = n->in[1]->shape;
        int ta = n->at.trans_a, tb = n->at.trans_b;
        int64_t m = n->shape.d[0], nn = n->shape.d[1], k = sa.d[ta ? 0 : 1];
        int64_t r0 = m * blk / nb, r1 = m * (blk + 1) / nb;
        float alpha = *(const float *)st->in[3];
        float *out = mode == 0 || mode == 3 ? st->out : acc;
        kiln_cpu_gemm_rows_into(ta, tb, m, nn, k, alpha, st->in[1], st->in[2],
                                mode == 1 ? 0.0f : 1.0f, mode == 3 ? acc : NULL,
                                out, r0, r1);
        return KILN_OK;
    }
    if (blk != 0)
        return KILN_OK;
    if (!mode)
        return kiln_cpu_run_prepared(&s->exec, n, st->out, st->in, st->scratch,
                                     st->prep, msg, size);
    int64_t count = kiln_shape_numel(n->shape);
    if (mode == 1)
        memset(acc, 0, (size_t)count * sizeof(float));
    if (run_on(s, st, acc, msg, size) != KILN_OK)
        return KILN_ERR_ARG;
    float *d = st->out;
    for (int64_t i = 0; mode == 3 && i < count; i++)
        d[i] += acc[i];
    return KILN_OK;
}

/* The variable step st writes in place when it is shared by processes
   (the sync's phases), else NULL. */
static kiln_var *shared_target(kiln_session *s, const kiln_grad_sync *sync,
                               const kiln_variant *v, const kiln_step *st,
                               int *nb)
{
    *nb = 0;
    int id = v->storage[st->n->id];
    if (!sync || !sync->phases || id < 0)
        return NULL;
    kiln_var *var = kiln_session_find(s, v->u.g->nodes[id]->name);
    if (var && var->data == v->buf[id])
        *nb = sync->phases(sync->ctx, var);
    return var;
}

/* The most consecutive writes over shared variables run together. */
enum { PHASED_GROUP = 32 };

/* Runs steps[0..n), consecutive writes over the shared variables vars[],
   together in nb phases: one wait before each phase for all of them. */
static kiln_status run_phased(kiln_session *s, const kiln_grad_sync *sync,
                              kiln_variant *v, kiln_step **steps,
                              kiln_var **vars, int n, int nb)
{
    char msg[KILN_ERRMSG_MAX - 16];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < steps[i]->n->n_in; k++)
            steps[i]->in[k] = v->buf[steps[i]->n->in[k]->id];
    for (int p = 0; p < nb; p++) {
        int blk = sync->phase(sync->ctx, p);
        if (blk < 0)
            return KILN_ERR_IO;
        for (int i = 0; i < n; i++) {
            int rc = run_block(s, sync, vars[i], steps[i], p, blk, nb, msg,
                               sizeof msg);
            if (rc < 0)
                return KILN_ERR_IO; /* the session's error, from the sync */
            if (rc != KILN_OK)
                return kiln_session_fail(s, KILN_ERR_ARG, "kiln_run: %s", msg);
        }
    }
    kiln_status rc = KILN_OK;
    for (int i = 0; i < n && rc == KILN_OK; i++)
        rc = sync->phase_end(sync->ctx, vars[i]);
    return rc;
}

/* 1 when st writes where a step of group does, or reads what one
   writes: it must then run after the whole group, not phase by phase. */
static int reads_group(const kiln_variant *v, const kiln_step *st,
                       kiln_step *const *group, int n)
{
    for (int g = 0; g < n; g++) {
        if (group[g]->out == st->out)
            return 1;
        for (int k = 0; k < st->n->n_in; k++)
            if (v->buf[st->n->in[k]->id] == group[g]->out)
                return 1;
    }
    return 0;
}

/* The writes over shared variables that follow steps[i] (one, in nb
   phases) and run with it: into group and vars; their number. */
static int phased_group(kiln_session *s, const kiln_grad_sync *sync,
                        kiln_variant *v, int i, int nb, kiln_var *first,
                        kiln_step **group, kiln_var **vars)
{
    int n = 1, asked = 0;
    group[0] = &v->steps[i];
    vars[0] = first;
    while (nb > 1 && n < PHASED_GROUP && i + n < v->n_steps) {
        asked = 1;
        int nbj;
        kiln_step *sj = &v->steps[i + n];
        kiln_var *vj = shared_target(s, sync, v, sj, &nbj);
        if (nbj != nb || sj->n->hook || sj->n->debug ||
            reads_group(v, sj, group, n))
            break;
        group[n] = sj;
        vars[n++] = vj;
    }
    if (asked) /* the look ahead may have asked about a private one */
        shared_target(s, sync, v, group[0], &nb);
    return n;
}

/* Runs v's step i and the shared writes that follow it (kiln_variant.h). */
int kiln_variant_run_shared(kiln_session *s, const kiln_grad_sync *sync,
                            kiln_variant *v, int i, kiln_status *rc)
{
    int nb;
    kiln_var *shared = shared_target(s, sync, v, &v->steps[i], &nb);
    *rc = KILN_ERR_IO;
    if (nb <= 0)
        return nb;
    kiln_step *group[PHASED_GROUP];
    kiln_var *vars[PHASED_GROUP];
    int n = phased_group(s, sync, v, i, nb, shared, group, vars);
    *rc = run_phased(s, sync, v, group, vars, n, nb);
    return *rc == KILN_OK ? n : -1;
}

/* Refuses, before the copies, a run whose update of a shared variable is
   a copy after it (a write in turns needs the update in place): the other
   processes' shares would be lost. */
kiln_status kiln_variant_check_shared(kiln_session *s, kiln_variant *v)
{
    const kiln_grad_sync *sync = v->hooked ? s->sync : NULL;
    for (int i = 0; sync && sync->phases && i < v->n_assigns; i++)
        for (int k = 0; k < s->n_vars; k++) {
            kiln_var *var = &s->vars[k];
            if (var->data != v->assigns[i].dst)
                continue;
            int nb = sync->phases(sync->ctx, var);
            if (nb < 0)
                return KILN_ERR_IO;
            if (nb > 0)
                return kiln_session_fail(
                    s, KILN_ERR_STATE,
                    "kiln_run: the update of shared variable '%s' is not "
                    "planned in place; build the step with "
                    "kiln_comm_set_shared_weights(c, 0)",
                    var->name);
        }
    return KILN_OK;
}
