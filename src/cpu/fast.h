/* Shared pieces of the fast kernels: run-time ISA selection, the thread
   split, and the broadcast plan that reduces any elementwise op to rows
   whose operands are contiguous or constant. */
#ifndef KILN_CPU_FAST_H
#define KILN_CPU_FAST_H

#include "cpu/kernels.h"

/* Functions marked KILN_CLONES are compiled for AVX-512, AVX2+FMA and
   baseline x86-64; the loader picks the best for the processor (ifunc), so
   the binary runs on any x86-64 and no -march flag is global. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) &&         \
    !defined(KILN_NO_CLONES)
#define KILN_CLONES                                                            \
    __attribute__((                                                            \
        target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KILN_CLONES
#endif

/* Below this many elements of work a kernel runs on the calling thread:
   waking the pool costs more than it saves. */
#define KILN_PAR_MIN 65536
/* A matrix product with M*N*K above this is split over the pool (gemm.c);
   OpenBLAS itself stays on one thread up to the same size. */
#define KILN_GEMM_SPLIT_MIN (4 * 65536)

/* Calls fn(ctx, lo, hi) over a split of [0, n) into T contiguous shares,
   T the running kernel's thread count (at most n), when n * cost_per_item
   >= KILN_PAR_MIN; else once over [0, n).  The shares depend on T alone:
   they run on the pool (pool.c), or one after another on the calling
   thread when the pool is busy with another session's kernel or fn itself
   calls kiln_par_for, so results never depend on timing.  Pool threads
   run under the caller's execution context (threads, denormals). */
typedef void (*kiln_range_fn)(void *ctx, int64_t lo, int64_t hi);
void kiln_par_for(int64_t n, int64_t cost_per_item, kiln_range_fn fn,
                  void *ctx);
/* Shares the last kiln_par_for on this thread split its work into since
   the last kernel started on it (1 when none split): lets tests see the
   thread count a run used.  Recorded by kiln_par_for. */
int kiln_par_last_shares(void);
void kiln_par_record_shares(int shares);

/* The largest of n floats, NaN when any is NaN (vectorised). */
float kiln_row_max(const float *x, int64_t n);

/* The execution context of the kernel running on this thread (set by
   kiln_cpu_run_kernel, and on pool threads for their share): enter makes
   ctx current and returns the previous one to give back to leave.  NULL
   when no kernel runs (then the process defaults apply). */
const kiln_exec_ctx *kiln_exec_enter(const kiln_exec_ctx *ctx);
void kiln_exec_leave(const kiln_exec_ctx *prev);
const kiln_exec_ctx *kiln_exec_current(void);

/* Threads the running kernel uses, the caller included: its context's, or
   the process default outside a run. */
int kiln_cpu_threads(void);

/* Denormal handling of the calling thread: kiln_fpu_enter switches flushing
   on (when flush is set) and returns the previous state to give back to
   kiln_fpu_leave. */
unsigned kiln_fpu_enter(int flush);
void kiln_fpu_leave(unsigned saved);

/* An elementwise op's operands seen through broadcasting, with adjacent
   axes merged and size-1 axes dropped: the last axis (inner) is contiguous
   (stride 1) or constant (stride 0) in every operand, and rows walk the
   remaining axes. */
typedef struct kiln_ew_plan {
    int nd, nin;
    int64_t dim[KILN_MAX_DIMS];
    int64_t st[3][KILN_MAX_DIMS];
    int64_t inner, rows;
} kiln_ew_plan;

void kiln_ew_plan_init(kiln_ew_plan *p, const kiln_node *n);
/* Element offsets of row r in each operand. */
void kiln_ew_row_offsets(const kiln_ew_plan *p, int64_t r, int64_t *off);

/* Ops with a fast kernel, each defined as kiln_fast_<OP> in a fast_*.c
   file and listed in kiln_fast_kernels (fast.c). */
#define KILN_FAST_OPS(X)                                                       \
    X(NEG)                                                                     \
    X(ABS) X(SIGN) X(EXP) X(LOG) X(SQRT) X(SIN) X(COS) X(TANH) X(SIGMOID)      \
        X(RELU) X(ERF) X(ADD) X(SUB) X(MUL) X(DIV) X(POW) X(MAX) X(MIN) X(LT)  \
            X(LE) X(GT) X(GE) X(EQ) X(SELECT) X(SUM) X(RMAX) X(RESHAPE)        \
                X(STOPGRAD) X(ASSIGN) X(BROADCAST) X(PERMUTE) X(MATMUL)    \
                    X(MATMUL_ACC)                                              \
                    X(SOFTMAX_CE) X(SOFTMAX_CE_GRAD) X(FUSED)

#define KILN_FAST_DECLARE(OP)                                                  \
    void kiln_fast_##OP(const kiln_node *n, void *out, void *const *in);
KILN_FAST_OPS(KILN_FAST_DECLARE)
#undef KILN_FAST_DECLARE

#endif
