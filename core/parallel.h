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

// The threads a parallel region opened here would get: 1 inside another parallel region (nested
// regions run serially), else the configured thread count.
inline int threads_here() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

// Calls f(slot, begin, end) for each slot in [0, slots) on its own thread, the slots cutting [0, n)
// into near-equal contiguous ranges. With one slot, or inside a parallel region, the calls run in
// order on this thread. `slots` must not exceed threads_here() (the caller sizes per-slot buffers
// by it).
template <typename F>
void parallel_slots(int64_t n, int slots, const F& f) {
  if (n <= 0) return;
  slots = static_cast<int>(std::clamp<int64_t>(slots, 1, n));
  const int64_t chunk = (n + slots - 1) / slots;
  // Slots first, first + step, ... on this thread.
  auto run = [&](int first, int step) {
    for (int t = first; t < slots; t += step) {
      const int64_t b = t * chunk, e = std::min(n, b + chunk);
      if (b < e) f(t, b, e);
    }
  };
#ifdef _OPENMP
  if (slots > 1 && !omp_in_parallel()) {
    // The runtime may give fewer threads than asked (OMP_THREAD_LIMIT): a thread then takes
    // more than one slot.
#pragma omp parallel num_threads(slots)
    run(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#endif
  run(0, 1);
}

// Calls f(begin, end) on disjoint chunks covering [begin, end), in parallel when the range is
// at least `grain` long and we are not already inside a parallel region.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end <= begin) return;
  const int64_t n = end - begin;
  const int here = threads_here();
  int threads = 1;
  if (n >= grain && here > 1) {
    const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain / 4, 1));
    threads = static_cast<int>(std::min<int64_t>(here, max_chunks));
  }
  if (threads == 1) {
    f(begin, end);
    return;
  }
  parallel_slots(n, threads, [&](int, int64_t b, int64_t e) { f(begin + b, begin + e); });
}

}  // namespace ember
