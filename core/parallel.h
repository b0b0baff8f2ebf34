// One thread pool for the whole process: OpenMP's. OpenBLAS is the OpenMP flavour, so GEMMs and
// Ember's own kernels share the same threads instead of oversubscribing the cores.
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember {

int get_num_threads();
// Sets the threads used by Ember kernels and by OpenBLAS.
void set_num_threads(int n);
// Below this many elements of simple work a parallel region costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// Calls f(begin, end) on disjoint chunks covering [begin, end), in parallel when the range is
// at least `grain` long and we are not already inside a parallel region.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end <= begin) return;
#ifdef _OPENMP
  int64_t n = end - begin;
  if (n >= grain && !omp_in_parallel() && omp_get_max_threads() > 1) {
    int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain / 4, 1));
    int nthreads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), max_chunks));
#pragma omp parallel num_threads(nthreads)
    {
      int64_t tid = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t chunk = (n + nt - 1) / nt;
      int64_t b = begin + tid * chunk, e = std::min(end, b + chunk);
      if (b < e) f(b, e);
    }
    return;
  }
#endif
  (void)grain;
  f(begin, end);
}

}  // namespace ember
