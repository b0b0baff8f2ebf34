// CPU softmax, log_softmax, their backwards and logsumexp over the middle dim of a contiguous
// [A, R, C] tensor. C == 1 (the last dim, the common case) runs row by row: one pass for the
// max, one for the exponentials and their sum, one to normalise. C > 1 runs over blocks of
// contiguous columns with a buffer of per-column maxima and sums, so every pass is a
// vectorised loop along the contiguous dim. All passes subtract the max first, so large
// logits (1000, -1000) neither overflow nor lose the small terms. float32 exponentials use a
// vectorisable polynomial (the libm call would keep the loop scalar); sums accumulate in double.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "core/reduce_kernels.h"

namespace ember {

EMBER_DEFINE_STUB(softmax_stub, SoftmaxFn);
EMBER_DEFINE_STUB(softmax_grad_stub, SoftmaxGradFn);
EMBER_DEFINE_STUB(logsumexp_stub, LogSumExpFn);

namespace {

constexpr int kLanes = 32;
constexpr int64_t kColBlock = 256;

// exp for float32 with about 1 ulp of error: Cody-Waite reduction by ln 2 to |r| <= ln2 / 2,
// Cephes' degree-6 polynomial, and 2^k applied as two factors so the result underflows to 0
// (below about -103.3) and overflows to inf (above about 88.7) as the true exp does. Branch-free
// so that loops calling it vectorise; NaN stays NaN.
inline float exp_f32(float x) {
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * 1.44269504088896341f + kMagic;
  const float k = t - kMagic;
  const int32_t ki = static_cast<int32_t>(std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kMagic));
  float r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const int32_t k1 = ki >> 1, k2 = ki - k1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(k1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(k2 + 127) << 23);
  return y * s1 * s2;
}

inline float fast_exp(float x) {
  return exp_f32(x);
}
inline double fast_exp(double x) {
  return std::exp(x);
}

// Row max, NaN-propagating, with kLanes accumulators.
template <typename T>
T row_max(const T* p, int64_t n) {
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
  T m = -std::numeric_limits<T>::infinity();
  for (; i < n; ++i) m = (p[i] > m || p[i] != p[i]) ? p[i] : m;
  for (int j = 0; j < kLanes; ++j) m = (lanes[j] > m || lanes[j] != lanes[j]) ? lanes[j] : m;
  return m;
}

// sum of f(i) for i < n in double, kLanes accumulators; f returns T.
template <typename T, typename F>
double row_sum(int64_t n, const F& f) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(f(i + j));
  }
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(f(i));
  for (int j = 0; j < kLanes; ++j) s += lanes[j];
  return s;
}

// Runs f(a, c0, n) over items of [A, C] blocks, threaded.
template <typename F>
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

template <typename T>
void softmax_rows(bool log, T* out, const T* in, int64_t A, int64_t R) {
  for_rows(A, R, [&](int64_t a) {
    const T* x = in + a * R;
    T* y = out + a * R;
    const T m = row_max(x, R);
    if (log) {
      const double s = row_sum<T>(R, [&](int64_t i) { return fast_exp(x[i] - m); });
      // (x - m) - log s: folding m into the shift first would round it at m's magnitude.
      const T ls = static_cast<T>(std::log(s));
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) y[i] = (x[i] - m) - ls;
    } else {
      const double s = row_sum<T>(R, [&](int64_t i) { return y[i] = fast_exp(x[i] - m); });
      const T inv = static_cast<T>(1.0 / s);
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) y[i] *= inv;
    }
  });
}

template <typename T>
void softmax_columns(bool log, T* out, const T* in, int64_t A, int64_t R, int64_t C) {
  for_blocks(A, R, C, [&](int64_t a, int64_t c0, int64_t n) {
    std::vector<T> m(static_cast<size_t>(n), -std::numeric_limits<T>::infinity());
    std::vector<double> s(static_cast<size_t>(n), 0.0);
    T* mp = m.data();
    double* sp = s.data();
    const T* x0 = in + a * R * C + c0;
    T* y0 = out + a * R * C + c0;
    for (int64_t r = 0; r < R; ++r) {
      const T* x = x0 + r * C;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) mp[c] = x[c] > mp[c] ? x[c] : mp[c];
    }
    for (int64_t r = 0; r < R; ++r) {
      const T* x = x0 + r * C;
      T* y = y0 + r * C;
      if (log) {
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) sp[c] += static_cast<double>(fast_exp(x[c] - mp[c]));
      } else {
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) {
          const T e = fast_exp(x[c] - mp[c]);
          y[c] = e;
          sp[c] += static_cast<double>(e);
        }
      }
    }
    std::vector<T> k(static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c) k[c] = static_cast<T>(log ? std::log(sp[c]) : 1.0 / sp[c]);
    const T* kp = k.data();
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
      const T s = static_cast<T>(row_sum<T>(R, [&](int64_t i) { return g[i]; }));
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) d[i] = g[i] - fast_exp(y[i]) * s;
    } else {
      const T dot = static_cast<T>(row_sum<T>(R, [&](int64_t i) { return g[i] * y[i]; }));
#pragma omp simd
      for (int64_t i = 0; i < R; ++i) d[i] = y[i] * (g[i] - dot);
    }
  });
}

template <typename T>
void softmax_grad_columns(bool log, T* gi, const T* go, const T* yv, int64_t A, int64_t R, int64_t C) {
  for_blocks(A, R, C, [&](int64_t a, int64_t c0, int64_t n) {
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
        for (int64_t c = 0; c < n; ++c) sp[c] += static_cast<double>(g[c] * y[c]);
      }
    }
    std::vector<T> k(s.begin(), s.end());
    const T* kp = k.data();
    for (int64_t r = 0; r < R; ++r) {
      const T* g = go + base + r * C;
      const T* y = yv + base + r * C;
      T* d = gi + base + r * C;
      if (log) {
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) d[c] = g[c] - fast_exp(y[c]) * kp[c];
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
      const double s = std::isfinite(m) ? row_sum<T>(R, [&](int64_t i) { return fast_exp(x[i] - m); }) : 0.0;
      out[a] = lse_finish(m, s);
    });
    return;
  }
  for_blocks(A, R, C, [&](int64_t a, int64_t c0, int64_t n) {
    std::vector<T> m(static_cast<size_t>(n), -std::numeric_limits<T>::infinity());
    std::vector<double> s(static_cast<size_t>(n), 0.0);
    T* mp = m.data();
    double* sp = s.data();
    const T* x0 = in + a * R * C + c0;
    for (int64_t r = 0; r < R; ++r) {
      const T* x = x0 + r * C;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) mp[c] = (x[c] > mp[c] || x[c] != x[c]) ? x[c] : mp[c];
    }
    for (int64_t r = 0; r < R; ++r) {
      const T* x = x0 + r * C;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) sp[c] += static_cast<double>(fast_exp(x[c] - mp[c]));
    }
    for (int64_t c = 0; c < n; ++c) out[a * C + c0 + c] = lse_finish(mp[c], sp[c]);
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
