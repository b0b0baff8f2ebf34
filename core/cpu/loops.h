// CPU elementwise loop machinery shared by every elementwise kernel. Operands arrive already
// broadcast to the output's shape (expanded views with zero strides). Dimensions that are
// contiguous with each other are merged first; then the common cases (everything contiguous, or
// a scalar operand) run as plain vectorisable loops, and the rest walks the strides with the
// innermost dimension as a flat loop. Work is split across OpenMP threads above a grain size.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/cpu/capability.h"
#include "core/parallel.h"
#include "core/tensor.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {

template <size_t N>
struct StridedLayout {
  Shape shape;                                  // coalesced
  std::array<std::vector<int64_t>, N> strides;  // in elements, per operand
};

// Merges adjacent dims that are contiguous for every operand, and drops size-1 dims.
template <size_t N>
StridedLayout<N> coalesce(const Shape& shape, const std::array<const Tensor*, N>& ops) {
  StridedLayout<N> L;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    L.shape.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) L.strides[k].push_back(ops[k]->strides()[d]);
  }
  // merge from the back
  for (int64_t d = static_cast<int64_t>(L.shape.size()) - 2; d >= 0; --d) {
    bool ok = true;
    for (size_t k = 0; k < N; ++k)
      if (L.strides[k][d] != L.strides[k][d + 1] * L.shape[d + 1]) ok = false;
    if (!ok) continue;
    L.shape[d] *= L.shape[d + 1];
    L.shape.erase(L.shape.begin() + d + 1);
    for (size_t k = 0; k < N; ++k) {
      L.strides[k][d] = L.strides[k][d + 1];
      L.strides[k].erase(L.strides[k].begin() + d + 1);
    }
  }
  return L;
}

// Calls f(ptrs, inner_strides, n) for runs of the innermost dimension, ptrs pointing at each
// operand's first element of the run (typed pointers, as char* cast by the caller).
template <size_t N, typename F>
void for_each_run(const Shape& shape, const std::array<const Tensor*, N>& ops, std::array<char*, N> base, const F& f) {
  StridedLayout<N> L = coalesce<N>(shape, ops);
  std::array<int64_t, N> isz;
  for (size_t k = 0; k < N; ++k) isz[k] = static_cast<int64_t>(ops[k]->itemsize());
  const int64_t nd = static_cast<int64_t>(L.shape.size());
  if (nd == 0) {
    std::array<int64_t, N> st{};
    f(base, st, int64_t{1});
    return;
  }
  const int64_t inner = L.shape[nd - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = L.strides[k][nd - 1];
  int64_t outer = 1;
  for (int64_t d = 0; d < nd - 1; ++d) outer *= L.shape[d];
  if (outer == 1) {
    // split the single run across threads
    parallel_for(0, inner, kParallelGrain, [&](int64_t b, int64_t e) {
      std::array<char*, N> p;
      for (size_t k = 0; k < N; ++k) p[k] = base[k] + b * inner_stride[k] * isz[k];
      f(p, inner_stride, e - b);
    });
    return;
  }
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1));
  parallel_for(0, outer, grain, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(static_cast<size_t>(nd - 1), 0);
    int64_t rem = b;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = rem % L.shape[d];
      rem /= L.shape[d];
    }
    for (int64_t o = b; o < e; ++o) {
      std::array<char*, N> p;
      for (size_t k = 0; k < N; ++k) {
        int64_t off = 0;
        for (int64_t d = 0; d < nd - 1; ++d) off += idx[d] * L.strides[k][d];
        p[k] = base[k] + off * isz[k];
      }
      f(p, inner_stride, inner);
      for (int64_t d = nd - 2; d >= 0; --d) {
        if (++idx[d] < L.shape[d]) break;
        idx[d] = 0;
      }
    }
  });
}

// out[i] = f(a[i]) with out and a of the same shape (a may be a broadcast view).
template <typename To, typename Ta, typename F>
void map1(const Tensor& out, const Tensor& a, const F& f) {
  std::array<const Tensor*, 2> ops{&out, &a};
  std::array<char*, 2> base{static_cast<char*>(out.raw_data()), static_cast<char*>(a.raw_data())};
  for_each_run<2>(out.shape(), ops, base, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
    To* o = reinterpret_cast<To*>(p[0]);
    const Ta* x = reinterpret_cast<const Ta*>(p[1]);
    if (s[0] == 1 && s[1] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else if (s[0] == 1 && s[1] == 0) {
      const To v = f(x[0]);
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(x[i * s[1]]);
    }
  });
}

// out[i] = f(a[i], b[i]).
template <typename To, typename Ta, typename Tb, typename F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, const F& f) {
  std::array<const Tensor*, 3> ops{&out, &a, &b};
  std::array<char*, 3> base{static_cast<char*>(out.raw_data()), static_cast<char*>(a.raw_data()),
                            static_cast<char*>(b.raw_data())};
  for_each_run<3>(out.shape(), ops, base, [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
    To* o = reinterpret_cast<To*>(p[0]);
    const Ta* x = reinterpret_cast<const Ta*>(p[1]);
    const Tb* y = reinterpret_cast<const Tb*>(p[2]);
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {
      const Tb yv = y[0];
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {
      const Ta xv = x[0];
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(x[i * s[1]], y[i * s[2]]);
    }
  });
}

// out[i] = f(a[i], b[i], c[i]).
template <typename To, typename Ta, typename Tb, typename Tc, typename F>
void map3(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const F& f) {
  std::array<const Tensor*, 4> ops{&out, &a, &b, &c};
  std::array<char*, 4> base{static_cast<char*>(out.raw_data()), static_cast<char*>(a.raw_data()),
                            static_cast<char*>(b.raw_data()), static_cast<char*>(c.raw_data())};
  for_each_run<4>(out.shape(), ops, base, [&](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
    To* o = reinterpret_cast<To*>(p[0]);
    const Ta* x = reinterpret_cast<const Ta*>(p[1]);
    const Tb* y = reinterpret_cast<const Tb*>(p[2]);
    const Tc* z = reinterpret_cast<const Tc*>(p[3]);
    for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(x[i * s[1]], y[i * s[2]], z[i * s[3]]);
  });
}

}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
