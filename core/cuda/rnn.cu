// CUDA kernels for the fused recurrent layers (core/rnn_kernels.h): LSTM, GRU and the plain
// tanh/ReLU RNNs, one layer and direction per call, on the workspace layout the CPU kernels use
// (so either device's backward reads the other's forward workspace the same way).
// Forward: the input projection of every step is one GEMM into the gates buffer (biases folded
// in first); then per step one GEMM with h_{t-1} (accumulated into the step's gates, or, for GRU,
// into a separate buffer because r multiplies W_hn h + b_hn) and one fused cell kernel that
// applies the gate nonlinearities and the state update for the whole batch, writing the activated
// gates, the new states and the output. Backward: per step, last first, one fused kernel for the
// gate gradients and the state gradients that bypass W_hh, then one GEMM adds dG_t W_hh to
// dh_{t-1}; after the loop single GEMMs over all steps give d input, dW_ih and dW_hh, and a
// deterministic column-sum kernel the bias gradients. Every GEMM goes through gemm_stub on the
// tensors' device (the native SGEMM or cuBLAS on a GPU; the CPU's BLAS under the emulator).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/allocator.h"
#include "core/copy.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/launch.h"
#include "core/element_ptr.h"
#include "core/gemm_kernels.h"
#include "core/rnn_kernels.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 16384;

enum Cell : int { kTanh = 0, kRelu = 1, kLstm = 2, kGru = 3 };

Cell cell_of(RnnMode m) {
  switch (m) {
    case RnnMode::Lstm:
      return kLstm;
    case RnnMode::Gru:
      return kGru;
    case RnnMode::RnnRelu:
      return kRelu;
    default:
      return kTanh;
  }
}

template <typename T>
EMBER_DEVICE T sigmoid(T x) {
  return T(1) / (T(1) + d_exp(-x));
}

// ------------------------------------------------------------------ kernels

// gates[r, k] = b_ih[k] + b_hh[k] (b_hh only for k < 2H with GRU, whose b_hn stays apart).
template <typename T>
__global__ void init_gates(T* gates, const T* b_ih, const T* b_hh, int64_t rows, int64_t GH, int64_t folded) {
  const int64_t n = rows * GH, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t k = i % GH;
    T v = b_ih ? b_ih[k] : T(0);
    if (b_hh && k < folded) v += b_hh[k];
    gates[i] = v;
  }
}

// dst = src, or zeros when src is null.
template <typename T>
__global__ void copy_or_zero(T* dst, const T* src, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i] = src ? src[i] : T(0);
}

// One step for the whole batch, one thread per (b, unit). `gt` [B, G*H] holds the
// pre-activations (for GRU: W_i x + b_i + b_hr|b_hz, with W_hh h_{t-1} in `gh`) and receives the
// activated gates. Rows past their sequence's length carry the state and output zeros.
template <typename T>
__global__ void cell_forward(int cell, T* gt, const T* gh, const T* b_hn, const T* hp, T* hn, const T* cp, T* cn,
                             T* out, T* hn_lin, const int64_t* len, int64_t t, int64_t B, int64_t H) {
  const int64_t n = B * H, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t G = cell == kLstm ? 4 : cell == kGru ? 3 : 1, GH = G * H;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t b = i / H, j = i - b * H;
    if (len && t >= len[b]) {
      hn[i] = hp[i];
      if (cell == kLstm) cn[i] = cp[i];
      out[i] = T(0);
      continue;
    }
    T* g = gt + b * GH + j;
    T h;
    if (cell == kLstm) {
      const T ig = sigmoid(g[0]), fg = sigmoid(g[H]), cg = d_tanh(g[2 * H]), og = sigmoid(g[3 * H]);
      const T c = fg * cp[i] + ig * cg;
      h = og * d_tanh(c);
      g[0] = ig;
      g[H] = fg;
      g[2 * H] = cg;
      g[3 * H] = og;
      cn[i] = c;
    } else if (cell == kGru) {
      const T* q = gh + b * GH + j;
      const T r = sigmoid(g[0] + q[0]);
      const T z = sigmoid(g[H] + q[H]);
      const T lin = q[2 * H] + (b_hn ? b_hn[j] : T(0));
      const T nn = d_tanh(g[2 * H] + r * lin);
      h = (T(1) - z) * nn + z * hp[i];
      g[0] = r;
      g[H] = z;
      g[2 * H] = nn;
      hn_lin[i] = lin;
    } else {
      h = cell == kRelu ? (g[0] > T(0) ? g[0] : T(0)) : d_tanh(g[0]);
      g[0] = h;
    }
    hn[i] = h;
    out[i] = h;
  }
}

// Gate gradients of one step for the whole batch. dh holds dL/dh_t from later steps on entry and
// the part of dL/dh_{t-1} that does not pass through W_hh on exit (dc likewise, LSTM). dgx: the
// input-side pre-activation gradients; dgh: the hidden-side ones (GRU only; the same buffer
// otherwise). Padding rows pass dh and dc through and get zero gate gradients.
template <typename T>
__global__ void cell_backward(int cell, const T* gt, const T* cp, const T* cn, const T* hp, const T* hn_lin,
                              const T* dout, T* dh, T* dc, T* dgx, T* dgh, const int64_t* len, int64_t t, int64_t B,
                              int64_t H) {
  const int64_t n = B * H, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t G = cell == kLstm ? 4 : cell == kGru ? 3 : 1, GH = G * H;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t b = i / H, j = i - b * H, o = b * GH + j;
    if (len && t >= len[b]) {
      for (int64_t k = 0; k < G; ++k) {
        dgx[o + k * H] = T(0);
        if (cell == kGru) dgh[o + k * H] = T(0);
      }
      continue;
    }
    const T* g = gt + o;
    const T dht = dh[i] + dout[i];
    if (cell == kLstm) {
      const T ig = g[0], fg = g[H], cg = g[2 * H], og = g[3 * H];
      const T tc = d_tanh(cn[i]);
      const T dct = dc[i] + dht * og * (T(1) - tc * tc);
      dgx[o] = dct * cg * ig * (T(1) - ig);
      dgx[o + H] = dct * cp[i] * fg * (T(1) - fg);
      dgx[o + 2 * H] = dct * ig * (T(1) - cg * cg);
      dgx[o + 3 * H] = dht * tc * og * (T(1) - og);
      dc[i] = dct * fg;
      dh[i] = T(0);
    } else if (cell == kGru) {
      const T r = g[0], z = g[H], nn = g[2 * H];
      const T dn = dht * (T(1) - z) * (T(1) - nn * nn);
      const T dr = dn * hn_lin[i] * r * (T(1) - r);
      const T dz = dht * (hp[i] - nn) * z * (T(1) - z);
      dgx[o] = dr;
      dgx[o + H] = dz;
      dgx[o + 2 * H] = dn;
      dgh[o] = dr;
      dgh[o + H] = dz;
      dgh[o + 2 * H] = dn * r;
      dh[i] = dht * z;
    } else {
      dgx[o] = cell == kRelu ? (g[0] > T(0) ? dht : T(0)) : dht * (T(1) - g[0] * g[0]);
      dh[i] = T(0);
    }
  }
}

constexpr int kColRows = 8;
constexpr int64_t kTargetBlocks = 2 * 132;  // enough blocks to fill a large GPU twice over

// Sums over rows [y * rows_per_slice, ...) of slice y = blockIdx.y of each column of a [rows, cols]:
// block (32, kColRows), a warp reading 32 neighbouring columns of a row, the kColRows partial
// sums added in a fixed order. One slice writes y directly; several write double partials
// [slices, cols] that sum_slices adds in slice order (deterministic: no atomics).
template <typename T>
__global__ void column_sums(T* y, double* part, const T* a, int64_t rows, int64_t cols, int64_t rows_per_slice) {
  EMBER_SHARED(double, acc, [kColRows][33]);
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * rows_per_slice;
  const int64_t r_end = rows - r_begin < rows_per_slice ? rows : r_begin + rows_per_slice;
  for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * 32; c0 < cols; c0 += static_cast<int64_t>(gridDim.x) * 32) {
    const int64_t c = c0 + threadIdx.x;
    double s = 0;
    if (c < cols)
      for (int64_t r = r_begin + threadIdx.y; r < r_end; r += kColRows) s += static_cast<double>(a[r * cols + c]);
    __syncthreads();  // the previous column block's readers are done
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      double total = 0;
      for (int k = 0; k < kColRows; ++k) total += acc[k][threadIdx.x];
      if (gridDim.y == 1)
        y[c] = static_cast<T>(total);
      else
        part[blockIdx.y * cols + c] = total;
    }
  }
}

template <typename T>
__global__ void sum_slices(T* y, const double* part, int64_t slices, int64_t cols) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += step) {
    double total = 0;
    for (int64_t s = 0; s < slices; ++s) total += part[s * cols + c];
    y[c] = static_cast<T>(total);
  }
}

// ------------------------------------------------------------------ host side

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

GemmArgs gemm_args(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                   const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  GemmArgs g;
  g.dtype = dt;
  g.trans_a = ta, g.trans_b = tb;
  g.m = m, g.n = n, g.k = k;
  g.alpha = 1.0, g.beta = beta;
  g.a = a, g.lda = std::max<int64_t>(lda, 1);
  g.b = b, g.ldb = std::max<int64_t>(ldb, 1);
  g.c = c, g.ldc = std::max<int64_t>(ldc, 1);
  return g;
}

// C[m, n] = op(A) op(B) + beta C (row-major) through the device's GEMM stub.
template <typename T>
void gemm(Device dev, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, double beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const DType dt = std::is_same_v<T, float> ? DType::Float32 : DType::Float64;
  gemm_stub(dev)(gemm_args(dt, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc));
}

// The same with A and B bfloat16 or float16 (dt) and C float32 (the tensor-core GEMM,
// core/cuda/gemm_bf16_mma.h).
void gemm_16bit(Device dev, DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda,
                const uint16_t* b, int64_t ldb, double beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  GemmArgs g = gemm_args(dt, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
  g.c_float32 = true;
  gemm_stub(dev)(g);
}

// A bfloat16 or float16 layer's own input and W_ih, which its input-side GEMMs read as they are
// (null: the layer is float32 or float64, and those GEMMs run in its compute type).
struct HalfOperands {
  DType dtype = DType::BFloat16;
  const uint16_t* input = nullptr;
  const uint16_t* w_ih = nullptr;
};

template <typename T>
void copy(T* dst, const T* src, int64_t n) {
  if (n > 0) launch(copy_or_zero<T>, blocks_for(n), kThreads, 0, kernel_stream(), dst, src, n);
}

// The sequence lengths in device memory (undefined tensor: every sequence is full).
Tensor lengths_on_device(const std::vector<int64_t>& lengths, Device dev) {
  if (lengths.empty()) return Tensor();
  const auto n = static_cast<int64_t>(lengths.size());
  const size_t bytes = lengths.size() * sizeof(int64_t);
#if defined(__CUDACC__)
  // Staged in pinned memory, so that the copy is asynchronous (a pageable or plain cudaMemcpy
  // would stall the host, and a plain one would not be ordered with the compute stream).
  // Tensor::copy_ queues it on the copy stream between events of the compute stream and keeps
  // the pinned block from reuse until it has been read.
  auto block = std::make_shared<DataPtr>(pinned_allocator()->allocate(bytes));
  std::memcpy(block->get(), lengths.data(), bytes);
  Tensor host = from_blob(block->get(), {n}, DType::Int64, [block](void*) mutable { block.reset(); });
  Tensor t = empty({n}, {.dtype = DType::Int64, .device = dev});
  t.copy_(host);
#else
  Tensor t = empty({n}, {.dtype = DType::Int64, .device = dev});
  std::memcpy(t.raw_data(), lengths.data(), bytes);
#endif
  return t;
}

// y[c] = sum over r of a[r, c]; rows are split into slices (at least 64 rows each) until the
// grid fills the GPU.
template <typename T>
void column_sum(T* y, const T* a, int64_t rows, int64_t cols, Device dev) {
  if (cols == 0) return;
  const int64_t col_blocks = std::min<int64_t>((cols + 31) / 32, kMaxBlocks);
  const int64_t slices = std::clamp<int64_t>(std::min((rows + 63) / 64, kTargetBlocks / col_blocks), 1, 1024);
  const int64_t rows_per_slice = std::max<int64_t>((rows + slices - 1) / slices, 1);
  Tensor part = slices > 1 ? empty({slices * cols}, {.dtype = DType::Float64, .device = dev}) : Tensor();
  double* p = mptr<double>(part);
  launch(column_sums<T>, dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(slices)), dim3(32, kColRows), 0,
         kernel_stream(), y, p, a, rows, cols, rows_per_slice);
  if (slices > 1)
    launch(sum_slices<T>, blocks_for(cols), kThreads, 0, kernel_stream(), y, static_cast<const double*>(p), slices,
           cols);
}

template <typename T>
void forward_impl(const RnnForwardArgs& a, const HalfOperands& lo = {}) {
  const RnnConfig& cfg = a.cfg;
  const int64_t Tn = cfg.T, B = cfg.B, I = cfg.I, H = cfg.H, G = rnn_gate_count(cfg.mode), GH = G * H;
  const Cell cell = cell_of(cfg.mode);
  const bool lstm = cell == kLstm, gru = cell == kGru;
  const RnnSteps steps{Tn, cfg.reverse};
  const Device dev = a.input.device();
  const int64_t BH = B * H, rows = Tn * B;

  T* gates = mptr<T>(a.ws.gates);
  T* hs = mptr<T>(a.ws.hs);
  T* cs = lstm ? mptr<T>(a.ws.cs) : nullptr;
  T* ghn = gru ? mptr<T>(a.ws.ghn) : nullptr;
  T* out = mptr<T>(a.output);
  const T* w_hh = cptr<T>(a.w_hh);
  const T* b_hh = cptr<T>(a.b_hh);
  const Tensor len_t = lengths_on_device(cfg.lengths, dev);
  const int64_t* len = cptr<int64_t>(len_t);

  if (rows * GH > 0)
    launch(init_gates<T>, blocks_for(rows * GH), kThreads, 0, kernel_stream(), gates, cptr<T>(a.b_ih), b_hh, rows, GH,
           gru ? 2 * H : GH);
  if constexpr (std::is_same_v<T, float>) {
    if (lo.input)
      gemm_16bit(dev, lo.dtype, false, true, rows, GH, I, lo.input, I, lo.w_ih, I, 1.0, gates, GH);
    else
      gemm<T>(dev, false, true, rows, GH, I, cptr<T>(a.input), I, cptr<T>(a.w_ih), I, 1.0, gates, GH);
  } else {
    gemm<T>(dev, false, true, rows, GH, I, cptr<T>(a.input), I, cptr<T>(a.w_ih), I, 1.0, gates, GH);
  }
  copy(hs + steps.first_slot() * BH, cptr<T>(a.h0), BH);
  if (lstm) copy(cs + steps.first_slot() * BH, cptr<T>(a.c0), BH);

  Tensor gh_buf = gru ? empty({B, GH}, {.dtype = a.input.dtype(), .device = dev}) : Tensor();
  T* gh = mptr<T>(gh_buf);
  for (int64_t s = 0; s < Tn && BH > 0; ++s) {
    const int64_t t = steps.time(s);
    const T* hp = hs + steps.prev_slot(t) * BH;
    T* gt = gates + t * B * GH;
    if (gru)
      gemm<T>(dev, false, true, B, GH, H, hp, H, w_hh, H, 0.0, gh, GH);
    else
      gemm<T>(dev, false, true, B, GH, H, hp, H, w_hh, H, 1.0, gt, GH);
    launch(cell_forward<T>, blocks_for(BH), kThreads, 0, kernel_stream(), static_cast<int>(cell), gt,
           static_cast<const T*>(gh), gru && b_hh ? b_hh + 2 * H : nullptr, hp, hs + steps.next_slot(t) * BH,
           lstm ? static_cast<const T*>(cs + steps.prev_slot(t) * BH) : nullptr,
           lstm ? cs + steps.next_slot(t) * BH : nullptr, out + t * BH, gru ? ghn + t * BH : nullptr, len, t, B, H);
  }
  copy(mptr<T>(a.h_n), static_cast<const T*>(hs + steps.last_slot() * BH), BH);
  if (lstm) copy(mptr<T>(a.c_n), static_cast<const T*>(cs + steps.last_slot() * BH), BH);
}

// After the loop: d input, dW_ih and dW_hh as single GEMMs over all steps, the biases' column sums.
template <typename T>
void parameter_gradients(const RnnBackwardArgs& a, const Tensor& dgx_buf, const T* dgh, const T* hs,
                         const HalfOperands& lo) {
  const RnnConfig& cfg = a.cfg;
  const int64_t B = cfg.B, I = cfg.I, H = cfg.H, GH = rnn_gate_count(cfg.mode) * H, rows = cfg.T * B;
  const Device dev = a.input.device();
  const T* dgx = cptr<T>(dgx_buf);
  bool input_side_done = false;
  if constexpr (std::is_same_v<T, float>) {
    if (lo.input && (a.grad_input.defined() || a.grad_w_ih.defined())) {
      // dG rounded to the layer's 16-bit type once (the CPU's bfloat16 GEMM rounds it as it packs it).
      Tensor dgx16 = empty({rows, GH}, {.dtype = lo.dtype, .device = dev});
      copy_stub(dev)(dgx16, dgx_buf);
      const uint16_t* d16 = cptr<uint16_t>(dgx16);
      if (a.grad_input.defined())
        gemm_16bit(dev, lo.dtype, false, false, rows, I, GH, d16, GH, lo.w_ih, I, 0.0, mptr<float>(a.grad_input), I);
      if (a.grad_w_ih.defined())
        gemm_16bit(dev, lo.dtype, true, false, GH, I, rows, d16, GH, lo.input, I, 0.0, mptr<float>(a.grad_w_ih), I);
      input_side_done = true;
    }
  }
  if (!input_side_done && a.grad_input.defined())
    gemm<T>(dev, false, false, rows, I, GH, dgx, GH, cptr<T>(a.w_ih), I, 0.0, mptr<T>(a.grad_input), I);
  if (!input_side_done && a.grad_w_ih.defined())
    gemm<T>(dev, true, false, GH, I, rows, dgx, GH, cptr<T>(a.input), I, 0.0, mptr<T>(a.grad_w_ih), I);
  if (a.grad_w_hh.defined()) {
    const T* h_prev = hs + (cfg.reverse ? B * H : 0);  // the states before each step, in time order
    gemm<T>(dev, true, false, GH, H, rows, dgh, GH, h_prev, H, 0.0, mptr<T>(a.grad_w_hh), H);
  }
  if (a.grad_b_ih.defined()) column_sum(mptr<T>(a.grad_b_ih), dgx, rows, GH, dev);
  if (a.grad_b_hh.defined()) column_sum(mptr<T>(a.grad_b_hh), dgh, rows, GH, dev);
}

template <typename T>
void backward_impl(const RnnBackwardArgs& a, const HalfOperands& lo = {}) {
  const RnnConfig& cfg = a.cfg;
  const int64_t Tn = cfg.T, B = cfg.B, H = cfg.H, G = rnn_gate_count(cfg.mode), GH = G * H;
  const Cell cell = cell_of(cfg.mode);
  const bool lstm = cell == kLstm, gru = cell == kGru;
  const RnnSteps steps{Tn, cfg.reverse};
  const Device dev = a.input.device();
  const TensorOptions opts{.dtype = a.input.dtype(), .device = dev};
  const int64_t BH = B * H, rows = Tn * B;

  const T* gates = cptr<T>(a.ws.gates);
  const T* hs = cptr<T>(a.ws.hs);
  const T* cs = lstm ? cptr<T>(a.ws.cs) : nullptr;
  const T* ghn = gru ? cptr<T>(a.ws.ghn) : nullptr;
  const T* dout = cptr<T>(a.grad_output);
  const T* w_hh = cptr<T>(a.w_hh);
  const Tensor len_t = lengths_on_device(cfg.lengths, dev);
  const int64_t* len = cptr<int64_t>(len_t);

  Tensor dgx_buf = empty({rows, GH}, opts), dgh_buf = gru ? empty({rows, GH}, opts) : dgx_buf;
  T* dgx = mptr<T>(dgx_buf);
  T* dgh = mptr<T>(dgh_buf);
  Tensor dh_buf = empty({B, H}, opts), dc_buf = lstm ? empty({B, H}, opts) : Tensor();
  T* dh = mptr<T>(dh_buf);
  T* dc = mptr<T>(dc_buf);
  copy(dh, cptr<T>(a.grad_h_n), BH);
  if (lstm) copy(dc, cptr<T>(a.grad_c_n), BH);

  for (int64_t s = Tn - 1; s >= 0 && BH > 0; --s) {
    const int64_t t = steps.time(s);
    const int64_t ps = steps.prev_slot(t), ns = steps.next_slot(t);
    launch(cell_backward<T>, blocks_for(BH), kThreads, 0, kernel_stream(), static_cast<int>(cell), gates + t * B * GH,
           lstm ? cs + ps * BH : nullptr, lstm ? cs + ns * BH : nullptr, hs + ps * BH, gru ? ghn + t * BH : nullptr,
           dout + t * BH, dh, dc, dgx + t * B * GH, dgh + t * B * GH, len, t, B, H);
    // dh_{t-1} += dG_t W_hh; after the first step in time it is dh_0, wanted only for h0.
    if (s > 0 || a.grad_h0.defined())
      gemm<T>(dev, false, false, B, H, GH, static_cast<const T*>(dgh + t * B * GH), GH, w_hh, H, 1.0, dh, H);
  }
  if (a.grad_h0.defined()) copy(mptr<T>(a.grad_h0), static_cast<const T*>(dh), BH);
  if (a.grad_c0.defined()) copy(mptr<T>(a.grad_c0), static_cast<const T*>(dc), BH);

  parameter_gradients<T>(a, dgx_buf, static_cast<const T*>(dgh), hs, lo);
}

HalfOperands half_operands(const Tensor& input, const Tensor& w_ih) {
  if (input.dtype() != DType::BFloat16 && input.dtype() != DType::Float16) return {};
  return {input.dtype(), cptr<uint16_t>(input), cptr<uint16_t>(w_ih)};
}

// float16/bfloat16 layers (autocast on a GPU): as the CPU's (rnn_float32_args, core/rnn_kernels.h),
// the layer runs in float32 on the device — operands widened, the float32
// kernels, outputs and workspace rounded back to the layer's dtype once — except that the
// input-side GEMMs, most of a layer's FLOPs, take 16-bit operands on the tensor cores: the
// forward's projection and the backward's d input and dW_ih read the layer's own 16-bit input and
// W_ih. The per-step recurrent GEMMs stay float32 (the state is carried in float32).
void rnn_forward_lowp(const RnnForwardArgs& a) {
  const RnnForwardArgs w = rnn_float32_args(a);
  forward_impl<float>(w, half_operands(a.input, a.w_ih));
  rnn_round_results(a, w);
}

void rnn_backward_lowp(const RnnBackwardArgs& a) {
  const RnnBackwardArgs w = rnn_float32_args(a);
  backward_impl<float>(w, half_operands(a.input, a.w_ih));
  rnn_round_results(a, w);
}

void cuda_rnn_forward(const RnnForwardArgs& a) {
  DeviceGuard guard(a.input.device());
  if (a.input.dtype() == DType::BFloat16 || a.input.dtype() == DType::Float16) return rnn_forward_lowp(a);
  EMBER_DISPATCH_FLOAT(a.input.dtype(), "rnn_layer", [&] { forward_impl<scalar_t>(a); });
}

void cuda_rnn_backward(const RnnBackwardArgs& a) {
  DeviceGuard guard(a.input.device());
  if (a.input.dtype() == DType::BFloat16 || a.input.dtype() == DType::Float16) return rnn_backward_lowp(a);
  EMBER_DISPATCH_FLOAT(a.input.dtype(), "rnn_layer", [&] { backward_impl<scalar_t>(a); });
}

}  // namespace

EMBER_REGISTER_KERNEL(rnn_forward_stub, CUDA, cuda_rnn_forward, Rnn);
EMBER_REGISTER_KERNEL(rnn_backward_stub, CUDA, cuda_rnn_backward, Rnn);

}  // namespace ember::cuda
