// The three GEMMs of a convolution (core/cuda/conv2d.cu), as Problems its implicit-GEMM kernels
// share: each maps GEMM coordinates to tensor positions (stride, padding, dilation; groups on
// blockIdx.z) and provides
//   M, N, K (per group); any(): a pointer every launch may read (the A operand's first element);
//   a_ptr(g, m, k): where A[m, k] is;
//   col(g, n): a column cursor, decoded once per thread, whose b_src(col, k) says where B[k, n]
//     is: a pointer that can always be read (inside the input, or a stand-in) and whether the
//     value is that element's (else 0: padding, a stride's gap); null only when nothing can be;
//   out(g, split, m, n): where C[m, n] goes, and bias_of(g, m): the value added to row m (null
//     for none); vec_out: the host found the output aligned for 4 elements and its rows (a plane of one
//     image, or a weight row) a multiple of 4 long. store() and store4() below write through them.
// T is float, double or uint16_t (bfloat16 bits, core/cuda/conv_bf16_mma.h).
//   forward          C[oc, (n,oh,ow)]  = W[oc, (c,kh,kw)]   * X[(c,kh,kw), (n,oh,ow)]
//   backward-data    C[c, (n,ih,iw)]   = W^T[c, (oc,kh,kw)] * dY[(oc,kh,kw), (n,ih,iw)]
//   backward-filter  C[oc, (c,kh,kw)]  = dY[oc, (n,oh,ow)]  * X[(n,oh,ow), (c,kh,kw)]
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cuda/device_api.h"
#include "core/nn_kernels.h"

namespace ember::cuda::conv {

// The geometry with the per-group sizes the problems need, as kernel parameters. GEMM
// coordinates and their decoding into (image, channel, row, column) are 32-bit (the host checks
// that every GEMM dimension fits: 64-bit division costs several times more on a GPU); offsets
// into the tensors are 64-bit.
struct Dims {
  int N, C, H, W, OC, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
  int Cg, OCg, KK;  // channels per group, output channels per group, KH*KW
};

inline Dims dims_of(const ConvGeometry& g) {
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  return Dims{i32(g.N),
              i32(g.C),
              i32(g.H),
              i32(g.W),
              i32(g.OC),
              i32(g.KH),
              i32(g.KW),
              i32(g.OH),
              i32(g.OW),
              i32(g.sh),
              i32(g.sw),
              i32(g.ph),
              i32(g.pw),
              i32(g.dh),
              i32(g.dw),
              i32(g.C / g.groups),
              i32(g.OC / g.groups),
              i32(g.KH * g.KW)};
}

// v where keep, else +0, by masking v's bits: the load that produced v stays unconditional in
// every lane (a select lets a compiler sink the load into the branch that keeps it, so that the
// warp's edge lanes branch away from it).
template <typename T>
EMBER_DEVICE T zero_unless(bool keep, T v) {
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
  static_assert(sizeof(T) == sizeof(Bits), "a double, a float or bfloat16 bits");
  Bits b;
  memcpy(&b, &v, sizeof b);
  b &= static_cast<Bits>(Bits(0) - static_cast<Bits>(keep));
  memcpy(&v, &b, sizeof b);
  return v;
}

// Where an element of B comes from: p can be read unless null; the value is *p when ok, else 0.
template <typename T>
struct Src {
  const T* p;
  bool ok;
};
// Every lane with a pointer loads; the value is masked afterwards (see zero_unless).
template <typename T>
EMBER_DEVICE T load(Src<T> s) {
  return s.p ? zero_unless(s.ok, *s.p) : T(0);
}

template <typename T>
struct Forward {
  Dims d;
  const T* x;
  const T* w;
  const T* bias;
  T* y;
  int M, N, K;
  bool vec_out;  // y aligned for 4 elements and OH * OW a multiple of 4

  EMBER_DEVICE const T* any() const { return w; }
  EMBER_DEVICE const T* a_ptr(int g, int m, int k) const { return w + static_cast<int64_t>(g * d.OCg + m) * K + k; }
  struct Col {
    const T* base;  // the group's first input channel of image n
    int ih0, iw0;
  };
  EMBER_DEVICE Col col(int g, int j) const {
    const int P = d.OH * d.OW, n = j / P, r = j - n * P, oh = r / d.OW, ow = r - oh * d.OW;
    return Col{x + static_cast<int64_t>(n * d.C + g * d.Cg) * d.H * d.W, oh * d.sh - d.ph, ow * d.sw - d.pw};
  }
  // A padding lane points at the nearest pixel inside its channel: a warp's 32 consecutive output
  // columns then read one input row in one request (the in-bounds neighbours' sectors), rather
  // than the edge lanes branching away.
  EMBER_DEVICE Src<T> b_src(const Col& c, int k) const {
    if (d.H == 0 || d.W == 0) return {nullptr, false};  // padding around an empty input
    const int ci = k / d.KK, r = k - ci * d.KK, kh = r / d.KW, kw = r - kh * d.KW;
    const int ih = c.ih0 + kh * d.dh, iw = c.iw0 + kw * d.dw;
    const bool inside = ih >= 0 && ih < d.H && iw >= 0 && iw < d.W;
    const int ihc = ih < 0 ? 0 : ih < d.H ? ih : d.H - 1, iwc = iw < 0 ? 0 : iw < d.W ? iw : d.W - 1;
    return {c.base + (static_cast<int64_t>(ci) * d.H + ihc) * d.W + iwc, inside};
  }
  EMBER_DEVICE T* out(int g, int, int m, int j) const {
    const int P = d.OH * d.OW, n = j / P, r = j - n * P;
    return y + (static_cast<int64_t>(n) * d.OC + g * d.OCg + m) * P + r;
  }
  EMBER_DEVICE const T* bias_of(int g, int m) const { return bias ? bias + g * d.OCg + m : nullptr; }
};

template <typename T>
struct BackwardData {
  Dims d;
  const T* dy;
  const T* w;
  const T* bias;  // per channel of grad_input (conv_transpose2d's bias)
  T* dx;
  int M, N, K;
  bool vec_out;  // dx aligned for 4 elements and H * W a multiple of 4

  EMBER_DEVICE const T* any() const { return w; }
  EMBER_DEVICE const T* a_ptr(int g, int m, int k) const {
    const int oc = k / d.KK, r = k - oc * d.KK;
    return w + (static_cast<int64_t>(g * d.OCg + oc) * d.Cg + m) * d.KK + r;
  }
  struct Col {
    const T* base;  // the group's first output channel of image n
    int th, tw;     // ih + ph, iw + pw
  };
  EMBER_DEVICE Col col(int g, int j) const {
    const int P = d.H * d.W, n = j / P, r = j - n * P, ih = r / d.W, iw = r - ih * d.W;
    return Col{dy + static_cast<int64_t>(n * d.OC + g * d.OCg) * d.OH * d.OW, ih + d.ph, iw + d.pw};
  }
  // Output row oh feeds input row ih through kh when oh * sh = ih + ph - kh * dh. A position that
  // no output reaches points at the group's first element (the value is 0).
  EMBER_DEVICE Src<T> b_src(const Col& c, int k) const {
    if (d.OH == 0 || d.OW == 0) return {nullptr, false};
    const int oc = k / d.KK, r = k - oc * d.KK, kh = r / d.KW, kw = r - kh * d.KW;
    const int th = c.th - kh * d.dh, tw = c.tw - kw * d.dw;
    const bool ahead = th >= 0 && tw >= 0;
    const int oh = ahead ? th / d.sh : 0, ow = ahead ? tw / d.sw : 0;
    const bool ok = ahead && oh * d.sh == th && ow * d.sw == tw && oh < d.OH && ow < d.OW;
    return {ok ? c.base + (static_cast<int64_t>(oc) * d.OH + oh) * d.OW + ow : c.base, ok};
  }
  EMBER_DEVICE T* out(int g, int, int m, int j) const {
    const int P = d.H * d.W, n = j / P, r = j - n * P;
    return dx + (static_cast<int64_t>(n) * d.C + g * d.Cg + m) * P + r;
  }
  EMBER_DEVICE const T* bias_of(int g, int m) const { return bias ? bias + g * d.Cg + m : nullptr; }
};

// O: the output's element type, T's, or float32 for bfloat16's partial sums.
template <typename T, typename O = T>
struct BackwardFilter {
  Dims d;
  const T* dy;
  const T* x;
  O* dw;  // [OC, Cg*KK], or the partial sums [splits, OC, Cg*KK] when split
  int M, N, K;
  bool vec_out;  // dw aligned for 4 elements and Cg * KK a multiple of 4

  EMBER_DEVICE const T* any() const { return dy; }
  EMBER_DEVICE const T* a_ptr(int g, int m, int k) const {
    const int P = d.OH * d.OW, n = k / P, r = k - n * P;
    return dy + (static_cast<int64_t>(n) * d.OC + g * d.OCg + m) * P + r;
  }
  struct Col {
    const T* base;       // input channel c of image 0
    int kh_off, kw_off;  // kh * dh - ph, kw * dw - pw
  };
  EMBER_DEVICE Col col(int g, int j) const {
    const int c = j / d.KK, r = j - c * d.KK, kh = r / d.KW, kw = r - kh * d.KW;
    return Col{x + static_cast<int64_t>(g * d.Cg + c) * d.H * d.W, kh * d.dh - d.ph, kw * d.dw - d.pw};
  }
  // As the forward: a padding position points at the nearest pixel of its channel.
  EMBER_DEVICE Src<T> b_src(const Col& c, int k) const {
    if (d.H == 0 || d.W == 0) return {nullptr, false};
    const int P = d.OH * d.OW, n = k / P, r = k - n * P, oh = r / d.OW, ow = r - oh * d.OW;
    const int ih = oh * d.sh + c.kh_off, iw = ow * d.sw + c.kw_off;
    const bool inside = ih >= 0 && ih < d.H && iw >= 0 && iw < d.W;
    const int ihc = ih < 0 ? 0 : ih < d.H ? ih : d.H - 1, iwc = iw < 0 ? 0 : iw < d.W ? iw : d.W - 1;
    return {c.base + (static_cast<int64_t>(n) * d.C * d.H + ihc) * d.W + iwc, inside};
  }
  EMBER_DEVICE O* out(int g, int split, int m, int j) const {
    return dw + (static_cast<int64_t>(split) * d.OC + g * d.OCg + m) * N + j;
  }
  EMBER_DEVICE const T* bias_of(int, int) const { return nullptr; }
};

// C[m, j] = v, plus the row's bias where the Problem has one.
template <typename Problem, typename T>
EMBER_DEVICE void store(const Problem& p, int g, int split, int m, int j, T v) {
  const T* b = p.bias_of(g, m);
  *p.out(g, split, m, j) = b ? v + *b : v;
}

// C[m, j .. j + 3], those below N: one 16-byte store where vec_out allows it (j a multiple of 4 and
// the rows a multiple of 4 long, so the four lie in one row, and aligned), else one at a time.
template <typename Problem, typename T>
EMBER_DEVICE void store4(const Problem& p, int g, int split, int m, int j, const T* v) {
  if constexpr (std::is_same_v<T, float>) {
    if (p.vec_out && j + 3 < p.N) {
      const float* b = p.bias_of(g, m);
      const float add = b ? *b : 0.f;
      *reinterpret_cast<float4*>(p.out(g, split, m, j)) =
          b ? make_float4(v[0] + add, v[1] + add, v[2] + add, v[3] + add) : make_float4(v[0], v[1], v[2], v[3]);
      return;
    }
  }
  for (int q = 0; q < 4 && j + q < p.N; ++q) store(p, g, split, m, j + q, v[q]);
}

}  // namespace ember::cuda::conv
