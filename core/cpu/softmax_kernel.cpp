// CPU softmax, log_softmax, their backwards and logsumexp over the middle dim of a contiguous
// [A, R, C] tensor. C == 1 (the last dim, the common case) runs row by row: one pass for the
// max, one for the exponentials and their sum, one to normalise. C > 1 runs over blocks of
// contiguous columns with a buffer of per-column maxima and sums, so every pass is a
// vectorised loop along the contiguous dim. All passes subtract the max first, so large
// logits (1000, -1000) neither overflow nor lose the small terms. float32 exponentials use a
// polynomial on 8-wide vectors (the libm call would keep the loop scalar); sums accumulate in
// double.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "core/reduce_kernels.h"

namespace ember {

namespace {

#if defined(__GNUC__)
// The 32-byte vector types below change the calling convention on targets without AVX; every
// function using them is internal to this file, so no ABI is shared with anything else.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

constexpr int kLanes = 32;
// Column blocks are wide so that every pass streams long contiguous runs of each row; short
// runs at a large row stride defeat the prefetchers, which costs far more than the passes
// missing cache.
constexpr int64_t kColBlock = 4096;

// ---------------------------------------------------------------- float32 exponential
// GCC keeps a loop scalar when a branch-free clamp inside it lets jump threading fold one arm
// into constants that "could trap", so the float32 exponential is written with vector
// extensions (GCC and Clang; any x86-64 or AArch64 target) instead of hoping for
// auto-vectorisation. Cody-Waite reduction by ln 2 to |r| <= ln2 / 2, Cephes' degree-6
// polynomial (about 1 ulp), and 2^k applied as two factors so the result underflows to 0
// (below about -103.3) and overflows to inf (above about 88.7) as the true exp does; NaN stays NaN.
typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));
typedef uint32_t u8 __attribute__((vector_size(32)));
typedef double d4 __attribute__((vector_size(32)));

inline f8 splat(float x) {
  return f8{x, x, x, x, x, x, x, x};
}
inline f8 load8(const float* p) {
  f8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, const f8& v) {
  std::memcpy(p, &v, sizeof v);
}
inline d4 low4(const f8& v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), d4);
}
inline d4 high4(const f8& v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), d4);
}

inline f8 exp8(const f8& in) {
  f8 x = in < splat(-104.0f) ? splat(-104.0f) : in;
  x = x > splat(89.0f) ? splat(89.0f) : x;
  const f8 magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const f8 t = x * splat(1.44269504088896341f) + magic;
  const f8 k = t - magic;
  const i8 ki = (i8)((u8)t - (u8)magic);
  f8 r = x - k * splat(0.693359375f);
  r = r - k * splat(-2.12194440e-4f);
  f8 p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  const f8 y = p * (r * r) + r + splat(1.0f);
  const i8 k1 = ki >> 1, k2 = ki - k1;
  const f8 s1 = (f8)((u8)(k1 + 127) << 23);
  const f8 s2 = (f8)((u8)(k2 + 127) << 23);
  return y * s1 * s2;
}

// The first n (< 8) lanes of p, the rest `pad` (only rows shorter than one vector use it).
inline f8 load_short(const float* p, int64_t n, float pad) {
  float b[8];
  for (int j = 0; j < 8; ++j) b[j] = j < n ? p[j] : pad;
  return load8(b);
}
inline void store_short(float* p, int64_t n, const f8& v) {
  float b[8];
  store8(b, v);
  for (int64_t j = 0; j < n; ++j) p[j] = b[j];
}
constexpr i8 kLaneIndex{0, 1, 2, 3, 4, 5, 6, 7};
inline double hsum(const d4& a) {
  return (a[0] + a[1]) + (a[2] + a[3]);
}

// sum over i of exp(x[i] - m) in double, writing the terms to y (not aliasing x) unless null.
double exp_sum(const float* x, float m, float* y, int64_t n) {
  d4 a0{}, a1{}, a2{}, a3{};
  const f8 mv = splat(m);
  if (n < 8) {
    f8 e = exp8(load_short(x, n, 0.0f) - mv);
    e = kLaneIndex < static_cast<int32_t>(n) ? e : splat(0.0f);
    if (y) store_short(y, n, e);
    return hsum(low4(e) + high4(e));
  }
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const f8 e0 = exp8(load8(x + i) - mv), e1 = exp8(load8(x + i + 8) - mv);
    if (y) {
      store8(y + i, e0);
      store8(y + i + 8, e1);
    }
    a0 += low4(e0);
    a1 += high4(e0);
    a2 += low4(e1);
    a3 += high4(e1);
  }
  if (i + 8 <= n) {
    const f8 e = exp8(load8(x + i) - mv);
    if (y) store8(y + i, e);
    a0 += low4(e);
    a1 += high4(e);
    i += 8;
  }
  if (i < n) {
    // One vector ending at n; only its last n - i lanes are new.
    f8 e = exp8(load8(x + n - 8) - mv);
    if (y) store8(y + n - 8, e);
    e = kLaneIndex >= static_cast<int32_t>(8 - (n - i)) ? e : splat(0.0f);
    a2 += low4(e);
    a3 += high4(e);
  }
  return hsum((a0 + a1) + (a2 + a3));
}
double exp_sum(const double* x, double m, double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = std::exp(x[i] - m);
    if (y) y[i] = e;
    s += e;
  }
  return s;
}

// y[i] = exp(x[i] - m[i]) (m null: exp(x[i])); y must not alias x or m.
void exp_sub(const float* x, const float* m, float* y, int64_t n) {
  if (n < 8) {
    const f8 v = load_short(x, n, 0.0f);
    store_short(y, n, exp8(m ? v - load_short(m, n, 0.0f) : v));
    return;
  }
  auto at = [&](int64_t i) { return store8(y + i, exp8(m ? load8(x + i) - load8(m + i) : load8(x + i))); };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) at(i);
  if (i < n) at(n - 8);  // overlaps the previous vector, rewriting the same values
}
void exp_sub(const double* x, const double* m, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(m ? x[i] - m[i] : x[i]);
}

// Row max, NaN-propagating, with kLanes accumulators.
template <typename T>
T row_max(const T* p, int64_t n) {
  auto pick = [](T a, T b) { return (b > a || b != b) ? b : a; };
  if (n < kLanes) {
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < n; ++i) m = pick(m, p[i]);
    return m;
  }
  T lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) {
      const T x = p[i + j];
      lanes[j] = (x > lanes[j] || x != x) ? x : lanes[j];
    }
  }
  for (int64_t j = 0; i + j < n; ++j) lanes[j] = pick(lanes[j], p[i + j]);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] = pick(lanes[j], lanes[j + w]);
  return lanes[0];
}

// sum of a[i] (b null) or a[i] * b[i] in double, with kLanes accumulators.
template <typename T>
double row_dot(const T* a, const T* b, int64_t n) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    if (b) {
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(a[i + j]) * static_cast<double>(b[i + j]);
    } else {
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(a[i + j]);
    }
  }
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(a[i]) * (b ? static_cast<double>(b[i]) : 1.0);
  for (int j = 0; j < kLanes; ++j) s += lanes[j];
  return s;
}

// Runs f(a, c0, n) over blocks of contiguous columns of an [A, R, C] tensor, threaded.
template <typename T, typename F>
void for_blocks(int64_t A, int64_t R, int64_t C, const F& f) {
  const int64_t width = std::min(C, kColBlock);
  const int64_t nblk = (C + width - 1) / width;
  parallel_for(0, A * nblk, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R * width, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t it = b; it < e; ++it) {
                   const int64_t a = it / nblk, c0 = (it % nblk) * width;
                   f(a, c0, std::min(width, C - c0));
                 }
               });
}

template <typename F>
void for_rows(int64_t A, int64_t R, const F& f) {
  parallel_for(0, A, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
    for (int64_t a = b; a < e; ++a) f(a);
  });
}

// Per-column max over the R rows of a block (NaN-propagating).
template <typename T>
void column_max(const T* x0, int64_t R, int64_t C, int64_t n, T* m) {
  for (int64_t c = 0; c < n; ++c) m[c] = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < R; ++r) {
    const T* x = x0 + r * C;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) m[c] = (x[c] > m[c] || x[c] != x[c]) ? x[c] : m[c];
  }
}

// Per-column sum of exp(x - m) over the R rows of a block, in double; the terms go to y (a
// block of the same layout) unless it is null, else through `tmp` (n elements).
template <typename T>
void column_exp_sum(const T* x0, T* y0, int64_t R, int64_t C, int64_t n, const T* m, T* tmp, double* s) {
  for (int64_t c = 0; c < n; ++c) s[c] = 0;
  for (int64_t r = 0; r < R; ++r) {
    T* e = y0 ? y0 + r * C : tmp;
    exp_sub(x0 + r * C, m, e, n);
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) s[c] += static_cast<double>(e[c]);
  }
}

template <typename T>
void softmax_rows(bool log, T* out, const T* in, int64_t A, int64_t R) {
  for_rows(A, R, [&](int64_t a) {
    const T* x = in + a * R;
    T* y = out + a * R;
    const T m = row_max(x, R);
    if (log) {
      // (x - m) - log s: folding m into the shift first would round it at m's magnitude.
      const T ls = static_cast<T>(std::log(exp_sum(x, m, static_cast<T*>(nullptr), R)));
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) y[i] = (x[i] - m) - ls;
    } else {
      const T inv = static_cast<T>(1.0 / exp_sum(x, m, y, R));
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) y[i] *= inv;
    }
  });
}

template <typename T>
void softmax_columns(bool log, T* out, const T* in, int64_t A, int64_t R, int64_t C) {
  for_blocks<T>(A, R, C, [&](int64_t a, int64_t c0, int64_t n) {
    std::vector<T> m(static_cast<size_t>(n)), k(static_cast<size_t>(n)), tmp(static_cast<size_t>(n));
    std::vector<double> s(static_cast<size_t>(n));
    const T* x0 = in + a * R * C + c0;
    T* y0 = out + a * R * C + c0;
    column_max(x0, R, C, n, m.data());
    column_exp_sum(x0, log ? nullptr : y0, R, C, n, m.data(), tmp.data(), s.data());
    for (int64_t c = 0; c < n; ++c) k[c] = static_cast<T>(log ? std::log(s[c]) : 1.0 / s[c]);
    const T* kp = k.data();
    const T* mp = m.data();
    for (int64_t r = 0; r < R; ++r) {
      const T* x = x0 + r * C;
      T* y = y0 + r * C;
      if (log) {
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) y[c] = (x[c] - mp[c]) - kp[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) y[c] *= kp[c];
      }
    }
  });
}

void cpu_softmax(bool log, const Tensor& out, const Tensor& in) {
  const int64_t A = in.size(0), R = in.size(1), C = in.size(2);
  if (A * R * C == 0) return;
  EMBER_DISPATCH_FLOAT(in.dtype(), log ? "log_softmax" : "softmax", [&] {
    using T = scalar_t;
    if (C == 1)
      softmax_rows<T>(log, out.data_ptr<T>(), in.data_ptr<T>(), A, R);
    else
      softmax_columns<T>(log, out.data_ptr<T>(), in.data_ptr<T>(), A, R, C);
  });
}

template <typename T>
void softmax_grad_rows(bool log, T* gi, const T* go, const T* yv, int64_t A, int64_t R) {
  for_rows(A, R, [&](int64_t a) {
    const T* g = go + a * R;
    const T* y = yv + a * R;
    T* d = gi + a * R;
    if (log) {
      const T s = static_cast<T>(row_dot(g, static_cast<const T*>(nullptr), R));
      exp_sub(y, static_cast<const T*>(nullptr), d, R);
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) d[i] = g[i] - d[i] * s;
    } else {
      const T dot = static_cast<T>(row_dot(g, y, R));
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) d[i] = y[i] * (g[i] - dot);
    }
  });
}

template <typename T>
void softmax_grad_columns(bool log, T* gi, const T* go, const T* yv, int64_t A, int64_t R, int64_t C) {
  for_blocks<T>(A, R, C, [&](int64_t a, int64_t c0, int64_t n) {
    std::vector<double> s(static_cast<size_t>(n), 0.0);
    double* sp = s.data();
    const int64_t base = a * R * C + c0;
    for (int64_t r = 0; r < R; ++r) {
      const T* g = go + base + r * C;
      const T* y = yv + base + r * C;
      if (log) {
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) sp[c] += static_cast<double>(g[c]);
      } else {
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) sp[c] += static_cast<double>(g[c]) * static_cast<double>(y[c]);
      }
    }
    std::vector<T> k(s.begin(), s.end());
    const T* kp = k.data();
    for (int64_t r = 0; r < R; ++r) {
      const T* g = go + base + r * C;
      const T* y = yv + base + r * C;
      T* d = gi + base + r * C;
      if (log) {
        exp_sub(y, static_cast<const T*>(nullptr), d, n);
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) d[c] = g[c] - d[c] * kp[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) d[c] = y[c] * (g[c] - kp[c]);
      }
    }
  });
}

void cpu_softmax_grad(bool log, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out) {
  const int64_t A = out.size(0), R = out.size(1), C = out.size(2);
  if (A * R * C == 0) return;
  EMBER_DISPATCH_FLOAT(out.dtype(), log ? "log_softmax backward" : "softmax backward", [&] {
    using T = scalar_t;
    if (C == 1)
      softmax_grad_rows<T>(log, grad_in.data_ptr<T>(), grad_out.data_ptr<T>(), out.data_ptr<T>(), A, R);
    else
      softmax_grad_columns<T>(log, grad_in.data_ptr<T>(), grad_out.data_ptr<T>(), out.data_ptr<T>(), A, R, C);
  });
}

// m + log(s), where a non-finite max (all -inf, some +inf, or NaN) is the answer itself.
template <typename T>
T lse_finish(T m, double s) {
  return std::isfinite(m) ? static_cast<T>(static_cast<double>(m) + std::log(s)) : m;
}

template <typename T>
void logsumexp_impl(T* out, const T* in, int64_t A, int64_t R, int64_t C) {
  if (C == 1) {
    for_rows(A, R, [&](int64_t a) {
      const T* x = in + a * R;
      const T m = row_max(x, R);
      out[a] = lse_finish(m, std::isfinite(m) ? exp_sum(x, m, static_cast<T*>(nullptr), R) : 0.0);
    });
    return;
  }
  for_blocks<T>(A, R, C, [&](int64_t a, int64_t c0, int64_t n) {
    std::vector<T> m(static_cast<size_t>(n)), tmp(static_cast<size_t>(n));
    std::vector<double> s(static_cast<size_t>(n));
    const T* x0 = in + a * R * C + c0;
    column_max(x0, R, C, n, m.data());
    column_exp_sum(x0, static_cast<T*>(nullptr), R, C, n, m.data(), tmp.data(), s.data());
    for (int64_t c = 0; c < n; ++c) out[a * C + c0 + c] = lse_finish(m[c], s[c]);
  });
}

void cpu_logsumexp(const Tensor& out, const Tensor& in) {
  const int64_t A = in.size(0), R = in.size(1), C = in.size(2);
  if (A * C == 0) return;
  EMBER_DISPATCH_FLOAT(in.dtype(), "logsumexp", [&] {
    using T = scalar_t;
    logsumexp_impl<T>(out.data_ptr<T>(), in.data_ptr<T>(), A, R, C);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(softmax_stub, CPU, cpu_softmax);
EMBER_REGISTER_KERNEL(softmax_grad_stub, CPU, cpu_softmax_grad);
EMBER_REGISTER_KERNEL(logsumexp_stub, CPU, cpu_logsumexp);

}  // namespace ember
