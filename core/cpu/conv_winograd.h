// Winograd's minimal filtering F(2x2, 3x3) and F(2x2, 5x5) for stride-1 convolutions (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each 2x2 block of outputs (a
// tile) comes from an a x a block of input (a = r + 1 for an r x r filter) as
// Y = A^T [(G g G^T) . (B^T d B)] A: a^2 multiplications per input and output channel where the
// direct form takes 4 r^2, 16 against 36 for 3x3 and 36 against 100 for 5x5. Over a batch the a^2
// element-wise products become a^2 GEMMs, [tiles, C] x [C, OC], so the multiply-adds still run in
// OpenBLAS's kernel.
//
// These are the transforms, of the filters, the input and the output, and for the weight gradient
// the adjoints of the filters' and the output's; conv_kernel.cpp runs them around the GEMMs. Each
// form is five one-dimensional transforms (F2x3, F2x5 below); the two-dimensional ones apply them
// down the columns, then along the rows. Output tiles stay 2x2 because larger ones lose accuracy:
// F(4x4, 3x3) loses about a digit in float; F(2x2, 5x5) needs six interpolation points like it,
// and with 0, +-1, 2 and -1/2 (the best of the sets tried: 0, +-1, +-2; 0, +-1, +-1/2) its error
// on random data is about 2.5x F(2x2, 3x3)'s, a few units in the last place of the direct form's.
// Every loop over channels is contiguous (channels-last input, channels-last output) and
// vectorises over channels. Compiled once per CPU level, in that level's namespace
// (core/cpu/capability.h).
#pragma once

#include <cstdint>
#include <utility>

#include "core/cpu/capability.h"
#include "core/nn_kernels.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {
namespace winograd {

// F(2, 3) on points 0, 1, -1 and infinity. filter: G g (3 -> 4 values); input: B^T d (4 -> 4);
// output: A^T m (4 -> 2); output_grad: A y (2 -> 4), output's adjoint; filter_grad: G^T d
// (4 -> 3), filter's adjoint. Only additions and halvings.
struct F2x3 {
  static constexpr int kR = 3, kA = 4;
  template <typename T>
  static void filter(const T* g, T* u) {
    u[0] = g[0];
    u[1] = (g[0] + g[1] + g[2]) * T(0.5);
    u[2] = (g[0] - g[1] + g[2]) * T(0.5);
    u[3] = g[2];
  }
  template <typename T>
  static void input(const T* d, T* v) {
    v[0] = d[0] - d[2];
    v[1] = d[1] + d[2];
    v[2] = d[2] - d[1];
    v[3] = d[1] - d[3];
  }
  template <typename T>
  static void output(const T* m, T* y) {
    y[0] = m[0] + m[1] + m[2];
    y[1] = m[1] - m[2] - m[3];
  }
  template <typename T>
  static void output_grad(const T* y, T* m) {
    m[0] = y[0];
    m[1] = y[0] + y[1];
    m[2] = y[0] - y[1];
    m[3] = -y[1];
  }
  template <typename T>
  static void filter_grad(const T* d, T* g) {
    g[0] = d[0] + (d[1] + d[2]) * T(0.5);
    g[1] = (d[1] - d[2]) * T(0.5);
    g[2] = (d[1] + d[2]) * T(0.5) + d[3];
  }
};

// F(2, 5) on points 0, 1, -1, 2, -1/2 and infinity (derived by Lagrange interpolation, checked
// against the direct form by the op-table rows). G's rows: [1 0 0 0 0], -[1 1 1 1 1]/3,
// [1 -1 1 -1 1]/3, [1 2 4 8 16]/15, [-16 8 -4 2 -1]/15, [0 0 0 0 1]; B^T's: [1 3/2 -2 -3/2 1 0],
// [0 -1 -5/2 -1/2 1 0], [0 1 1/2 -5/2 1 0], [0 -1/2 -1 1/2 1 0], [0 2 -1 -2 1 0],
// [0 1 3/2 -2 -3/2 1]; A^T's: [1 1 1 1 1 0], [0 1 -1 2 -1/2 1]. The thirds and fifteenths sit in
// G, which runs once a step per filter, not in B^T, which runs on every tile.
struct F2x5 {
  static constexpr int kR = 5, kA = 6;
  template <typename T>
  static void filter(const T* g, T* u) {
    const T even = g[0] + g[2] + g[4], odd = g[1] + g[3];
    u[0] = g[0];
    u[1] = (even + odd) * T(-1.0 / 3);
    u[2] = (even - odd) * T(1.0 / 3);
    u[3] = (g[0] + T(2) * g[1] + T(4) * g[2] + T(8) * g[3] + T(16) * g[4]) * T(1.0 / 15);
    u[4] = (T(-16) * g[0] + T(8) * g[1] - T(4) * g[2] + T(2) * g[3] - g[4]) * T(1.0 / 15);
    u[5] = g[4];
  }
  template <typename T>
  static void input(const T* d, T* v) {
    const T s42 = d[4] - d[2], s13 = d[1] - d[3];
    v[0] = d[0] + d[4] - T(2) * d[2] + T(1.5) * s13;
    v[1] = d[4] - d[1] - T(2.5) * d[2] - T(0.5) * d[3];
    v[2] = d[4] + d[1] + T(0.5) * d[2] - T(2.5) * d[3];
    v[3] = s42 - T(0.5) * s13;
    v[4] = s42 + T(2) * s13;
    v[5] = d[1] + d[5] - T(2) * d[3] + T(1.5) * (d[2] - d[4]);
  }
  template <typename T>
  static void output(const T* m, T* y) {
    y[0] = m[0] + m[1] + m[2] + m[3] + m[4];
    y[1] = m[1] - m[2] + T(2) * m[3] - T(0.5) * m[4] + m[5];
  }
  template <typename T>
  static void output_grad(const T* y, T* m) {
    m[0] = y[0];
    m[1] = y[0] + y[1];
    m[2] = y[0] - y[1];
    m[3] = y[0] + T(2) * y[1];
    m[4] = y[0] - T(0.5) * y[1];
    m[5] = y[1];
  }
  template <typename T>
  static void filter_grad(const T* d, T* g) {
    // rows 1 and 2 of G give every column -d1 / 3 and (-1)^k d2 / 3: p on even columns, q on odd
    const T p = (d[2] - d[1]) * T(1.0 / 3), q = (d[1] + d[2]) * T(-1.0 / 3), a = d[3] * T(1.0 / 15),
            b = d[4] * T(1.0 / 15);
    g[0] = d[0] + p + a - T(16) * b;
    g[1] = q + T(2) * a + T(8) * b;
    g[2] = p + T(4) * a - T(4) * b;
    g[3] = q + T(8) * a + T(2) * b;
    g[4] = p + T(16) * a - b + d[5];
  }
};

// Each transform's loop over channels calls a function for one channel (filter_at, input_at,
// output_at, output_grad_at) that holds the a x a values in arrays, and GCC vectorises the loop only
// if it can turn those arrays into registers first. Two things make sure it can: the arrays are
// declared in the function, not in the `omp simd` loop's body (there they become per-lane arrays
// that GCC 12 leaves in memory, and the loops ran scalar), and every index into them is a constant:
// unrolled() calls f(0), f(1), ... f(N - 1) with each index a compile-time constant, where GCC
// does not unroll loops of 36 iterations completely.
template <int N, typename F>
inline void unrolled(F f) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (f(std::integral_constant<int, I>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

// y [Out x Out] = L x L^T for x [In x In], where L is the one-dimensional transform f (In values
// to Out): f down each column, then along each row of the result.
template <int In, int Out, typename T, typename F>
inline void both_ways(const T* x, T* y, F f) {
  T t[Out * In];
  unrolled<In>([&](auto q) {
    T col[In], r[Out];
    unrolled<In>([&](auto i) { col[i] = x[i * In + q]; });
    f(col, r);
    unrolled<Out>([&](auto i) { t[i * In + q] = r[i]; });
  });
  unrolled<Out>([&](auto p) { f(t + p * In, y + p * Out); });
}

// Output tiles of one image: 2x2 blocks of output pixels, the last row or column of tiles
// clipped when OH or OW is odd.
inline int64_t tiles_h(const ConvGeometry& g) {
  return (g.OH + 1) / 2;
}
inline int64_t tiles_w(const ConvGeometry& g) {
  return (g.OW + 1) / 2;
}
inline int64_t tiles(const ConvGeometry& g) {
  return tiles_h(g) * tiles_w(g);
}

// One output channel of filter(): g's r x r taps for channel oc transformed into d's a^2 planes.
template <typename Form, typename T>
[[gnu::always_inline]] inline void filter_at(const T* g, T* d, int64_t oc, int64_t OC, int64_t plane) {
  constexpr int R = Form::kR, A = Form::kA;
  T x[R * R], y[A * A];
  unrolled<R * R>([&](auto k) { x[k] = g[k * OC + oc]; });
  both_ways<R, A>(x, y, [](const T* in, T* out) { Form::filter(in, out); });
  unrolled<A * A>([&](auto k) { d[k * plane + oc] = y[k]; });
}

// u [a^2, C, OC] = G g G^T for every (input channel c, output channel oc), where g is the r x r
// filter held at wt[(c * r^2 + kh * r + kw) * OC + oc] (the caller lays the filters out so, output
// channels innermost, and the loop runs over them in vectors: a training step transforms the
// filters once per chunk of images, and done one filter at a time that cost 4% of a MnistCnn step).
template <typename Form, typename T>
void filter(const T* wt, T* u, int64_t C, int64_t OC) {
  constexpr int R = Form::kR;
  const int64_t plane = C * OC;
  for (int64_t c = 0; c < C; ++c) {
    const T* g = wt + c * R * R * OC;
    T* d = u + c * OC;
#pragma omp simd
    for (int64_t oc = 0; oc < OC; ++oc) filter_at<Form>(g, d, oc, OC, plane);
  }
}

// One channel of input(): the tile's a x a values at s[k][c] transformed into dst's a^2 planes.
template <typename Form, typename T>
[[gnu::always_inline]] inline void input_at(const T* const* s, int64_t c, T* dst, int64_t ldv) {
  constexpr int A = Form::kA;
  T x[A * A], y[A * A];
  unrolled<A * A>([&](auto k) { x[k] = s[k][c]; });
  both_ways<A, A>(x, y, [](const T* in, T* out) { Form::input(in, out); });
  unrolled<A * A>([&](auto k) { dst[k * ldv + c] = y[k]; });
}

// One image: v[k * ldv + t * C + c] = (B^T d B)[k] for each tile t and channel c, where d is the
// a x a block of xt [H, W, C] (channels-last) at the tile's corner, zero outside the image
// (the padding); `zeros` holds C zeros.
template <typename Form, typename T>
void input(const T* xt, T* v, int64_t ldv, const ConvGeometry& g, const T* zeros) {
  constexpr int A = Form::kA;
  const int64_t C = g.C, TH = tiles_h(g), TW = tiles_w(g);
  for (int64_t ty = 0; ty < TH; ++ty)
    for (int64_t tx = 0; tx < TW; ++tx) {
      const T* s[A * A];
      for (int r = 0; r < A; ++r)
        for (int q = 0; q < A; ++q) {
          const int64_t ih = 2 * ty - g.ph + r, iw = 2 * tx - g.pw + q;
          s[r * A + q] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? xt + (ih * g.W + iw) * C : zeros;
        }
      T* dst = v + (ty * TW + tx) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) input_at<Form>(s, c, dst, ldv);
    }
}

// One output channel of output_tile(): the tile's a^2 products at src transformed into its (up to)
// four outputs.
template <typename Form, bool kRight, bool kDown, typename T>
[[gnu::always_inline]] inline void output_at(const T* src, int64_t ldm, T* y00, int64_t row, int64_t OC, int64_t oc) {
  constexpr int A = Form::kA;
  T x[A * A], y[4];
  unrolled<A * A>([&](auto k) { x[k] = src[k * ldm + oc]; });
  both_ways<A, 2>(x, y, [](const T* in, T* out) { Form::output(in, out); });
  y00[oc] = y[0];
  if constexpr (kRight) y00[OC + oc] = y[1];
  if constexpr (kDown) y00[row + oc] = y[2];
  if constexpr (kRight && kDown) y00[row + OC + oc] = y[3];
}

// One tile's outputs for every output channel, from m's a^2 products of it at src; kRight and
// kDown: whether the tile has its second column and row (the clipped tiles at odd edges have not).
// An instantiation per case keeps the loop's stores unconditional: with `if (right)` inside it,
// GCC 12 left the loop scalar at the avx2 level (no masked stores before AVX-512), and this
// transform took 12% of a MnistCnn training step on a Zen 3 VM.
template <typename Form, bool kRight, bool kDown, typename T>
inline void output_tile(const T* src, int64_t ldm, T* y00, int64_t row, int64_t OC) {
#pragma omp simd
  for (int64_t oc = 0; oc < OC; ++oc) output_at<Form, kRight, kDown>(src, ldm, y00, row, OC, oc);
}

// One image: ot [OH * OW, OC] (channels-last) = A^T m A for each tile, where m[k] =
// m[k * ldm + t * OC + oc] are the tile's a^2 GEMM results.
template <typename Form, typename T>
void output(const T* m, int64_t ldm, T* ot, const ConvGeometry& g) {
  const int64_t OC = g.OC, TH = tiles_h(g), TW = tiles_w(g), row = g.OW * OC;
  for (int64_t ty = 0; ty < TH; ++ty)
    for (int64_t tx = 0; tx < TW; ++tx) {
      const T* src = m + (ty * TW + tx) * OC;
      const int64_t oh = 2 * ty, ow = 2 * tx;
      const bool down = oh + 1 < g.OH, right = ow + 1 < g.OW;  // the clipped tiles at odd edges
      T* y00 = ot + (oh * g.OW + ow) * OC;
      if (right && down)
        output_tile<Form, true, true>(src, ldm, y00, row, OC);
      else if (right)
        output_tile<Form, true, false>(src, ldm, y00, row, OC);
      else if (down)
        output_tile<Form, false, true>(src, ldm, y00, row, OC);
      else
        output_tile<Form, false, false>(src, ldm, y00, row, OC);
    }
}

// One output channel of output_grad(): the tile's 2x2 output gradient transformed into dst's a^2
// planes.
template <typename Form, typename T>
[[gnu::always_inline]] inline void output_grad_at(const T* y00, const T* y01, const T* y10, const T* y11, T* dst,
                                                  int64_t ldm, int64_t oc) {
  constexpr int A = Form::kA;
  const T x[4] = {y00[oc], y01[oc], y10[oc], y11[oc]};
  T y[A * A];
  both_ways<2, A>(x, y, [](const T* in, T* out) { Form::output_grad(in, out); });
  unrolled<A * A>([&](auto k) { dst[k * ldm + oc] = y[k]; });
}

// The weight gradient runs the forward backwards: with M = U . V summed over channels and
// Y = A^T M A, dL/dM = A dY A^T per tile and dL/dU = sum over tiles of dL/dM . V (GEMMs), then
// dL/dg = G^T dL/dU G. This is output()'s adjoint: mg[k * ldm + t * OC + oc] = (A dy A^T)[k]
// for the 2x2 output gradient dy of tile t at got [OH * OW, OC] (channels-last), zero where a
// clipped tile has no output.
template <typename Form, typename T>
void output_grad(const T* got, T* mg, int64_t ldm, const ConvGeometry& g, const T* zeros) {
  const int64_t OC = g.OC, TH = tiles_h(g), TW = tiles_w(g);
  for (int64_t ty = 0; ty < TH; ++ty)
    for (int64_t tx = 0; tx < TW; ++tx) {
      const int64_t oh = 2 * ty, ow = 2 * tx;
      const bool down = oh + 1 < g.OH, right = ow + 1 < g.OW;
      const T* y00 = got + (oh * g.OW + ow) * OC;
      const T* y01 = right ? y00 + OC : zeros;
      const T* y10 = down ? y00 + g.OW * OC : zeros;
      const T* y11 = down && right ? y00 + (g.OW + 1) * OC : zeros;
      T* dst = mg + (ty * TW + tx) * OC;
#pragma omp simd
      for (int64_t oc = 0; oc < OC; ++oc) output_grad_at<Form>(y00, y01, y10, y11, dst, ldm, oc);
    }
}

// gw [OC, C, r, r] = G^T du G for every (c, oc), du [a^2, C, OC]: filter()'s adjoint.
template <typename Form, typename T>
void filter_grad(const T* du, T* gw, int64_t C, int64_t OC) {
  constexpr int R = Form::kR, A = Form::kA;
  const int64_t plane = C * OC;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t oc = 0; oc < OC; ++oc) {
      T x[A * A];
      unrolled<A * A>([&](auto k) { x[k] = du[k * plane + c * OC + oc]; });
      both_ways<A, R>(x, gw + (oc * C + c) * R * R, [](const T* in, T* out) { Form::filter_grad(in, out); });
    }
}

}  // namespace winograd
}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
