// CUDA kernels for the fused recurrent layers (core/rnn_kernels.h): LSTM, GRU and the plain
// tanh/ReLU RNNs, one layer a call (one direction, or both of a bidirectional layer), on the
// workspace layout the CPU kernels use (so either device's backward reads the other's forward
// workspace the same way).
// Forward: the input projection of every step is one GEMM per direction into the gates buffer
// (biases folded in first); then per step one GEMM with h_{t-1} (accumulated into the step's gates,
// or, for GRU, into a separate buffer because r multiplies W_hn h + b_hn) and one fused cell kernel
// that applies the gate nonlinearities and the state update for the whole batch, writing the
// activated gates, the new states and the output. Backward: per step, last first, one fused kernel
// for the gate gradients and the state gradients that bypass W_hh, then one GEMM adds dG_t W_hh to
// dh_{t-1}; after the loop single GEMMs over all steps give d input, dW_ih and dW_hh, and a
// deterministic column-sum kernel the bias gradients. A bidirectional layer's directions step
// together: each step's GEMM is one batched GEMM over both and its cell kernel one launch
// (blockIdx.y the direction): half the launches, twice the blocks of a thin per-step GEMM. Every
// GEMM goes through gemm_stub / gemm_batched_stub on the tensors' device (the native SGEMM or
// cuBLAS on a GPU; the emulated native SGEMM under the emulator).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "core/allocator.h"
#include "core/copy.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/grid_fill.h"
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

// One direction's operands in a step's cell launch, forward.
template <typename T>
struct CellForwardDir {
  T* gt;
  const T* gh;
  const T* b_hn;
  const T* hp;
  T* hn;
  const T* cp;
  T* cn;
  T* out;
  T* hn_lin;
  int64_t t;
};

// Up to two directions of one layer; a launch's blockIdx.y picks one.
template <typename Dir>
struct ByDirection {
  Dir dir[2];
};

// One step for the whole batch, one thread per (b, unit), of direction blockIdx.y. `gt` [B, G*H]
// holds the pre-activations (for GRU: W_i x + b_i + b_hr|b_hz, with W_hh h_{t-1} in `gh`) and
// receives the activated gates. Rows past their sequence's length carry the state and output zeros.
template <typename T>
__global__ void cell_forward(int cell, ByDirection<CellForwardDir<T>> dirs, const int64_t* len, int64_t B, int64_t H) {
  const CellForwardDir<T>& d = dirs.dir[blockIdx.y];
  const int64_t n = B * H, step = static_cast<int64_t>(gridDim.x) * blockDim.x, t = d.t;
  const int64_t G = cell == kLstm ? 4 : cell == kGru ? 3 : 1, GH = G * H;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t b = i / H, j = i - b * H;
    if (len && t >= len[b]) {
      d.hn[i] = d.hp[i];
      if (cell == kLstm) d.cn[i] = d.cp[i];
      d.out[i] = T(0);
      continue;
    }
    T* g = d.gt + b * GH + j;
    T h;
    if (cell == kLstm) {
      const T ig = sigmoid(g[0]), fg = sigmoid(g[H]), cg = d_tanh(g[2 * H]), og = sigmoid(g[3 * H]);
      const T c = fg * d.cp[i] + ig * cg;
      h = og * d_tanh(c);
      g[0] = ig;
      g[H] = fg;
      g[2 * H] = cg;
      g[3 * H] = og;
      d.cn[i] = c;
    } else if (cell == kGru) {
      const T* q = d.gh + b * GH + j;
      const T r = sigmoid(g[0] + q[0]);
      const T z = sigmoid(g[H] + q[H]);
      const T lin = q[2 * H] + (d.b_hn ? d.b_hn[j] : T(0));
      const T nn = d_tanh(g[2 * H] + r * lin);
      h = (T(1) - z) * nn + z * d.hp[i];
      g[0] = r;
      g[H] = z;
      g[2 * H] = nn;
      d.hn_lin[i] = lin;
    } else {
      h = cell == kRelu ? (g[0] > T(0) ? g[0] : T(0)) : d_tanh(g[0]);
      g[0] = h;
    }
    d.hn[i] = h;
    d.out[i] = h;
  }
}

// One direction's operands in a step's cell launch, backward.
template <typename T>
struct CellBackwardDir {
  const T* gt;
  const T* cp;
  const T* cn;
  const T* hp;
  const T* hn_lin;
  const T* dout;
  T* dh;
  T* dc;
  T* dgx;
  T* dgh;
  int64_t t;
};

// Gate gradients of one step for the whole batch, of direction blockIdx.y. dh holds dL/dh_t from
// later steps on entry and the part of dL/dh_{t-1} that does not pass through W_hh on exit (dc
// likewise, LSTM). dgx: the input-side pre-activation gradients; dgh: the hidden-side ones (GRU
// only; the same buffer otherwise). Padding rows pass dh and dc through and get zero gate gradients.
template <typename T>
__global__ void cell_backward(int cell, ByDirection<CellBackwardDir<T>> dirs, const int64_t* len, int64_t B,
                              int64_t H) {
  const CellBackwardDir<T>& d = dirs.dir[blockIdx.y];
  const int64_t n = B * H, step = static_cast<int64_t>(gridDim.x) * blockDim.x, t = d.t;
  const int64_t G = cell == kLstm ? 4 : cell == kGru ? 3 : 1, GH = G * H;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t b = i / H, j = i - b * H, o = b * GH + j;
    if (len && t >= len[b]) {
      for (int64_t k = 0; k < G; ++k) {
        d.dgx[o + k * H] = T(0);
        if (cell == kGru) d.dgh[o + k * H] = T(0);
      }
      continue;
    }
    const T* g = d.gt + o;
    const T dht = d.dh[i] + d.dout[i];
    if (cell == kLstm) {
      const T ig = g[0], fg = g[H], cg = g[2 * H], og = g[3 * H];
      const T tc = d_tanh(d.cn[i]);
      const T dct = d.dc[i] + dht * og * (T(1) - tc * tc);
      d.dgx[o] = dct * cg * ig * (T(1) - ig);
      d.dgx[o + H] = dct * d.cp[i] * fg * (T(1) - fg);
      d.dgx[o + 2 * H] = dct * ig * (T(1) - cg * cg);
      d.dgx[o + 3 * H] = dht * tc * og * (T(1) - og);
      d.dc[i] = dct * fg;
      d.dh[i] = T(0);
    } else if (cell == kGru) {
      const T r = g[0], z = g[H], nn = g[2 * H];
      const T dn = dht * (T(1) - z) * (T(1) - nn * nn);
      const T dr = dn * d.hn_lin[i] * r * (T(1) - r);
      const T dz = dht * (d.hp[i] - nn) * z * (T(1) - z);
      d.dgx[o] = dr;
      d.dgx[o + H] = dz;
      d.dgx[o + 2 * H] = dn;
      d.dgh[o] = dr;
      d.dgh[o + H] = dz;
      d.dgh[o + 2 * H] = dn * r;
      d.dh[i] = dht * z;
    } else {
      d.dgx[o] = cell == kRelu ? (g[0] > T(0) ? dht : T(0)) : dht * (T(1) - g[0] * g[0]);
      d.dh[i] = T(0);
    }
  }
}

constexpr int kColRows = 8;

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

// Elements from `from` to `to` when that is a whole number of them (the two directions' matrices
// of one operand, each in its own or a shared allocation).
template <typename E>
std::optional<int64_t> elements_between(const E* from, const E* to) {
  const auto bytes = static_cast<int64_t>(reinterpret_cast<uintptr_t>(to) - reinterpret_cast<uintptr_t>(from));
  if (bytes % static_cast<int64_t>(sizeof(E)) != 0) return std::nullopt;
  return bytes / static_cast<int64_t>(sizeof(E));
}

// One operand of a GEMM per direction (the second unused with one direction).
template <typename E>
using PerDir = std::array<E*, 2>;

// C_d = op(A_d) op(B_d) + beta C_d (row-major) for the n directions d through the device's GEMM
// stubs: with two directions one batched GEMM (twice the blocks of one, half the launches) where
// the second direction's A, B and C all lie at non-negative offsets from the first's, or all at
// non-positive ones (the batch then starts at the second); else one GEMM each. E: the element type
// of A and B (T, or uint16_t with 16-bit dtype `dt` and float32 C).
template <typename E, typename C>
void gemm_dirs(Device dev, DType dt, size_t n, bool ta, bool tb, int64_t m, int64_t nn, int64_t k, PerDir<const E> a,
               int64_t lda, PerDir<const E> b, int64_t ldb, double beta, PerDir<C> c, int64_t ldc) {
  if (m == 0 || nn == 0) return;
  GemmArgs g = gemm_args(dt, ta, tb, m, nn, k, a[0], lda, b[0], ldb, beta, c[0], ldc);
  g.c_float32 = std::is_same_v<E, uint16_t>;
  if (n == 2) {
    const auto sa = elements_between(a[0], a[1]), sb = elements_between(b[0], b[1]), sc = elements_between(c[0], c[1]);
    if (sa && sb && sc && *sc != 0) {
      if (*sa >= 0 && *sb >= 0 && *sc > 0) return gemm_batched_stub(dev)(g, 2, *sa, *sb, *sc);
      if (*sa <= 0 && *sb <= 0 && *sc < 0) {
        g.a = a[1], g.b = b[1], g.c = c[1];
        return gemm_batched_stub(dev)(g, 2, -*sa, -*sb, -*sc);
      }
    }
  }
  for (size_t d = 0; d < n; ++d) {
    g.a = a[d], g.b = b[d], g.c = c[d];
    gemm_stub(dev)(g);
  }
}

template <typename T>
constexpr DType dtype_of() {
  return std::is_same_v<T, float> ? DType::Float32 : DType::Float64;
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
  const int64_t slices = std::clamp<int64_t>(std::min((rows + 63) / 64, kFillBlocks / col_blocks), 1, 1024);
  const int64_t rows_per_slice = std::max<int64_t>((rows + slices - 1) / slices, 1);
  Tensor part = slices > 1 ? empty({slices * cols}, {.dtype = DType::Float64, .device = dev}) : Tensor();
  double* p = mptr<double>(part);
  launch(column_sums<T>, dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(slices)), dim3(32, kColRows), 0,
         kernel_stream(), y, p, a, rows, cols, rows_per_slice);
  if (slices > 1)
    launch(sum_slices<T>, blocks_for(cols), kThreads, 0, kernel_stream(), y, static_cast<const double*>(p), slices,
           cols);
}

// The directions' W_hh as the per-step GEMMs read them: as they are when the second lies after the
// first (nn::LSTM's parameters usually do), else both copied into one block [2, G*H, H] (`keep`
// holds it) so that each step is still one batched GEMM.
template <typename T>
PerDir<const T> paired_w_hh(std::span<const Tensor* const> w_hh, int64_t n_each, Tensor& keep) {
  PerDir<const T> w{cptr<T>(*w_hh[0]), w_hh.size() > 1 ? cptr<T>(*w_hh[1]) : nullptr};
  if (w_hh.size() < 2) return w;
  const auto gap = elements_between(w[0], w[1]);
  if (gap && *gap > 0) return w;
  keep = empty({2, n_each}, w_hh[0]->options());
  for (int d = 0; d < 2; ++d) copy(mptr<T>(keep) + d * n_each, w[d], n_each);
  return {cptr<T>(keep), cptr<T>(keep) + n_each};
}

// Per direction: the gates initialised with the biases, the input projection of every step added,
// h0 and c0 in their first slots.
template <typename T>
void forward_prologue(std::span<const RnnForwardArgs> dirs, std::span<const HalfOperands> lo) {
  const RnnConfig& cfg = dirs[0].cfg;
  const int64_t B = cfg.B, I = cfg.I, H = cfg.H, GH = rnn_gate_count(cfg.mode) * H, rows = cfg.T * B, BH = B * H;
  const bool gru = cfg.mode == RnnMode::Gru, lstm = cfg.mode == RnnMode::Lstm;
  const Device dev = dirs[0].input.device();
  const size_t n = dirs.size();
  PerDir<T> gates{};
  PerDir<const T> x{}, w_ih{};
  PerDir<const uint16_t> x16{}, w_ih16{};
  for (size_t d = 0; d < n; ++d) {
    const RnnForwardArgs& a = dirs[d];
    gates[d] = mptr<T>(a.ws.gates);
    x[d] = cptr<T>(a.input), w_ih[d] = cptr<T>(a.w_ih);
    x16[d] = lo[d].input, w_ih16[d] = lo[d].w_ih;
    if (rows * GH > 0)
      launch(init_gates<T>, blocks_for(rows * GH), kThreads, 0, kernel_stream(), gates[d], cptr<T>(a.b_ih),
             cptr<T>(a.b_hh), rows, GH, gru ? 2 * H : GH);
    const RnnSteps steps{cfg.T, a.cfg.reverse};
    copy(mptr<T>(a.ws.hs) + steps.first_slot() * BH, cptr<T>(a.h0), BH);
    if (lstm) copy(mptr<T>(a.ws.cs) + steps.first_slot() * BH, cptr<T>(a.c0), BH);
  }
  // One GEMM per direction: each has T * B rows, enough blocks for a GPU already.
  for (size_t d = 0; d < n; ++d) {
    if constexpr (std::is_same_v<T, float>) {
      if (lo[d].input) {
        gemm_dirs<uint16_t, float>(dev, lo[d].dtype, 1, false, true, rows, GH, I, {x16[d]}, I, {w_ih16[d]}, I, 1.0,
                                   {gates[d]}, GH);
        continue;
      }
    }
    gemm_dirs<T, T>(dev, dtype_of<T>(), 1, false, true, rows, GH, I, {x[d]}, I, {w_ih[d]}, I, 1.0, {gates[d]}, GH);
  }
}

// Forward through time for one direction or two together: per step one GEMM with h_{t-1} for all
// of them and one cell launch (blockIdx.y the direction).
template <typename T>
void forward_impl(std::span<const RnnForwardArgs> dirs, std::span<const HalfOperands> lo) {
  const RnnConfig& cfg = dirs[0].cfg;
  const int64_t Tn = cfg.T, B = cfg.B, H = cfg.H, GH = rnn_gate_count(cfg.mode) * H, BH = B * H;
  const Cell cell = cell_of(cfg.mode);
  const bool lstm = cell == kLstm, gru = cell == kGru;
  const Device dev = dirs[0].input.device();
  const size_t n = dirs.size();
  const Tensor len_t = lengths_on_device(cfg.lengths, dev);
  const int64_t* len = cptr<int64_t>(len_t);

  forward_prologue<T>(dirs, lo);
  const Tensor* w_hh_t[2] = {&dirs[0].w_hh, n > 1 ? &dirs[1].w_hh : nullptr};
  Tensor w_pair;
  const PerDir<const T> w_hh = paired_w_hh<T>(std::span(w_hh_t, n), GH * H, w_pair);
  // GRU: W_hh h_{t-1} of each direction apart from the gates, one block for both.
  Tensor gh_buf = gru ? empty({static_cast<int64_t>(n), B, GH}, dirs[0].input.options()) : Tensor();
  for (int64_t s = 0; s < Tn && BH > 0; ++s) {
    ByDirection<CellForwardDir<T>> step{};
    PerDir<const T> hp{};
    PerDir<T> acc{};
    for (size_t d = 0; d < n; ++d) {
      const RnnForwardArgs& a = dirs[d];
      const RnnSteps steps{Tn, a.cfg.reverse};
      const int64_t t = steps.time(s);
      T* gt = mptr<T>(a.ws.gates) + t * B * GH;
      T* gh = gru ? mptr<T>(gh_buf) + static_cast<int64_t>(d) * B * GH : nullptr;
      hp[d] = mptr<T>(a.ws.hs) + steps.prev_slot(t) * BH;
      acc[d] = gru ? gh : gt;
      const T* b_hh = cptr<T>(a.b_hh);
      step.dir[d] = {gt,
                     gh,
                     gru && b_hh ? b_hh + 2 * H : nullptr,
                     hp[d],
                     mptr<T>(a.ws.hs) + steps.next_slot(t) * BH,
                     lstm ? cptr<T>(a.ws.cs) + steps.prev_slot(t) * BH : nullptr,
                     lstm ? mptr<T>(a.ws.cs) + steps.next_slot(t) * BH : nullptr,
                     mptr<T>(a.output) + t * BH,
                     gru ? mptr<T>(a.ws.ghn) + t * BH : nullptr,
                     t};
    }
    gemm_dirs(dev, dtype_of<T>(), n, false, true, B, GH, H, hp, H, w_hh, H, gru ? 0.0 : 1.0, acc, GH);
    launch(cell_forward<T>, dim3(blocks_for(BH), static_cast<unsigned>(n)), kThreads, 0, kernel_stream(),
           static_cast<int>(cell), step, len, B, H);
  }
  for (const RnnForwardArgs& a : dirs) {
    const RnnSteps steps{Tn, a.cfg.reverse};
    copy(mptr<T>(a.h_n), cptr<T>(a.ws.hs) + steps.last_slot() * BH, BH);
    if (lstm) copy(mptr<T>(a.c_n), cptr<T>(a.ws.cs) + steps.last_slot() * BH, BH);
  }
}

// After the loop: d input, dW_ih and dW_hh as single GEMMs over all steps, the biases' column sums.
template <typename T>
void parameter_gradients(const RnnBackwardArgs& a, const Tensor& dgx_buf, const T* dgh, const HalfOperands& lo) {
  const RnnConfig& cfg = a.cfg;
  const int64_t B = cfg.B, I = cfg.I, H = cfg.H, GH = rnn_gate_count(cfg.mode) * H, rows = cfg.T * B;
  const Device dev = a.input.device();
  const T* dgx = cptr<T>(dgx_buf);
  const T* hs = cptr<T>(a.ws.hs);
  bool input_side_done = false;
  if constexpr (std::is_same_v<T, float>) {
    if (lo.input && (a.grad_input.defined() || a.grad_w_ih.defined())) {
      // dG rounded to the layer's 16-bit type once (the CPU's bfloat16 GEMM rounds it as it packs it).
      Tensor dgx16 = empty({rows, GH}, {.dtype = lo.dtype, .device = dev});
      copy_stub(dev)(dgx16, dgx_buf);
      const uint16_t* d16 = cptr<uint16_t>(dgx16);
      if (a.grad_input.defined())
        gemm_dirs<uint16_t, float>(dev, lo.dtype, 1, false, false, rows, I, GH, {d16}, GH, {lo.w_ih}, I, 0.0,
                                   {mptr<float>(a.grad_input)}, I);
      if (a.grad_w_ih.defined())
        gemm_dirs<uint16_t, float>(dev, lo.dtype, 1, true, false, GH, I, rows, {d16}, GH, {lo.input}, I, 0.0,
                                   {mptr<float>(a.grad_w_ih)}, I);
      input_side_done = true;
    }
  }
  const DType dt = dtype_of<T>();
  if (!input_side_done && a.grad_input.defined())
    gemm_dirs<T, T>(dev, dt, 1, false, false, rows, I, GH, {dgx}, GH, {cptr<T>(a.w_ih)}, I, 0.0,
                    {mptr<T>(a.grad_input)}, I);
  if (!input_side_done && a.grad_w_ih.defined())
    gemm_dirs<T, T>(dev, dt, 1, true, false, GH, I, rows, {dgx}, GH, {cptr<T>(a.input)}, I, 0.0, {mptr<T>(a.grad_w_ih)},
                    I);
  if (a.grad_w_hh.defined()) {
    const T* h_prev = hs + (cfg.reverse ? B * H : 0);  // the states before each step, in time order
    gemm_dirs<T, T>(dev, dt, 1, true, false, GH, H, rows, {dgh}, GH, {h_prev}, H, 0.0, {mptr<T>(a.grad_w_hh)}, H);
  }
  if (a.grad_b_ih.defined()) column_sum(mptr<T>(a.grad_b_ih), dgx, rows, GH, dev);
  if (a.grad_b_hh.defined()) column_sum(mptr<T>(a.grad_b_hh), dgh, rows, GH, dev);
}

// What one step of backward_impl hands its cell launch for direction a: step s's time in it, and its
// slices of the gradient buffers (dgx, dgh: [rows, G*H]; dh, dc: [B, H]).
template <typename T>
CellBackwardDir<T> backward_step(const RnnBackwardArgs& a, int64_t s, T* dgx, T* dgh, T* dh, T* dc) {
  const RnnConfig& cfg = a.cfg;
  const int64_t B = cfg.B, H = cfg.H, GH = rnn_gate_count(cfg.mode) * H, BH = B * H;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const RnnSteps steps{cfg.T, cfg.reverse};
  const int64_t t = steps.time(s), ps = steps.prev_slot(t), ns = steps.next_slot(t);
  const T* cs = lstm ? cptr<T>(a.ws.cs) : nullptr;
  return {cptr<T>(a.ws.gates) + t * B * GH,
          lstm ? cs + ps * BH : nullptr,
          lstm ? cs + ns * BH : nullptr,
          cptr<T>(a.ws.hs) + ps * BH,
          gru ? cptr<T>(a.ws.ghn) + t * BH : nullptr,
          cptr<T>(a.grad_output) + t * BH,
          dh,
          dc,
          dgx + t * B * GH,
          dgh + t * B * GH,
          t};
}

// Backward through time for one direction or two together: per step, last first, one cell launch
// and one GEMM adding dG_t W_hh to dh_{t-1} for all of them; then each direction's parameter GEMMs.
template <typename T>
void backward_impl(std::span<const RnnBackwardArgs> dirs, std::span<const HalfOperands> lo) {
  const RnnConfig& cfg = dirs[0].cfg;
  const int64_t Tn = cfg.T, B = cfg.B, H = cfg.H, GH = rnn_gate_count(cfg.mode) * H, BH = B * H, rows = Tn * B;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const Device dev = dirs[0].input.device();
  const TensorOptions opts{.dtype = dirs[0].input.dtype(), .device = dev};
  const auto n = static_cast<int64_t>(dirs.size());
  const Tensor len_t = lengths_on_device(cfg.lengths, dev);
  const int64_t* len = cptr<int64_t>(len_t);

  // One block per buffer for all directions (direction d at d times a direction's size).
  Tensor dgx_buf = empty({n, rows, GH}, opts), dgh_buf = gru ? empty({n, rows, GH}, opts) : dgx_buf;
  Tensor dh_buf = empty({n, B, H}, opts), dc_buf = lstm ? empty({n, B, H}, opts) : Tensor();
  T* dgx = mptr<T>(dgx_buf);
  T* dgh = mptr<T>(dgh_buf);
  T* dh = mptr<T>(dh_buf);
  T* dc = mptr<T>(dc_buf);
  bool need_dh0 = false;
  const Tensor* w_hh_t[2] = {&dirs[0].w_hh, n > 1 ? &dirs[1].w_hh : nullptr};
  for (int64_t d = 0; d < n; ++d) {
    copy(dh + d * BH, cptr<T>(dirs[d].grad_h_n), BH);
    if (lstm) copy(dc + d * BH, cptr<T>(dirs[d].grad_c_n), BH);
    need_dh0 = need_dh0 || dirs[d].grad_h0.defined();
  }
  Tensor w_pair;
  const PerDir<const T> w_hh = paired_w_hh<T>(std::span(w_hh_t, static_cast<size_t>(n)), GH * H, w_pair);

  for (int64_t s = Tn - 1; s >= 0 && BH > 0; --s) {
    ByDirection<CellBackwardDir<T>> step{};
    PerDir<const T> dg{};
    PerDir<T> dh_d{};
    for (int64_t d = 0; d < n; ++d) {
      step.dir[d] = backward_step<T>(dirs[d], s, dgx + d * rows * GH, dgh + d * rows * GH, dh + d * BH,
                                     lstm ? dc + d * BH : nullptr);
      dg[d] = step.dir[d].dgh, dh_d[d] = dh + d * BH;
    }
    launch(cell_backward<T>, dim3(blocks_for(BH), static_cast<unsigned>(n)), kThreads, 0, kernel_stream(),
           static_cast<int>(cell_of(cfg.mode)), step, len, B, H);
    // dh_{t-1} += dG_t W_hh; after the first step in time it is dh_0, wanted only for h0.
    if (s > 0 || need_dh0)
      gemm_dirs(dev, dtype_of<T>(), static_cast<size_t>(n), false, false, B, H, GH, dg, GH, w_hh, H, 1.0, dh_d, H);
  }
  for (int64_t d = 0; d < n; ++d) {
    const RnnBackwardArgs& a = dirs[d];
    if (a.grad_h0.defined()) copy(mptr<T>(a.grad_h0), static_cast<const T*>(dh + d * BH), BH);
    if (a.grad_c0.defined()) copy(mptr<T>(a.grad_c0), static_cast<const T*>(dc + d * BH), BH);
    parameter_gradients<T>(a, dgx_buf[d], static_cast<const T*>(dgh + d * rows * GH), lo[d]);
  }
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
void rnn_forward_lowp(std::span<const RnnForwardArgs> dirs) {
  const std::vector<RnnForwardArgs> wide = rnn_float32_args(dirs);
  std::vector<HalfOperands> lo;
  for (const RnnForwardArgs& a : dirs) lo.push_back(half_operands(a.input, a.w_ih));
  forward_impl<float>(wide, lo);
  for (size_t d = 0; d < dirs.size(); ++d) rnn_round_results(dirs[d], wide[d]);
}

void rnn_backward_lowp(std::span<const RnnBackwardArgs> dirs) {
  std::vector<RnnBackwardArgs> wide;
  std::vector<HalfOperands> lo;
  for (const RnnBackwardArgs& a : dirs) {
    wide.push_back(rnn_float32_args(a));
    lo.push_back(half_operands(a.input, a.w_ih));
  }
  backward_impl<float>(wide, lo);
  for (size_t d = 0; d < dirs.size(); ++d) rnn_round_results(dirs[d], wide[d]);
}

// Whether a layer's directions can run their steps together: two of them over one input, alike
// but for `reverse` (as core/ops/rnn.cpp makes a bidirectional layer's).
template <typename Args>
bool together(std::span<const Args> dirs) {
  if (dirs.size() != 2) return dirs.size() == 1;
  const RnnConfig &a = dirs[0].cfg, &b = dirs[1].cfg;
  return a.mode == b.mode && a.T == b.T && a.B == b.B && a.I == b.I && a.H == b.H && a.lengths == b.lengths &&
         dirs[0].input.dtype() == dirs[1].input.dtype() && dirs[0].input.device() == dirs[1].input.device() &&
         dirs[0].w_hh.dtype() == dirs[1].w_hh.dtype();
}

// A layer's directions on the device: together where they can be, else one at a time; 16-bit
// layers through `lowp`, the others through impl<float or double>(dirs, no 16-bit operands).
template <typename Args, typename Lowp, typename Impl>
void run_on_device(std::span<const Args> dirs, const Lowp& lowp, const Impl& impl) {
  if (dirs.empty()) return;
  if (!together(dirs)) {
    for (size_t d = 0; d < dirs.size(); ++d) run_on_device(dirs.subspan(d, 1), lowp, impl);
    return;
  }
  DeviceGuard guard(dirs[0].input.device());
  const DType dt = dirs[0].input.dtype();
  if (dt == DType::BFloat16 || dt == DType::Float16) return lowp(dirs);
  const std::vector<HalfOperands> lo(dirs.size());
  EMBER_DISPATCH_FLOAT(dt, "rnn_layer", [&] { impl.template operator()<scalar_t>(dirs, lo); });
}

void cuda_rnn_forward(std::span<const RnnForwardArgs> dirs) {
  run_on_device(
      dirs, rnn_forward_lowp,
      []<typename T>(std::span<const RnnForwardArgs> d, std::span<const HalfOperands> lo) { forward_impl<T>(d, lo); });
}

void cuda_rnn_backward(std::span<const RnnBackwardArgs> dirs) {
  run_on_device(dirs, rnn_backward_lowp,
                []<typename T>(std::span<const RnnBackwardArgs> d, std::span<const HalfOperands> lo) {
                  backward_impl<T>(d, lo);
                });
}

}  // namespace

EMBER_REGISTER_KERNEL(rnn_forward_stub, CUDA, cuda_rnn_forward, Rnn);
EMBER_REGISTER_KERNEL(rnn_backward_stub, CUDA, cuda_rnn_backward, Rnn);

}  // namespace ember::cuda
