// CPU pooling: max (with argmax indices), average and adaptive average, forward and backward.
// Every kernel makes one pass over its planes, threaded over the N * C planes: each plane's
// gradient is written by one thread only, so the backward scatters need no atomics.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/nn_kernels.h"
#include "core/parallel.h"

namespace ember {

namespace {

// Planes per parallel chunk so that a chunk carries about kParallelGrain elements of work.
int64_t plane_grain(int64_t plane_work) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, plane_work));
}

// Keeps (v, i) when v beats the best so far: strictly greater keeps the first maximum, and NaN
// wins as in PyTorch.
template <typename T>
inline void take_max(T v, int64_t i, T& best, int64_t& bi) {
  const bool c = (v > best) | (v != v);
  best = c ? v : best;
  bi = c ? i : bi;
}

// 2x2 windows at stride 2, no padding, every window inside the plane: MNIST's max pooling.
inline bool is_2x2_stride_2(const Pool2dGeometry& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.OH * 2 <= g.H &&
         g.OW * 2 <= g.W;
}

// What max2x2_row (below, AVX-512 only) takes: float32 2x2/2 windows on rows short enough for its
// 32-bit offsets.
inline bool max2x2_row_applies(DType dt, const Pool2dGeometry& g) {
  return dt == DType::Float32 && is_2x2_stride_2(g) && g.W < (int64_t{1} << 29);
}

#if defined(__AVX512F__)
// One output row of the 2x2, stride-2 max pool in float32, sixteen outputs per step: r0 and r1
// are the window's two input rows, i0 r0's index in the plane. The compiler vectorised the
// scalar loop eight outputs wide and left MNIST's 13-wide rows five outputs of scalar remainder,
// which made max pooling 9% of a one-thread MnistCnn step; masks cover any remainder here. The
// selects are take_max's, in its order, so NaNs and ties pick the same element.
inline void max2x2_row(const float* r0, const float* r1, int64_t i0, int64_t W, float* y, int64_t* iy, int64_t n) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i one = _mm512_set1_epi32(1), w = _mm512_set1_epi32(static_cast<int>(W));
  const __m512i w1 = _mm512_set1_epi32(static_cast<int>(W + 1));
  for (int64_t o = 0; o < n; o += 16) {
    const int64_t m = std::min<int64_t>(16, n - o), m2 = 2 * m;
    const auto mask = [](int64_t k) { return static_cast<__mmask16>(k >= 16 ? 0xFFFF : (1u << k) - 1); };
    const __mmask16 km = mask(m), klo = mask(m2), khi = mask(m2 > 16 ? m2 - 16 : 0);
    const __m512 a0 = _mm512_maskz_loadu_ps(klo, r0 + 2 * o), b0 = _mm512_maskz_loadu_ps(khi, r0 + 2 * o + 16);
    const __m512 a1 = _mm512_maskz_loadu_ps(klo, r1 + 2 * o), b1 = _mm512_maskz_loadu_ps(khi, r1 + 2 * o + 16);
    __m512 best = _mm512_permutex2var_ps(a0, even, b0);
    __m512i off = _mm512_setzero_si512();
    const auto take = [&](__m512 v, __m512i at) {
      const __mmask16 c = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      best = _mm512_mask_mov_ps(best, c, v);
      off = _mm512_mask_mov_epi32(off, c, at);
    };
    take(_mm512_permutex2var_ps(a0, odd, b0), one);
    take(_mm512_permutex2var_ps(a1, even, b1), w);
    take(_mm512_permutex2var_ps(a1, odd, b1), w1);
    _mm512_mask_storeu_ps(y + o, km, best);
    // index = i0 + 2 * (o + lane) + off, in int64
    const __m512i rel = _mm512_add_epi32(even, off);  // even[lane] = 2 * lane
    const __m512i base = _mm512_set1_epi64(i0 + 2 * o);
    const __m512i lo =
        _mm512_add_epi64(base, _mm512_maskz_cvtepi32_epi64(0xFF, _mm512_maskz_extracti64x4_epi64(0xF, rel, 0)));
    const __m512i hi =
        _mm512_add_epi64(base, _mm512_maskz_cvtepi32_epi64(0xFF, _mm512_maskz_extracti64x4_epi64(0xF, rel, 1)));
    _mm512_mask_storeu_epi64(iy + o, static_cast<__mmask8>(km & 0xFF), lo);
    _mm512_mask_storeu_epi64(iy + o + 8, static_cast<__mmask8>(km >> 8), hi);
  }
}
#endif

// One plane's 2x2 stride-2 max pooling (the MNIST case): every window lies inside the plane.
template <typename T>
void max_plane_2x2(const T* xp, T* yp, int64_t* ip, const Pool2dGeometry& g) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const T* r0 = xp + 2 * oh * g.W;
    const T* r1 = r0 + g.W;
    const int64_t i0 = 2 * oh * g.W, i1 = i0 + g.W;
    T* yr = yp + oh * g.OW;
    int64_t* ir = ip + oh * g.OW;
    // a vectorised loop: the compiler turns the selects into blends (as branches they
    // mispredict half the time on real data)
#pragma omp simd
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t c = 2 * ow;
      T best = r0[c];
      int64_t bi = i0 + c;
      take_max(r0[c + 1], i0 + c + 1, best, bi);
      take_max(r1[c], i1 + c, best, bi);
      take_max(r1[c + 1], i1 + c + 1, best, bi);
      yr[ow] = best;
      ir[ow] = bi;
    }
  }
}

// One plane's max pooling of any window, stride and padding.
template <typename T>
void max_plane(const T* xp, T* yp, int64_t* ip, const Pool2dGeometry& g) {
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const int64_t h0 = std::max<int64_t>(oh * g.sh - g.ph, 0);
    const int64_t h1 = std::min(oh * g.sh - g.ph + g.kh, g.H);
    // Windows of a row that lie wholly inside the plane, [ow_lo, ow_hi), run as vectorised
    // loops over output columns with branch-free selects, as the 2x2 case above: on real
    // data a compare-and-branch per element mispredicts about half the time.
    int64_t ow_lo = g.OW, ow_hi = g.OW;
    if (h1 - h0 == g.kh) {
      ow_lo = std::min(g.OW, (g.pw + g.sw - 1) / g.sw);
      ow_hi = g.W + g.pw - g.kw >= 0 ? std::clamp((g.W + g.pw - g.kw) / g.sw + 1, ow_lo, g.OW) : ow_lo;
    }
    auto edge = [&](int64_t ow) {
      const int64_t w0 = std::max<int64_t>(ow * g.sw - g.pw, 0);
      const int64_t w1 = std::min(ow * g.sw - g.pw + g.kw, g.W);
      T best = -std::numeric_limits<T>::infinity();
      int64_t bi = h0 * g.W + w0;
      for (int64_t ih = h0; ih < h1; ++ih)
        for (int64_t iw = w0; iw < w1; ++iw) {
          take_max(xp[ih * g.W + iw], ih * g.W + iw, best, bi);
        }
      yp[oh * g.OW + ow] = best;
      ip[oh * g.OW + ow] = bi;
    };
    for (int64_t ow = 0; ow < ow_lo; ++ow) edge(ow);
    T* yr = yp + oh * g.OW;
    int64_t* ir = ip + oh * g.OW;
    // Tap by tap over the whole run of columns, the output row holding the running maxima:
    // each output still sees its window in edge()'s order (rows, then columns).
    const int64_t sw = g.sw, W = g.W, col0 = ow_lo * g.sw - g.pw, n = ow_hi - ow_lo;
    T* yb = yr + ow_lo;
    int64_t* ib = ir + ow_lo;
    for (int64_t o = 0; o < n; ++o) {
      yb[o] = -std::numeric_limits<T>::infinity();
      ib[o] = h0 * W + col0 + o * sw;
    }
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t base = (h0 + i) * W + col0 + j;
        const T* src = xp + base;
#pragma omp simd
        for (int64_t o = 0; o < n; ++o) {
          const T v = src[o * sw];
          const int64_t at = base + o * sw;
          const bool c = (v > yb[o]) | (v != v);
          yb[o] = c ? v : yb[o];
          ib[o] = c ? at : ib[o];
        }
      }
    for (int64_t ow = ow_hi; ow < g.OW; ++ow) edge(ow);
  }
}

template <typename T>
void max_forward(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dGeometry& g) {
  const T* x = static_cast<const T*>(input.raw_data());
  T* y = static_cast<T*>(out.raw_data());
  int64_t* ix = static_cast<int64_t*>(indices.raw_data());
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  const bool simple = is_2x2_stride_2(g);
#if defined(__AVX512F__)
  const bool row512 = std::is_same_v<T, float> && max2x2_row_applies(DType::Float32, g);
#endif
  parallel_for(0, g.P, plane_grain(HW), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T* xp = x + p * HW;
      T* yp = y + p * OHW;
      int64_t* ip = ix + p * OHW;
#if defined(__AVX512F__)
      if constexpr (std::is_same_v<T, float>) {
        if (row512) {
          for (int64_t oh = 0; oh < g.OH; ++oh)
            max2x2_row(xp + 2 * oh * g.W, xp + (2 * oh + 1) * g.W, 2 * oh * g.W, g.W, yp + oh * g.OW, ip + oh * g.OW,
                       g.OW);
          continue;
        }
      }
#endif
      if (simple)
        max_plane_2x2(xp, yp, ip, g);
      else
        max_plane(xp, yp, ip, g);
    }
  });
}

template <typename T>
void max_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices, const Pool2dGeometry& g) {
  T* gi = static_cast<T*>(grad_input.raw_data());
  const T* go = static_cast<const T*>(grad_out.raw_data());
  const int64_t* ix = static_cast<const int64_t*>(indices.raw_data());
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  parallel_for(0, g.P, plane_grain(HW), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      T* gp = gi + p * HW;
      std::fill(gp, gp + HW, T(0));
      const T* op = go + p * OHW;
      const int64_t* ip = ix + p * OHW;
      for (int64_t i = 0; i < OHW; ++i) gp[ip[i]] += op[i];
    }
  });
}

// The window of output (oh, ow) clipped to the input, and its divisor (PyTorch's rule).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

inline AvgWindow avg_window(int64_t oh, int64_t ow, const Pool2dGeometry& g) {
  int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  int64_t h1 = std::min(h0 + g.kh, g.H + g.ph), w1 = std::min(w0 + g.kw, g.W + g.pw);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.H), w1 = std::min(w1, g.W);
  return {h0, h1, w0, w1, g.count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

template <typename T>
void avg_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  const T* x = static_cast<const T*>(input.raw_data());
  T* y = static_cast<T*>(out.raw_data());
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  parallel_for(0, g.P, plane_grain(HW), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T* xp = x + p * HW;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const AvgWindow w = avg_window(oh, ow, g);
          T s = 0;
          for (int64_t ih = w.h0; ih < w.h1; ++ih)
            for (int64_t iw = w.w0; iw < w.w1; ++iw) s += xp[ih * g.W + iw];
          y[p * OHW + oh * g.OW + ow] = w.divisor > 0 ? s / static_cast<T>(w.divisor) : T(0);
        }
    }
  });
}

template <typename T>
void avg_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g) {
  T* gi = static_cast<T*>(grad_input.raw_data());
  const T* go = static_cast<const T*>(grad_out.raw_data());
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  parallel_for(0, g.P, plane_grain(HW), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      T* gp = gi + p * HW;
      std::fill(gp, gp + HW, T(0));
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const AvgWindow w = avg_window(oh, ow, g);
          if (w.divisor <= 0) continue;
          const T v = go[p * OHW + oh * g.OW + ow] / static_cast<T>(w.divisor);
          for (int64_t ih = w.h0; ih < w.h1; ++ih)
            for (int64_t iw = w.w0; iw < w.w1; ++iw) gp[ih * g.W + iw] += v;
        }
    }
  });
}

// PyTorch's adaptive pooling bounds: [floor(i * in / out), ceil((i + 1) * in / out)).
inline int64_t adaptive_start(int64_t i, int64_t in, int64_t out) {
  return (i * in) / out;
}
inline int64_t adaptive_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

template <typename T>
void adaptive_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  const T* x = static_cast<const T*>(input.raw_data());
  T* y = static_cast<T*>(out.raw_data());
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  parallel_for(0, g.P, plane_grain(HW), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T* xp = x + p * HW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h0 = adaptive_start(oh, g.H, g.OH), h1 = adaptive_end(oh, g.H, g.OH);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = adaptive_start(ow, g.W, g.OW), w1 = adaptive_end(ow, g.W, g.OW);
          T s = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) s += xp[ih * g.W + iw];
          y[p * OHW + oh * g.OW + ow] = s / static_cast<T>((h1 - h0) * (w1 - w0));
        }
      }
    }
  });
}

template <typename T>
void adaptive_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g) {
  T* gi = static_cast<T*>(grad_input.raw_data());
  const T* go = static_cast<const T*>(grad_out.raw_data());
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  parallel_for(0, g.P, plane_grain(HW), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      T* gp = gi + p * HW;
      std::fill(gp, gp + HW, T(0));
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h0 = adaptive_start(oh, g.H, g.OH), h1 = adaptive_end(oh, g.H, g.OH);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = adaptive_start(ow, g.W, g.OW), w1 = adaptive_end(ow, g.W, g.OW);
          const T v = go[p * OHW + oh * g.OW + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) gp[ih * g.W + iw] += v;
        }
      }
    }
  });
}

void cpu_max_forward(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dGeometry& g) {
#if EMBER_CPU_LEVEL == 2
  // At the avx512 level only float32 2x2/2 pooling runs here (max2x2_row). GCC 12 compiles the
  // other loops for x86-64-v4 to code slower than their avx2 copy (the scalar 2x2 loop 2.3x, the
  // ResNet stem's 3x3/2 windows 1.4x, in bench/layers), so those cases take the avx2 copy.
  if (!max2x2_row_applies(input.dtype(), g)) {
    for (int l = static_cast<int>(CpuCapability::Avx2); l >= 0; --l)
      if (auto* f = max_pool2d_forward_stub.cpu[l]) return f(out, indices, input, g);
  }
#endif
  EMBER_DISPATCH_FLOAT(input.dtype(), "max_pool2d", [&] { max_forward<scalar_t>(out, indices, input, g); });
}
void cpu_max_backward(const Tensor& gi, const Tensor& go, const Tensor& indices, const Pool2dGeometry& g) {
  EMBER_DISPATCH_FLOAT(go.dtype(), "max_pool2d_backward", [&] { max_backward<scalar_t>(gi, go, indices, g); });
}
void cpu_avg_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  EMBER_DISPATCH_FLOAT(input.dtype(), "avg_pool2d", [&] { avg_forward<scalar_t>(out, input, g); });
}
void cpu_avg_backward(const Tensor& gi, const Tensor& go, const Pool2dGeometry& g) {
  EMBER_DISPATCH_FLOAT(go.dtype(), "avg_pool2d_backward", [&] { avg_backward<scalar_t>(gi, go, g); });
}
void cpu_adaptive_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  EMBER_DISPATCH_FLOAT(input.dtype(), "adaptive_avg_pool2d", [&] { adaptive_forward<scalar_t>(out, input, g); });
}
void cpu_adaptive_backward(const Tensor& gi, const Tensor& go, const Pool2dGeometry& g) {
  EMBER_DISPATCH_FLOAT(go.dtype(), "adaptive_avg_pool2d_backward", [&] { adaptive_backward<scalar_t>(gi, go, g); });
}

}  // namespace

EMBER_REGISTER_KERNEL(max_pool2d_forward_stub, CPU, cpu_max_forward);
EMBER_REGISTER_KERNEL(max_pool2d_backward_stub, CPU, cpu_max_backward);
EMBER_REGISTER_KERNEL(avg_pool2d_forward_stub, CPU, cpu_avg_forward);
EMBER_REGISTER_KERNEL(avg_pool2d_backward_stub, CPU, cpu_avg_backward);
EMBER_REGISTER_KERNEL(adaptive_avg_pool2d_forward_stub, CPU, cpu_adaptive_forward);
EMBER_REGISTER_KERNEL(adaptive_avg_pool2d_backward_stub, CPU, cpu_adaptive_backward);

}  // namespace ember
