/* One thread count for everything Kiln runs: the kernels' pool, OpenMP
   loops and BLAS.  BLAS is only ever called from the calling thread or, for
   products small enough that it stays on one thread, from a pool thread, so
   with n threads at most n cores are busy. */
#include <unistd.h>

#include "cpu/fast.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef KILN_HAVE_BLAS
#include <cblas.h>
#endif

int kiln_set_num_threads(int n)
{
    if (n <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n = cores > 0 ? (int)cores : 1;
    }
    n = kiln_pool_resize(n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
#ifdef KILN_HAVE_BLAS
    openblas_set_num_threads(n);
#endif
    return n;
}
