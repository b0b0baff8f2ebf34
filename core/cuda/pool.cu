// CUDA pooling (core/nn_kernels.h): max (with argmax indices), average and adaptive average,
// forward and backward, over P = N * C planes. Every kernel is a grid-stride loop with one
// thread per output element (forward) or per input element (backward). The backward passes
// gather instead of scatter: an input position walks the few windows that contain it and adds
// their contributions in ascending window order, so there are no atomics and the result is
// deterministic (the CPU adds in the same order). Semantics follow the CPU kernels
// (core/cpu/pool_kernel.cpp): the first maximum wins ties and NaN wins over numbers, windows are
// clipped to the input, average pooling's divisor follows PyTorch's count_include_pad rule, and
// adaptive cell i covers [floor(i * H / OH), ceil((i + 1) * H / OH)). ceil_mode arrives as the
// op layer's OH/OW (the last window may hang over the input and is clipped like any other).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/cuda/launch.h"
#include "core/cuda/plane_index.h"
#include "core/element_ptr.h"
#include "core/nn_kernels.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// The geometry as kernel parameters: one in-plane coordinate is 32-bit (the host checks H, W, OH,
// OW and the window arithmetic fit), while plane sizes and offsets (H * W may reach 2^31 and
// beyond) are 64-bit, through core/cuda/plane_index.h.
struct Geo {
  int64_t P;
  int H, W, OH, OW, kh, kw, sh, sw, ph, pw;
  bool count_include_pad;
};

Geo geo_of(const Pool2dGeometry& g, const char* op) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  for (int64_t v : {g.H, g.W, g.OH, g.OW, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.H + g.ph + g.kh, g.W + g.pw + g.kw,
                    g.OH * g.sh, g.OW * g.sw})
    EMBER_CHECK(v >= 0 && v < kLimit, op, ": the pooling geometry (H=", g.H, ", W=", g.W, ", OH=", g.OH, ", OW=", g.OW,
                ", kernel ", g.kh, "x", g.kw, ", stride ", g.sh, "x", g.sw, ", padding ", g.ph, "x", g.pw,
                ") is too large for the CUDA kernels' 32-bit in-plane indexing; expected each below 2^30");
  auto i32 = [](int64_t v) { return static_cast<int>(v); };
  return Geo{g.P,       i32(g.H),  i32(g.W),  i32(g.OH), i32(g.OW), i32(g.kh),
             i32(g.kw), i32(g.sh), i32(g.sw), i32(g.ph), i32(g.pw), g.count_include_pad};
}

EMBER_DEVICE int imin(int a, int b) {
  return a < b ? a : b;
}
EMBER_DEVICE int imax(int a, int b) {
  return a > b ? a : b;
}

// The windows (along one axis) that contain input position i: [lo, hi] of output positions
// o with o * s - p <= i < o * s - p + k, clipped to [0, O).
EMBER_DEVICE void windows_containing(int i, int s, int p, int k, int O, int& lo, int& hi) {
  const int t = i + p;
  lo = t < k ? 0 : (t - k) / s + 1;
  hi = imin(t / s, O - 1);
}

// ------------------------------------------------------------------ max
template <typename T>
__global__ void max_forward(T* y, int64_t* idx, const T* x, Geo g) {
  const int64_t n = g.P * plane_area(g.OH, g.OW), step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const PlanePos q = split_plane_index(e, g.OH, g.OW);
    const int oh = q.row, ow = q.col;
    const int h0 = imax(oh * g.sh - g.ph, 0), h1 = imin(oh * g.sh - g.ph + g.kh, g.H);
    const int w0 = imax(ow * g.sw - g.pw, 0), w1 = imin(ow * g.sw - g.pw + g.kw, g.W);
    const T* xp = x + q.plane * plane_area(g.H, g.W);
    T best = -static_cast<T>(INFINITY);
    int64_t bi = plane_offset(h0, w0, g.W);
    for (int ih = h0; ih < h1; ++ih)
      for (int iw = w0; iw < w1; ++iw) {
        const int64_t i = plane_offset(ih, iw, g.W);
        const T v = xp[i];
        if (v > best || v != v) best = v, bi = i;  // first maximum; NaN wins
      }
    y[e] = best;
    idx[e] = bi;
  }
}

// grad_input[p, i] = sum of grad_out over the windows of plane p whose argmax is i.
template <typename T>
__global__ void max_backward(T* gi, const T* go, const int64_t* idx, Geo g) {
  const int64_t n = g.P * plane_area(g.H, g.W), step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const PlanePos q = split_plane_index(e, g.H, g.W);
    int oh0, oh1, ow0, ow1;
    windows_containing(q.row, g.sh, g.ph, g.kh, g.OH, oh0, oh1);
    windows_containing(q.col, g.sw, g.pw, g.kw, g.OW, ow0, ow1);
    const int64_t base = q.plane * plane_area(g.OH, g.OW);
    T s = T(0);
    for (int oh = oh0; oh <= oh1; ++oh)
      for (int ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = base + plane_offset(oh, ow, g.OW);
        if (idx[o] == q.offset) s += go[o];
      }
    gi[e] = s;
  }
}

// ------------------------------------------------------------------ average
// The window of output (oh, ow) clipped to the input, and its divisor (as the CPU's avg_window,
// in int64 there too: a kernel of kh x kw may cover 2^31 positions).
struct Window {
  int h0, h1, w0, w1;
  int64_t divisor;
};
EMBER_DEVICE Window avg_window(int oh, int ow, const Geo& g) {
  int h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
  int h1 = imin(h0 + g.kh, g.H + g.ph), w1 = imin(w0 + g.kw, g.W + g.pw);
  const int64_t padded = plane_area(h1 - h0, w1 - w0);
  h0 = imax(h0, 0), w0 = imax(w0, 0);
  h1 = imin(h1, g.H), w1 = imin(w1, g.W);
  return Window{h0, h1, w0, w1, g.count_include_pad ? padded : plane_area(h1 - h0, w1 - w0)};
}

template <typename T>
__global__ void avg_forward(T* y, const T* x, Geo g) {
  const int64_t n = g.P * plane_area(g.OH, g.OW), step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const PlanePos q = split_plane_index(e, g.OH, g.OW);
    const Window w = avg_window(q.row, q.col, g);
    const T* xp = x + q.plane * plane_area(g.H, g.W);
    T s = T(0);
    for (int ih = w.h0; ih < w.h1; ++ih)
      for (int iw = w.w0; iw < w.w1; ++iw) s += xp[plane_offset(ih, iw, g.W)];
    y[e] = w.divisor > 0 ? s / static_cast<T>(w.divisor) : T(0);
  }
}

template <typename T>
__global__ void avg_backward(T* gi, const T* go, Geo g) {
  const int64_t n = g.P * plane_area(g.H, g.W), step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const PlanePos q = split_plane_index(e, g.H, g.W);
    int oh0, oh1, ow0, ow1;
    windows_containing(q.row, g.sh, g.ph, g.kh, g.OH, oh0, oh1);
    windows_containing(q.col, g.sw, g.pw, g.kw, g.OW, ow0, ow1);
    const T* gp = go + q.plane * plane_area(g.OH, g.OW);
    T s = T(0);
    for (int oh = oh0; oh <= oh1; ++oh)
      for (int ow = ow0; ow <= ow1; ++ow) {
        const Window w = avg_window(oh, ow, g);
        if (w.divisor > 0) s += gp[plane_offset(oh, ow, g.OW)] / static_cast<T>(w.divisor);
      }
    gi[e] = s;
  }
}

// ------------------------------------------------------------------ adaptive average
EMBER_DEVICE int adaptive_start(int i, int in, int out) {
  return static_cast<int>(static_cast<int64_t>(i) * in / out);
}
EMBER_DEVICE int adaptive_end(int i, int in, int out) {
  return static_cast<int>((static_cast<int64_t>(i + 1) * in + out - 1) / out);
}
// The cells containing input position i: o from floor(i * out / in) while start(o) <= i.
EMBER_DEVICE void cells_containing(int i, int in, int out, int& lo, int& hi) {
  lo = static_cast<int>(static_cast<int64_t>(i) * out / in);
  hi = lo;
  while (hi + 1 < out && adaptive_start(hi + 1, in, out) <= i) ++hi;
}

template <typename T>
__global__ void adaptive_forward(T* y, const T* x, Geo g) {
  const int64_t n = g.P * plane_area(g.OH, g.OW), step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const PlanePos q = split_plane_index(e, g.OH, g.OW);
    const int h0 = adaptive_start(q.row, g.H, g.OH), h1 = adaptive_end(q.row, g.H, g.OH);
    const int w0 = adaptive_start(q.col, g.W, g.OW), w1 = adaptive_end(q.col, g.W, g.OW);
    const T* xp = x + q.plane * plane_area(g.H, g.W);
    T s = T(0);
    for (int ih = h0; ih < h1; ++ih)
      for (int iw = w0; iw < w1; ++iw) s += xp[plane_offset(ih, iw, g.W)];
    y[e] = s / static_cast<T>(plane_area(h1 - h0, w1 - w0));
  }
}

template <typename T>
__global__ void adaptive_backward(T* gi, const T* go, Geo g) {
  const int64_t n = g.P * plane_area(g.H, g.W), step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const PlanePos q = split_plane_index(e, g.H, g.W);
    int oh0, oh1, ow0, ow1;
    cells_containing(q.row, g.H, g.OH, oh0, oh1);
    cells_containing(q.col, g.W, g.OW, ow0, ow1);
    const T* gp = go + q.plane * plane_area(g.OH, g.OW);
    T s = T(0);
    for (int oh = oh0; oh <= oh1; ++oh) {
      const int hn = adaptive_end(oh, g.H, g.OH) - adaptive_start(oh, g.H, g.OH);
      for (int ow = ow0; ow <= ow1; ++ow) {
        const int wn = adaptive_end(ow, g.W, g.OW) - adaptive_start(ow, g.W, g.OW);
        s += gp[plane_offset(oh, ow, g.OW)] / static_cast<T>(plane_area(hn, wn));
      }
    }
    gi[e] = s;
  }
}

// ------------------------------------------------------------------ host side

void cuda_max_pool_forward(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dGeometry& g) {
  const int64_t n = g.P * g.OH * g.OW;
  if (n == 0) return;
  DeviceGuard guard(out.device());
  const Geo d = geo_of(g, "max_pool2d");
  EMBER_DISPATCH_FLOAT(input.dtype(), "max_pool2d", [&] {
    launch(max_forward<scalar_t>, blocks_for(n), kThreads, 0, kernel_stream(), mptr<scalar_t>(out),
           mptr<int64_t>(indices), cptr<scalar_t>(input), d);
  });
}

void cuda_max_pool_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                            const Pool2dGeometry& g) {
  const int64_t n = g.P * g.H * g.W;
  if (n == 0) return;
  DeviceGuard guard(grad_input.device());
  const Geo d = geo_of(g, "max_pool2d_backward");
  EMBER_DISPATCH_FLOAT(grad_out.dtype(), "max_pool2d_backward", [&] {
    launch(max_backward<scalar_t>, blocks_for(n), kThreads, 0, kernel_stream(), mptr<scalar_t>(grad_input),
           cptr<scalar_t>(grad_out), cptr<int64_t>(indices), d);
  });
}

void cuda_avg_pool_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  const int64_t n = g.P * g.OH * g.OW;
  if (n == 0) return;
  DeviceGuard guard(out.device());
  const Geo d = geo_of(g, "avg_pool2d");
  EMBER_DISPATCH_FLOAT(input.dtype(), "avg_pool2d", [&] {
    launch(avg_forward<scalar_t>, blocks_for(n), kThreads, 0, kernel_stream(), mptr<scalar_t>(out),
           cptr<scalar_t>(input), d);
  });
}

void cuda_avg_pool_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g) {
  const int64_t n = g.P * g.H * g.W;
  if (n == 0) return;
  DeviceGuard guard(grad_input.device());
  const Geo d = geo_of(g, "avg_pool2d_backward");
  EMBER_DISPATCH_FLOAT(grad_out.dtype(), "avg_pool2d_backward", [&] {
    launch(avg_backward<scalar_t>, blocks_for(n), kThreads, 0, kernel_stream(), mptr<scalar_t>(grad_input),
           cptr<scalar_t>(grad_out), d);
  });
}

void cuda_adaptive_forward(const Tensor& out, const Tensor& input, const Pool2dGeometry& g) {
  const int64_t n = g.P * g.OH * g.OW;
  if (n == 0) return;
  EMBER_CHECK(g.H > 0 && g.W > 0, "adaptive_avg_pool2d: input plane ", g.H, "x", g.W,
              " is empty; expected at least one element per output cell");
  DeviceGuard guard(out.device());
  const Geo d = geo_of(g, "adaptive_avg_pool2d");
  EMBER_DISPATCH_FLOAT(input.dtype(), "adaptive_avg_pool2d", [&] {
    launch(adaptive_forward<scalar_t>, blocks_for(n), kThreads, 0, kernel_stream(), mptr<scalar_t>(out),
           cptr<scalar_t>(input), d);
  });
}

void cuda_adaptive_backward(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g) {
  const int64_t n = g.P * g.H * g.W;
  if (n == 0) return;
  EMBER_CHECK(g.OH > 0 && g.OW > 0, "adaptive_avg_pool2d_backward: output ", g.OH, "x", g.OW,
              " is empty; expected at least one cell");
  DeviceGuard guard(grad_input.device());
  const Geo d = geo_of(g, "adaptive_avg_pool2d_backward");
  EMBER_DISPATCH_FLOAT(grad_out.dtype(), "adaptive_avg_pool2d_backward", [&] {
    launch(adaptive_backward<scalar_t>, blocks_for(n), kThreads, 0, kernel_stream(), mptr<scalar_t>(grad_input),
           cptr<scalar_t>(grad_out), d);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(max_pool2d_forward_stub, CUDA, cuda_max_pool_forward);
EMBER_REGISTER_KERNEL(max_pool2d_backward_stub, CUDA, cuda_max_pool_backward);
EMBER_REGISTER_KERNEL(avg_pool2d_forward_stub, CUDA, cuda_avg_pool_forward, Pool);
EMBER_REGISTER_KERNEL(avg_pool2d_backward_stub, CUDA, cuda_avg_pool_backward, Pool);
EMBER_REGISTER_KERNEL(adaptive_avg_pool2d_forward_stub, CUDA, cuda_adaptive_forward);
EMBER_REGISTER_KERNEL(adaptive_avg_pool2d_backward_stub, CUDA, cuda_adaptive_backward);

}  // namespace ember::cuda
