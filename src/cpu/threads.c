/* Execution contexts: the process-wide defaults that new sessions copy, and
   the context of the kernel running on each thread.  A session keeps its
   own copy, so a setter called while another thread runs changes nothing
   that run reads: kernels get their thread count and denormal mode from the
   run, never from these defaults. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/threads.h"

/* 0 until kiln_set_num_threads: then one per core, as BLAS does. */
static atomic_int default_threads;
/* Flush denormals to zero in kernels (FTZ and DAZ); on by default. */
static atomic_int default_flush = 1;
/* -1 until first read from KILN_REFERENCE. */
static atomic_int default_reference = -1;
/* kiln_set_debug_stream; NULL: the log. */
static _Atomic(FILE *) default_debug;

static _Thread_local const kiln_exec_ctx *current;
static _Thread_local int shares_seen = 1;

static int cores(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    if (c < 1)
        return 1;
    return c > KILN_MAX_THREADS ? KILN_MAX_THREADS : (int)c;
}

int kiln_set_num_threads(int n)
{
    if (n <= 0)
        n = cores();
    if (n > KILN_MAX_THREADS)
        n = KILN_MAX_THREADS;
    atomic_store(&default_threads, n);
    return n;
}

int kiln_set_flush_denormals(int on)
{
    if (on >= 0)
        atomic_store(&default_flush, on ? 1 : 0);
    return atomic_load(&default_flush);
}

int kiln_set_reference_kernels(int on)
{
    if (on >= 0) {
        atomic_store(&default_reference, on ? 1 : 0);
        return on ? 1 : 0;
    }
    int v = atomic_load(&default_reference);
    if (v < 0) {
        const char *e = getenv("KILN_REFERENCE");
        v = e && *e && strcmp(e, "0") != 0;
        atomic_store(&default_reference, v);
    }
    return v;
}

void kiln_set_debug_stream(FILE *out)
{
    atomic_store(&default_debug, out);
}

kiln_exec_ctx kiln_exec_defaults(void)
{
    int n = atomic_load(&default_threads);
    return (kiln_exec_ctx){.threads = n > 0 ? n : cores(),
                           .flush_denormals = atomic_load(&default_flush),
                           .reference = kiln_set_reference_kernels(-1),
                           .debug = atomic_load(&default_debug)};
}

const kiln_exec_ctx *kiln_exec_enter(const kiln_exec_ctx *ctx)
{
    const kiln_exec_ctx *prev = current;
    current = ctx;
    shares_seen = 1;
    return prev;
}

void kiln_exec_leave(const kiln_exec_ctx *prev)
{
    current = prev;
}

const kiln_exec_ctx *kiln_exec_current(void)
{
    return current;
}

int kiln_cpu_threads(void)
{
    return current ? current->threads : kiln_exec_defaults().threads;
}

void kiln_par_record_shares(int shares)
{
    shares_seen = shares;
}

int kiln_par_last_shares(void)
{
    return shares_seen;
}
