// CUDA softmax, log_softmax, their backwards and logsumexp over the middle dim of a contiguous
// [A, R, C] tensor (core/reduce_kernels.h). C == 1 (the last dim): one block per row, the max and
// the sum of exponentials by warp shuffles and shared memory (core/cuda/block_reduce.h), then a
// normalising pass. C > 1: one thread per (a, c) column walking the R rows, so that a warp reads
// 32 neighbouring columns at once. Sums accumulate in double, as on the CPU; every pass
// subtracts the max first.
#include <cstdint>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/launch.h"
#include "core/reduce_kernels.h"

namespace ember::cuda {
namespace {

constexpr int64_t kMaxBlocks = 16384;

struct MaxF {
  template <typename T>
  EMBER_DEVICE T operator()(T a, T b) const {
    return max_nan(a, b);
  }
};
struct AddF {
  EMBER_DEVICE double operator()(double a, double b) const { return a + b; }
};

// m + log(s), where a non-finite max (all -inf, some +inf, or NaN) is the answer itself.
template <typename T>
EMBER_DEVICE T lse_finish(T m, double s) {
  const bool finite = m == m && m != d_infinity<T>() && m != -d_infinity<T>();
  return finite ? static_cast<T>(static_cast<double>(m) + d_log(s)) : m;
}

template <typename T>
EMBER_DEVICE T row_max(const T* x, int64_t R) {
  T m = -d_infinity<T>();
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) m = max_nan(m, x[r]);
  return block_reduce(m, MaxF{}, -d_infinity<T>());
}

template <typename T>
EMBER_DEVICE double row_exp_sum(const T* x, T m, int64_t R) {
  double s = 0;
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) s += static_cast<double>(d_exp(x[r] - m));
  return block_reduce(s, AddF{}, 0.0);
}

template <typename T>
__global__ void softmax_rows(bool log, T* out, const T* in, int64_t A, int64_t R) {
  for (int64_t a = blockIdx.x; a < A; a += gridDim.x) {
    const T* x = in + a * R;
    T* y = out + a * R;
    const T m = row_max(x, R);
    const double s = row_exp_sum(x, m, R);
    if (log) {
      const T shift = m + static_cast<T>(d_log(s));
      for (int64_t r = threadIdx.x; r < R; r += blockDim.x) y[r] = x[r] - shift;
    } else {
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t r = threadIdx.x; r < R; r += blockDim.x) y[r] = d_exp(x[r] - m) * inv;
    }
  }
}

template <typename T>
__global__ void softmax_columns(bool log, T* out, const T* in, int64_t A, int64_t R, int64_t C) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < A * C; i += step) {
    const int64_t a = i / C, c = i % C;
    const T* x = in + a * R * C + c;
    T* y = out + a * R * C + c;
    T m = -d_infinity<T>();
    for (int64_t r = 0; r < R; ++r) m = max_nan(m, x[r * C]);
    double s = 0;
    for (int64_t r = 0; r < R; ++r) s += static_cast<double>(d_exp(x[r * C] - m));
    if (log) {
      const T shift = m + static_cast<T>(d_log(s));
      for (int64_t r = 0; r < R; ++r) y[r * C] = x[r * C] - shift;
    } else {
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t r = 0; r < R; ++r) y[r * C] = d_exp(x[r * C] - m) * inv;
    }
  }
}

// softmax: gi = y * (g - sum g*y); log_softmax: gi = g - exp(y) * sum g.
template <typename T>
__global__ void softmax_grad_rows(bool log, T* gi, const T* go, const T* yv, int64_t A, int64_t R) {
  for (int64_t a = blockIdx.x; a < A; a += gridDim.x) {
    const T* g = go + a * R;
    const T* y = yv + a * R;
    T* d = gi + a * R;
    double s = 0;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x)
      s += static_cast<double>(g[r]) * (log ? 1.0 : static_cast<double>(y[r]));
    const T k = static_cast<T>(block_reduce(s, AddF{}, 0.0));
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) d[r] = log ? g[r] - d_exp(y[r]) * k : y[r] * (g[r] - k);
  }
}

template <typename T>
__global__ void softmax_grad_columns(bool log, T* gi, const T* go, const T* yv, int64_t A, int64_t R, int64_t C) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < A * C; i += step) {
    const int64_t base = (i / C) * R * C + i % C;
    double s = 0;
    for (int64_t r = 0; r < R; ++r)
      s += static_cast<double>(go[base + r * C]) * (log ? 1.0 : static_cast<double>(yv[base + r * C]));
    const T k = static_cast<T>(s);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t j = base + r * C;
      gi[j] = log ? go[j] - d_exp(yv[j]) * k : yv[j] * (go[j] - k);
    }
  }
}

template <typename T>
__global__ void logsumexp_rows(T* out, const T* in, int64_t A, int64_t R) {
  for (int64_t a = blockIdx.x; a < A; a += gridDim.x) {
    const T* x = in + a * R;
    const T m = row_max(x, R);
    const bool finite = m == m && m != d_infinity<T>() && m != -d_infinity<T>();
    // Uniform across the block (m is), so the barriers inside row_exp_sum are reached by all.
    const double s = finite ? row_exp_sum(x, m, R) : 0.0;
    if (threadIdx.x == 0) out[a] = lse_finish(m, s);
  }
}

template <typename T>
__global__ void logsumexp_columns(T* out, const T* in, int64_t A, int64_t R, int64_t C) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < A * C; i += step) {
    const T* x = in + (i / C) * R * C + i % C;
    T m = -d_infinity<T>();
    for (int64_t r = 0; r < R; ++r) m = max_nan(m, x[r * C]);
    double s = 0;
    for (int64_t r = 0; r < R; ++r) s += static_cast<double>(d_exp(x[r * C] - m));
    out[i] = lse_finish(m, s);
  }
}

unsigned row_blocks(int64_t A) {
  return static_cast<unsigned>(std::min<int64_t>(A, kMaxBlocks));
}
unsigned column_blocks(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + 127) / 128, kMaxBlocks));
}

void cuda_softmax(bool log, const Tensor& out, const Tensor& in) {
  const int64_t A = in.size(0), R = in.size(1), C = in.size(2);
  if (A * R * C == 0) return;
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_FLOAT(in.dtype(), log ? "log_softmax" : "softmax", [&] {
    using T = scalar_t;
    T* y = static_cast<T*>(out.raw_data());
    const T* x = static_cast<const T*>(in.raw_data());
    if (C == 1)
      launch(softmax_rows<T>, row_blocks(A), reduce_threads(R), 0, kernel_stream(), log, y, x, A, R);
    else
      launch(softmax_columns<T>, column_blocks(A * C), 128, 0, kernel_stream(), log, y, x, A, R, C);
  });
}

void cuda_softmax_grad(bool log, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out) {
  const int64_t A = out.size(0), R = out.size(1), C = out.size(2);
  if (A * R * C == 0) return;
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_FLOAT(out.dtype(), log ? "log_softmax backward" : "softmax backward", [&] {
    using T = scalar_t;
    T* gi = static_cast<T*>(grad_in.raw_data());
    const T* go = static_cast<const T*>(grad_out.raw_data());
    const T* y = static_cast<const T*>(out.raw_data());
    if (C == 1)
      launch(softmax_grad_rows<T>, row_blocks(A), reduce_threads(R), 0, kernel_stream(), log, gi, go, y, A, R);
    else
      launch(softmax_grad_columns<T>, column_blocks(A * C), 128, 0, kernel_stream(), log, gi, go, y, A, R, C);
  });
}

void cuda_logsumexp(const Tensor& out, const Tensor& in) {
  const int64_t A = in.size(0), R = in.size(1), C = in.size(2);
  if (A * C == 0) return;
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_FLOAT(in.dtype(), "logsumexp", [&] {
    using T = scalar_t;
    T* y = static_cast<T*>(out.raw_data());
    const T* x = static_cast<const T*>(in.raw_data());
    if (C == 1)
      launch(logsumexp_rows<T>, row_blocks(A), reduce_threads(R), 0, kernel_stream(), y, x, A, R);
    else
      launch(logsumexp_columns<T>, column_blocks(A * C), 128, 0, kernel_stream(), y, x, A, R, C);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(softmax_stub, CUDA, cuda_softmax);
EMBER_REGISTER_KERNEL(softmax_grad_stub, CUDA, cuda_softmax_grad);
EMBER_REGISTER_KERNEL(logsumexp_stub, CUDA, cuda_logsumexp);

}  // namespace ember::cuda
