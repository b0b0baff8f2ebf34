// Per-row math of the fused recurrent cells for the CPU kernels (core/cpu/rnn_kernel.cpp): the
// forward step (nonlinearities and state update) and its backward, for one batch row and a range
// of hidden units. The loops are `omp simd` loops over the branch-free float functions of
// core/cpu/vec_math.h, so float rows compile to vector code; float64 rows use std:: math, exact
// for gradient checks.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cpu/capability.h"
#include "core/cpu/vec_math.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {
namespace rnn {

inline float sigmoid_of(float x) {
  return sigmoid_f32(x);
}
inline double sigmoid_of(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
inline float tanh_of(float x) {
  return tanh_f32(x);
}
inline double tanh_of(double x) {
  return std::tanh(x);
}
// Calls f(j) for j in [0, n): an `omp simd` loop for float, a plain loop for float64 (whose libm
// calls cannot be vectorised, and clang warns when a requested vectorisation fails).
template <typename T, typename F>
inline void simd_for(int64_t n, const F& f) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) f(j);
  } else {
    for (int64_t j = 0; j < n; ++j) f(j);
  }
}

// x where `keep`, else 0, as a blend so that the loop stays vectorisable.
template <typename T>
inline T keep_or_zero(bool keep, T x) {
  return blend(keep, x, T(0));
}

// One batch row of one step, for `units` hidden units (the calling thread's share); H is the
// distance between gates in a row. `g` holds the pre-activations on entry, the activations on exit.
template <typename T>
inline void lstm_row(int64_t H, int64_t units, T* __restrict g, const T* __restrict cp, T* __restrict cn,
                     T* __restrict hn, T* __restrict out) {
  simd_for<T>(units, [&](int64_t j) {
    const T i = sigmoid_of(g[j]), f = sigmoid_of(g[H + j]), c_in = tanh_of(g[2 * H + j]), o = sigmoid_of(g[3 * H + j]);
    const T c = f * cp[j] + i * c_in;
    const T h = o * tanh_of(c);
    g[j] = i;
    g[H + j] = f;
    g[2 * H + j] = c_in;
    g[3 * H + j] = o;
    cn[j] = c;
    hn[j] = h;
    out[j] = h;
  });
}

// `gx` holds W_i x + b_i (+ b_hr, b_hz for r and z) on entry and r, z, n on exit; `gh` holds
// W_hh h_{t-1} without bias.
template <typename T>
inline void gru_row(int64_t H, int64_t units, T* __restrict gx, const T* __restrict gh, const T* __restrict b_hn,
                    const T* __restrict hp, T* __restrict hn_lin, T* __restrict hn, T* __restrict out) {
  simd_for<T>(units, [&](int64_t j) {
    const T r = sigmoid_of(gx[j] + gh[j]);
    const T z = sigmoid_of(gx[H + j] + gh[H + j]);
    const T lin = gh[2 * H + j] + b_hn[j];
    const T n = tanh_of(gx[2 * H + j] + r * lin);
    const T h = (T(1) - z) * n + z * hp[j];
    gx[j] = r;
    gx[H + j] = z;
    gx[2 * H + j] = n;
    hn_lin[j] = lin;
    hn[j] = h;
    out[j] = h;
  });
}

template <typename T>
inline void rnn_row(bool relu, int64_t units, T* __restrict g, T* __restrict hn, T* __restrict out) {
  if (relu) {
    simd_for<T>(units, [&](int64_t j) {
      const T h = keep_or_zero(g[j] > T(0), g[j]);
      g[j] = h;
      hn[j] = h;
      out[j] = h;
    });
  } else {
    simd_for<T>(units, [&](int64_t j) {
      const T h = tanh_of(g[j]);
      g[j] = h;
      hn[j] = h;
      out[j] = h;
    });
  }
}

// Backward of one active row of one step. dh holds dL/dh_t from later steps on entry and the part
// of dL/dh_{t-1} that does not go through W_hh on exit; dc likewise for the LSTM cell.
template <typename T>
inline void lstm_row_backward(int64_t H, int64_t units, const T* __restrict g, const T* __restrict cp,
                              const T* __restrict cn, const T* __restrict dout, T* __restrict dh, T* __restrict dc,
                              T* __restrict dg) {
  simd_for<T>(units, [&](int64_t j) {
    const T i = g[j], f = g[H + j], c_in = g[2 * H + j], o = g[3 * H + j];
    const T tc = tanh_of(cn[j]);
    const T dht = dh[j] + dout[j];
    const T dct = dc[j] + dht * o * (T(1) - tc * tc);
    dg[j] = dct * c_in * i * (T(1) - i);
    dg[H + j] = dct * cp[j] * f * (T(1) - f);
    dg[2 * H + j] = dct * i * (T(1) - c_in * c_in);
    dg[3 * H + j] = dht * tc * o * (T(1) - o);
    dc[j] = dct * f;
    dh[j] = T(0);
  });
}

template <typename T>
inline void gru_row_backward(int64_t H, int64_t units, const T* __restrict g, const T* __restrict hn_lin,
                             const T* __restrict hp, const T* __restrict dout, T* __restrict dh, T* __restrict dgx,
                             T* __restrict dgh) {
  simd_for<T>(units, [&](int64_t j) {
    const T r = g[j], z = g[H + j], n = g[2 * H + j];
    const T dht = dh[j] + dout[j];
    const T dn = dht * (T(1) - z) * (T(1) - n * n);
    const T dr = dn * hn_lin[j] * r * (T(1) - r);
    const T dz = dht * (hp[j] - n) * z * (T(1) - z);
    dgx[j] = dr;
    dgx[H + j] = dz;
    dgx[2 * H + j] = dn;
    dgh[j] = dr;
    dgh[H + j] = dz;
    dgh[2 * H + j] = dn * r;
    dh[j] = dht * z;
  });
}

template <typename T>
inline void rnn_row_backward(bool relu, int64_t units, const T* __restrict g, const T* __restrict dout,
                             T* __restrict dh, T* __restrict dg) {
  if (relu) {
    simd_for<T>(units, [&](int64_t j) {
      dg[j] = keep_or_zero(g[j] > T(0), dh[j] + dout[j]);
      dh[j] = T(0);
    });
  } else {
    simd_for<T>(units, [&](int64_t j) {
      dg[j] = (dh[j] + dout[j]) * (T(1) - g[j] * g[j]);
      dh[j] = T(0);
    });
  }
}

}  // namespace rnn
}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
