// CUDA layer norm forward and backward over the rows of a contiguous [M, D] input
// (core/nn_kernels.h). Forward: one block per row; each thread keeps a Welford mean and M2 of its
// strided share in double, the block merges them (Chan's formula) by warp shuffles and shared
// memory, and the normalising pass subtracts the mean split into two T parts as the CPU does, so
// float32 rows far from zero keep their precision. Backward: one block per row for grad_input
// (two block sums, in double), and a column kernel for grad_weight and grad_bias that walks the
// rows in a fixed order, split into row slices whose partials a second kernel adds in order when
// the columns alone would not fill the GPU (deterministic: no atomics).
#include <algorithm>
#include <cstdint>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/grid_fill.h"
#include "core/cuda/launch.h"
#include "core/nn_kernels.h"

namespace ember::cuda {
namespace {

constexpr int64_t kMaxBlocks = 16384;

struct Welford {
  double n = 0, mean = 0, m2 = 0;
};

EMBER_DEVICE Welford merge(Welford a, Welford b) {
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  Welford r;
  r.n = a.n + b.n;
  const double delta = b.mean - a.mean, fb = b.n / r.n;
  r.mean = a.mean + delta * fb;
  r.m2 = a.m2 + b.m2 + delta * delta * a.n * fb;
  return r;
}

EMBER_DEVICE Welford warp_merge(Welford v) {
  EMBER_UNROLL
  for (int o = 16; o > 0; o /= 2) {
    Welford other;
    other.n = __shfl_xor_sync(kFullMask, v.n, o);
    other.mean = __shfl_xor_sync(kFullMask, v.mean, o);
    other.m2 = __shfl_xor_sync(kFullMask, v.m2, o);
    v = merge(v, other);
  }
  return v;
}

// The whole block's statistics, identical in every thread (thread 0's result is broadcast: the
// butterfly's rounding may differ between lanes). Every thread of the block must call it.
EMBER_DEVICE Welford block_merge(Welford v) {
  EMBER_SHARED(double, part, [3][33]);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  v = warp_merge(v);
  __syncthreads();  // the previous row's readers are done with `part`
  if (lane == 0) {
    part[0][warp] = v.n;
    part[1][warp] = v.mean;
    part[2][warp] = v.m2;
  }
  __syncthreads();
  Welford w;
  if (lane < nwarps) {
    w.n = part[0][lane];
    w.mean = part[1][lane];
    w.m2 = part[2][lane];
  }
  w = warp_merge(w);
  __syncthreads();  // everyone has read the partials before thread 0 overwrites slot 32
  if (threadIdx.x == 0) {
    part[0][32] = w.n;
    part[1][32] = w.mean;
    part[2][32] = w.m2;
  }
  __syncthreads();
  return Welford{part[0][32], part[1][32], part[2][32]};
}

struct AddF {
  EMBER_DEVICE double operator()(double a, double b) const { return a + b; }
};

template <typename T>
__global__ void ln_forward_rows(T* y, double* mean, double* rstd, const T* x, const T* w, const T* b, int64_t M,
                                int64_t D, double eps) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    Welford acc;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      const double v = static_cast<double>(xr[i]);
      acc.n += 1;
      const double d = v - acc.mean;
      acc.mean += d / acc.n;
      acc.m2 += d * (v - acc.mean);
    }
    acc = block_merge(acc);
    const double m = acc.mean, var = D > 0 ? acc.m2 / static_cast<double>(D) : 0.0;
    const double rs = 1.0 / d_sqrt(var + eps);
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    const T hd = static_cast<T>(m), tl = static_cast<T>(m - static_cast<double>(hd)), trs = static_cast<T>(rs);
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      T v = ((xr[i] - hd) - tl) * trs;
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = v;
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w.
template <typename T>
__global__ void ln_backward_rows(T* gi, const T* dy, const T* x, const T* w, const double* mean, const double* rstd,
                                 int64_t M, int64_t D) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const T* xr = x + r * D;
    const T* g = dy + r * D;
    const double m = mean[r];
    const T hd = static_cast<T>(m), tl = static_cast<T>(m - static_cast<double>(hd)), trs = static_cast<T>(rstd[r]);
    double s1 = 0, s2 = 0;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      const T gv = w ? g[i] * w[i] : g[i];
      s1 += static_cast<double>(gv);
      s2 += static_cast<double>(gv * (((xr[i] - hd) - tl) * trs));
    }
    s1 = block_reduce(s1, AddF{}, 0.0);
    s2 = block_reduce(s2, AddF{}, 0.0);
    const T c1 = static_cast<T>(s1 / static_cast<double>(D)), c2 = static_cast<T>(s2 / static_cast<double>(D));
    T* o = gi + r * D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      const T gv = w ? g[i] * w[i] : g[i];
      o[i] = trs * (gv - c1 - ((xr[i] - hd) - tl) * trs * c2);
    }
  }
}

constexpr int kColRows = 8;  // threadIdx.y: rows walked in parallel per column

// Over rows [y * rows_per_slice, ...) of slice y = blockIdx.y: sw[c] = sum dy * xhat, sb[c] = sum dy.
// Block (32, kColRows): a warp reads 32 neighbouring columns of one row; the kColRows partial sums
// are added in a fixed order. With one slice the sums go straight to gw/gb; otherwise to the
// double partials part_w/part_b [slices, D], which ln_sum_slices adds in slice order
// (deterministic: no atomics).
template <typename T>
__global__ void ln_backward_columns(T* gw, T* gb, double* part_w, double* part_b, const T* dy, const T* x,
                                    const double* mean, const double* rstd, int64_t M, int64_t D,
                                    int64_t rows_per_slice) {
  EMBER_SHARED(double, pw, [kColRows][33]);
  EMBER_SHARED(double, pb, [kColRows][33]);
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * rows_per_slice;
  const int64_t r_end = M - r_begin < rows_per_slice ? M : r_begin + rows_per_slice;
  for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * 32; c0 < D; c0 += static_cast<int64_t>(gridDim.x) * 32) {
    const int64_t c = c0 + threadIdx.x;
    double sw = 0, sb = 0;
    if (c < D) {
      for (int64_t r = r_begin + threadIdx.y; r < r_end; r += kColRows) {
        const double g = static_cast<double>(dy[r * D + c]);
        sw += g * (static_cast<double>(x[r * D + c]) - mean[r]) * rstd[r];
        sb += g;
      }
    }
    __syncthreads();  // the previous column block's readers are done
    pw[threadIdx.y][threadIdx.x] = sw;
    pb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && c < D) {
      double tw = 0, tb = 0;
      for (int k = 0; k < kColRows; ++k) {
        tw += pw[k][threadIdx.x];
        tb += pb[k][threadIdx.x];
      }
      if (gridDim.y == 1) {
        if (gw) gw[c] = static_cast<T>(tw);
        if (gb) gb[c] = static_cast<T>(tb);
      } else {
        part_w[blockIdx.y * D + c] = tw;
        part_b[blockIdx.y * D + c] = tb;
      }
    }
  }
}

template <typename T>
__global__ void ln_sum_slices(T* gw, T* gb, const double* part_w, const double* part_b, int64_t slices, int64_t D) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < D; c += step) {
    double tw = 0, tb = 0;
    for (int64_t s = 0; s < slices; ++s) {
      tw += part_w[s * D + c];
      tb += part_b[s * D + c];
    }
    if (gw) gw[c] = static_cast<T>(tw);
    if (gb) gb[c] = static_cast<T>(tb);
  }
}

template <typename T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

unsigned row_blocks(int64_t M) {
  return static_cast<unsigned>(std::min<int64_t>(M, kMaxBlocks));
}

void cuda_ln_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input,
                     const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t M = input.size(0), D = input.size(1);
  if (M == 0) return;
  DeviceGuard guard(input.device());
  EMBER_DISPATCH_FLOAT(input.dtype(), "layer_norm", [&] {
    using T = scalar_t;
    launch(ln_forward_rows<T>, row_blocks(M), reduce_threads(D, 512), 0, kernel_stream(), ptr_or_null<T>(out),
           ptr_or_null<double>(mean), ptr_or_null<double>(rstd), ptr_or_null<const T>(input),
           ptr_or_null<const T>(weight), ptr_or_null<const T>(bias), M, D, eps);
  });
}

void cuda_ln_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                      const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                      const Tensor& rstd) {
  const int64_t M = input.size(0), D = input.size(1);
  DeviceGuard guard(input.device());
  EMBER_DISPATCH_FLOAT(input.dtype(), "layer_norm_backward", [&] {
    using T = scalar_t;
    const T* dy = ptr_or_null<const T>(grad_out);
    const T* x = ptr_or_null<const T>(input);
    const double* mp = ptr_or_null<const double>(mean);
    const double* rp = ptr_or_null<const double>(rstd);
    if (grad_input.defined() && M > 0 && D > 0)
      launch(ln_backward_rows<T>, row_blocks(M), reduce_threads(D, 512), 0, kernel_stream(), ptr_or_null<T>(grad_input),
             dy, x, ptr_or_null<const T>(weight), mp, rp, M, D);
    if ((grad_weight.defined() || grad_bias.defined()) && D > 0) {
      // Rows are split into slices (at least 64 rows each) until the grid fills the GPU.
      const int64_t col_blocks = std::min<int64_t>((D + 31) / 32, kMaxBlocks);
      const int64_t slices = std::clamp<int64_t>(std::min((M + 63) / 64, kFillBlocks / col_blocks), 1, 1024);
      const int64_t rows_per_slice = std::max<int64_t>((M + slices - 1) / slices, 1);
      Tensor part =
          slices > 1 ? empty({2 * slices * D}, {.dtype = DType::Float64, .device = input.device()}) : Tensor();
      double* pw = ptr_or_null<double>(part);
      launch(ln_backward_columns<T>, dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(slices)),
             dim3(32, kColRows), 0, kernel_stream(), ptr_or_null<T>(grad_weight), ptr_or_null<T>(grad_bias), pw,
             pw ? pw + slices * D : nullptr, dy, x, mp, rp, M, D, rows_per_slice);
      if (slices > 1)
        launch(ln_sum_slices<T>, static_cast<unsigned>(std::min<int64_t>((D + 255) / 256, kMaxBlocks)), 256, 0,
               kernel_stream(), ptr_or_null<T>(grad_weight), ptr_or_null<T>(grad_bias), static_cast<const double*>(pw),
               static_cast<const double*>(pw + slices * D), slices, D);
    }
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(layer_norm_forward_stub, CUDA, cuda_ln_forward);
EMBER_REGISTER_KERNEL(layer_norm_backward_stub, CUDA, cuda_ln_backward);

}  // namespace ember::cuda
