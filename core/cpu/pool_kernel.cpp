// CPU pooling: max (with argmax indices), average and adaptive average, forward and backward.
// Every kernel makes one pass over its planes, threaded over the N * C planes: each plane's
// gradient is written by one thread only, so the backward scatters need no atomics.
#include <algorithm>
#include <cmath>
#include <limits>

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

template <typename T>
void max_forward(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dGeometry& g) {
  const T* x = static_cast<const T*>(input.raw_data());
  T* y = static_cast<T*>(out.raw_data());
  int64_t* ix = static_cast<int64_t*>(indices.raw_data());
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  const bool simple =
      g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.OH * 2 <= g.H && g.OW * 2 <= g.W;
  parallel_for(0, g.P, plane_grain(HW), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T* xp = x + p * HW;
      T* yp = y + p * OHW;
      int64_t* ip = ix + p * OHW;
      if (simple) {  // the MNIST case: every window lies inside the plane
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
        continue;
      }
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

[[maybe_unused]] void cpu_max_forward(const Tensor& out, const Tensor& indices, const Tensor& input,
                                      const Pool2dGeometry& g) {
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

// Not at the avx512 level: GCC 12 compiles the 2x2 window loop for x86-64-v4 to code 2.3x slower
// than its avx2 copy (5-6 against 12-15 GB/s on MNIST's 64x32x26x26 in bench/layers, with or
// without the SLP fence and 512-bit vectors), so AVX-512 CPUs take the avx2 copy.
#if EMBER_CPU_LEVEL != 2
EMBER_REGISTER_KERNEL(max_pool2d_forward_stub, CPU, cpu_max_forward);
#endif
EMBER_REGISTER_KERNEL(max_pool2d_backward_stub, CPU, cpu_max_backward);
EMBER_REGISTER_KERNEL(avg_pool2d_forward_stub, CPU, cpu_avg_forward);
EMBER_REGISTER_KERNEL(avg_pool2d_backward_stub, CPU, cpu_avg_backward);
EMBER_REGISTER_KERNEL(adaptive_avg_pool2d_forward_stub, CPU, cpu_adaptive_forward);
EMBER_REGISTER_KERNEL(adaptive_avg_pool2d_backward_stub, CPU, cpu_adaptive_backward);

}  // namespace ember
