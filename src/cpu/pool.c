/* The kernels' thread pool.  Not OpenMP: libgomp's workers spin for about
   a millisecond after each parallel region (OMP_WAIT_POLICY can only be set
   before the program starts), which on a machine with as many cores as
   threads took the cores from OpenBLAS's workers in the next matrix
   product: a 2-thread MLP step ran 5 to 10 times slower.  These workers spin
   for a few microseconds, enough to chain kernels, then sleep on a
   condition variable, so other work gets the cores back at once.

   Workers start on demand, up to the largest thread count a kernel has
   asked for, and stay.  A kernel splits its work into as many shares as
   its run's thread count (the session's), whatever the pool holds.  One
   caller at a time uses the pool; a second concurrent caller (another
   session on another thread) runs the same shares one after another on its
   own thread, so a run's results never depend on timing or on other
   sessions. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpu/fpu.h"
#include "cpu/pool.h"
#include "cpu/threads.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

enum { SPIN = 4000 };

typedef struct job {
    kiln_range_fn fn;
    void *ctx;
    int64_t n;
    int shares;
    kiln_exec_ctx run; /* the caller's context, made current on workers */
} job;

static struct {
    pthread_mutex_t busy; /* held by the caller of a parallel region */
    pthread_mutex_t lock; /* guards sleeping on wake */
    pthread_cond_t wake;
    atomic_uint gen;    /* bumped once per job */
    atomic_int pending; /* shares claimed by workers and not yet done */
    atomic_int helpers; /* workers the last job used: only they spin */
    /* per share of the current job: 0 free, 1 claimed (by its worker or,
       when that worker is late, by the caller); worker t runs share t */
    atomic_int claimed[KILN_MAX_THREADS];
    /* the rest is written by the holder of busy: */
    int started;                          /* workers 1..started run */
    unsigned start_gen[KILN_MAX_THREADS]; /* gen when worker t started */
    job job;                              /* the published job */
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER,
          .lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER};

static void run_share(const job *j, int t)
{
    int64_t lo = j->n * t / j->shares, hi = j->n * (t + 1) / j->shares;
    if (lo < hi)
        j->fn(j->ctx, lo, hi);
}

/* A worker runs its share only if it claims it first: when it wakes late
   (its core taken by other work), the caller has done the share itself and
   moved on, and the worker must not touch that job. */
static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned seen = pool.start_gen[t]; /* a job may come before we run */
    for (;;) {
        int spin = t <= atomic_load(&pool.helpers) ? SPIN : 0;
        for (int i = 0; i < spin && atomic_load(&pool.gen) == seen; i++)
            cpu_relax();
        if (atomic_load(&pool.gen) == seen) {
            pthread_mutex_lock(&pool.lock);
            while (atomic_load(&pool.gen) == seen)
                pthread_cond_wait(&pool.wake, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = atomic_load(&pool.gen);
        int free_share = 0;
        if (atomic_compare_exchange_strong(&pool.claimed[t], &free_share, 1)) {
            const kiln_exec_ctx *prev = kiln_exec_enter(&pool.job.run);
            unsigned saved = kiln_fpu_enter(pool.job.run.flush_denormals);
            run_share(&pool.job, t);
            kiln_fpu_leave(saved);
            kiln_exec_leave(prev);
            atomic_fetch_sub(&pool.pending, 1);
        }
    }
    return NULL; /* workers live as long as the process */
}

static void publish(void)
{
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add(&pool.gen, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

/* Starts workers up to n; the caller holds pool.busy.  When the system
   refuses a thread, the pool keeps what it has and callers run the
   missing shares themselves. */
static void start_workers(int n)
{
    while (pool.started < n) {
        int t = pool.started + 1;
        pthread_t tid;
        pool.start_gen[t] = atomic_load(&pool.gen);
        if (pthread_create(&tid, NULL, worker, (void *)(intptr_t)t) != 0)
            return;
        pthread_detach(tid);
        pool.started = t;
    }
}

void kiln_par_for(int64_t n, int64_t cost_per_item, kiln_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    /* small work (a dynamic graph's every op on small values) runs here
       before the context is even looked at */
    if (n * cost_per_item < KILN_PAR_MIN) {
        fn(ctx, 0, n);
        return;
    }
    const kiln_exec_ctx *cur = kiln_exec_current();
    job j = {fn, ctx, n, 1, cur ? *cur : kiln_exec_defaults()};
    j.shares = j.run.threads < n ? j.run.threads : (int)n;
    if (j.shares < 2) {
        fn(ctx, 0, n);
        return;
    }
    kiln_par_record_shares(j.shares);
    if (pthread_mutex_trylock(&pool.busy) != 0) {
        for (int t = 0; t < j.shares; t++)
            run_share(&j, t);
        return;
    }
    start_workers(j.shares - 1);
    /* shares 1..helped go to workers, the rest (when threads could not
       start) to the caller */
    int helped = pool.started < j.shares - 1 ? pool.started : j.shares - 1;
    pool.job = j;
    atomic_store(&pool.pending, helped);
    atomic_store(&pool.helpers, helped);
    for (int t = 1; t <= pool.started; t++)
        atomic_store(&pool.claimed[t], t <= helped ? 0 : 1);
    publish();
    run_share(&j, 0);
    for (int t = 1; t < j.shares; t++) {
        int free_share = 0;
        if (t > helped) {
            run_share(&j, t);
        } else if (atomic_compare_exchange_strong(&pool.claimed[t], &free_share,
                                                  1)) {
            run_share(&j, t);
            atomic_fetch_sub(&pool.pending, 1);
        }
    }
    for (long i = 0; atomic_load(&pool.pending) > 0; i++) {
        if (i < SPIN)
            cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_unlock(&pool.busy);
}
