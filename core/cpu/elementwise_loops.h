// Loop helpers the elementwise kernel files share on top of core/cpu/loops.h: a three-input map
// with a vectorisable path when every operand is contiguous, and a one-input map that hands
// contiguous runs to a hand-vectorised function (for the few operations, like sqrt, that a
// compiler keeps scalar under the default math flags).
#pragma once

#include <cstdint>

#include "core/cpu/capability.h"
#include "core/cpu/loops.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {

// out[i] = f(a[i], b[i], c[i]); all four have out's shape (inputs may be broadcast views).
template <typename To, typename Ta, typename Tb, typename Tc, typename F>
void map3_fast(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const F& f) {
  if (out.is_contiguous() && a.is_contiguous() && b.is_contiguous() && c.is_contiguous()) {
    To* o = static_cast<To*>(out.raw_data());
    const Ta* x = static_cast<const Ta*>(a.raw_data());
    const Tb* y = static_cast<const Tb*>(b.raw_data());
    const Tc* z = static_cast<const Tc*>(c.raw_data());
    parallel_for(0, out.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) o[i] = f(x[i], y[i], z[i]);
    });
    return;
  }
  map3<To, Ta, Tb, Tc>(out, a, b, c, f);
}

// out[i] = f(a[i]), with run(o, x, n) doing contiguous runs.
template <typename T, typename Run, typename F>
void map1_runs(const Tensor& out, const Tensor& a, const Run& run, const F& f) {
  std::array<const Tensor*, 2> ops{&out, &a};
  std::array<char*, 2> base{static_cast<char*>(out.raw_data()), static_cast<char*>(a.raw_data())};
  for_each_run<2>(out.shape(), ops, base, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
    T* o = reinterpret_cast<T*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    if (s[0] == 1 && s[1] == 1) {
      run(o, x, n);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(x[i * s[1]]);
    }
  });
}

}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
