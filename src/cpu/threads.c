/* One thread count for everything Kiln runs: OpenMP loops and BLAS. */
#include <unistd.h>

#include "kiln.h"

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
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
#ifdef KILN_HAVE_BLAS
    openblas_set_num_threads(n);
#endif
    return n;
}
