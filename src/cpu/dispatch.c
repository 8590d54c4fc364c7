/* Kernel dispatch: fast or reference table, the run's execution context
   and denormal flushing, and the broadcast plan shared by the fast
   kernels. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/fast.h"
#include "cpu/profile.h"

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#define KILN_HAVE_MXCSR 1
#endif

/* -1 until first read from KILN_REFERENCE. */
static atomic_int use_reference = -1;

int kiln_cpu_use_reference(int on)
{
    if (on >= 0) {
        atomic_store(&use_reference, on ? 1 : 0);
        return on ? 1 : 0;
    }
    int v = atomic_load_explicit(&use_reference, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("KILN_REFERENCE");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store(&use_reference, v);
    }
    return v;
}

#ifdef KILN_HAVE_MXCSR
enum { MXCSR_FTZ_DAZ = 0x8040 };

unsigned kiln_fpu_enter(int flush)
{
    unsigned saved = _mm_getcsr();
    if (flush && (saved & MXCSR_FTZ_DAZ) != MXCSR_FTZ_DAZ)
        _mm_setcsr(saved | MXCSR_FTZ_DAZ);
    return saved;
}

void kiln_fpu_leave(unsigned saved)
{
    if (_mm_getcsr() != saved)
        _mm_setcsr(saved);
}
#else
unsigned kiln_fpu_enter(int flush)
{
    (void)flush;
    return 0;
}

void kiln_fpu_leave(unsigned saved)
{
    (void)saved;
}
#endif

kiln_status kiln_cpu_run_kernel(const kiln_exec_ctx *ctx, const kiln_node *n,
                                void *out, void *const *in, char *msg,
                                size_t len)
{
    kiln_status st = kiln_cpu_check_inputs(n, in, msg, len);
    if (st != KILN_OK)
        return st;
    kiln_kernel_fn k =
        kiln_cpu_use_reference(-1) ? NULL : kiln_fast_kernels[n->op];
    if (!k)
        k = kiln_ref_kernels[n->op];
    if (!k)
        return KILN_OK;
    kiln_exec_ctx defaults;
    if (!ctx) {
        defaults = kiln_exec_defaults();
        ctx = &defaults;
    }
    const kiln_exec_ctx *prev = kiln_exec_enter(ctx);
    unsigned saved = kiln_fpu_enter(ctx->flush_denormals);
    if (kiln_profile_enabled()) {
        double t0 = kiln_profile_now();
        k(n, out, in);
        kiln_profile_record(n, kiln_profile_now() - t0);
    } else {
        k(n, out, in);
    }
    kiln_fpu_leave(saved);
    kiln_exec_leave(prev);
    return KILN_OK;
}

kiln_status kiln_cpu_exec(const kiln_node *n, void *out, void *const *in,
                          char *msg, size_t len)
{
    return kiln_cpu_run_kernel(NULL, n, out, in, msg, len);
}

/* ------------------------------------------------------------ broadcast plan
 */

void kiln_ew_plan_init(kiln_ew_plan *p, const kiln_node *n)
{
    memset(p, 0, sizeof *p);
    p->nin = n->n_in < 3 ? n->n_in : 3;
    int64_t st[3][KILN_MAX_DIMS];
    for (int k = 0; k < p->nin; k++)
        kiln_broadcast_strides(n->in[k]->shape, n->shape, st[k]);
    /* keep axes of size > 1, merging an axis into the previous kept one
       when every operand continues the same walk across the boundary */
    for (int d = 0; d < n->shape.ndim; d++) {
        int64_t len = n->shape.d[d];
        if (len == 1)
            continue;
        int merge = p->nd > 0;
        for (int k = 0; k < p->nin && merge; k++)
            merge = p->st[k][p->nd - 1] == st[k][d] * len;
        if (merge) {
            p->dim[p->nd - 1] *= len;
            for (int k = 0; k < p->nin; k++)
                p->st[k][p->nd - 1] = st[k][d];
        } else {
            p->dim[p->nd] = len;
            for (int k = 0; k < p->nin; k++)
                p->st[k][p->nd] = st[k][d];
            p->nd++;
        }
    }
    int64_t numel = kiln_shape_numel(n->shape);
    if (p->nd == 0) { /* a single element (or a scalar) */
        p->nd = 1;
        p->dim[0] = numel;
        for (int k = 0; k < p->nin; k++)
            p->st[k][0] = 1;
    }
    p->inner = p->dim[p->nd - 1];
    p->rows = p->inner ? numel / p->inner : 0;
}

void kiln_ew_row_offsets(const kiln_ew_plan *p, int64_t r, int64_t *off)
{
    for (int k = 0; k < p->nin; k++)
        off[k] = 0;
    for (int d = p->nd - 2; d >= 0 && r; d--) {
        int64_t i = r % p->dim[d];
        r /= p->dim[d];
        for (int k = 0; k < p->nin; k++)
            off[k] += i * p->st[k][d];
    }
}
