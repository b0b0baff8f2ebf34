// Per-row math of the fused recurrent cells for the CPU kernels (core/cpu/rnn_kernel.cpp): the
// forward step (nonlinearities and state update) and its backward, for one batch row and a range
// of hidden units. float rows run on GCC/Clang vector extensions with their own exp/tanh, so the
// math vectorises whatever the compiler's cost model decides; float64 rows are scalar libm math,
// exact for gradient checks.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ember::cpu::rnn {

// ------------------------------------------------------------------ lanes

// 8 float lanes with AVX, else 4 (SSE/NEON width); float64 runs one element at a time.
#if defined(__AVX__)
constexpr int kFloatLanes = 8;
#else
constexpr int kFloatLanes = 4;
#endif
using vfloat = float __attribute__((vector_size(4 * kFloatLanes)));
using vint = int32_t __attribute__((vector_size(4 * kFloatLanes)));

template <typename T>
struct Lanes {  // float64: scalars
  using V = T;
  static constexpr int64_t W = 1;
};
template <>
struct Lanes<float> {
  using V = vfloat;
  static constexpr int64_t W = kFloatLanes;
};

// Loads/stores n <= W elements (the row's tail is zero-padded).
template <typename T>
inline typename Lanes<T>::V ld(const T* p, int64_t n) {
  if constexpr (Lanes<T>::W == 1) {
    (void)n;
    return *p;
  } else {
    typename Lanes<T>::V v{};
    std::memcpy(&v, p, sizeof(T) * static_cast<size_t>(n));
    return v;
  }
}
template <typename T>
inline void st(T* p, typename Lanes<T>::V v, int64_t n) {
  if constexpr (Lanes<T>::W == 1) {
    (void)n;
    *p = v;
  } else {
    std::memcpy(p, &v, sizeof(T) * static_cast<size_t>(n));
  }
}

// Calls f(j, n) for lane groups [j, j + n) covering [0, H); full groups pass n as the constant W
// so that their loads and stores are single moves.
template <typename T, typename F>
inline void for_lanes(int64_t H, const F& f) {
  constexpr int64_t W = Lanes<T>::W;
  int64_t j = 0;
  for (; j + W <= H; j += W) f(j, W);
  if (j < H) f(j, H - j);
}

inline vfloat splat(float x) {
  return vfloat{} + x;
}
inline vfloat select(vint mask, vfloat a, vfloat b) {
  return std::bit_cast<vfloat>((mask & std::bit_cast<vint>(a)) | (~mask & std::bit_cast<vint>(b)));
}

// exp(x) = 2^n e^r with |r| <= ln2/2: a degree-6 polynomial for e^r (Cephes expf, about 1e-7
// relative error) and 2^n built in the exponent bits. Inputs are clamped to where the result is a
// normal float.
inline vfloat exp_of(vfloat x) {
  x = select(x < -87.0f, splat(-87.0f), x);
  x = select(x > 88.0f, splat(88.0f), x);
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  const vfloat t = x * 1.44269504088896341f + kMagic;
  const vfloat n = t - kMagic;
  const vint ni = std::bit_cast<vint>(t) - std::bit_cast<int32_t>(kMagic);
  const vfloat r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  vfloat p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<vfloat>((ni + 127) << 23);
}

inline vfloat sigmoid_of(vfloat x) {
  return 1.0f / (1.0f + exp_of(-x));
}
inline double sigmoid_of(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Cephes tanhf: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), else through exp.
inline vfloat tanh_of(vfloat x) {
  const vint sign = std::bit_cast<vint>(x) & std::bit_cast<int32_t>(-0.0f);
  const vfloat ax = std::bit_cast<vfloat>(std::bit_cast<vint>(x) ^ sign);
  const vfloat z = x * x;
  vfloat p = splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const vfloat small = p * z * x + x;
  const vfloat big = 1.0f - 2.0f / (exp_of(2.0f * ax) + 1.0f);
  return select(ax < 0.625f, small, std::bit_cast<vfloat>(std::bit_cast<vint>(big) | sign));
}
inline double tanh_of(double x) {
  return std::tanh(x);
}

inline vfloat relu_of(vfloat x) {
  return select(x > 0.0f, x, splat(0.0f));
}
inline double relu_of(double x) {
  return x > 0.0 ? x : 0.0;
}
// g where h > 0, else 0 (ReLU's backward, as PyTorch: the derivative at 0 is 0).
inline vfloat where_positive(vfloat h, vfloat g) {
  return select(h > 0.0f, g, splat(0.0f));
}
inline double where_positive(double h, double g) {
  return h > 0.0 ? g : 0.0;
}

// ------------------------------------------------------------------ per-row cells

// One batch row of one step, for `units` hidden units (the calling thread's share); H is the
// distance between gates in a row. `g` holds the pre-activations on entry, the activations on exit.
template <typename T>
inline void lstm_row(int64_t H, int64_t units, T* __restrict g, const T* __restrict cp, T* __restrict cn,
                     T* __restrict hn, T* __restrict out) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto i = sigmoid_of(ld(g + j, n)), f = sigmoid_of(ld(g + H + j, n));
    const auto c_in = tanh_of(ld(g + 2 * H + j, n)), o = sigmoid_of(ld(g + 3 * H + j, n));
    const auto c = f * ld(cp + j, n) + i * c_in;
    const auto h = o * tanh_of(c);
    st(g + j, i, n);
    st(g + H + j, f, n);
    st(g + 2 * H + j, c_in, n);
    st(g + 3 * H + j, o, n);
    st(cn + j, c, n);
    st(hn + j, h, n);
    st(out + j, h, n);
  });
}

// `gx` holds W_i x + b_i (+ b_hr, b_hz for r and z) on entry and r, z, n on exit; `gh` holds
// W_hh h_{t-1} without bias.
template <typename T>
inline void gru_row(int64_t H, int64_t units, T* __restrict gx, const T* __restrict gh, const T* __restrict b_hn,
                    const T* __restrict hp, T* __restrict hn_lin, T* __restrict hn, T* __restrict out) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto r = sigmoid_of(ld(gx + j, n) + ld(gh + j, n));
    const auto z = sigmoid_of(ld(gx + H + j, n) + ld(gh + H + j, n));
    const auto lin = ld(gh + 2 * H + j, n) + ld(b_hn + j, n);
    const auto nn = tanh_of(ld(gx + 2 * H + j, n) + r * lin);
    const auto h = (T(1) - z) * nn + z * ld(hp + j, n);
    st(gx + j, r, n);
    st(gx + H + j, z, n);
    st(gx + 2 * H + j, nn, n);
    st(hn_lin + j, lin, n);
    st(hn + j, h, n);
    st(out + j, h, n);
  });
}

template <typename T>
inline void rnn_row(bool relu, int64_t units, T* __restrict g, T* __restrict hn, T* __restrict out) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto pre = ld(g + j, n);
    const auto h = relu ? relu_of(pre) : tanh_of(pre);
    st(g + j, h, n);
    st(hn + j, h, n);
    st(out + j, h, n);
  });
}

// Backward of one active row of one step. dh holds dL/dh_t from later steps on entry and the part
// of dL/dh_{t-1} that does not go through W_hh on exit; dc likewise for the LSTM cell.
template <typename T>
inline void lstm_row_backward(int64_t H, int64_t units, const T* __restrict g, const T* __restrict cp,
                              const T* __restrict cn, const T* __restrict dout, T* __restrict dh, T* __restrict dc,
                              T* __restrict dg) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto i = ld(g + j, n), f = ld(g + H + j, n), c_in = ld(g + 2 * H + j, n), o = ld(g + 3 * H + j, n);
    const auto tc = tanh_of(ld(cn + j, n));
    const auto dht = ld(dh + j, n) + ld(dout + j, n);
    const auto dct = ld(dc + j, n) + dht * o * (T(1) - tc * tc);
    st(dg + j, dct * c_in * i * (T(1) - i), n);
    st(dg + H + j, dct * ld(cp + j, n) * f * (T(1) - f), n);
    st(dg + 2 * H + j, dct * i * (T(1) - c_in * c_in), n);
    st(dg + 3 * H + j, dht * tc * o * (T(1) - o), n);
    st(dc + j, dct * f, n);
    st(dh + j, typename Lanes<T>::V{}, n);
  });
}

template <typename T>
inline void gru_row_backward(int64_t H, int64_t units, const T* __restrict g, const T* __restrict hn_lin,
                             const T* __restrict hp, const T* __restrict dout, T* __restrict dh, T* __restrict dgx,
                             T* __restrict dgh) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto r = ld(g + j, n), z = ld(g + H + j, n), nn = ld(g + 2 * H + j, n);
    const auto dht = ld(dh + j, n) + ld(dout + j, n);
    const auto dn = dht * (T(1) - z) * (T(1) - nn * nn);
    const auto dr = dn * ld(hn_lin + j, n) * r * (T(1) - r);
    const auto dz = dht * (ld(hp + j, n) - nn) * z * (T(1) - z);
    st(dgx + j, dr, n);
    st(dgx + H + j, dz, n);
    st(dgx + 2 * H + j, dn, n);
    st(dgh + j, dr, n);
    st(dgh + H + j, dz, n);
    st(dgh + 2 * H + j, dn * r, n);
    st(dh + j, dht * z, n);
  });
}

template <typename T>
inline void rnn_row_backward(bool relu, int64_t units, const T* __restrict g, const T* __restrict dout,
                             T* __restrict dh, T* __restrict dg) {
  for_lanes<T>(units, [&](int64_t j, int64_t n) {
    const auto h = ld(g + j, n);
    const auto dht = ld(dh + j, n) + ld(dout + j, n);
    st(dg + j, relu ? where_positive(h, dht) : dht * (T(1) - h * h), n);
    st(dh + j, typename Lanes<T>::V{}, n);
  });
}

}  // namespace ember::cpu::rnn
