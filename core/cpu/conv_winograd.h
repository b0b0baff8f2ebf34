// Winograd's minimal filtering F(2x2, 3x3) for 3x3, stride-1 convolutions (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016): each 2x2 block of outputs (a tile) comes
// from a 4x4 block of input as Y = A^T [(G g G^T) . (B^T d B)] A, 16 multiplications per input
// and output channel where the direct form takes 36. Over a batch the 16 element-wise products
// become 16 GEMMs, [tiles, C] x [C, OC], so the multiply-adds still run in OpenBLAS's kernel,
// 2.25x fewer of them (fewer still counting the transforms' reuse of each input element).
//
// These are the transforms, of the filters, the input and the output, and for the weight gradient
// the adjoints of the filters' and the output's; conv_kernel.cpp runs them around the GEMMs. Only
// additions and halvings, so the rounding error stays within a few units in the last place of the
// direct form's (the larger tiles of F(4x4, 3x3) lose about a digit in float, which is why this
// is 2x2).
// Every loop over channels is contiguous (channels-last input, channels-last output) and
// vectorises over channels. Compiled once per CPU level, in that level's namespace
// (core/cpu/capability.h).
#pragma once

#include <cstdint>

#include "core/cpu/capability.h"
#include "core/nn_kernels.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {
namespace winograd {

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

// u [16, C, OC] = G g G^T for every (input channel c, output channel oc), where g is the 3x3
// filter held at wt[(c * 9 + kh * 3 + kw) * OC + oc] (the caller lays the filters out so, output
// channels innermost, and the loop runs over them in vectors: a training step transforms the
// filters once per chunk of images, and done one filter at a time that cost 4% of a MnistCnn step).
template <typename T>
void filter(const T* wt, T* u, int64_t C, int64_t OC) {
  for (int64_t c = 0; c < C; ++c) {
    const T* g = wt + c * 9 * OC;
    T* d = u + c * OC;
    const int64_t plane = C * OC;
#pragma omp simd
    for (int64_t oc = 0; oc < OC; ++oc) {
      T t[12];  // G g: rows g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2 of g's rows
      for (int kw = 0; kw < 3; ++kw) {
        const T g0 = g[kw * OC + oc], g1 = g[(3 + kw) * OC + oc], g2 = g[(6 + kw) * OC + oc];
        t[kw] = g0;
        t[3 + kw] = (g0 + g1 + g2) * T(0.5);
        t[6 + kw] = (g0 - g1 + g2) * T(0.5);
        t[9 + kw] = g2;
      }
      for (int r = 0; r < 4; ++r) {  // (G g) G^T: the same on each row's three columns
        const T a = t[r * 3], b = t[r * 3 + 1], e = t[r * 3 + 2];
        d[(r * 4 + 0) * plane + oc] = a;
        d[(r * 4 + 1) * plane + oc] = (a + b + e) * T(0.5);
        d[(r * 4 + 2) * plane + oc] = (a - b + e) * T(0.5);
        d[(r * 4 + 3) * plane + oc] = e;
      }
    }
  }
}

// One image: v[k * ldv + t * C + c] = (B^T d B)[k] for each tile t and channel c, where d is the
// 4x4 block of xt [H, W, C] (channels-last) at the tile's corner, zero outside the image
// (the padding); `zeros` holds C zeros.
template <typename T>
void input(const T* xt, T* v, int64_t ldv, const ConvGeometry& g, const T* zeros) {
  const int64_t C = g.C, TH = tiles_h(g), TW = tiles_w(g);
  for (int64_t ty = 0; ty < TH; ++ty)
    for (int64_t tx = 0; tx < TW; ++tx) {
      const T* s[16];
      for (int r = 0; r < 4; ++r)
        for (int q = 0; q < 4; ++q) {
          const int64_t ih = 2 * ty - g.ph + r, iw = 2 * tx - g.pw + q;
          s[r * 4 + q] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? xt + (ih * g.W + iw) * C : zeros;
        }
      T* dst = v + (ty * TW + tx) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        // B^T d, row by row: d0 - d2, d1 + d2, d2 - d1, d1 - d3 (each a row of four)
        T t[16];
        for (int q = 0; q < 4; ++q) {
          const T d0 = s[q][c], d1 = s[4 + q][c], d2 = s[8 + q][c], d3 = s[12 + q][c];
          t[q] = d0 - d2;
          t[4 + q] = d1 + d2;
          t[8 + q] = d2 - d1;
          t[12 + q] = d1 - d3;
        }
        for (int r = 0; r < 4; ++r) {  // (B^T d) B: the same on each row's columns
          const T a = t[r * 4], b = t[r * 4 + 1], e = t[r * 4 + 2], f = t[r * 4 + 3];
          dst[(r * 4 + 0) * ldv + c] = a - e;
          dst[(r * 4 + 1) * ldv + c] = b + e;
          dst[(r * 4 + 2) * ldv + c] = e - b;
          dst[(r * 4 + 3) * ldv + c] = b - f;
        }
      }
    }
}

// One tile's outputs for every output channel, from m's 16 products of it at src; kRight and
// kDown: whether the tile has its second column and row (the clipped tiles at odd edges have not).
// An instantiation per case keeps the loop's stores unconditional: with `if (right)` inside it,
// GCC 12 left the loop scalar at the avx2 level (no masked stores before AVX-512), and this
// transform took 12% of a MnistCnn training step on a Zen 3 VM.
template <bool kRight, bool kDown, typename T>
inline void output_tile(const T* src, int64_t ldm, T* y00, int64_t row, int64_t OC) {
  T* y01 = y00 + OC;
  T* y10 = y00 + row;
  T* y11 = y10 + OC;
#pragma omp simd
  for (int64_t oc = 0; oc < OC; ++oc) {
    // A^T m: rows m0 + m1 + m2 and m1 - m2 - m3 (each a row of four)
    T a[8];
    for (int q = 0; q < 4; ++q) {
      const T m0 = src[q * ldm + oc], m1 = src[(4 + q) * ldm + oc], m2 = src[(8 + q) * ldm + oc],
              m3 = src[(12 + q) * ldm + oc];
      a[q] = m0 + m1 + m2;
      a[4 + q] = m1 - m2 - m3;
    }
    y00[oc] = a[0] + a[1] + a[2];
    if constexpr (kRight) y01[oc] = a[1] - a[2] - a[3];
    if constexpr (kDown) y10[oc] = a[4] + a[5] + a[6];
    if constexpr (kRight && kDown) y11[oc] = a[5] - a[6] - a[7];
  }
}

// One image: ot [OH * OW, OC] (channels-last) = A^T m A for each tile, where m[k] =
// m[k * ldm + t * OC + oc] are the tile's 16 GEMM results.
template <typename T>
void output(const T* m, int64_t ldm, T* ot, const ConvGeometry& g) {
  const int64_t OC = g.OC, TH = tiles_h(g), TW = tiles_w(g), row = g.OW * OC;
  for (int64_t ty = 0; ty < TH; ++ty)
    for (int64_t tx = 0; tx < TW; ++tx) {
      const T* src = m + (ty * TW + tx) * OC;
      const int64_t oh = 2 * ty, ow = 2 * tx;
      const bool down = oh + 1 < g.OH, right = ow + 1 < g.OW;  // the clipped tiles at odd edges
      T* y00 = ot + (oh * g.OW + ow) * OC;
      if (right && down)
        output_tile<true, true>(src, ldm, y00, row, OC);
      else if (right)
        output_tile<true, false>(src, ldm, y00, row, OC);
      else if (down)
        output_tile<false, true>(src, ldm, y00, row, OC);
      else
        output_tile<false, false>(src, ldm, y00, row, OC);
    }
}

// The weight gradient runs the forward backwards: with M = U . V summed over channels and
// Y = A^T M A, dL/dM = A dY A^T per tile and dL/dU = sum over tiles of dL/dM . V (GEMMs), then
// dL/dg = G^T dL/dU G. This is output()'s adjoint: mg[k * ldm + t * OC + oc] = (A dy A^T)[k]
// for the 2x2 output gradient dy of tile t at got [OH * OW, OC] (channels-last), zero where a
// clipped tile has no output.
template <typename T>
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
      for (int64_t oc = 0; oc < OC; ++oc) {
        // A dy: rows dy0, dy0 + dy1, dy0 - dy1, -dy1 (each a row of two)
        const T a0 = y00[oc], a1 = y01[oc], b0 = y10[oc], b1 = y11[oc];
        const T t[8] = {a0, a1, a0 + b0, a1 + b1, a0 - b0, a1 - b1, -b0, -b1};
        for (int r = 0; r < 4; ++r) {  // (A dy) A^T: the same on each row's two columns
          const T p = t[2 * r], q = t[2 * r + 1];
          dst[(r * 4 + 0) * ldm + oc] = p;
          dst[(r * 4 + 1) * ldm + oc] = p + q;
          dst[(r * 4 + 2) * ldm + oc] = p - q;
          dst[(r * 4 + 3) * ldm + oc] = -q;
        }
      }
    }
}

// gw [OC, C, 3, 3] = G^T du G for every (c, oc), du [16, C, OC]: filter()'s adjoint.
template <typename T>
void filter_grad(const T* du, T* gw, int64_t C, int64_t OC) {
  const int64_t plane = C * OC;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t oc = 0; oc < OC; ++oc) {
      T d[16];
      for (int k = 0; k < 16; ++k) d[k] = du[k * plane + c * OC + oc];
      T t[12];  // G^T d: rows d0 + (d1 + d2) / 2, (d1 - d2) / 2, (d1 + d2) / 2 + d3
      for (int q = 0; q < 4; ++q) {
        const T d0 = d[q], d1 = d[4 + q], d2 = d[8 + q], d3 = d[12 + q];
        t[q] = d0 + (d1 + d2) * T(0.5);
        t[4 + q] = (d1 - d2) * T(0.5);
        t[8 + q] = (d1 + d2) * T(0.5) + d3;
      }
      T* o = gw + (oc * C + c) * 9;
      for (int r = 0; r < 3; ++r) {  // (G^T d) G: the same on each row's four columns
        const T a = t[r * 4], b = t[r * 4 + 1], e = t[r * 4 + 2], f = t[r * 4 + 3];
        o[r * 3 + 0] = a + (b + e) * T(0.5);
        o[r * 3 + 1] = (b - e) * T(0.5);
        o[r * 3 + 2] = (b + e) * T(0.5) + f;
      }
    }
}

}  // namespace winograd
}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
