/* The kernels' thread pool.  Not OpenMP: libgomp's workers spin for about
   a millisecond after each parallel region (OMP_WAIT_POLICY can only be set
   before the program starts), which on a machine with as many cores as
   threads takes the cores from OpenBLAS's own workers in the next matrix
   product: a 2-thread MLP step ran 5 to 10 times slower.  These workers spin
   for a few microseconds, enough to chain elementwise kernels, then sleep
   on a condition variable, so BLAS gets the cores back at once.

   One caller at a time uses the pool; a second concurrent caller (another
   session on another thread) runs its kernel on its own thread. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpu/fast.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

enum { MAX_THREADS = 256, SPIN = 4000 };

static struct {
    pthread_mutex_t busy; /* held by the caller of a parallel region */
    pthread_mutex_t lock; /* guards sleeping on wake */
    pthread_cond_t wake;
    atomic_uint gen;    /* bumped once per job (and to stop) */
    atomic_int pending; /* shares claimed by workers and not yet done */
    /* per share of the current job: 0 free, 1 claimed (by its worker or,
       when that worker is late, by the caller) */
    atomic_int claimed[MAX_THREADS];
    int size;    /* threads in use, the caller included; 0 until
                    set: then one per core, as BLAS does */
    int started; /* workers running (size - 1 once started) */
    int stop;
    unsigned start_gen; /* gen when the workers were started */
    pthread_t tid[MAX_THREADS];
    kiln_range_fn fn;
    void *ctx;
    int64_t n;
} pool = {PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER,
          0,
          0,
          {0},
          0,
          0,
          0,
          0,
          {0},
          NULL,
          NULL,
          0};

static void run_share(int t, int T)
{
    int64_t lo = pool.n * t / T, hi = pool.n * (t + 1) / T;
    if (lo < hi) {
        unsigned saved = kiln_fpu_enter();
        pool.fn(pool.ctx, lo, hi);
        kiln_fpu_leave(saved);
    }
}

/* A worker runs its share only if it claims it first: when it wakes late
   (its core taken by other work), the caller has done the share itself and
   moved on, and the worker must not touch that job. */
static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned seen = pool.start_gen; /* a job may be published before we run */
    for (;;) {
        for (int i = 0; i < SPIN && atomic_load(&pool.gen) == seen; i++)
            cpu_relax();
        if (atomic_load(&pool.gen) == seen) {
            pthread_mutex_lock(&pool.lock);
            while (atomic_load(&pool.gen) == seen)
                pthread_cond_wait(&pool.wake, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = atomic_load(&pool.gen);
        if (pool.stop)
            return NULL;
        int free_share = 0;
        if (atomic_compare_exchange_strong(&pool.claimed[t], &free_share, 1)) {
            run_share(t, pool.size);
            atomic_fetch_sub(&pool.pending, 1);
        }
    }
}

static void publish(void)
{
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add(&pool.gen, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

/* Stops the workers; the caller holds pool.busy. */
static void stop_workers(void)
{
    if (!pool.started)
        return;
    pool.stop = 1;
    publish();
    for (int i = 0; i < pool.started; i++)
        pthread_join(pool.tid[i], NULL);
    pool.stop = 0;
    pool.started = 0;
}

/* Starts size - 1 workers; on failure the pool shrinks to what started. */
static void start_workers(void)
{
    pool.start_gen = atomic_load(&pool.gen);
    for (int i = 1; i < pool.size; i++) {
        if (pthread_create(&pool.tid[i - 1], NULL, worker,
                           (void *)(intptr_t)i) != 0) {
            pool.size = i;
            break;
        }
        pool.started = i;
    }
}

int kiln_pool_resize(int n)
{
    if (n < 1)
        n = 1;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    pthread_mutex_lock(&pool.busy);
    if (n != pool.size) {
        stop_workers();
        pool.size = n;
        start_workers(); /* now, so that no run creates threads */
    }
    n = pool.size;
    pthread_mutex_unlock(&pool.busy);
    return n;
}

static int cores(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

int kiln_cpu_threads(void)
{
    return pool.size ? pool.size : cores();
}

void kiln_par_for(int64_t n, int64_t cost_per_item, kiln_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (!pool.size)
        kiln_pool_resize(cores());
    if (pool.size < 2 || n < 2 || n * cost_per_item < KILN_PAR_MIN ||
        pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    if (pool.started != pool.size - 1)
        start_workers();
    int T = pool.size;
    if (T < 2) {
        pthread_mutex_unlock(&pool.busy);
        fn(ctx, 0, n);
        return;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    /* pending counts every share but the caller's; a share the caller
       takes back is subtracted by the caller */
    atomic_store(&pool.pending, T - 1);
    for (int t = 1; t < T; t++)
        atomic_store(&pool.claimed[t], 0);
    atomic_store(&pool.claimed[0], 1);
    publish();
    fn(ctx, 0, n / T);
    for (int t = 1; t < T; t++) {
        int free_share = 0;
        if (atomic_compare_exchange_strong(&pool.claimed[t], &free_share, 1)) {
            run_share(t, T);
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
